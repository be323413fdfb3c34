// Whole-file decompression of dataset files: gzip (zlib) and zstd (libzstd), both from Debian.
#pragma once

#include <string>

namespace titan::data {

// Whether `path` names a compressed file this reader knows (.gz or .zst).
bool is_compressed(const std::string& path);

// The decompressed bytes of a .gz or .zst file (all of its frames or members). Throws
// titan::Error naming the file for unreadable, corrupt or truncated data.
std::string decompress_file(const std::string& path);

}  // namespace titan::data
