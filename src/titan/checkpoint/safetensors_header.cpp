// parse_safetensors_header: the same rules as the reference Rust parser (safetensors
// `SafeTensors::read_metadata` + `Metadata::validate`).
#include "titan/checkpoint/safetensors_header.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <set>
#include <sstream>
#include <tuple>

#include "titan/checkpoint/safetensors_dtypes.h"
#include "titan/common/error.h"

namespace titan::checkpoint {

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

SafetensorsHeader parse_safetensors_header(const std::string& path, const uint8_t* bytes,
                                           uint64_t size) {
  SafetensorsHeader result;

  if (size < 8) {
    fail(path, ": truncated: ", size, " bytes is too small for a safetensors file (the first 8 ",
         "bytes hold the header length)");
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes, 8);  // little-endian u64 (static_assert in safetensors_file.cpp)
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
        result.metadata[meta_key] = meta_value.get<std::string>();
      }
      continue;
    }
    result.tensors.push_back(parse_entry(path, key, value));
  }
  std::sort(result.tensors.begin(), result.tensors.end(),
            [](const TensorInfo& a, const TensorInfo& b) {
              return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
            });
  const uint64_t data_end = validate_layout(path, result.tensors);
  const uint64_t data_size = size - 8 - header_len;
  if (data_end > data_size) {
    fail(path, ": truncated: header says ", data_end, " bytes of data but file has ", data_size);
  }
  if (data_end < data_size) {
    fail(path, ": ", data_size - data_end, " unexpected bytes after the last tensor (header says ",
         data_end, " bytes of data, file has ", data_size, ")");
  }
  result.data_start = 8 + header_len;
  return result;
}

}  // namespace titan::checkpoint
