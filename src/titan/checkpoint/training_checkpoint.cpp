#include "titan/checkpoint/training_checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "titan/checkpoint/checkpoint_names.h"
#include "titan/checkpoint/safetensors.h"
#include "titan/common/error.h"
#include "titan/common/strings.h"

namespace fs = std::filesystem;

namespace titan::checkpoint {
namespace {

constexpr int kFormatVersion = 1;
const char* kParts[] = {"model", "optimizer", "rng"};  // tensor parts, one file each per rank

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

// The manifest entries of one file: for each tensor its global shape and the slice held, per
// dimension [begin, end) (a piece differs from the whole only in dim 0).
nlohmann::json tensor_entries(const NamedTensors& tensors,
                              const std::map<std::string, PieceOf>& pieces) {
  nlohmann::json entries = nlohmann::json::object();
  for (const auto& [name, t] : tensors) {
    std::vector<int64_t> global = t.sizes().vec();
    int64_t row_begin = 0;
    if (auto it = pieces.find(name); it != pieces.end()) {
      global = it->second.global_shape;
      row_begin = it->second.row_begin;
    }
    nlohmann::json slice = nlohmann::json::array();
    for (int64_t d = 0; d < t.dim(); ++d) {
      const int64_t begin = d == 0 ? row_begin : 0;
      slice.push_back({begin, begin + t.size(d)});
    }
    entries[name] = {{"global_shape", global}, {"slice", slice}};
  }
  return entries;
}

bool excluded(const std::vector<std::string>& exclude, const std::string& part) {
  return std::find(exclude.begin(), exclude.end(), part) != exclude.end();
}

std::string part_file(const std::string& part, const SaveCoordination& c) {
  return c.world_size > 1 ? part + "-rank" + std::to_string(c.rank) + ".safetensors"
                          : part + ".safetensors";
}

// The key under which rank `rank` publishes its manifest entries for a step's save.
std::string entries_key(const SaveCoordination& c, int64_t step, int64_t rank) {
  return "titan/checkpoint/" + c.run_id + "/step-" + std::to_string(step) + "/rank" +
         std::to_string(rank);
}

std::vector<int64_t> json_ints(const nlohmann::json& j, const std::string& where) {
  TITAN_CHECK(j.is_array(), where, " must be a list of integers");
  std::vector<int64_t> out;
  for (const auto& v : j) {
    TITAN_CHECK(v.is_number_integer(), where, " must be a list of integers");
    out.push_back(v.get<int64_t>());
  }
  return out;
}

}  // namespace

// ---- reading ------------------------------------------------------------------------------

struct CheckpointReader::Piece {
  std::string file;
  std::vector<int64_t> global_shape;
  int64_t row_begin = 0, row_end = 0;  // dim 0 (0, 1 for a 0-dim tensor)
};

// Files are opened (memory-mapped) when first read, and kept.
struct CheckpointReader::Files {
  std::map<std::string, SafetensorsFile> open;
  const SafetensorsFile& get(const std::string& path) {
    auto it = open.find(path);
    if (it == open.end()) it = open.emplace(path, SafetensorsFile::open(path)).first;
    return it->second;
  }
};

CheckpointReader::CheckpointReader(const std::string& step_dir)
    : dir_(step_dir), files_(std::make_unique<Files>()) {
  const fs::path manifest_path = fs::path(step_dir) / "manifest.json";
  const std::string where = manifest_path.string();
  TITAN_CHECK(fs::exists(manifest_path), "no complete checkpoint at ", step_dir,
              " (manifest.json missing)");
  nlohmann::json manifest;
  try {
    std::ifstream in(manifest_path);
    manifest = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(where, ": invalid JSON: ", e.what());
  }
  TITAN_CHECK(manifest.is_object(), where, ": must be a JSON object");
  TITAN_CHECK(manifest.value("format_version", 0) == kFormatVersion, where,
              ": unsupported format_version ", manifest.value("format_version", 0));
  TITAN_CHECK(manifest.contains("step") && manifest["step"].is_number_integer(), where,
              ": 'step' is missing or not an integer");
  TITAN_CHECK(manifest.contains("files") && manifest["files"].is_object(), where,
              ": 'files' is missing or not an object");
  step_ = manifest["step"].get<int64_t>();
  state_ = manifest.value("state", nlohmann::json::object());
  for (const auto& [file, entry] : manifest["files"].items()) {
    const std::string file_where = where + ": files." + file;
    TITAN_CHECK(entry.is_object() && entry.contains("part") && entry["part"].is_string() &&
                    entry.contains("tensors") && entry["tensors"].is_object(),
                file_where, " needs 'part' and 'tensors'");
    const std::string part = entry["part"].get<std::string>();
    for (const auto& [name, t] : entry["tensors"].items()) {
      const std::string tensor_where = file_where + ".tensors." + name;
      TITAN_CHECK(t.is_object() && t.contains("global_shape") && t.contains("slice"), tensor_where,
                  " needs 'global_shape' and 'slice'");
      Piece piece;
      piece.file = (fs::path(step_dir) / file).string();
      piece.global_shape = json_ints(t["global_shape"], tensor_where + ".global_shape");
      const nlohmann::json& slice = t["slice"];
      TITAN_CHECK(slice.is_array() && slice.size() == piece.global_shape.size(), tensor_where,
                  ".slice must have one [begin, end] per dimension");
      if (piece.global_shape.empty()) {
        piece.row_end = 1;
      } else {
        const std::vector<int64_t> rows = json_ints(slice[0], tensor_where + ".slice[0]");
        TITAN_CHECK(rows.size() == 2 && 0 <= rows[0] && rows[0] <= rows[1] &&
                        rows[1] <= piece.global_shape[0],
                    tensor_where, ".slice[0] is not within the global shape");
        piece.row_begin = rows[0];
        piece.row_end = rows[1];
      }
      auto& list = pieces_[{part, name}];
      if (list.empty()) order_[part].push_back(name);
      TITAN_CHECK(list.empty() || list.front().global_shape == piece.global_shape, tensor_where,
                  ": global shape differs from another file's");
      list.push_back(std::move(piece));
    }
  }
}

CheckpointReader::~CheckpointReader() = default;

std::vector<std::string> CheckpointReader::names(const std::string& part) const {
  auto it = order_.find(part);
  return it == order_.end() ? std::vector<std::string>{} : it->second;
}

bool CheckpointReader::contains(const std::string& part, const std::string& name) const {
  return pieces_.count({part, name}) > 0;
}

std::vector<int64_t> CheckpointReader::global_shape(const std::string& part,
                                                    const std::string& name) const {
  auto it = pieces_.find({part, name});
  TITAN_CHECK(it != pieces_.end(), dir_, ": the checkpoint has no ", part, " tensor '", name, "'");
  return it->second.front().global_shape;
}

at::Tensor CheckpointReader::read_rows(const std::string& part, const std::string& name,
                                       int64_t begin, int64_t end) const {
  auto it = pieces_.find({part, name});
  TITAN_CHECK(it != pieces_.end(), dir_, ": the checkpoint has no ", part, " tensor '", name, "'");
  const std::vector<int64_t>& global = it->second.front().global_shape;
  at::Tensor out;
  int64_t filled = 0;
  for (const Piece& piece : it->second) {
    const int64_t from = std::max(begin, piece.row_begin), to = std::min(end, piece.row_end);
    if (from >= to && !(global.empty() && begin == 0)) continue;
    const at::Tensor data = files_->get(piece.file).tensor(name);
    if (global.empty()) return data.clone();
    TITAN_CHECK(data.dim() == static_cast<int64_t>(global.size()) &&
                    data.size(0) == piece.row_end - piece.row_begin,
                piece.file, ": tensor '", name, "' has shape ", shape_to_string(data.sizes()),
                ", which does not match its manifest entry");
    if (!out.defined()) {
      std::vector<int64_t> shape = global;
      shape[0] = end - begin;
      out = at::empty(shape, data.options());
    }
    out.narrow(0, from - begin, to - from).copy_(data.narrow(0, from - piece.row_begin, to - from));
    filled += to - from;
  }
  TITAN_CHECK(filled == end - begin, dir_, ": rows [", begin, ", ", end, ") of ", part, " tensor '",
              name, "' are not all in the checkpoint's files");
  if (!out.defined()) {  // an empty range
    std::vector<int64_t> shape = global;
    shape[0] = 0;
    out = at::empty(shape);
  }
  return out;
}

at::Tensor CheckpointReader::read(const std::string& part, const std::string& name) const {
  const std::vector<int64_t> global = global_shape(part, name);
  return read_rows(part, name, 0, global.empty() ? 1 : global[0]);
}

// ---- writing ------------------------------------------------------------------------------

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

void CheckpointStore::save(const TrainingCheckpoint& ckpt,
                           const SaveCoordination& coordination) const {
  // A failed save leaves no half-written folder behind (it would hold the space a full disk
  // needs back); with several ranks the next save's pruning removes it.
  auto remove_staging = [&] {
    if (coordination.world_size > 1) return;
    std::error_code ignored;
    fs::remove_all(
        fs::path(folder_) / (staging_folder_prefix(ckpt.step) + std::to_string(::getpid())),
        ignored);
  };
  try {
    write(ckpt, coordination);
  } catch (const fs::filesystem_error& e) {
    remove_staging();
    // A full disk, a read-only folder, a file where a folder should be: name the checkpoint.
    fail("cannot write training checkpoint ", step_dir(ckpt.step), ": ", e.code().message(), " (",
         e.path1().string(), ")");
  } catch (const Error& e) {
    remove_staging();
    fail("cannot write training checkpoint ", step_dir(ckpt.step), ": ", e.what());
  }
}

void CheckpointStore::write(const TrainingCheckpoint& ckpt,
                            const SaveCoordination& coordination) const {
  const bool several = coordination.world_size > 1;
  // One process names the temporary folder after itself; ranks share one named by the run.
  const std::string suffix = several ? coordination.run_id : std::to_string(::getpid());
  fs::create_directories(folder_);
  const fs::path final_dir = step_dir(ckpt.step);
  const fs::path tmp_dir = fs::path(folder_) / (staging_folder_prefix(ckpt.step) + suffix);
  if (!several) fs::remove_all(tmp_dir);
  fs::create_directories(tmp_dir);

  nlohmann::json files = nlohmann::json::object();
  for (const std::string part : kParts) {
    const NamedTensors& tensors = part_tensors(ckpt, part);
    if (several && tensors.empty()) continue;
    const std::string file = part_file(part, coordination);
    write_safetensors((tmp_dir / file).string(), tensors);
    files[file] = {{"part", part},
                   {"rank", coordination.rank},
                   {"tensors", tensor_entries(tensors, ckpt.pieces)}};
    if (write_delay_ms_ > 0)  // test hook: widens the window in which a kill hits a save
      std::this_thread::sleep_for(std::chrono::milliseconds(write_delay_ms_));
  }
  if (several) {
    fsync_path(tmp_dir);
    coordination.publish(entries_key(coordination, ckpt.step, coordination.rank), files.dump());
    if (coordination.rank != 0) return;  // rank 0 completes the checkpoint
    for (int64_t r = 1; r < coordination.world_size; ++r) {
      const nlohmann::json theirs =
          nlohmann::json::parse(coordination.collect(entries_key(coordination, ckpt.step, r)));
      for (const auto& [file, entry] : theirs.items()) files[file] = entry;
    }
  }
  const nlohmann::json manifest = {{"format", "titan-training-checkpoint"},
                                   {"format_version", kFormatVersion},
                                   {"step", ckpt.step},
                                   {"world_size", coordination.world_size},
                                   {"state", ckpt.state},
                                   {"files", files}};
  {
    // The manifest goes last: a folder without one is never taken for a checkpoint.
    std::ofstream out(tmp_dir / "manifest.json");
    out << manifest.dump(2) << "\n";
    out.flush();
    TITAN_CHECK(out.good(), "cannot write ", (tmp_dir / "manifest.json").string(), ": ",
                std::strerror(errno));
  }
  fsync_path(tmp_dir / "manifest.json");
  fsync_path(tmp_dir);
  if (fs::exists(final_dir)) fs::remove_all(final_dir);  // a re-save of the same step
  fs::rename(tmp_dir, final_dir);
  fsync_path(folder_);
  prune(".tmp-" + suffix);
}

void CheckpointStore::prune(const std::string& keep_staging_suffix) const {
  // Leftovers of saves that were killed are never checkpoints; remove them too (not the
  // folders of this run's saves still being written by other ranks).
  for (const auto& entry : fs::directory_iterator(folder_)) {
    const std::string name = entry.path().filename().string();
    if (is_staging_folder_name(name) && !name.ends_with(keep_staging_suffix))
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
  for (const auto& part : exclude) {
    TITAN_CHECK(std::find(checkpoint_parts().begin(), checkpoint_parts().end(), part) !=
                    checkpoint_parts().end(),
                "checkpoint.exclude_from_loading: unknown part '", part,
                "'; accepted: model, optimizer, lr_scheduler, dataloader, train_state, rng");
  }
  const CheckpointReader reader(step_dir(step));
  TrainingCheckpoint ckpt;
  ckpt.step = reader.step();
  ckpt.state = reader.state();
  for (const std::string part : kParts) {
    if (excluded(exclude, part)) continue;
    NamedTensors& out = part_tensors(ckpt, part);
    for (const std::string& name : reader.names(part))
      out.emplace_back(name, reader.read(part, name));
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

void AsyncCheckpointSaver::save(TrainingCheckpoint ckpt, SaveCoordination coordination) {
  wait();
  ckpt.model = cpu_copy(ckpt.model);
  ckpt.optimizer = cpu_copy(ckpt.optimizer);
  ckpt.rng = cpu_copy(ckpt.rng);
  worker_ = std::thread([this, c = std::move(ckpt), coordination = std::move(coordination)]() {
    try {
      store_.save(c, coordination);
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
