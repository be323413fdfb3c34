#include "titan/checkpoint/dcp_reader.h"

#include <filesystem>

#include "titan/checkpoint/restricted_unpickler.h"
#include "titan/checkpoint/torch_save_archive.h"
#include "titan/common/error.h"
#include "titan/common/strings.h"

namespace fs = std::filesystem;

namespace titan::checkpoint {
namespace {

const std::vector<std::pair<std::string, at::ScalarType>>& dtype_table() {
  static const std::vector<std::pair<std::string, at::ScalarType>> table = {
      {"float32", at::kFloat},
      {"float64", at::kDouble},
      {"float16", at::kHalf},
      {"bfloat16", at::kBFloat16},
      {"int64", at::kLong},
      {"int32", at::kInt},
      {"int16", at::kShort},
      {"int8", at::kChar},
      {"uint8", at::kByte},
      {"bool", at::kBool},
      {"complex64", at::kComplexFloat},
      {"float8_e4m3fn", at::kFloat8_e4m3fn},
      {"float8_e5m2", at::kFloat8_e5m2}};
  return table;
}

// Whether a view (offset, sizes, strides) stays inside a storage of `numel` elements.
bool view_fits(int64_t offset, const std::vector<int64_t>& size, const std::vector<int64_t>& stride,
               int64_t numel) {
  if (offset < 0) return false;
  int64_t last = offset;
  for (size_t d = 0; d < size.size(); ++d) {
    if (size[d] < 0 || stride[d] < 0) return false;
    if (size[d] == 0) return true;  // an empty view reads nothing
    int64_t reach = 0;
    if (__builtin_mul_overflow(size[d] - 1, stride[d], &reach) ||
        __builtin_add_overflow(last, reach, &last))
      return false;
  }
  return last < numel;
}

}  // namespace

bool is_dcp_checkpoint(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / ".metadata", ec);
}

std::optional<at::ScalarType> dcp_dtype(const std::string& name) {
  for (const auto& [n, t] : dtype_table())
    if (n == name) return t;
  return std::nullopt;
}

std::string dcp_dtype_name(at::ScalarType type) {
  for (const auto& [n, t] : dtype_table())
    if (t == type) return n;
  fail("a DCP checkpoint cannot hold dtype ", type);
}

DcpReader::DcpReader(std::string dir) : dir_(std::move(dir)), metadata_(read_dcp_metadata(dir_)) {}

const MappedFile& DcpReader::file(const std::string& relative_path) const {
  auto it = files_.find(relative_path);
  if (it == files_.end()) {
    const std::string path = (fs::path(dir_) / relative_path).string();
    TITAN_CHECK(fs::exists(path), dir_, "/.metadata names ", relative_path,
                ", which is not there (an incomplete copy of the checkpoint?)");
    it = files_.emplace(relative_path, MappedFile::open(path)).first;
  }
  return *it->second;
}

at::Tensor DcpReader::tensor(const std::string& fqn) const {
  auto info_it = metadata_.tensors.find(fqn);
  TITAN_CHECK(info_it != metadata_.tensors.end(), dir_, ": no tensor '", fqn,
              "' in the checkpoint");
  const DcpTensorInfo& info = info_it->second;
  const std::optional<at::ScalarType> dtype = dcp_dtype(info.dtype);
  TITAN_CHECK(dtype, dir_, ": tensor '", fqn, "' has dtype ", info.dtype,
              ", which titan does not read");
  at::Tensor out = at::empty(info.size, at::TensorOptions().dtype(*dtype));
  int64_t covered = 0;
  for (const DcpChunk& chunk : info.chunks) {
    auto s = metadata_.storage.find({fqn, chunk.offsets});
    TITAN_CHECK(s != metadata_.storage.end(), dir_, "/.metadata: no storage for a chunk of '", fqn,
                "' at ", shape_to_string(chunk.offsets));
    const DcpStorage& where = s->second;
    const MappedFile& f = file(where.relative_path);
    const std::string source = f.path() + " (" + fqn + ")";
    TITAN_CHECK(where.offset <= f.size() && where.length <= f.size() - where.offset, source,
                ": the item lies past the end of the file (", f.size(), " bytes)");
    const auto records = read_torch_save_archive(f.data() + where.offset, where.length, source);
    auto pkl = records.find("data.pkl");
    TITAN_CHECK(pkl != records.end(), source, ": the item has no data.pkl");
    const pickle::ValuePtr v = pickle::unpickle(pkl->second.data, pkl->second.size,
                                                pickle::Admits::kTensor, source + "/data.pkl");
    TITAN_CHECK(v->kind == pickle::Value::Kind::kTensor && v->text == "tensor", source,
                ": the item holds ", pickle::describe(*v), ", not a tensor");
    const pickle::Value::TensorRef& ref = v->tensor;
    TITAN_CHECK(ref.dtype == info.dtype, source, ": stored as ", ref.dtype, " but .metadata says ",
                info.dtype);
    TITAN_CHECK(ref.size == chunk.sizes, source, ": stored with shape ", shape_to_string(ref.size),
                " but .metadata says ", shape_to_string(chunk.sizes));
    auto data = records.find("data/" + ref.storage_key);
    TITAN_CHECK(data != records.end(), source, ": no storage record data/", ref.storage_key);
    const int64_t element = static_cast<int64_t>(c10::elementSize(*dtype));
    TITAN_CHECK(ref.storage_numel >= 0 &&
                    data->second.size >= static_cast<uint64_t>(ref.storage_numel) * element,
                source, ": its storage holds ", data->second.size, " bytes, not ",
                ref.storage_numel, " elements");
    TITAN_CHECK(view_fits(ref.storage_offset, ref.size, ref.stride, ref.storage_numel), source,
                ": its view (offset ", ref.storage_offset, ", strides ",
                shape_to_string(ref.stride), ") reaches past its storage");
    const at::Tensor storage =
        at::from_blob(const_cast<uint8_t*>(data->second.data), {ref.storage_numel},
                      at::TensorOptions().dtype(*dtype));
    const at::Tensor piece = storage.as_strided(ref.size, ref.stride, ref.storage_offset);
    at::Tensor target = out;
    for (size_t d = 0; d < chunk.offsets.size(); ++d)
      target = target.narrow(static_cast<int64_t>(d), chunk.offsets[d], chunk.sizes[d]);
    target.copy_(piece);
    covered += piece.numel();
  }
  // Chunks of different ranks never overlap: together they must make the whole tensor.
  TITAN_CHECK(covered == out.numel(), dir_, "/.metadata: the chunks of '", fqn, "' cover ", covered,
              " of its ", out.numel(), " elements");
  return out;
}

pickle::ValuePtr DcpReader::item(const std::string& fqn) const {
  auto s = metadata_.storage.find({fqn, {}});
  TITAN_CHECK(metadata_.is_item(fqn) && s != metadata_.storage.end(), dir_, ": no item '", fqn,
              "' in the checkpoint");
  const MappedFile& f = file(s->second.relative_path);
  const std::string source = f.path() + " (" + fqn + ")";
  TITAN_CHECK(s->second.offset <= f.size() && s->second.length <= f.size() - s->second.offset,
              source, ": the item lies past the end of the file");
  const auto records =
      read_torch_save_archive(f.data() + s->second.offset, s->second.length, source);
  auto pkl = records.find("data.pkl");
  TITAN_CHECK(pkl != records.end(), source, ": the item has no data.pkl");
  return pickle::unpickle(pkl->second.data, pkl->second.size, pickle::Admits::kPlainData,
                          source + "/data.pkl");
}

}  // namespace titan::checkpoint
