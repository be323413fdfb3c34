// write_safetensors: the layout of the reference Rust writer (safetensors `prepare` +
// `serialize_to_file`), so our files are byte-identical to Python's
// `safetensors.torch.save_file(tensors, path, metadata={"format": "pt"})`.
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <set>
#include <string_view>

#include "titan/checkpoint/file_util.h"
#include "titan/checkpoint/safetensors.h"
#include "titan/checkpoint/safetensors_dtypes.h"
#include "titan/common/error.h"

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

struct PreparedTensor {
  std::string name;
  at::Tensor data;  // contiguous, on the CPU
  const detail::DtypeInfo* dtype;
  uint64_t bytes;
};

}  // namespace

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<PreparedTensor> prepared;
  prepared.reserve(tensors.size());
  std::set<std::string_view> names;
  for (const auto& [name, tensor] : tensors) {
    if (name == "__metadata__") fail(path, ": '__metadata__' cannot be a tensor name");
    if (!names.insert(name).second) fail(path, ": tensor name '", name, "' given twice");
    TITAN_CHECK(tensor.defined(), path, ": tensor '", name, "' is undefined");
    const detail::DtypeInfo* dtype = detail::find_dtype(tensor.scalar_type());
    if (dtype == nullptr) {
      fail(path, ": tensor '", name, "' has dtype ", c10::toString(tensor.scalar_type()),
           ", which safetensors cannot store");
    }
    // Written in its own dtype: any conversion is the caller's decision.
    at::Tensor data = tensor.detach().to(at::kCPU).contiguous();
    if (data.is_conj()) data = data.resolve_conj();
    if (data.is_neg()) data = data.resolve_neg();
    prepared.push_back({name, std::move(data), dtype, static_cast<uint64_t>(tensor.nbytes())});
  }
  // Reference order: dtype rank descending (largest alignment first), then name.
  std::sort(prepared.begin(), prepared.end(), [](const PreparedTensor& a, const PreparedTensor& b) {
    if (a.dtype->rank != b.dtype->rank) return a.dtype->rank > b.dtype->rank;
    return a.name < b.name;
  });

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
  for (const PreparedTensor& t : prepared) {
    if (!first) header += ',';
    first = false;
    append_json_string(header, t.name);
    header += ":{\"dtype\":\"";
    header += t.dtype->name;
    header += "\",\"shape\":[";
    for (int64_t i = 0; i < t.data.dim(); ++i) {
      if (i > 0) header += ',';
      header += std::to_string(t.data.size(i));
    }
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + t.bytes) + "]}";
    offset += t.bytes;
  }
  header += '}';
  // Pad with spaces so the data section (and so every tensor) starts 8-byte aligned.
  header.append((8 - header.size() % 8) % 8, ' ');

  AtomicFile file(path);
  const uint64_t header_len = header.size();
  file.write(&header_len, sizeof(header_len));  // little-endian host (checked in the reader)
  file.write(header);
  for (const PreparedTensor& t : prepared) {
    if (t.bytes > 0) file.write(t.data.const_data_ptr(), t.bytes);
  }
  file.commit();
}

}  // namespace titan::checkpoint
