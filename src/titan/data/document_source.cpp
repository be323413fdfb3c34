#include "titan/data/document_source.h"

#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "titan/common/error.h"

namespace titan::data {
namespace {

bool is_blank(const char* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r') return false;
  return true;
}

void check_readable(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail("dataset file ", path, " not found");
  if (std::filesystem::is_directory(path, ec))
    fail("dataset file ", path, " is a directory, not a file");
}

}  // namespace

std::unique_ptr<DocumentSource> DocumentSource::open(const std::string& path) {
  check_readable(path);
  if (path.ends_with(".jsonl")) return std::make_unique<JsonlSource>(path);
  if (path.ends_with(".jsonl.zst") || path.ends_with(".jsonl.gz")) {
    fail("dataset file ", path, ": compressed jsonl is not supported; decompress it first");
  }
  return std::make_unique<TextFileSource>(path);
}

JsonlSource::JsonlSource(const std::string& path)
    : DocumentSource(path), in_(path, std::ios::binary) {
  if (!in_) fail("dataset file ", path, " cannot be opened");
  // One pass in 1 MiB blocks to find the line boundaries.
  std::vector<char> block(1 << 20);
  uint64_t offset = 0, line_start = 0, number = 1;
  bool blank = true;  // so far, the current line holds only blanks
  while (in_) {
    in_.read(block.data(), static_cast<std::streamsize>(block.size()));
    const auto n = static_cast<size_t>(in_.gcount());
    if (n == 0) break;
    for (size_t i = 0; i < n; ++i) {
      if (block[i] == '\n') {
        if (!blank) lines_.push_back({line_start, offset + i - line_start, number});
        line_start = offset + i + 1;
        ++number;
        blank = true;
      } else if (blank && !is_blank(&block[i], 1)) {
        blank = false;
      }
    }
    offset += n;
  }
  if (!blank) lines_.push_back({line_start, offset - line_start, number});
  in_.clear();
}

std::string JsonlSource::text(int64_t index) {
  const Line& line = lines_.at(static_cast<size_t>(index));
  std::string raw(line.length, '\0');
  in_.seekg(static_cast<std::streamoff>(line.offset));
  in_.read(raw.data(), static_cast<std::streamsize>(raw.size()));
  if (static_cast<uint64_t>(in_.gcount()) != line.length) {
    fail_read("dataset file ", path_, ":", line.number, ": cannot read the line (file changed?)");
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(raw);
  } catch (const nlohmann::json::exception& e) {
    fail_read("dataset file ", path_, ":", line.number, ": invalid JSON: ", e.what());
  }
  if (!j.is_object() || !j.contains("text") || !j["text"].is_string()) {
    fail_read("dataset file ", path_, ":", line.number,
              ": expected an object with a string field \"text\"");
  }
  return std::move(j["text"].get_ref<std::string&>());
}

TextFileSource::TextFileSource(const std::string& path) : DocumentSource(path) {}

std::string TextFileSource::text(int64_t index) {
  std::ifstream in(path_, std::ios::binary);
  if (!in) fail_read("dataset file ", path_, " cannot be opened");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace titan::data
