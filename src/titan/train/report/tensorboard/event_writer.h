// TensorBoard scalars (metrics.enable_tensorboard): an events.out.tfevents.* file in
// <dump_folder>/<metrics.save_tb_folder> that `tensorboard --logdir` reads. Records are
// protobuf Event messages (event.proto) in TFRecord framing: the length, its masked CRC-32C,
// the bytes, their masked CRC-32C. Each step's scalars are flushed when written, so a running
// job's curves are up to date.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace titan::train {

class EventWriter {
 public:
  // Creates the folder and the file (named after the time, host and process, as TensorFlow's
  // writer does) and writes the file-version record. Throws titan::Error naming the file.
  explicit EventWriter(const std::string& folder);

  // One record with every (tag, value) of `step`.
  void add_scalars(int64_t step, const std::vector<std::pair<std::string, double>>& scalars);

  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& bytes);
  std::string path_;
  std::ofstream out_;
};

}  // namespace titan::train
