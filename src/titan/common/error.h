// Errors that reach the user. Every boundary (files, config keys, CLI values) throws
// titan::Error with a message that names the file/key/value and says what to fix; the
// CLI prints it as one line and exits non-zero.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace titan {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

namespace detail {
inline void append(std::ostringstream&) {}
template <class T, class... Rest>
void append(std::ostringstream& out, const T& first, const Rest&... rest) {
  out << first;
  append(out, rest...);
}
}  // namespace detail

// Builds a message from pieces: fail("file ", path, ": truncated").
template <class... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream out;
  detail::append(out, parts...);
  throw Error(out.str());
}

}  // namespace titan

// Check at a boundary: TITAN_CHECK(cond, "key ", name, " must be positive").
#define TITAN_CHECK(cond, ...)               \
  do {                                       \
    if (!(cond)) ::titan::fail(__VA_ARGS__); \
  } while (0)
