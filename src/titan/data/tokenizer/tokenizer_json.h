// Reading tokenizer.json quickly. A DOM parse of Qwen3's 11 MB file costs about a second, nearly
// all of it in the 151k-entry vocab object and the 151k merges; so the file is read with a SAX
// handler that streams those two straight into flat vectors and builds a DOM only for the rest.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace titan::data {

struct TokenizerJson {
  // The whole file except model.vocab and model.merges, which are left as {} and [].
  nlohmann::json rest;
  std::vector<std::pair<std::string, int64_t>> vocab;
  // Each merge as its two parts; a merge written "a b" is split at the first space.
  std::vector<std::pair<std::string, std::string>> merges;
  bool has_vocab = false, has_merges = false;
};

// Throws titan::Error naming `file` when it is missing or not valid JSON, or when the vocab or
// merges entries have the wrong types.
TokenizerJson read_tokenizer_json(const std::string& file);
// The same for the file's bytes already in memory; errors name `file`.
TokenizerJson parse_tokenizer_json(std::string_view text, const std::string& file);

}  // namespace titan::data
