#include "titan/checkpoint/dcp_metadata.h"

#include <algorithm>
#include <filesystem>
#include <random>

#include "titan/checkpoint/pickle_writer.h"
#include "titan/checkpoint/restricted_unpickler.h"
#include "titan/common/error.h"
#include "titan/common/file_util.h"

namespace titan::checkpoint {
namespace {

using pickle::Value;
using Kind = Value::Kind;

constexpr const char* kMetadataModule = "torch.distributed.checkpoint.metadata";
constexpr const char* kFilesystemModule = "torch.distributed.checkpoint.filesystem";

// Typed access to the unpickled metadata; every mismatch names the file and the field.
class Fields {
 public:
  explicit Fields(std::string source) : source_(std::move(source)) {}

  const Value& object(const Value& v, const char* cls, const std::string& what) const {
    if (v.kind != Kind::kObject || v.text != cls)
      fail(source_, ": ", what, " is ", pickle::describe(v), ", expected a ", cls);
    return v;
  }
  const Value& field(const Value& obj, const char* name) const {
    const Value* v = obj.get(name);
    if (v == nullptr) fail(source_, ": ", obj.text, " has no field '", name, "'");
    return *v;
  }
  const Value& of_kind(const Value& v, Kind kind, const std::string& what) const {
    if (v.kind != kind) fail(source_, ": ", what, " is ", pickle::describe(v));
    return v;
  }
  std::vector<int64_t> ints(const Value& v, const std::string& what) const {
    if (v.kind != Kind::kTuple && v.kind != Kind::kList)
      fail(source_, ": ", what, " is ", pickle::describe(v), ", expected a torch.Size");
    std::vector<int64_t> out;
    for (const auto& x : v.items) {
      if (!x->is_int() || x->integer < 0)
        fail(source_, ": ", what, " holds ", pickle::describe(*x));
      out.push_back(x->integer);
    }
    return out;
  }
  int64_t non_negative(const Value& v, const std::string& what) const {
    if (!v.is_int() || v.integer < 0) fail(source_, ": ", what, " is ", pickle::describe(v));
    return v.integer;
  }

 private:
  std::string source_;
};

}  // namespace

bool DcpMetadata::is_item(const std::string& fqn) const {
  return std::find(items.begin(), items.end(), fqn) != items.end();
}

DcpMetadata read_dcp_metadata(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / ".metadata").string();
  const std::string bytes = read_text_file(path);
  const pickle::ValuePtr root = pickle::unpickle(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                 bytes.size(), pickle::Admits::kDcpMetadata, path);
  const Fields f(path);
  const Value& md = f.object(*root, "Metadata", "the pickle");
  DcpMetadata out;
  const Value& entries =
      f.of_kind(f.field(md, "state_dict_metadata"), Kind::kDict, "state_dict_metadata");
  for (const auto& [key, entry] : entries.entries) {
    const std::string& fqn = f.of_kind(*key, Kind::kString, "a state_dict_metadata key").text;
    if (entry->kind == Kind::kObject && entry->text == "BytesStorageMetadata") {
      out.items.push_back(fqn);
      continue;
    }
    const Value& tensor = f.object(*entry, "TensorStorageMetadata", fqn);
    DcpTensorInfo info;
    const Value& properties =
        f.object(f.field(tensor, "properties"), "TensorProperties", fqn + ".properties");
    const Value& dtype = f.field(properties, "dtype");
    if (dtype.kind != Kind::kGlobal || dtype.text.rfind("torch.", 0) != 0)
      fail(path, ": ", fqn, " has dtype ", pickle::describe(dtype));
    info.dtype = dtype.text.substr(6);
    info.size = f.ints(f.field(tensor, "size"), fqn + ".size");
    const Value& chunks = f.of_kind(f.field(tensor, "chunks"), Kind::kList, fqn + ".chunks");
    for (const auto& c : chunks.items) {
      const Value& chunk = f.object(*c, "ChunkStorageMetadata", fqn + " chunk");
      DcpChunk piece{f.ints(f.field(chunk, "offsets"), fqn + " chunk offsets"),
                     f.ints(f.field(chunk, "sizes"), fqn + " chunk sizes")};
      if (piece.offsets.size() != info.size.size() || piece.sizes.size() != info.size.size())
        fail(path, ": ", fqn, " has a chunk of another rank than its shape");
      for (size_t d = 0; d < info.size.size(); ++d)
        if (piece.offsets[d] > info.size[d] || piece.sizes[d] > info.size[d] - piece.offsets[d])
          fail(path, ": ", fqn, " has a chunk outside its shape");
      info.chunks.push_back(std::move(piece));
    }
    out.tensors.emplace(fqn, std::move(info));
  }
  const Value& storage = f.of_kind(f.field(md, "storage_data"), Kind::kDict, "storage_data");
  for (const auto& [key, value] : storage.entries) {
    const Value& index = f.object(*key, "MetadataIndex", "a storage_data key");
    const std::string& fqn = f.of_kind(f.field(index, "fqn"), Kind::kString, "an index fqn").text;
    std::vector<int64_t> offsets;
    if (const Value* o = index.get("offset"); o != nullptr && !o->is_none())
      offsets = f.ints(*o, fqn + " index offset");
    const Value& info = f.object(*value, "_StorageInfo", fqn + " storage");
    if (const Value* t = info.get("transform_descriptors");
        t != nullptr && !t->is_none() && !t->items.empty())
      fail(path, ": ", fqn, " is stored through a transform (", pickle::describe(*t),
           ", e.g. zstd compression), which titan does not read; save without _extensions");
    DcpStorage s;
    s.relative_path =
        f.of_kind(f.field(info, "relative_path"), Kind::kString, fqn + " relative_path").text;
    if (s.relative_path.empty() || s.relative_path.find('/') != std::string::npos ||
        s.relative_path == "." || s.relative_path == "..")
      fail(path, ": ", fqn, " is stored in '", s.relative_path,
           "', not a file of the checkpoint's folder");
    s.offset = f.non_negative(f.field(info, "offset"), fqn + " offset");
    s.length = f.non_negative(f.field(info, "length"), fqn + " length");
    out.storage[{fqn, offsets}] = s;
  }
  return out;
}

std::string dcp_metadata_pickle(const DcpMetadata& metadata, const std::string& checkpoint_id) {
  pickle::PickleWriter p;
  const auto field = [&](const char* name) { p.string(name); };
  p.new_object(kMetadataModule, "Metadata");
  p.empty_dict();
  p.mark();
  // state_dict_metadata: tensors (with one entry per chunk) and items, in name order.
  field("state_dict_metadata");
  p.empty_dict();
  p.mark();
  std::vector<std::string> names;
  for (const auto& [fqn, _] : metadata.tensors) names.push_back(fqn);
  names.insert(names.end(), metadata.items.begin(), metadata.items.end());
  std::sort(names.begin(), names.end());
  for (const std::string& fqn : names) {
    p.string(fqn);
    auto it = metadata.tensors.find(fqn);
    if (it == metadata.tensors.end()) {
      p.new_object(kMetadataModule, "BytesStorageMetadata");
      p.empty_dict();
      p.build();
      continue;
    }
    const DcpTensorInfo& info = it->second;
    p.new_object(kMetadataModule, "TensorStorageMetadata");
    p.empty_dict();
    p.mark();
    field("properties");
    p.new_object(kMetadataModule, "TensorProperties");
    p.mark();  // its __setstate__ tuple
    p.global("torch", info.dtype);
    p.global("torch.serialization", "_get_layout");
    p.string("torch.strided");
    p.end_tuple(1);
    p.reduce();
    p.boolean(false);  // requires_grad
    p.global(kMetadataModule, "_MEM_FORMAT_ENCODING");
    p.integer(0);  // torch.contiguous_format
    p.end_tuple(1);
    p.reduce();
    p.boolean(false);  // pin_memory
    p.end_tuple(5);
    p.build();
    field("size");
    p.torch_size(info.size);
    field("chunks");
    p.empty_list();
    p.mark();
    for (const DcpChunk& c : info.chunks) {
      p.new_object(kMetadataModule, "ChunkStorageMetadata");
      p.empty_dict();
      p.mark();
      field("offsets");
      p.torch_size(c.offsets);
      field("sizes");
      p.torch_size(c.sizes);
      p.setitems();
      p.build();
    }
    p.appends();
    p.setitems();
    p.build();
  }
  p.setitems();
  // planner_data: the path of each entry in the nested state dict.
  field("planner_data");
  p.empty_dict();
  p.mark();
  for (const std::string& fqn : names) {
    p.string(fqn);
    auto path = metadata.planner_paths.find(fqn);
    const std::vector<std::string> parts =
        path != metadata.planner_paths.end() ? path->second : std::vector<std::string>{fqn};
    if (parts.size() > 3) p.mark();
    for (const std::string& part : parts) p.string(part);
    p.end_tuple(parts.size());
  }
  p.setitems();
  // storage_data: MetadataIndex(fqn, offset, index) -> _StorageInfo(relative_path, offset,
  // length).
  field("storage_data");
  p.empty_dict();
  p.mark();
  std::map<std::string, int64_t> chunk_index;
  for (const auto& [key, s] : metadata.storage) {
    const auto& [fqn, offsets] = key;
    const bool tensor = metadata.tensors.count(fqn) > 0;
    p.new_object(kMetadataModule, "MetadataIndex");
    p.empty_dict();
    p.mark();
    field("fqn");
    p.string(fqn);
    if (tensor) {
      field("offset");
      p.torch_size(offsets);
      // Its place among the tensor's chunks.
      const auto& chunks = metadata.tensors.at(fqn).chunks;
      int64_t index = 0;
      for (size_t i = 0; i < chunks.size(); ++i)
        if (chunks[i].offsets == offsets) index = static_cast<int64_t>(i);
      field("index");
      p.integer(index);
    } else {
      field("index");
      p.none();
    }
    p.setitems();
    p.build();
    p.new_object(kFilesystemModule, "_StorageInfo");
    p.empty_dict();
    p.mark();
    field("relative_path");
    p.string(s.relative_path);
    field("offset");
    p.integer(static_cast<int64_t>(s.offset));
    field("length");
    p.integer(static_cast<int64_t>(s.length));
    p.setitems();
    p.build();
  }
  p.setitems();
  // storage_meta: the folder it was saved to and a save id, as torch records them.
  field("storage_meta");
  p.new_object(kMetadataModule, "StorageMeta");
  p.empty_dict();
  p.mark();
  field("checkpoint_id");
  p.global("pathlib", "PosixPath");
  p.string(checkpoint_id);
  p.end_tuple(1);
  p.reduce();
  field("save_id");
  std::random_device random;
  char id[33];
  std::snprintf(id, sizeof id, "%08x%08x%08x%08x", random(), random(), random(), random());
  p.string(id);
  field("load_id");
  p.none();
  field("modules");
  p.empty_list();
  p.setitems();
  p.build();
  field("version");
  p.string("1.0.0");
  p.setitems();
  p.build();
  return p.finish();
}

}  // namespace titan::checkpoint
