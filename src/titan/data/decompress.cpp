#include "titan/data/decompress.h"

#include <zlib.h>
#include <zstd.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <vector>

#include "titan/common/error.h"

namespace titan::data {
namespace {

std::string gunzip(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  TITAN_CHECK(file != nullptr, "dataset file ", path, " cannot be opened");
  std::unique_ptr<gzFile_s, int (*)(gzFile)> closer(file, &gzclose);
  std::string out;
  std::vector<char> block(1 << 20);
  while (true) {
    const int n = gzread(file, block.data(), static_cast<unsigned>(block.size()));
    if (n < 0) {
      int code = 0;
      const char* message = gzerror(file, &code);
      fail("dataset file ", path, ": corrupt gzip data (", message, ")");
    }
    // zlib would pass bytes that are not gzip through unchanged ("transparent" reading).
    if (gzdirect(file)) fail("dataset file ", path, ": not gzip data (no gzip header)");
    if (n == 0) break;
    out.append(block.data(), static_cast<size_t>(n));
  }
  // gzread reports a file cut short only through the error state at its end.
  int code = 0;
  const char* message = gzerror(file, &code);
  if (code != Z_OK) fail("dataset file ", path, ": corrupt or truncated gzip data (", message, ")");
  return out;
}

std::string unzstd(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TITAN_CHECK(in, "dataset file ", path, " cannot be opened");
  const std::string compressed((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
  std::unique_ptr<ZSTD_DStream, size_t (*)(ZSTD_DStream*)> stream(ZSTD_createDStream(),
                                                                  &ZSTD_freeDStream);
  TITAN_CHECK(stream != nullptr, "dataset file ", path, ": cannot create a zstd decoder");
  ZSTD_initDStream(stream.get());
  std::string out;
  std::vector<char> block(ZSTD_DStreamOutSize());
  ZSTD_inBuffer input{compressed.data(), compressed.size(), 0};
  size_t last = 0;  // 0 once a frame is complete
  while (input.pos < input.size) {
    ZSTD_outBuffer output{block.data(), block.size(), 0};
    last = ZSTD_decompressStream(stream.get(), &output, &input);
    if (ZSTD_isError(last))
      fail("dataset file ", path, ": corrupt zstd data (", ZSTD_getErrorName(last), ")");
    out.append(block.data(), output.pos);
  }
  // Flush what the decoder still holds for the last frame.
  while (last != 0) {
    ZSTD_outBuffer output{block.data(), block.size(), 0};
    last = ZSTD_decompressStream(stream.get(), &output, &input);
    if (ZSTD_isError(last))
      fail("dataset file ", path, ": corrupt zstd data (", ZSTD_getErrorName(last), ")");
    if (output.pos == 0 && last != 0) fail("dataset file ", path, ": truncated zstd data");
    out.append(block.data(), output.pos);
  }
  return out;
}

}  // namespace

bool is_compressed(const std::string& path) {
  return path.ends_with(".gz") || path.ends_with(".zst");
}

std::string decompress_file(const std::string& path) {
  if (path.ends_with(".gz")) return gunzip(path);
  if (path.ends_with(".zst")) return unzstd(path);
  fail("dataset file ", path, ": not a .gz or .zst file");
}

}  // namespace titan::data
