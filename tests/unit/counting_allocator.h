// A CPU allocator for tests that counts the bytes live through it and their peak, forwarding
// every allocation to the allocator it replaces. Installed once per test binary (c10's
// allocator registry keeps it for the process), it measures what a piece of code allocates
// at most at once, as a memory-bound test needs.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace titan::testing {

class CountingAllocator : public c10::Allocator {
 public:
  // The process's counting allocator, installed on first use.
  static CountingAllocator& installed() {
    static CountingAllocator* instance = [] {
      auto* a = new CountingAllocator(c10::GetCPUAllocator());
      c10::SetCPUAllocator(a, /*priority=*/100);
      return a;
    }();
    return *instance;
  }

  // Starts a new peak from the bytes live now; peak() is then the most live at once since.
  void reset_peak() { peak_ = live_.load(); }
  int64_t live() const { return live_; }
  int64_t peak() const { return peak_; }

  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr inner = inner_->allocate(n);
    void* data = inner.get();
    auto* context = new Context{std::move(inner), static_cast<int64_t>(n), this};
    const int64_t now = live_ += context->bytes;
    int64_t seen = peak_;
    while (now > seen && !peak_.compare_exchange_weak(seen, now)) {
    }
    return {data, context, &Context::release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

 private:
  struct Context {
    c10::DataPtr inner;
    int64_t bytes;
    CountingAllocator* owner;
    static void release(void* p) {
      auto* c = static_cast<Context*>(p);
      c->owner->live_ -= c->bytes;
      delete c;
    }
  };
  explicit CountingAllocator(c10::Allocator* inner) : inner_(inner) {}
  c10::Allocator* inner_;
  std::atomic<int64_t> live_{0};
  std::atomic<int64_t> peak_{0};
};

}  // namespace titan::testing
