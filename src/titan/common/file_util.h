// File helpers for checkpoints and data files: a read-only memory mapping (RAII), a file that
// appears at its final path only once it is complete and on disk (temporary sibling + fsync +
// rename), and the same for whole directories. Every failure throws titan::Error naming the path.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace titan {

// A whole file mapped copy-on-write: readers see the file's bytes; a stray write into a tensor
// viewing the mapping changes only this process's copy, never the file (and never faults).
class MappedFile {
 public:
  static std::shared_ptr<const MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  uint8_t* mutable_data() const { return data_; }  // copy-on-write pages
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Drops the pages read so far from this process's memory (madvise MADV_DONTNEED); the file
  // stays in the page cache and a later read faults its pages in again. A load that copies
  // tensor after tensor out of a large file calls this so that its resident size does not
  // grow by the whole file.
  void release_pages() const;

 private:
  MappedFile() = default;
  std::string path_;
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

// Writes `path` atomically: bytes go to a temporary file beside it; commit() fsyncs, renames
// it over `path` and fsyncs the directory. Destroyed without commit() (an exception on the
// way), the temporary file is removed and `path` is untouched.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Small pieces are gathered in a buffer so the disk sees large sequential writes; large
  // ones go straight from the caller's memory.
  void write(const void* data, size_t size);
  void write(std::string_view text) { write(text.data(), text.size()); }
  void commit();

  const std::string& path() const { return path_; }

 private:
  void flush_buffer();
  void write_all(const void* data, size_t size);

  std::string path_;
  std::string tmp_path_;
  int fd_ = -1;
  std::vector<uint8_t> buffer_;
  size_t buffered_ = 0;
  bool committed_ = false;
};

// Writes a whole (small) file atomically.
void write_file_atomic(const std::string& path, std::string_view content);

// Reads a whole (small) file; throws naming it when it cannot.
std::string read_text_file(const std::string& path);

// fsyncs a directory so that renames inside it are durable.
void fsync_directory(const std::string& dir);

// Creates a fresh directory `prefix` + 6 random characters (mkdtemp) and returns its path. It
// gets the permissions of any new folder (0777 minus the umask), not mkdtemp's 0700, since it is
// renamed into place as an output (an HF export, a converted checkpoint).
std::string make_temp_directory(const std::string& prefix);

// The process's file-mode creation mask.
mode_t current_umask();

// Moves the complete directory `staged` to `target`, replacing any existing `target` only now
// (atomic exchange where the filesystem supports it), then removes the old contents.
void replace_directory(const std::string& staged, const std::string& target);

// fsyncs every regular file directly inside `dir`, then `dir` itself.
void fsync_directory_tree(const std::string& dir);

// A directory that appears at `target` only once complete: `fill` writes into a fresh sibling
// folder (make_temp_directory), which is then fsynced and put in place (replace_directory). If
// `fill` throws, the sibling is removed and `target` is left as it was.
void write_directory_atomically(const std::string& target,
                                const std::function<void(const std::string& staged)>& fill);

}  // namespace titan
