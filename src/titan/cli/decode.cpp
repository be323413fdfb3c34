// titan decode --tokenizer DIR: a JSON array of token ids on stdin -> text on stdout.
#include <cstdio>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "titan/cli/commands.h"
#include "titan/cli/flag_parser.h"
#include "titan/common/error.h"
#include "titan/data/tokenizer/tokenizer.h"

namespace titan::cli {
namespace {

constexpr const char* kUsage =
    "usage: titan decode --tokenizer DIR [--jsonl]\n"
    "\n"
    "Reads a JSON array of token ids from stdin and prints their text (special tokens\n"
    "included, no newline added), as Hugging Face tokenizers' decode(ids,\n"
    "skip_special_tokens=False) does.\n"
    "\n"
    "  --tokenizer DIR  folder holding tokenizer.json (or the file itself)\n"
    "  --jsonl          each stdin line is a JSON array of ids; prints each text as one\n"
    "                   JSON string per line, in order\n";

std::vector<int32_t> parse_ids(std::string_view text, const std::string& where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("decode: ", where, " is not valid JSON: ", e.what());
  }
  TITAN_CHECK(j.is_array(), "decode: ", where, " must be a JSON array of token ids");
  std::vector<int32_t> ids;
  ids.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& v = j[i];
    const bool ok = v.is_number_integer() && v.get<int64_t>() >= 0 &&
                    v.get<int64_t>() <= std::numeric_limits<int32_t>::max();
    TITAN_CHECK(ok, "decode: ", where, ": element ", i, " (", v.dump(), ") is not a token id");
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return ids;
}

}  // namespace

int run_decode(const Args& args) {
  if (wants_help(args)) {
    std::cout << kUsage;
    return 0;
  }
  const FlagParser flags(args, "decode", {"--tokenizer"}, {"--jsonl"});
  const std::string tokenizer_dir = flags.require("--tokenizer");
  const bool jsonl = flags.has("--jsonl");
  const auto tokenizer = data::Tokenizer::from_directory(tokenizer_dir);

  std::string input;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), stdin)) > 0) input.append(buffer, n);
  std::string out;
  if (!jsonl) {
    out = tokenizer.decode(parse_ids(input, "stdin"));
  } else {
    size_t line_number = 0;
    for (size_t begin = 0; begin < input.size();) {
      size_t end = input.find('\n', begin);
      if (end == std::string::npos) end = input.size();
      ++line_number;
      const auto ids = parse_ids(std::string_view(input).substr(begin, end - begin),
                                 "stdin line " + std::to_string(line_number));
      begin = end + 1;
      out += nlohmann::json(tokenizer.decode(ids)).dump();
      out += '\n';
    }
  }
  // Written only once everything is decoded, so an error leaves no partial output.
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace titan::cli
