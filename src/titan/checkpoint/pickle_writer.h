// Writes pickles (protocol 2, as torch.save's data.pkl) of plain data and of the few globals a
// DCP checkpoint names: enough to spell DCP's .metadata, a torch.save tensor archive's data.pkl
// and DCP's non-tensor items. Values are emitted in order, as the pickle machine reads them.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace titan::checkpoint::pickle {

class PickleWriter {
 public:
  PickleWriter();  // PROTO 2

  void none();
  void boolean(bool b);
  void integer(int64_t i);
  void real(double d);
  void string(const std::string& utf8);
  void bytes(const std::string& raw);  // _codecs.encode(str, 'latin1'), protocol 2's bytes
  // Plain JSON data: null, bool, numbers, strings, arrays (as lists), objects (as dicts).
  void json(const nlohmann::json& value);
  void integer_tuple(const std::vector<int64_t>& values);
  void real_tuple(const std::vector<double>& values);

  void global(const std::string& module, const std::string& name);
  void mark();
  // Closes a tuple of the `n` values emitted since the matching mark() (n > 3) or, for n <= 3,
  // of the last n values (no mark()).
  void end_tuple(size_t n);
  void empty_tuple();
  void empty_list();
  void empty_dict();
  void appends();   // the values since mark() onto the list below them
  void setitems();  // the key/value pairs since mark() into the dict below them
  void reduce();    // callable(*tuple)
  void build();     // object.__setstate__(state)
  void binpersid();

  // torch.Size(values)
  void torch_size(const std::vector<int64_t>& values);
  // module.cls.__new__(cls): an object whose state a build() sets next.
  void new_object(const std::string& module, const std::string& cls);

  // The pickle, with its STOP.
  std::string finish();

 private:
  std::string out_;
};

}  // namespace titan::checkpoint::pickle
