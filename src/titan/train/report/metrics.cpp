#include "titan/train/report/metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "titan/common/error.h"
#include "titan/train/report/device_stats.h"
#include "titan/train/report/tensorboard/event_writer.h"
#include "titan/train/report/tensorboard_tags.h"

namespace titan::train {

std::pair<double, double> peak_memory(at::Device device) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  if (device.is_cuda()) {
    const DeviceMemory mem = cuda_memory(device.index());
    return {mem.peak_bytes / kGiB, 100.0 * mem.peak_bytes / std::max<double>(mem.total_bytes, 1)};
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double peak = usage.ru_maxrss * 1024.0;  // ru_maxrss is in KiB on Linux
  const double total = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
  return {peak / kGiB, 100.0 * peak / std::max(total, 1.0)};
}

double peak_reserved_memory(at::Device device) {
  if (!device.is_cuda()) return 0;
  return cuda_memory(device.index()).peak_reserved_bytes / (1024.0 * 1024.0 * 1024.0);
}

void add_allocator_counters(at::Device device, StepMetrics& m) {
  if (!device.is_cuda()) return;
  const DeviceMemory mem = cuda_memory(device.index());
  m.memory_reserved_percent =
      100.0 * mem.peak_reserved_bytes / std::max<double>(mem.total_bytes, 1);
  m.num_alloc_retries = mem.num_alloc_retries;
  m.num_ooms = mem.num_ooms;
}

std::optional<double> device_peak_flops(at::Device device) {
  if (!device.is_cuda()) return std::nullopt;
  const std::string name = cuda_device_name(device.index());
  if (name.find("H100") != std::string::npos || name.find("H200") != std::string::npos)
    return 989e12;
  if (name.find("A100") != std::string::npos) return 312e12;
  if (name.find("B200") != std::string::npos) return 2250e12;
  return std::nullopt;
}

std::string tensorboard_folder(const config::TrainerConfig& cfg) {
  if (!cfg.metrics.enable_tensorboard) return "";
  return (std::filesystem::path(cfg.job.dump_folder) / cfg.metrics.save_tb_folder).string();
}

MetricsLogger::MetricsLogger(const std::string& dump_folder, bool enabled,
                             const std::string& tensorboard_folder)
    : enabled_(enabled) {
  if (!enabled_) return;
  std::filesystem::create_directories(dump_folder);
  const std::string path = dump_folder + "/metrics.jsonl";
  jsonl_.open(path, std::ios::app);
  TITAN_CHECK(jsonl_.good(), "cannot write metrics file ", path);
  if (!tensorboard_folder.empty()) tensorboard_ = std::make_unique<EventWriter>(tensorboard_folder);
}

MetricsLogger::~MetricsLogger() = default;

std::string format_step_line(const StepMetrics& m) {
  char buf[512];
  int n =
      std::snprintf(buf, sizeof(buf),
                    "step: %lld  loss: %.5f  grad_norm: %.4f  lr: %.4e  memory: %.2f GiB(%.2f%%)"
                    "  tps: %.0f  tflops: %.3f",
                    static_cast<long long>(m.step), m.loss, m.grad_norm, m.lr, m.memory_gib,
                    m.memory_percent, m.tps, m.tflops);
  std::string line(buf, n);
  if (m.mfu) {
    std::snprintf(buf, sizeof(buf), "  mfu: %.2f%%", *m.mfu);
    line += buf;
  }
  if (m.trained_tokens) line += "  trained_tokens: " + std::to_string(*m.trained_tokens);
  for (const auto& [name, value] : m.objective_metrics) {
    std::snprintf(buf, sizeof(buf), "  %s: %.4f", name.c_str(), value);
    line += buf;
  }
  if (m.skipped_steps > 0) line += "  skipped: " + std::to_string(m.skipped_steps);
  return line;
}

std::string format_validation_line(int64_t step, double loss) {
  char buf[128];
  int n = std::snprintf(buf, sizeof(buf), "validate step: %lld  loss: %.5f",
                        static_cast<long long>(step), loss);
  return std::string(buf, n);
}

void MetricsLogger::log(const StepMetrics& m) {
  std::cout << format_step_line(m) << std::endl;
  if (!enabled_) return;
  nlohmann::json j = {{"step", m.step},
                      {"loss", m.loss},
                      {"grad_norm", m.grad_norm},
                      {"lr", m.lr},
                      {"memory_gib", m.memory_gib},
                      {"tps", m.tps},
                      {"tflops", m.tflops}};
  j["mfu"] = m.mfu ? nlohmann::json(*m.mfu) : nlohmann::json(nullptr);
  j["memory_reserved_gib"] = m.memory_reserved_gib;
  j["skipped_steps"] = m.skipped_steps;
  j["data_loading_s"] = m.data_loading_s;
  j["data_documents_read"] = m.documents_read;
  if (m.validation_loss) j["validation_metrics/loss"] = *m.validation_loss;
  if (m.trained_tokens) j["trained_tokens"] = *m.trained_tokens;
  for (const auto& [name, value] : m.objective_metrics) j[name] = value;
  j["elapsed_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  jsonl_ << j.dump() << "\n";
  jsonl_.flush();
  if (tensorboard_) tensorboard_->add_scalars(m.step, tensorboard_scalars(m));
}

}  // namespace titan::train
