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
#include "titan/common/box_tensor.h"
#include "titan/common/error.h"
#include "titan/common/strings.h"

namespace fs = std::filesystem;

namespace titan::checkpoint {
namespace {

// 2: pieces are N-d boxes and the manifest records the mesh; 1 (read only): dim-0 pieces.
constexpr int kFormatVersion = 2;

void fsync_path(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// The manifest entries of one file: for each tensor its global shape and the box held, per
// dimension [begin, end).
nlohmann::json tensor_entries(const CheckpointPart& part) {
  nlohmann::json entries = nlohmann::json::object();
  for (const auto& [name, t] : part.tensors) {
    std::vector<int64_t> global = t.sizes().vec();
    std::vector<int64_t> offset(global.size(), 0);
    if (auto it = part.pieces.find(name); it != part.pieces.end()) {
      global = it->second.global_shape;
      offset = it->second.offset;
      TITAN_CHECK(offset.size() == static_cast<size_t>(t.dim()) && global.size() == offset.size(),
                  "checkpoint piece '", name, "' of shape ", shape_to_string(t.sizes()),
                  " has a box of ", offset.size(), " dimensions in a tensor of ", global.size());
    }
    nlohmann::json slice = nlohmann::json::array();
    for (int64_t d = 0; d < t.dim(); ++d) slice.push_back({offset[d], offset[d] + t.size(d)});
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

CheckpointPart& TrainingCheckpoint::part(const std::string& name) {
  for (auto& [n, p] : parts)
    if (n == name) return p;
  parts.emplace_back(name, CheckpointPart{});
  return parts.back().second;
}

const CheckpointPart* TrainingCheckpoint::find(const std::string& name) const {
  for (const auto& [n, p] : parts)
    if (n == name) return &p;
  return nullptr;
}

// ---- reading ------------------------------------------------------------------------------

struct CheckpointReader::Piece {
  std::string file;
  std::vector<int64_t> global_shape;
  Box box;  // what the file holds
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
  const int version = manifest.value("format_version", 0);
  TITAN_CHECK(version == 1 || version == kFormatVersion, where, ": unsupported format_version ",
              version, " (this titan reads 1 and ", kFormatVersion, ")");
  TITAN_CHECK(manifest.contains("step") && manifest["step"].is_number_integer(), where,
              ": 'step' is missing or not an integer");
  TITAN_CHECK(manifest.contains("files") && manifest["files"].is_object(), where,
              ": 'files' is missing or not an object");
  step_ = manifest["step"].get<int64_t>();
  state_ = manifest.value("state", nlohmann::json::object());
  TITAN_CHECK(state_.is_object(), where, ": 'state' must be an object");
  mesh_ = manifest.value("mesh", nlohmann::json::object());
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
      for (size_t d = 0; d < piece.global_shape.size(); ++d) {
        const std::string dim_where = tensor_where + ".slice[" + std::to_string(d) + "]";
        const std::vector<int64_t> range = json_ints(slice[d], dim_where);
        TITAN_CHECK(range.size() == 2 && 0 <= range[0] && range[0] <= range[1] &&
                        range[1] <= piece.global_shape[d],
                    dim_where, " is not within the global shape");
        piece.box.offset.push_back(range[0]);
        piece.box.length.push_back(range[1] - range[0]);
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

nlohmann::json CheckpointReader::state_of(const std::string& part) const {
  return state_.contains(part) ? state_[part] : nlohmann::json();
}

at::Tensor CheckpointReader::read_box(const std::string& part, const std::string& name,
                                      const Box& box) const {
  auto it = pieces_.find({part, name});
  TITAN_CHECK(it != pieces_.end(), dir_, ": the checkpoint has no ", part, " tensor '", name, "'");
  const std::vector<int64_t>& global = it->second.front().global_shape;
  TITAN_CHECK(box.offset.size() == global.size(), dir_, ": ", part, " tensor '", name, "' has ",
              global.size(), " dimensions, asked for a box of ", box.offset.size());
  at::Tensor out;
  int64_t filled = 0;
  for (const Piece& piece : it->second) {
    const Box common = intersect(piece.box, box);
    if (common.empty() && !(global.empty() && filled == 0)) continue;
    const at::Tensor data = files_->get(piece.file).tensor(name);
    TITAN_CHECK(data.sizes().vec() == piece.box.length, piece.file, ": tensor '", name,
                "' has shape ", shape_to_string(data.sizes()),
                ", which does not match its manifest entry ", describe(piece.box));
    if (!out.defined()) out = at::empty(box.length, data.options());
    narrow_to(out, box, common).copy_(narrow_to(data, piece.box, common));
    filled += common.numel();
    if (global.empty()) break;
  }
  TITAN_CHECK(filled == box.numel(), dir_, ": entries ", describe(box), " of ", part, " tensor '",
              name, "' are ", filled < box.numel() ? "not all" : "more than once",
              " in the checkpoint's files");
  if (!out.defined()) out = at::empty(box.length);  // an empty box
  return out;
}

at::Tensor CheckpointReader::read(const std::string& part, const std::string& name) const {
  return read_box(part, name, whole_box(global_shape(part, name)));
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
  nlohmann::json state = nlohmann::json::object();
  for (const auto& [part, content] : ckpt.parts) {
    if (!content.state.is_null()) state[part] = content.state;
    if (content.tensors.empty()) continue;
    const std::string file = part_file(part, coordination);
    write_safetensors((tmp_dir / file).string(), content.tensors);
    files[file] = {
        {"part", part}, {"rank", coordination.rank}, {"tensors", tensor_entries(content)}};
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
                                   {"mesh", ckpt.mesh},
                                   {"state", state},
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
                "'; accepted: model, optimizer, lr_scheduler, dataloader, train_state, rng, "
                "dpo_reference");
  }
  const CheckpointReader reader(step_dir(step));
  TrainingCheckpoint ckpt;
  ckpt.step = reader.step();
  ckpt.mesh = reader.mesh();
  for (const std::string& part : checkpoint_parts()) {
    if (excluded(exclude, part)) continue;
    CheckpointPart content;
    for (const std::string& name : reader.names(part))
      content.tensors.emplace_back(name, reader.read(part, name));
    content.state = reader.state_of(part);
    if (!content.tensors.empty() || !content.state.is_null())
      ckpt.parts.emplace_back(part, content);
  }
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
  for (auto& [name, part] : ckpt.parts) part.tensors = cpu_copy(part.tensors);
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
