// write_safetensors: the layout of the reference Rust writer (safetensors `prepare` +
// `serialize_to_file`), so our files are byte-identical to Python's
// `safetensors.torch.save_file(tensors, path, metadata={"format": "pt"})`.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <numeric>
#include <set>
#include <string_view>

#include "titan/checkpoint/safetensors.h"
#include "titan/checkpoint/safetensors_dtypes.h"
#include "titan/common/error.h"
#include "titan/common/file_util.h"

namespace titan::checkpoint {
namespace {

// A JSON string as serde_json writes it: `"` and `\` escaped, \b \f \n \r \t short forms,
// other control bytes as \u00xx (lowercase hex), everything else (UTF-8 included) verbatim.
void append_json_string(std::string& out, std::string_view text) {
  out += '"';
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

// Reference order: dtype rank descending (largest alignment first), then name.
bool written_before(const detail::DtypeInfo* a_dtype, const std::string& a_name,
                    const detail::DtypeInfo* b_dtype, const std::string& b_name) {
  if (a_dtype->rank != b_dtype->rank) return a_dtype->rank > b_dtype->rank;
  return a_name < b_name;
}

const detail::DtypeInfo* checked_dtype(const std::string& path, const TensorSpec& spec) {
  const detail::DtypeInfo* dtype = detail::find_dtype(spec.dtype);
  if (dtype == nullptr) {
    fail(path, ": tensor '", spec.name, "' has dtype ", c10::toString(spec.dtype),
         ", which safetensors cannot store");
  }
  return dtype;
}

uint64_t byte_size(const TensorSpec& spec) {
  uint64_t n = at::elementSize(spec.dtype);
  for (int64_t d : spec.shape) n *= static_cast<uint64_t>(d);
  return n;
}

}  // namespace

std::vector<size_t> safetensors_write_order(const std::vector<TensorSpec>& specs) {
  std::vector<size_t> order(specs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::vector<const detail::DtypeInfo*> dtypes;
  for (const TensorSpec& spec : specs) dtypes.push_back(checked_dtype("safetensors", spec));
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return written_before(dtypes[a], specs[a].name, dtypes[b], specs[b].name);
  });
  return order;
}

void write_safetensors_streamed(const std::string& path, const std::vector<TensorSpec>& specs,
                                const std::function<at::Tensor(size_t)>& data,
                                const std::map<std::string, std::string>& metadata) {
  std::set<std::string_view> names;
  for (const TensorSpec& spec : specs) {
    if (spec.name == "__metadata__") fail(path, ": '__metadata__' cannot be a tensor name");
    if (!names.insert(spec.name).second) fail(path, ": tensor name '", spec.name, "' given twice");
    checked_dtype(path, spec);
  }
  const std::vector<size_t> order = safetensors_write_order(specs);

  // Compact JSON: __metadata__ first, then the tensors in offset order.
  std::string header = "{";
  bool first = true;
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    for (const auto& [key, value] : metadata) {
      if (!first) header += ',';
      first = false;
      append_json_string(header, key);
      header += ':';
      append_json_string(header, value);
    }
    header += '}';
    first = false;
  }
  uint64_t offset = 0;
  for (size_t i : order) {
    const TensorSpec& t = specs[i];
    if (!first) header += ',';
    first = false;
    append_json_string(header, t.name);
    header += ":{\"dtype\":\"";
    header += detail::find_dtype(t.dtype)->name;
    header += "\",\"shape\":[";
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (d > 0) header += ',';
      header += std::to_string(t.shape[d]);
    }
    const uint64_t bytes = byte_size(t);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + bytes) + "]}";
    offset += bytes;
  }
  header += '}';
  // Pad with spaces so the data section (and so every tensor) starts 8-byte aligned.
  header.append((8 - header.size() % 8) % 8, ' ');

  AtomicFile file(path);
  const uint64_t header_len = header.size();
  file.write(&header_len, sizeof(header_len));  // little-endian host (checked in the reader)
  file.write(header);
  for (size_t i : order) {
    const TensorSpec& spec = specs[i];
    at::Tensor t = data(i);
    TITAN_CHECK(t.defined() && t.scalar_type() == spec.dtype && t.sizes().vec() == spec.shape, path,
                ": tensor '", spec.name, "' does not match its header entry");
    // Written in its own dtype: any conversion is the caller's decision.
    t = t.detach().to(at::kCPU).contiguous();
    if (t.is_conj()) t = t.resolve_conj();
    if (t.is_neg()) t = t.resolve_neg();
    const uint64_t bytes = byte_size(spec);
    if (bytes > 0) file.write(t.const_data_ptr(), bytes);
  }
  file.commit();
}

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<TensorSpec> specs;
  for (const auto& [name, tensor] : tensors) {
    TITAN_CHECK(tensor.defined(), path, ": tensor '", name, "' is undefined");
    specs.push_back({name, tensor.scalar_type(), tensor.sizes().vec()});
  }
  write_safetensors_streamed(
      path, specs, [&](size_t i) { return tensors[i].second; }, metadata);
}

}  // namespace titan::checkpoint
