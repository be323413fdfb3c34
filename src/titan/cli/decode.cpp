// titan decode --tokenizer DIR: a JSON array of token ids on stdin -> text on stdout.
#include <cstdio>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "titan/cli/commands.h"
#include "titan/common/error.h"
#include "titan/data/tokenizer/tokenizer.h"

namespace titan::cli {
namespace {

constexpr const char* kUsage =
    "usage: titan decode --tokenizer DIR\n"
    "\n"
    "Reads a JSON array of token ids from stdin and prints their text (special tokens\n"
    "included, no newline added), as Hugging Face tokenizers' decode(ids,\n"
    "skip_special_tokens=False) does.\n"
    "\n"
    "  --tokenizer DIR  folder holding tokenizer.json (or the file itself)\n";

}  // namespace

int run_decode(const Args& args) {
  std::string tokenizer_dir;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (args[i] == "--tokenizer" && i + 1 < args.size()) {
      tokenizer_dir = args[++i];
    } else {
      fail("decode: unexpected argument '", args[i], "'; see titan decode --help");
    }
  }
  TITAN_CHECK(!tokenizer_dir.empty(), "decode: --tokenizer DIR is required; see titan decode --help");
  const auto tokenizer = data::Tokenizer::from_directory(tokenizer_dir);

  std::string input;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), stdin)) > 0) input.append(buffer, n);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(input);
  } catch (const nlohmann::json::exception& e) {
    fail("decode: stdin is not valid JSON: ", e.what());
  }
  TITAN_CHECK(j.is_array(), "decode: stdin must be a JSON array of token ids");
  std::vector<int32_t> ids;
  ids.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& v = j[i];
    const bool ok = v.is_number_integer() && v.get<int64_t>() >= 0 &&
                    v.get<int64_t>() <= std::numeric_limits<int32_t>::max();
    TITAN_CHECK(ok, "decode: element ", i, " (", v.dump(), ") is not a token id");
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  const std::string text = tokenizer.decode(ids);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace titan::cli
