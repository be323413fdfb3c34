// SafetensorsFile: memory-maps a file and validates its header with the same rules as the
// reference Rust parser (safetensors `SafeTensors::read_metadata` + `Metadata::validate`).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cstring>
#include <set>
#include <sstream>
#include <unordered_map>

#include "titan/checkpoint/file_util.h"
#include "titan/checkpoint/safetensors.h"
#include "titan/checkpoint/safetensors_dtypes.h"
#include "titan/common/error.h"

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

namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference parser's MAX_HEADER_SIZE

std::string shape_text(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

// Parses the header JSON, rejecting duplicate keys at any depth (serde rejects duplicate
// struct fields; a duplicate tensor name would silently hide a tensor).
nlohmann::json parse_header_json(const std::string& path, const char* begin, const char* end) {
  std::vector<std::set<std::string>> seen;
  std::string duplicate;
  auto callback = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) {
      seen.emplace_back();
    } else if (event == Event::object_end) {
      if (!seen.empty()) seen.pop_back();
    } else if (event == Event::key && !seen.empty()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!seen.back().insert(key).second && duplicate.empty()) duplicate = key;
    }
    return true;
  };
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(begin, end, callback);
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": invalid JSON header: ", e.what());
  }
  if (!duplicate.empty()) fail(path, ": duplicate key '", duplicate, "' in the header");
  return header;
}

uint64_t read_u64(const nlohmann::json& value, const std::string& path, const std::string& name,
                  const char* field) {
  if (!value.is_number_unsigned()) {
    fail(path, ": tensor '", name, "': ", field, " must hold non-negative integers, got ",
         value.dump());
  }
  return value.get<uint64_t>();
}

TensorInfo parse_entry(const std::string& path, const std::string& name,
                       const nlohmann::json& entry) {
  if (!entry.is_object()) fail(path, ": tensor '", name, "': entry must be an object");
  // Like the reference parser (serde without deny_unknown_fields), other fields are ignored.
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!entry.contains(field)) fail(path, ": tensor '", name, "': missing field '", field, "'");
  }
  TensorInfo info;
  info.name = name;
  const auto& dtype = entry["dtype"];
  if (!dtype.is_string()) fail(path, ": tensor '", name, "': dtype must be a string");
  info.dtype = dtype.get<std::string>();
  if (detail::find_dtype(info.dtype) == nullptr) {
    fail(path, ": tensor '", name, "' has unknown dtype '", info.dtype, "'");
  }
  const auto& shape = entry["shape"];
  if (!shape.is_array()) fail(path, ": tensor '", name, "': shape must be an array");
  for (const auto& dim : shape) {
    uint64_t d = read_u64(dim, path, name, "shape");
    if (d > static_cast<uint64_t>(INT64_MAX)) fail(path, ": tensor '", name, "': shape too large");
    info.shape.push_back(static_cast<int64_t>(d));
  }
  const auto& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2) {
    fail(path, ": tensor '", name, "': data_offsets must be [begin, end]");
  }
  info.begin = read_u64(offsets[0], path, name, "data_offsets");
  info.end = read_u64(offsets[1], path, name, "data_offsets");
  return info;
}

// Offsets must tile [0, last_end) with no gap or overlap, and each range must be exactly the
// tensor's size. Returns the end of the data the header describes.
uint64_t validate_layout(const std::string& path, const std::vector<TensorInfo>& tensors) {
  uint64_t expected_begin = 0;
  for (const TensorInfo& t : tensors) {
    if (t.begin != expected_begin || t.end < t.begin) {
      fail(path, ": tensor '", t.name, "' has data_offsets [", t.begin, ", ", t.end, "] but ",
           expected_begin == 0 && &t == &tensors.front()
               ? std::string("the data section starts at 0")
               : "the previous tensor ends at " + std::to_string(expected_begin),
           " (tensors must tile the data with no gaps or overlaps)");
    }
    uint64_t numel = 1;
    for (int64_t d : t.shape) {
      if (__builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel)) {
        fail(path, ": tensor '", t.name, "': shape ", shape_text(t.shape), " overflows");
      }
    }
    uint64_t bits = 0;
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(detail::find_dtype(t.dtype)->bits),
                               &bits)) {
      fail(path, ": tensor '", t.name, "': shape ", shape_text(t.shape), " overflows");
    }
    if (bits % 8 != 0) {
      fail(path, ": tensor '", t.name, "': ", numel, " elements of ", t.dtype,
           " do not fill whole bytes");
    }
    if (t.end - t.begin != bits / 8) {
      fail(path, ": tensor '", t.name, "': data_offsets [", t.begin, ", ", t.end, "] span ",
           t.end - t.begin, " bytes but dtype ", t.dtype, " with shape ", shape_text(t.shape),
           " needs ", bits / 8);
    }
    expected_begin = t.end;
  }
  return expected_begin;
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  auto impl = std::make_shared<Impl>();
  impl->path = path;
  impl->file = MappedFile::open(path);
  const uint64_t size = impl->file->size();
  const uint8_t* bytes = impl->file->data();

  if (size < 8) {
    fail(path, ": truncated: ", size, " bytes is too small for a safetensors file (the first 8 ",
         "bytes hold the header length)");
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes, 8);  // little-endian u64 (static_assert above)
  if (header_len > kMaxHeaderBytes) {
    fail(path, ": header length ", header_len, " exceeds the limit of ", kMaxHeaderBytes,
         " bytes (not a safetensors file?)");
  }
  if (8 + header_len > size) {
    fail(path, ": truncated: header says the JSON header is ", header_len,
         " bytes but the file has only ", size - 8, " bytes after the length field");
  }
  const char* header_begin = reinterpret_cast<const char*>(bytes + 8);
  const char* header_end = header_begin + header_len;
  if (header_len == 0 || header_begin[0] != '{') {
    fail(path, ": header does not start with '{' (not a safetensors file?)");
  }
  nlohmann::json header = parse_header_json(path, header_begin, header_end);
  if (!header.is_object()) fail(path, ": header must be a JSON object");

  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (value.is_null()) continue;
      if (!value.is_object()) fail(path, ": __metadata__ must be an object of strings");
      for (const auto& [meta_key, meta_value] : value.items()) {
        if (!meta_value.is_string()) {
          fail(path, ": __metadata__ value of '", meta_key, "' must be a string, got ",
               meta_value.dump());
        }
        impl->metadata[meta_key] = meta_value.get<std::string>();
      }
      continue;
    }
    impl->tensors.push_back(parse_entry(path, key, value));
  }
  std::sort(impl->tensors.begin(), impl->tensors.end(),
            [](const TensorInfo& a, const TensorInfo& b) {
              return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
            });
  const uint64_t data_end = validate_layout(path, impl->tensors);
  const uint64_t data_size = size - 8 - header_len;
  if (data_end > data_size) {
    fail(path, ": truncated: header says ", data_end, " bytes of data but file has ", data_size);
  }
  if (data_end < data_size) {
    fail(path, ": ", data_size - data_end, " unexpected bytes after the last tensor (header says ",
         data_end, " bytes of data, file has ", data_size, ")");
  }
  impl->data_start = 8 + header_len;
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

}  // namespace titan::checkpoint
