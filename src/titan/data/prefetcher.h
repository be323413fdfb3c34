// A background thread that produces items ahead of their use, `depth` at most waiting, so that
// the consumer (the training step) never waits for work the producer can do meanwhile (the data
// loader reads, tokenizes and packs batches on it). An exception thrown by the producer reaches
// the consumer, with its type, at the next() that would have returned the failed item. The
// destructor stops the thread and joins it.
//
// A producer that takes part in collectives with other processes' producers (shared reading,
// token_stream.h) must make the same calls on every process, whenever each one stops: with
// `fill_before_stopping` the destructor first lets the thread fill the queue to `depth`, which
// every process reaches after the same items, since they consume the same ones. Not while an
// exception unwinds the stack: the other processes are failing too, and this one must not wait
// for them.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace titan::data {

template <class T>
class Prefetcher {
 public:
  Prefetcher(std::function<T()> produce, size_t depth, bool fill_before_stopping = false)
      : produce_(std::move(produce)),
        depth_(depth < 1 ? 1 : depth),
        fill_before_stopping_(fill_before_stopping) {
    thread_ = std::thread([this] { run(); });
  }
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  ~Prefetcher() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      if (std::uncaught_exceptions() > 0) fill_before_stopping_ = false;
    }
    changed_.notify_all();
    thread_.join();
  }

  // The next item, waiting for it if the producer is behind; rethrows the producer's error.
  T next() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return !ready_.empty() || error_; });
    if (ready_.empty()) std::rethrow_exception(error_);
    T item = std::move(ready_.front());
    ready_.pop_front();
    changed_.notify_all();
    return item;
  }

 private:
  void run() {
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [this] { return stop_ || ready_.size() < depth_; });
        if (stop_ && (!fill_before_stopping_ || ready_.size() >= depth_)) return;
      }
      try {
        T item = produce_();
        std::lock_guard<std::mutex> lock(mutex_);
        ready_.push_back(std::move(item));
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        error_ = std::current_exception();
        changed_.notify_all();
        return;
      }
      changed_.notify_all();
    }
  }

  std::function<T()> produce_;
  const size_t depth_;
  bool fill_before_stopping_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<T> ready_;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread thread_;  // last: started once everything above exists
};

}  // namespace titan::data
