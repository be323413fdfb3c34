#include "titan/common/file_util.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "titan/common/error.h"

namespace titan {
namespace {

namespace fs = std::filesystem;

// strerror, and for a full disk or a file-size limit a word on what it means for the save.
std::string errno_text() {
  const int err = errno;
  std::string text = std::strerror(err);
  if (err == ENOSPC || err == EFBIG || err == EDQUOT)
    text +=
        " (the disk is full or a file-size limit was reached; this save is abandoned and "
        "earlier checkpoints are untouched)";
  return text;
}

std::string parent_of(const std::string& path) {
  fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

// One write() moves at most this much; Linux caps a single call just below 2 GiB anyway.
constexpr size_t kMaxWriteChunk = size_t{1} << 30;
// Pieces smaller than the buffer are gathered; 8 MiB keeps the syscall count negligible.
constexpr size_t kBufferBytes = size_t{8} << 20;

}  // namespace

// ---- MappedFile -----------------------------------------------------------------------------

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, ": cannot open: ", errno_text());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    std::string why = errno_text();
    ::close(fd);
    fail(path, ": cannot stat: ", why);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, ": not a regular file");
  }
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<uint64_t>(st.st_size);
  if (file->size_ > 0) {
    void* addr = ::mmap(nullptr, file->size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      std::string why = errno_text();
      ::close(fd);
      fail(path, ": cannot memory-map ", file->size_, " bytes: ", why);
    }
    file->data_ = static_cast<uint8_t*>(addr);
    // Loads read the file front to back; let the kernel read ahead generously.
    ::madvise(addr, file->size_, MADV_SEQUENTIAL);
  }
  ::close(fd);  // the mapping keeps the file open
  return file;
}

void MappedFile::release_pages() const {
  if (data_ != nullptr) ::madvise(data_, size_, MADV_DONTNEED);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

// ---- AtomicFile -----------------------------------------------------------------------------

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  tmp_path_ = path_ + ".tmp-XXXXXX";
  fd_ = ::mkostemp(tmp_path_.data(), O_CLOEXEC);
  if (fd_ < 0) fail(path_, ": cannot create temporary file ", tmp_path_, ": ", errno_text());
  buffer_.resize(kBufferBytes);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_path_.c_str());
}

void AtomicFile::write_all(const void* data, size_t size) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd_, bytes, std::min(size, kMaxWriteChunk));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(path_, ": write failed: ", errno_text());
    }
    bytes += n;
    size -= static_cast<size_t>(n);
  }
}

void AtomicFile::flush_buffer() {
  write_all(buffer_.data(), buffered_);
  buffered_ = 0;
}

void AtomicFile::write(const void* data, size_t size) {
  TITAN_CHECK(!committed_, path_, ": write after commit");
  if (buffered_ + size <= buffer_.size()) {
    std::memcpy(buffer_.data() + buffered_, data, size);
    buffered_ += size;
    return;
  }
  flush_buffer();
  if (size >= buffer_.size() / 2) {
    write_all(data, size);
  } else {
    std::memcpy(buffer_.data(), data, size);
    buffered_ = size;
  }
}

void AtomicFile::commit() {
  TITAN_CHECK(!committed_, path_, ": committed twice");
  flush_buffer();
  if (::fsync(fd_) != 0) fail(path_, ": fsync failed: ", errno_text());
  if (::close(fd_) != 0) {
    fd_ = -1;
    fail(path_, ": close failed: ", errno_text());
  }
  fd_ = -1;
  // mkstemp creates 0600; give the file the usual permissions (0666 minus umask).
  ::chmod(tmp_path_.c_str(), 0666 & ~current_umask());
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    fail(path_, ": cannot rename ", tmp_path_, " into place: ", errno_text());
  }
  committed_ = true;
  fsync_directory(parent_of(path_));
}

void write_file_atomic(const std::string& path, std::string_view content) {
  AtomicFile file(path);
  file.write(content);
  file.commit();
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open: ", errno_text());
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) fail(path, ": read failed");
  return out.str();
}

// ---- directories ----------------------------------------------------------------------------

void fsync_directory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail(dir, ": cannot open directory to fsync: ", errno_text());
  int rc = ::fsync(fd);
  int err = rc != 0 ? errno : 0;
  ::close(fd);
  // Some filesystems do not support fsync on directories; that is not a data-loss error.
  if (rc != 0 && err != EINVAL && err != EROFS) fail(dir, ": fsync failed: ", std::strerror(err));
}

void fsync_directory_tree(const std::string& dir) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::string path = entry.path().string();
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(path, ": cannot open to fsync: ", errno_text());
    int rc = ::fsync(fd);
    std::string why = rc != 0 ? errno_text() : "";
    ::close(fd);
    if (rc != 0) fail(path, ": fsync failed: ", why);
  }
  fsync_directory(dir);
}

mode_t current_umask() {
  // Read without changing it where the kernel tells (Linux 4.7+): umask(0) then umask(mask)
  // would let another thread create a file with no mask in between.
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Umask:", 0) == 0)
      return static_cast<mode_t>(std::stoul(line.substr(6), nullptr, 8));
  }
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return mask;
}

std::string make_temp_directory(const std::string& prefix) {
  std::string path = prefix + "XXXXXX";
  std::error_code ec;
  fs::create_directories(parent_of(path), ec);
  if (::mkdtemp(path.data()) == nullptr) {
    fail(prefix, ": cannot create temporary directory: ", errno_text());
  }
  // mkdtemp creates 0700; the folder it becomes is an output like any other (0777 minus umask).
  ::chmod(path.c_str(), 0777 & ~current_umask());
  return path;
}

void write_directory_atomically(const std::string& target,
                                const std::function<void(const std::string& staged)>& fill) {
  const std::string staged = make_temp_directory(target + ".tmp-");
  try {
    fill(staged);
    fsync_directory_tree(staged);
    replace_directory(staged, target);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(staged, ec);
    throw;
  }
}

void replace_directory(const std::string& staged, const std::string& target) {
  std::error_code ec;
  bool exists = fs::exists(target, ec);
  if (!exists) {
    if (::rename(staged.c_str(), target.c_str()) != 0) {
      fail(target, ": cannot rename ", staged, " into place: ", errno_text());
    }
    fsync_directory(parent_of(target));
    return;
  }
  if (!fs::is_directory(target, ec)) fail(target, ": exists and is not a directory");
  // Swap the two directories in one step, so `target` is never missing; then the old one
  // (now at `staged`) is removed. Fall back to two renames where the exchange is unsupported.
  if (::renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) != 0) {
    std::string old = target + ".old-" + std::to_string(::getpid());
    if (::rename(target.c_str(), old.c_str()) != 0) {
      fail(target, ": cannot move the previous directory aside: ", errno_text());
    }
    if (::rename(staged.c_str(), target.c_str()) != 0) {
      std::string why = errno_text();
      ::rename(old.c_str(), target.c_str());
      fail(target, ": cannot rename ", staged, " into place: ", why);
    }
    fsync_directory(parent_of(target));
    fs::remove_all(old, ec);
    return;
  }
  fsync_directory(parent_of(target));
  fs::remove_all(staged, ec);
}

}  // namespace titan
