// A binary cache of a parsed tokenizer.json, so that start-up skips the JSON parse (most of the
// load time: 151k vocabulary entries and 151k merges). It sits beside the file
// (DIR/.tokenizer.json.titan-cache-v1.bin), or under $XDG_CACHE_HOME/titan (~/.cache/titan) when
// that folder is read-only, and is used only when it was made from the same bytes: its key is the
// size and a 64-bit hash of the whole tokenizer.json. A cache that is stale, truncated or
// corrupt (magic, version, bounds of every field and a checksum are verified) is ignored and
// rebuilt from the JSON; one that cannot be written is simply skipped.
#pragma once

#include <string>
#include <string_view>

#include "titan/data/tokenizer/tokenizer_json.h"

namespace titan::data {

// Reads `json_file` through its cache, (re)writing the cache when it was missing or unusable.
// Errors in the JSON itself throw as read_tokenizer_json() does.
TokenizerJson read_tokenizer_json_cached(const std::string& json_file);

// Where the cache of `json_file` is looked for first (beside it).
std::string tokenizer_cache_path(const std::string& json_file);

// The cache file's bytes for `parsed`, made from a tokenizer.json of `source` bytes; and the
// inverse, which returns false (leaving `out` unspecified) for anything but an intact cache made
// from exactly `source`. Exposed for tests.
std::string encode_tokenizer_cache(const TokenizerJson& parsed, std::string_view source);
bool decode_tokenizer_cache(std::string_view cache, std::string_view source, TokenizerJson& out);

}  // namespace titan::data
