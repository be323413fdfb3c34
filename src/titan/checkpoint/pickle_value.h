// The values a restricted unpickler (restricted_unpickler.h) builds: plain Python data (None,
// bool, int, float, str, bytes, tuple, list, dict) and inert records of what a pickle named
// (an admitted class's instance and its fields, a dtype, a tensor's storage). Nothing here
// runs code: a pickle is read as data only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace titan::checkpoint::pickle {

struct Value;
using ValuePtr = std::shared_ptr<Value>;

struct Value {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kBytes,
    kTuple,
    kList,
    kDict,
    kObject,  // an admitted class's instance: `text` is the class, `entries` its fields
    kGlobal,  // an admitted global used as a value: `text` is "module.name" (torch.float32)
    kTensor,  // torch._utils._rebuild_tensor_v2(...): `tensor` says where its bytes are
  };
  struct TensorRef {
    std::string dtype;        // "float32", "bfloat16", ... (from the storage class)
    std::string storage_key;  // the archive's data/<key> record
    int64_t storage_numel = 0;
    int64_t storage_offset = 0;
    std::vector<int64_t> size, stride;
  };

  Kind kind = Kind::kNone;
  bool boolean = false;
  int64_t integer = 0;
  double real = 0;
  std::string text;                                    // str (UTF-8), bytes, class or global
  std::vector<ValuePtr> items;                         // tuple, list
  std::vector<std::pair<ValuePtr, ValuePtr>> entries;  // dict (in order), object fields
  TensorRef tensor;
  // Containers become read-only once they are put into another (the unpickler refuses to
  // change them after), so the value graph has no cycles and `depth` stays exact.
  bool frozen = false;
  int depth = 0;  // nesting below this value

  bool is(Kind k) const { return kind == k; }
  bool is_none() const { return kind == Kind::kNone; }
  bool is_int() const { return kind == Kind::kInt; }
  bool is_string() const { return kind == Kind::kString; }
  // A field of an object, or the value of a dict entry with a string key; nullptr when absent.
  const Value* get(const std::string& key) const {
    for (const auto& [k, v] : entries)
      if (k->kind == Kind::kString && k->text == key) return v.get();
    return nullptr;
  }
};

// "None", "int 5", "str 'x'", "dict", "object TensorStorageMetadata": what a value is, for
// messages.
std::string describe(const Value& v);

}  // namespace titan::checkpoint::pickle
