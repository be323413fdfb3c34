#include "titan/checkpoint/training_checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "titan/checkpoint/checkpoint_names.h"
#include "titan/checkpoint/safetensors.h"
#include "titan/common/error.h"

namespace fs = std::filesystem;

namespace titan::checkpoint {
namespace {

constexpr int kFormatVersion = 1;
const char* kParts[] = {"model", "optimizer", "rng"};  // tensor parts, one file each

void fsync_path(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

const NamedTensors& part_tensors(const TrainingCheckpoint& c, const std::string& part) {
  if (part == "model") return c.model;
  if (part == "optimizer") return c.optimizer;
  return c.rng;
}
NamedTensors& part_tensors(TrainingCheckpoint& c, const std::string& part) {
  return const_cast<NamedTensors&>(part_tensors(const_cast<const TrainingCheckpoint&>(c), part));
}

// Every tensor of a single-process save holds the whole tensor: slice = [0, size) per dim.
nlohmann::json tensor_entries(const NamedTensors& tensors) {
  nlohmann::json entries = nlohmann::json::object();
  for (const auto& [name, t] : tensors) {
    nlohmann::json slice = nlohmann::json::array();
    for (int64_t s : t.sizes()) slice.push_back({0, s});
    entries[name] = {{"global_shape", t.sizes().vec()}, {"slice", slice}};
  }
  return entries;
}

bool excluded(const std::vector<std::string>& exclude, const std::string& part) {
  return std::find(exclude.begin(), exclude.end(), part) != exclude.end();
}

}  // namespace

CheckpointStore::CheckpointStore(std::string folder, int64_t keep_latest_k, int64_t write_delay_ms)
    : folder_(std::move(folder)), keep_latest_k_(keep_latest_k), write_delay_ms_(write_delay_ms) {}

std::string CheckpointStore::step_dir(int64_t step) const {
  return (fs::path(folder_) / step_folder_name(step)).string();
}

std::vector<int64_t> CheckpointStore::complete_steps() const {
  std::vector<int64_t> steps;
  if (!fs::is_directory(folder_)) return steps;
  for (const auto& entry : fs::directory_iterator(folder_)) {
    const std::optional<int64_t> step = parse_step_folder_name(entry.path().filename().string());
    if (step && entry.is_directory() && fs::exists(entry.path() / "manifest.json"))
      steps.push_back(*step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

void CheckpointStore::save(const TrainingCheckpoint& ckpt) const {
  try {
    write(ckpt);
  } catch (const fs::filesystem_error& e) {
    // A full disk, a read-only folder, a file where a folder should be: name the checkpoint.
    fail("cannot write training checkpoint ", step_dir(ckpt.step), ": ", e.code().message(),
         " (", e.path1().string(), ")");
  }
}

void CheckpointStore::write(const TrainingCheckpoint& ckpt) const {
  fs::create_directories(folder_);
  const fs::path final_dir = step_dir(ckpt.step);
  const fs::path tmp_dir =
      fs::path(folder_) / (staging_folder_prefix(ckpt.step) + std::to_string(::getpid()));
  fs::remove_all(tmp_dir);
  fs::create_directories(tmp_dir);

  nlohmann::json manifest = {{"format", "titan-training-checkpoint"},
                             {"format_version", kFormatVersion},
                             {"step", ckpt.step},
                             {"world_size", 1},
                             {"state", ckpt.state},
                             {"files", nlohmann::json::object()}};
  for (const std::string part : kParts) {
    const NamedTensors& tensors = part_tensors(ckpt, part);
    const std::string file = part + ".safetensors";
    write_safetensors((tmp_dir / file).string(), tensors);
    manifest["files"][file] = {{"part", part}, {"rank", 0}, {"tensors", tensor_entries(tensors)}};
    if (write_delay_ms_ > 0)  // test hook: widens the window in which a kill hits a save
      std::this_thread::sleep_for(std::chrono::milliseconds(write_delay_ms_));
  }
  {
    // The manifest goes last: a folder without one is never taken for a checkpoint.
    std::ofstream out(tmp_dir / "manifest.json");
    out << manifest.dump(2) << "\n";
    TITAN_CHECK(out.good(), "cannot write ", (tmp_dir / "manifest.json").string());
  }
  fsync_path(tmp_dir / "manifest.json");
  fsync_path(tmp_dir);
  if (fs::exists(final_dir)) fs::remove_all(final_dir);  // a re-save of the same step
  fs::rename(tmp_dir, final_dir);
  fsync_path(folder_);
  prune();
}

void CheckpointStore::prune() const {
  // Leftovers of saves that were killed are never checkpoints; remove them too.
  for (const auto& entry : fs::directory_iterator(folder_)) {
    const std::string name = entry.path().filename().string();
    if (is_staging_folder_name(name) &&
        name.find(".tmp-" + std::to_string(::getpid())) == std::string::npos)
      fs::remove_all(entry.path());
  }
  if (keep_latest_k_ <= 0) return;
  std::vector<int64_t> steps = complete_steps();
  while (static_cast<int64_t>(steps.size()) > keep_latest_k_) {
    fs::remove_all(step_dir(steps.front()));
    steps.erase(steps.begin());
  }
}

TrainingCheckpoint CheckpointStore::load(int64_t step,
                                         const std::vector<std::string>& exclude) const {
  for (const auto& part : exclude)
    TITAN_CHECK(std::find(checkpoint_parts().begin(), checkpoint_parts().end(), part) !=
                    checkpoint_parts().end(),
                "checkpoint.exclude_from_loading: unknown part '", part,
                "'; accepted: model, optimizer, lr_scheduler, dataloader, train_state, rng");
  const fs::path dir = step_dir(step);
  const fs::path manifest_path = dir / "manifest.json";
  TITAN_CHECK(fs::exists(manifest_path), "no complete checkpoint at ", dir.string(),
              " (manifest.json missing)");
  nlohmann::json manifest;
  try {
    std::ifstream in(manifest_path);
    manifest = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(manifest_path.string(), ": invalid JSON: ", e.what());
  }
  TITAN_CHECK(manifest.value("format_version", 0) == kFormatVersion, manifest_path.string(),
              ": unsupported format_version ", manifest.value("format_version", 0));
  TITAN_CHECK(manifest.value("world_size", 1) == 1, manifest_path.string(), ": saved by ",
              manifest.value("world_size", 1),
              " ranks; resharding across world sizes is not supported yet");

  TrainingCheckpoint ckpt;
  TITAN_CHECK(manifest.contains("step") && manifest["step"].is_number_integer(),
              manifest_path.string(), ": 'step' is missing or not an integer");
  TITAN_CHECK(manifest.contains("files") && manifest["files"].is_object(), manifest_path.string(),
              ": 'files' is missing or not an object");
  ckpt.step = manifest["step"].get<int64_t>();
  ckpt.state = manifest.value("state", nlohmann::json::object());
  for (const std::string part : kParts) {
    if (excluded(exclude, part)) continue;
    const fs::path file = dir / (part + ".safetensors");
    const SafetensorsFile st = SafetensorsFile::open(file.string());
    NamedTensors& out = part_tensors(ckpt, part);
    // Keep the manifest's order (the save order), and clone out of the mapping.
    for (const auto& [name, entry] : manifest["files"][part + ".safetensors"]["tensors"].items()) {
      (void)entry;
      out.emplace_back(name, st.tensor(name).clone());
    }
  }
  for (const std::string part : {"lr_scheduler", "dataloader", "train_state"})
    if (excluded(exclude, part)) ckpt.state.erase(part);
  return ckpt;
}

NamedTensors cpu_copy(const NamedTensors& tensors) {
  NamedTensors out;
  out.reserve(tensors.size());
  for (const auto& [name, t] : tensors)
    out.emplace_back(name, t.detach().to(at::kCPU, /*non_blocking=*/false, /*copy=*/true));
  return out;
}

AsyncCheckpointSaver::~AsyncCheckpointSaver() {
  if (worker_.joinable()) worker_.join();
  if (!error_) return;
  // Nobody waited for this save: report its error rather than drop it.
  try {
    std::rethrow_exception(error_);
  } catch (const std::exception& e) {
    std::cerr << "error: the background checkpoint save failed: " << e.what() << std::endl;
  }
}

void AsyncCheckpointSaver::save(TrainingCheckpoint ckpt) {
  wait();
  ckpt.model = cpu_copy(ckpt.model);
  ckpt.optimizer = cpu_copy(ckpt.optimizer);
  ckpt.rng = cpu_copy(ckpt.rng);
  worker_ = std::thread([this, c = std::move(ckpt)]() {
    try {
      store_.save(c);
    } catch (...) {
      error_ = std::current_exception();
    }
  });
}

void AsyncCheckpointSaver::wait() {
  if (worker_.joinable()) worker_.join();
  if (error_) {
    auto e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

}  // namespace titan::checkpoint
