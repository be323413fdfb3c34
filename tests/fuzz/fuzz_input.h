// Helpers of the libFuzzer targets: the input as a file (for readers that take a path), and
// the rule every target follows: titan::Error is the expected answer to bad input; any other
// exception escapes to libFuzzer, which reports it as a crash.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace titan::fuzz {

// The input written to a fresh temporary file ending in `suffix`, removed when destroyed.
class InputFile {
 public:
  InputFile(const uint8_t* data, size_t size, const std::string& suffix) {
    path_ = std::string(P_tmpdir) + "/titan-fuzz-XXXXXX" + suffix;
    const int fd = ::mkstemps(path_.data(), static_cast<int>(suffix.size()));
    if (fd < 0) std::abort();
    for (size_t done = 0; done < size;) {
      const ssize_t n = ::write(fd, data + done, size - done);
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
    ::close(fd);
  }
  ~InputFile() { ::unlink(path_.c_str()); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A property the target checks on accepted input; a failure is a crash libFuzzer records.
inline void require(bool condition) {
  if (!condition) std::abort();
}

}  // namespace titan::fuzz
