// SafetensorsFile: memory-maps a file, validates its header (safetensors_header.h) and hands
// out zero-copy tensors viewing the mapping.
#include <bit>
#include <cstring>
#include <unordered_map>

#include "titan/checkpoint/safetensors.h"
#include "titan/checkpoint/safetensors_dtypes.h"
#include "titan/common/error.h"
#include "titan/common/file_util.h"

namespace titan::checkpoint {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swaps");

struct SafetensorsFile::Impl {
  std::string path;
  std::shared_ptr<const MappedFile> file;
  uint64_t data_start = 0;  // 8 + header length
  std::vector<TensorInfo> tensors;
  std::unordered_map<std::string, size_t> index;
  std::map<std::string, std::string> metadata;
};

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  auto impl = std::make_shared<Impl>();
  impl->path = path;
  impl->file = MappedFile::open(path);
  SafetensorsHeader header = parse_safetensors_header(path, impl->file->data(), impl->file->size());
  impl->data_start = header.data_start;
  impl->tensors = std::move(header.tensors);
  impl->metadata = std::move(header.metadata);
  for (size_t i = 0; i < impl->tensors.size(); ++i) impl->index[impl->tensors[i].name] = i;

  SafetensorsFile result;
  result.impl_ = std::move(impl);
  return result;
}

const std::string& SafetensorsFile::path() const { return impl_->path; }

const std::vector<TensorInfo>& SafetensorsFile::tensors() const { return impl_->tensors; }

bool SafetensorsFile::contains(const std::string& name) const {
  return impl_->index.count(name) > 0;
}

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  auto it = impl_->index.find(name);
  if (it == impl_->index.end()) fail(impl_->path, ": no tensor named '", name, "'");
  return impl_->tensors[it->second];
}

const std::map<std::string, std::string>& SafetensorsFile::metadata() const {
  return impl_->metadata;
}

at::Tensor SafetensorsFile::tensor(const std::string& name) const {
  const TensorInfo& t = info(name);
  const detail::DtypeInfo* dtype = detail::find_dtype(t.dtype);
  if (!dtype->torch_type) {
    fail(impl_->path, ": tensor '", name, "' has dtype ", t.dtype, ", which torch cannot hold");
  }
  auto options = at::TensorOptions().dtype(*dtype->torch_type).device(at::kCPU);
  uint8_t* data = impl_->file->mutable_data() + impl_->data_start + t.begin;
  const size_t element_bytes = static_cast<size_t>(dtype->bits / 8);
  if (reinterpret_cast<uintptr_t>(data) % element_bytes != 0) {
    // Only files from other writers can misalign a tensor (the reference writer pads the
    // header to 8 bytes); torch kernels assume natural alignment, so copy those few.
    at::Tensor copy = at::empty(t.shape, options);
    std::memcpy(copy.data_ptr(), data, t.end - t.begin);
    return copy;
  }
  // The deleter owns a reference to the mapping, so the bytes outlive this SafetensorsFile.
  std::shared_ptr<const MappedFile> keep_alive = impl_->file;
  return at::from_blob(
      data, t.shape, [keep_alive](void*) mutable { keep_alive.reset(); }, options);
}

void SafetensorsFile::release_pages() const { impl_->file->release_pages(); }

}  // namespace titan::checkpoint
