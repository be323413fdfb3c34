#include "titan/checkpoint/restricted_unpickler.h"

#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

#include "titan/common/error.h"

namespace titan::checkpoint::pickle {
namespace {

using Kind = Value::Kind;

constexpr const char* kMetadataModule = "torch.distributed.checkpoint.metadata";
constexpr const char* kFilesystemModule = "torch.distributed.checkpoint.filesystem";
// Deeper nesting than any checkpoint has; bounds the destructors' recursion too.
constexpr int kMaxDepth = 100;
constexpr size_t kMaxStack = size_t{1} << 26;

// torch.<name> dtypes, by the name DCP pickles them under.
const std::set<std::string>& dtype_names() {
  static const std::set<std::string> names = {
      "float32", "float64", "float16", "bfloat16",  "int64",         "int32",      "int16",
      "int8",    "uint8",   "bool",    "complex64", "float8_e4m3fn", "float8_e5m2"};
  return names;
}

// torch.<X>Storage -> the dtype of its elements.
const std::map<std::string, std::string>& storage_dtypes() {
  static const std::map<std::string, std::string> types = {
      {"FloatStorage", "float32"},
      {"DoubleStorage", "float64"},
      {"HalfStorage", "float16"},
      {"BFloat16Storage", "bfloat16"},
      {"LongStorage", "int64"},
      {"IntStorage", "int32"},
      {"ShortStorage", "int16"},
      {"CharStorage", "int8"},
      {"ByteStorage", "uint8"},
      {"BoolStorage", "bool"},
      {"Float8_e4m3fnStorage", "float8_e4m3fn"},
      {"Float8_e5m2Storage", "float8_e5m2"}};
  return types;
}

const std::set<std::string>& dcp_classes() {
  static const std::set<std::string> classes = {
      std::string(kMetadataModule) + ".Metadata",
      std::string(kMetadataModule) + ".TensorStorageMetadata",
      std::string(kMetadataModule) + ".BytesStorageMetadata",
      std::string(kMetadataModule) + ".ChunkStorageMetadata",
      std::string(kMetadataModule) + ".TensorProperties",
      std::string(kMetadataModule) + ".MetadataIndex",
      std::string(kMetadataModule) + ".StorageMeta",
      std::string(kFilesystemModule) + "._StorageInfo"};
  return classes;
}

std::string admitted_list(Admits admits) {
  switch (admits) {
    case Admits::kPlainData:
      return "plain data only (None, bool, int, float, str, bytes, tuple, list, dict)";
    case Admits::kDcpMetadata:
      return "plain data and DCP's metadata classes (torch.distributed.checkpoint.metadata.*, "
             "torch.Size, torch dtypes)";
    case Admits::kTensor:
      return "plain data and one tensor (torch._utils._rebuild_tensor_v2 over a typed storage)";
  }
  return "";
}

ValuePtr make(Kind kind) {
  auto v = std::make_shared<Value>();
  v->kind = kind;
  return v;
}
ValuePtr make_int(int64_t i) {
  ValuePtr v = make(Kind::kInt);
  v->integer = i;
  return v;
}
ValuePtr make_text(Kind kind, std::string text) {
  ValuePtr v = make(kind);
  v->text = std::move(text);
  return v;
}

bool is_container(const Value& v) {
  return v.kind == Kind::kTuple || v.kind == Kind::kList || v.kind == Kind::kDict ||
         v.kind == Kind::kObject;
}

class Machine {
 public:
  Machine(const uint8_t* data, size_t size, Admits admits, const std::string& source)
      : p_(data), end_(data + size), begin_(data), admits_(admits), source_(source) {}

  ValuePtr run() {
    while (true) {
      const uint8_t op = byte();
      switch (op) {
        case 0x80:  // PROTO
          byte();
          break;
        case 0x95:  // FRAME: a length hint only
          take(8);
          break;
        case '.':  // STOP
          if (stack_.size() != 1 || !marks_.empty()) refuse("a pickle that ends mid-value");
          return stack_.back();
        // ---- scalars
        case 'N':
          push(make(Kind::kNone));
          break;
        case 0x88:
        case 0x89: {  // NEWTRUE, NEWFALSE
          ValuePtr v = make(Kind::kBool);
          v->boolean = op == 0x88;
          push(v);
          break;
        }
        case 'K':
          push(make_int(byte()));
          break;
        case 'M':
          push(make_int(static_cast<int64_t>(little(2))));
          break;
        case 'J':
          push(make_int(static_cast<int32_t>(little(4))));
          break;
        case 0x8a: {  // LONG1: n bytes, little-endian two's complement
          const size_t n = byte();
          if (n > 8) refuse("an integer wider than 64 bits");
          const uint8_t* b = take(n);
          uint64_t u = 0;
          for (size_t i = 0; i < n; ++i) u |= uint64_t{b[i]} << (8 * i);
          if (n > 0 && n < 8 && (b[n - 1] & 0x80)) u |= ~uint64_t{0} << (8 * n);
          push(make_int(static_cast<int64_t>(u)));
          break;
        }
        case 'G': {  // BINFLOAT: big-endian IEEE double
          const uint8_t* b = take(8);
          uint64_t u = 0;
          for (int i = 0; i < 8; ++i) u = (u << 8) | b[i];
          ValuePtr v = make(Kind::kFloat);
          std::memcpy(&v->real, &u, 8);
          push(v);
          break;
        }
        case 0x8c:  // SHORT_BINUNICODE
          push(make_text(Kind::kString, bytes(byte())));
          break;
        case 'X':  // BINUNICODE
          push(make_text(Kind::kString, bytes(little(4))));
          break;
        case 0x8d:  // BINUNICODE8
          push(make_text(Kind::kString, bytes(little(8))));
          break;
        case 'C':  // SHORT_BINBYTES
          push(make_text(Kind::kBytes, bytes(byte())));
          break;
        case 'B':  // BINBYTES
          push(make_text(Kind::kBytes, bytes(little(4))));
          break;
        case 0x8e:  // BINBYTES8
          push(make_text(Kind::kBytes, bytes(little(8))));
          break;
        // ---- the memo
        case 0x94:  // MEMOIZE
          memo_[static_cast<uint64_t>(memo_.size())] = top();
          break;
        case 'q':
          memo_[byte()] = top();
          break;
        case 'r':
          memo_[little(4)] = top();
          break;
        case 'h':
          push(memo_get(byte()));
          break;
        case 'j':
          push(memo_get(little(4)));
          break;
        // ---- containers
        case '(':  // MARK
          marks_.push_back(stack_.size());
          break;
        case ')':
          push(make(Kind::kTuple));
          break;
        case 0x85:
        case 0x86:
        case 0x87: {  // TUPLE1..3
          const size_t n = op - 0x84;
          if (stack_.size() < n + floor()) refuse("a tuple of missing items");
          std::vector<ValuePtr> items(stack_.end() - n, stack_.end());
          stack_.resize(stack_.size() - n);
          push(tuple(std::move(items)));
          break;
        }
        case 't':
          push(tuple(pop_mark()));
          break;
        case '}':
          push(make(Kind::kDict));
          break;
        case ']':
          push(make(Kind::kList));
          break;
        case 'l': {  // LIST
          ValuePtr list = make(Kind::kList);
          for (ValuePtr& item : pop_mark()) add_item(*list, std::move(item));
          push(list);
          break;
        }
        case 'd': {  // DICT
          ValuePtr dict = make(Kind::kDict);
          add_entries(*dict, pop_mark());
          push(dict);
          break;
        }
        case 'a': {  // APPEND
          ValuePtr item = pop();
          Value& list = mutable_top(Kind::kList, "APPEND");
          add_item(list, std::move(item));
          break;
        }
        case 'e': {  // APPENDS
          std::vector<ValuePtr> items = pop_mark();
          Value& list = mutable_top(Kind::kList, "APPENDS");
          for (ValuePtr& item : items) add_item(list, std::move(item));
          break;
        }
        case 's': {  // SETITEM
          ValuePtr value = pop();
          ValuePtr key = pop();
          add_entries(mutable_top(Kind::kDict, "SETITEM"), {key, value});
          break;
        }
        case 'u': {  // SETITEMS
          std::vector<ValuePtr> items = pop_mark();
          add_entries(mutable_top(Kind::kDict, "SETITEMS"), std::move(items));
          break;
        }
        // ---- globals, objects, calls
        case 'c': {  // GLOBAL "module\nname\n"
          std::string module = line();
          std::string name = line();
          push(global(module, name));
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          ValuePtr name = pop();
          ValuePtr module = pop();
          if (!module->is_string() || !name->is_string()) refuse("STACK_GLOBAL of non-strings");
          push(global(module->text, name->text));
          break;
        }
        case 0x81: {  // NEWOBJ cls()
          ValuePtr args = pop();
          ValuePtr cls = pop();
          push(new_object(*cls, *args));
          break;
        }
        case 'b': {  // BUILD
          ValuePtr state = pop();
          build(mutable_top(Kind::kObject, "BUILD"), *state);
          break;
        }
        case 'R': {  // REDUCE f(*args)
          ValuePtr args = pop();
          ValuePtr fn = pop();
          push(call(*fn, *args));
          break;
        }
        case 'Q': {  // BINPERSID: a tensor's storage
          ValuePtr pid = pop();
          push(storage(*pid));
          break;
        }
        default: {
          char hex[8];
          std::snprintf(hex, sizeof hex, "0x%02x", op);
          refuse("pickle opcode ", hex, " at byte ", (p_ - begin_) - 1,
                 ", which DCP checkpoints do not use");
        }
      }
    }
  }

 private:
  template <class... Parts>
  [[noreturn]] void refuse(const Parts&... parts) const {
    fail(source_, ": refused to read this pickle: ", parts...,
         "; nothing in it was run (it may hold ", admitted_list(admits_), ")");
  }

  // ---- input
  uint8_t byte() { return *take(1); }
  const uint8_t* take(uint64_t n) {
    if (n > static_cast<uint64_t>(end_ - p_)) refuse("it is truncated");
    const uint8_t* at = p_;
    p_ += n;
    return at;
  }
  uint64_t little(int n) {
    const uint8_t* b = take(n);
    uint64_t u = 0;
    for (int i = 0; i < n; ++i) u |= uint64_t{b[i]} << (8 * i);
    return u;
  }
  std::string bytes(uint64_t n) {
    const uint8_t* b = take(n);
    return std::string(reinterpret_cast<const char*>(b), n);
  }
  std::string line() {
    const uint8_t* nl = static_cast<const uint8_t*>(std::memchr(p_, '\n', end_ - p_));
    if (nl == nullptr) refuse("it is truncated");
    std::string s(reinterpret_cast<const char*>(p_), nl - p_);
    p_ = nl + 1;
    return s;
  }

  // ---- the stack
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  void push(ValuePtr v) {
    if (stack_.size() >= kMaxStack) refuse("more than ", kMaxStack, " values at once");
    stack_.push_back(std::move(v));
  }
  ValuePtr pop() {
    if (stack_.size() <= floor()) refuse("an operation on an empty stack");
    ValuePtr v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  const ValuePtr& top() const {
    if (stack_.empty()) refuse("MEMOIZE on an empty stack");
    return stack_.back();
  }
  std::vector<ValuePtr> pop_mark() {
    if (marks_.empty()) refuse("a MARK is missing");
    const size_t at = marks_.back();
    marks_.pop_back();
    std::vector<ValuePtr> items(std::make_move_iterator(stack_.begin() + at),
                                std::make_move_iterator(stack_.end()));
    stack_.resize(at);
    return items;
  }
  Value& mutable_top(Kind kind, const char* op) {
    if (stack_.size() <= floor() || stack_.back()->kind != kind)
      refuse(op, " on ", stack_.size() <= floor() ? "nothing" : describe(*stack_.back()));
    Value& v = *stack_.back();
    // A container already inside another stays as it is (no cycles; depths stay exact).
    if (v.frozen) refuse(op, " on a ", describe(v), " that is already part of another value");
    return v;
  }
  ValuePtr memo_get(uint64_t index) const {
    auto it = memo_.find(index);
    if (it == memo_.end()) refuse("memo entry ", index, " is not set");
    return it->second;
  }

  // Puts `child` into `parent`, freezing it.
  void adopt(Value& parent, const ValuePtr& child) {
    if (child.get() == &parent) refuse("a value that contains itself");
    if (is_container(*child)) {
      child->frozen = true;
      if (child->depth + 1 > kMaxDepth) refuse("values nested more than ", kMaxDepth, " deep");
      parent.depth = std::max(parent.depth, child->depth + 1);
    }
  }
  void add_item(Value& list, ValuePtr item) {
    adopt(list, item);
    list.items.push_back(std::move(item));
  }
  void add_entries(Value& dict, std::vector<ValuePtr> items) {
    if (items.size() % 2 != 0) refuse("a dict entry without a value");
    for (size_t i = 0; i < items.size(); i += 2) {
      adopt(dict, items[i]);
      adopt(dict, items[i + 1]);
      dict.entries.emplace_back(std::move(items[i]), std::move(items[i + 1]));
    }
  }
  ValuePtr tuple(std::vector<ValuePtr> items) {
    ValuePtr t = make(Kind::kTuple);
    for (ValuePtr& item : items) add_item(*t, std::move(item));
    return t;
  }

  // ---- what a pickle may name: the whole allow-list
  ValuePtr global(const std::string& module, const std::string& name) {
    const std::string full = module + "." + name;
    const bool metadata = admits_ == Admits::kDcpMetadata;
    const bool tensor = admits_ == Admits::kTensor;
    bool admitted = full == "_codecs.encode" || (tensor && full == "collections.OrderedDict");
    if (metadata) {
      admitted = admitted || dcp_classes().count(full) ||
                 full == std::string(kMetadataModule) + "._MEM_FORMAT_ENCODING" ||
                 full == "torch.Size" || full == "torch.serialization._get_layout" ||
                 full == "pathlib.PosixPath" || full == "pathlib.WindowsPath" ||
                 full == "pathlib.Path" || (module == "torch" && dtype_names().count(name));
    }
    if (tensor) {
      admitted = admitted || full == "torch._utils._rebuild_tensor_v2" ||
                 (module == "torch" && storage_dtypes().count(name));
    }
    if (!admitted) refuse("it names the global ", full, ", which a DCP checkpoint never holds");
    return make_text(Kind::kGlobal, full);
  }

  ValuePtr new_object(const Value& cls, const Value& args) {
    if (cls.kind != Kind::kGlobal || !dcp_classes().count(cls.text))
      refuse("NEWOBJ on ", describe(cls), ", not one of DCP's metadata classes");
    if (args.kind != Kind::kTuple || !args.items.empty())
      refuse("NEWOBJ of ", cls.text, " with arguments");
    ValuePtr obj = make(Kind::kObject);
    obj->text = cls.text.substr(cls.text.rfind('.') + 1);
    return obj;
  }

  void build(Value& obj, const Value& state) {
    if (obj.text == "TensorProperties" && state.kind == Kind::kTuple) {
      // Its __setstate__ takes (dtype, layout, requires_grad, memory_format, pin_memory).
      static const char* const kFields[] = {"dtype", "layout", "requires_grad", "memory_format",
                                            "pin_memory"};
      if (state.items.size() != 5)
        refuse("TensorProperties state of ", state.items.size(), " items");
      for (size_t i = 0; i < 5; ++i) {
        adopt(obj, state.items[i]);
        obj.entries.emplace_back(make_text(Kind::kString, kFields[i]), state.items[i]);
      }
      return;
    }
    if (state.kind != Kind::kDict) refuse("BUILD of ", obj.text, " with a ", describe(state));
    for (const auto& [key, value] : state.entries) {
      if (!key->is_string()) refuse("a field of ", obj.text, " named by a ", describe(*key));
      adopt(obj, value);
      obj.entries.emplace_back(key, value);
    }
  }

  // The admitted callables, each on arguments of exactly the types it takes.
  ValuePtr call(const Value& fn, const Value& args) {
    if (fn.kind != Kind::kGlobal) refuse("a call of ", describe(fn));
    if (args.kind != Kind::kTuple) refuse("a call of ", fn.text, " with ", describe(args));
    const std::vector<ValuePtr>& a = args.items;
    const auto all_ints = [](const Value& t) {
      for (const auto& x : t.items)
        if (!x->is_int()) return false;
      return t.kind == Kind::kTuple;
    };
    if (fn.text == "torch.Size") {
      if (a.size() != 1 || !all_ints(*a[0])) refuse("torch.Size of ", describe(args));
      ValuePtr t = make(Kind::kTuple);
      for (const auto& x : a[0]->items) add_item(*t, x);
      return t;
    }
    if (fn.text == "torch.serialization._get_layout") {
      if (a.size() != 1 || !a[0]->is_string() || a[0]->text != "torch.strided")
        refuse("a tensor layout other than torch.strided");
      return make_text(Kind::kString, "strided");
    }
    if (fn.text == std::string(kMetadataModule) + "._MEM_FORMAT_ENCODING") {
      if (a.size() != 1 || !a[0]->is_int() || a[0]->integer < 0 || a[0]->integer > 2)
        refuse("_MEM_FORMAT_ENCODING of ", describe(args));
      return make_int(a[0]->integer);
    }
    if (fn.text.rfind("pathlib.", 0) == 0) {
      std::string path;
      for (const auto& part : a) {
        if (!part->is_string()) refuse(fn.text, " of ", describe(*part));
        path += (path.empty() ? "" : "/") + part->text;
      }
      return make_text(Kind::kString, path);
    }
    if (fn.text == "collections.OrderedDict") {
      if (!a.empty()) refuse("collections.OrderedDict with arguments");
      return make(Kind::kDict);
    }
    if (fn.text == "_codecs.encode") {
      // How protocol 2 spells bytes: the latin-1 characters of a str, one per byte.
      if (a.size() != 2 || !a[0]->is_string() || !a[1]->is_string() ||
          (a[1]->text != "latin1" && a[1]->text != "latin-1"))
        refuse("_codecs.encode of ", describe(args));
      return make_text(Kind::kBytes, latin1(a[0]->text));
    }
    if (fn.text == "torch._utils._rebuild_tensor_v2") {
      // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
      if (a.size() < 6 || a.size() > 7 || a[0]->kind != Kind::kTensor ||
          !a[0]->tensor.size.empty() || !a[1]->is_int() || !all_ints(*a[2]) || !all_ints(*a[3]) ||
          a[2]->items.size() != a[3]->items.size() || a[4]->kind != Kind::kBool ||
          a[5]->kind != Kind::kDict)
        refuse("torch._utils._rebuild_tensor_v2 of ", describe(args));
      ValuePtr t = make(Kind::kTensor);
      t->tensor = a[0]->tensor;
      t->tensor.storage_offset = a[1]->integer;
      for (const auto& x : a[2]->items) t->tensor.size.push_back(x->integer);
      for (const auto& x : a[3]->items) t->tensor.stride.push_back(x->integer);
      t->text = "tensor";
      return t;
    }
    refuse("a call of ", fn.text);
  }

  // ('storage', torch.XStorage, key, location, numel)
  ValuePtr storage(const Value& pid) {
    if (admits_ != Admits::kTensor) refuse("a persistent id (a tensor where none belongs)");
    const auto& a = pid.items;
    if (pid.kind != Kind::kTuple || a.size() != 5 || !a[0]->is_string() ||
        a[0]->text != "storage" || a[1]->kind != Kind::kGlobal || !a[2]->is_string() ||
        !a[3]->is_string() || !a[4]->is_int())
      refuse("a persistent id ", describe(pid), " that is not a tensor storage");
    const std::string cls = a[1]->text.substr(a[1]->text.rfind('.') + 1);
    auto it = storage_dtypes().find(cls);
    if (it == storage_dtypes().end()) refuse("a storage of type ", a[1]->text);
    ValuePtr s = make(Kind::kTensor);  // a storage: its size stays empty until rebuilt
    s->text = "storage";
    s->tensor.dtype = it->second;
    s->tensor.storage_key = a[2]->text;
    s->tensor.storage_numel = a[4]->integer;
    return s;
  }

  // UTF-8 text of code points < 256 -> one byte each.
  std::string latin1(const std::string& utf8) const {
    std::string out;
    for (size_t i = 0; i < utf8.size(); ++i) {
      const auto c = static_cast<unsigned char>(utf8[i]);
      if (c < 0x80) {
        out.push_back(static_cast<char>(c));
      } else if ((c == 0xc2 || c == 0xc3) && i + 1 < utf8.size()) {
        out.push_back(static_cast<char>(((c & 0x03) << 6) | (utf8[++i] & 0x3f)));
      } else {
        refuse("_codecs.encode of a character outside latin-1");
      }
    }
    return out;
  }

  const uint8_t* p_;
  const uint8_t* end_;
  const uint8_t* begin_;
  Admits admits_;
  const std::string& source_;
  std::vector<ValuePtr> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, ValuePtr> memo_;
};

}  // namespace

std::string describe(const Value& v) {
  switch (v.kind) {
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return v.boolean ? "True" : "False";
    case Kind::kInt:
      return "int " + std::to_string(v.integer);
    case Kind::kFloat:
      return "float " + std::to_string(v.real);
    case Kind::kString:
      return "str '" + v.text.substr(0, 40) + "'";
    case Kind::kBytes:
      return "bytes of length " + std::to_string(v.text.size());
    case Kind::kTuple:
      return "tuple of " + std::to_string(v.items.size());
    case Kind::kList:
      return "list of " + std::to_string(v.items.size());
    case Kind::kDict:
      return "dict";
    case Kind::kObject:
      return "object " + v.text;
    case Kind::kGlobal:
      return v.text;
    case Kind::kTensor:
      return v.text == "storage" ? "storage" : "tensor";
  }
  return "value";
}

ValuePtr unpickle(const uint8_t* data, size_t size, Admits admits, const std::string& source) {
  return Machine(data, size, admits, source).run();
}

}  // namespace titan::checkpoint::pickle
