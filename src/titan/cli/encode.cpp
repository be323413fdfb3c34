// titan encode --tokenizer DIR [--jsonl]: text on stdin -> token ids as JSON on stdout.
#include <charconv>
#include <cstdio>
#include <iostream>
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
    "usage: titan encode --tokenizer DIR [--jsonl]\n"
    "\n"
    "Encodes text read from stdin with DIR/tokenizer.json, exactly as Hugging Face\n"
    "tokenizers' Tokenizer.encode(text).ids does, and prints the ids as a JSON array.\n"
    "\n"
    "  --tokenizer DIR  folder holding tokenizer.json (or the file itself)\n"
    "  --jsonl          each stdin line is a JSON object with a \"text\" field; prints one\n"
    "                   JSON array per line, in order\n";

std::string read_all_stdin() {
  std::string data;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), stdin)) > 0) data.append(buffer, n);
  return data;
}

void append_ids_json(const std::vector<int32_t>& ids, std::string& out) {
  out.push_back('[');
  char digits[16];
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out.push_back(',');
    const auto r = std::to_chars(digits, digits + sizeof(digits), ids[i]);
    out.append(digits, r.ptr);
  }
  out.append("]\n");
}

}  // namespace

int run_encode(const Args& args) {
  if (wants_help(args)) {
    std::cout << kUsage;
    return 0;
  }
  const FlagParser flags(args, "encode", {"--tokenizer"}, {"--jsonl"});
  const std::string tokenizer_dir = flags.require("--tokenizer");
  const bool jsonl = flags.has("--jsonl");
  const auto tokenizer = data::Tokenizer::from_directory(tokenizer_dir);
  const std::string input = read_all_stdin();

  std::string out;
  std::vector<int32_t> ids;
  if (!jsonl) {
    tokenizer.encode_into(input, ids);
    append_ids_json(ids, out);
  } else {
    size_t line_number = 0;
    for (size_t begin = 0; begin < input.size();) {
      size_t end = input.find('\n', begin);
      if (end == std::string::npos) end = input.size();
      ++line_number;
      const std::string_view line(input.data() + begin, end - begin);
      begin = end + 1;
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception& e) {
        fail("encode: stdin line ", line_number, " is not valid JSON: ", e.what());
      }
      if (!j.is_object() || !j.contains("text") || !j["text"].is_string()) {
        fail("encode: stdin line ", line_number, " has no string field \"text\"");
      }
      ids.clear();
      tokenizer.encode_into(j["text"].get_ref<const std::string&>(), ids);
      append_ids_json(ids, out);
    }
  }
  // Written only once everything is encoded, so an error leaves no partial output.
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace titan::cli
