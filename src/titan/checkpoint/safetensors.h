// safetensors files (docs/qwen3.md section 5.1): a memory-mapped reader that validates the
// header the way the reference parser does, a sharded-directory reader, and a writer that
// lays files out exactly as the reference writer does.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "titan/checkpoint/safetensors_header.h"

namespace titan::checkpoint {

// One .safetensors file, memory-mapped read-only. Opening validates the whole header
// (length, JSON, offsets tiling the data exactly, sizes) and throws titan::Error naming the
// file and the problem.
class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const;
  const std::vector<TensorInfo>& tensors() const;  // in file (offset) order
  bool contains(const std::string& name) const;
  const TensorInfo& info(const std::string& name) const;  // throws naming name and file
  const std::map<std::string, std::string>& metadata() const;
  // A CPU tensor viewing the mapped bytes (zero-copy; keeps the mapping alive). F32, BF16,
  // F16, F64, I64, I32, I16, I8, U8 and BOOL are supported; others throw naming the dtype.
  at::Tensor tensor(const std::string& name) const;
  // Drops the mapped pages read so far from this process's memory (MappedFile::release_pages).
  void release_pages() const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

// A Hugging Face weights directory: model.safetensors, or model.safetensors.index.json plus
// the shards it names. Every key must live in exactly one file.
class SafetensorsDirectory {
 public:
  static SafetensorsDirectory open(const std::string& dir);

  std::vector<std::string> keys() const;  // sorted
  bool contains(const std::string& name) const;
  const TensorInfo& info(const std::string& name) const;
  at::Tensor tensor(const std::string& name) const;  // throws naming the key and directory
  void release_pages() const;                        // of every file

 private:
  std::vector<SafetensorsFile> files_;
  std::map<std::string, size_t> where_;  // key -> index into files_
  std::string dir_;
};

// Writes tensors (any device/dtype among the supported ones; made contiguous on the CPU) to
// `path` as the reference writer does: sorted by dtype alignment then name, back to back,
// header padded with spaces to a multiple of 8, `__metadata__` first. Writes to a temporary
// file, fsyncs, renames into place.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

// What a streamed file holds, known before its data: the header is written first.
struct TensorSpec {
  std::string name;
  at::ScalarType dtype;
  std::vector<int64_t> shape;
};
// The order (indices into `specs`) in which the writer lays the tensors out, and asks for them.
std::vector<size_t> safetensors_write_order(const std::vector<TensorSpec>& specs);
// write_safetensors with the data supplied one tensor at a time, in safetensors_write_order:
// `data(i)` must return a tensor of spec i's dtype and shape (on any device). Only one tensor
// need exist at a time.
void write_safetensors_streamed(const std::string& path, const std::vector<TensorSpec>& specs,
                                const std::function<at::Tensor(size_t)>& data,
                                const std::map<std::string, std::string>& metadata = {
                                    {"format", "pt"}});

std::string safetensors_dtype_name(at::ScalarType type);                // throws for unsupported
at::ScalarType scalar_type_from_safetensors(const std::string& dtype);  // throws naming it

}  // namespace titan::checkpoint
