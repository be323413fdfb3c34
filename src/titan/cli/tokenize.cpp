// titan tokenize --tokenizer DIR --input FILE [FILE...] --output PREFIX: corpus -> token shards.
#include <algorithm>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "titan/cli/commands.h"
#include "titan/common/error.h"
#include "titan/config/field_values.h"
#include "titan/data/token_shards.h"
#include "titan/data/tokenizer/tokenizer.h"

namespace titan::cli {
namespace {

constexpr const char* kUsage =
    "usage: titan tokenize --tokenizer DIR --input FILE [FILE...] --output PREFIX\n"
    "                      [--eos-token TOKEN] [--shard-tokens N] [--text-field NAME]\n"
    "                      [--threads N]\n"
    "\n"
    "Tokenizes a corpus once into token shards: PREFIX-00000.bin, ... hold a header\n"
    "(magic TITANTOK, version, id width, token and document counts, document ends) and\n"
    "little-endian uint32 ids, every document followed by the eos id; PREFIX.json describes\n"
    "them (format titan-token-shards-v2: eos_id, documents, tokens, and per shard its file,\n"
    "documents and tokens). Train on them with --training.dataset_path PREFIX.json.\n"
    "Inputs are .jsonl files (one {\"text\": ...} per line; also\n"
    ".jsonl.gz and .jsonl.zst), .parquet and .arrow files (one document per row, text in\n"
    "the string column \"text\"), text files (one document each), folders (a folder written\n"
    "by datasets' save_to_disk: the .arrow files its state.json lists) or globs of them.\n"
    "\n"
    "  --tokenizer DIR    folder holding tokenizer.json\n"
    "  --input FILE...    one or more input files\n"
    "  --output PREFIX    path prefix of the shards and of PREFIX.json\n"
    "  --eos-token TOKEN  document separator (default <|endoftext|>)\n"
    "  --shard-tokens N   a shard closes once it holds N tokens (default 268435456 = 1 GiB)\n"
    "  --text-field NAME  the jsonl field or Parquet/Arrow column holding the text\n"
    "                     (default text)\n"
    "  --threads N        tokenizing threads (default: every core); the output is the same\n"
    "                     for any number\n";

}  // namespace

int run_tokenize(const Args& args) {
  std::string tokenizer_dir, output, eos_token = "<|endoftext|>", text_field = "text";
  std::vector<std::string> inputs;
  int64_t shard_tokens = int64_t{1} << 28;
  int64_t threads = std::max(1u, std::thread::hardware_concurrency());
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool has_value = i + 1 < args.size();
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (a == "--tokenizer" && has_value) {
      tokenizer_dir = args[++i];
    } else if (a == "--output" && has_value) {
      output = args[++i];
    } else if (a == "--eos-token" && has_value) {
      eos_token = args[++i];
    } else if (a == "--text-field" && has_value) {
      text_field = args[++i];
    } else if (a == "--shard-tokens" && has_value) {
      const std::string& v = args[++i];
      TITAN_CHECK(config::parse_int64(v, shard_tokens) && shard_tokens > 0,
                  "tokenize: --shard-tokens takes a positive integer, got '", v, "'");
    } else if (a == "--threads" && has_value) {
      const std::string& v = args[++i];
      TITAN_CHECK(config::parse_int64(v, threads) && threads > 0 && threads <= 1024,
                  "tokenize: --threads takes an integer from 1 to 1024, got '", v, "'");
    } else if (a == "--input") {
      while (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) inputs.push_back(args[++i]);
    } else {
      fail("tokenize: unexpected argument '", a, "'; see titan tokenize --help");
    }
  }
  TITAN_CHECK(!tokenizer_dir.empty(),
              "tokenize: --tokenizer DIR is required; see titan tokenize --help");
  TITAN_CHECK(!inputs.empty(), "tokenize: --input FILE is required; see titan tokenize --help");
  TITAN_CHECK(!output.empty(), "tokenize: --output PREFIX is required; see titan tokenize --help");
  const auto tokenizer = data::Tokenizer::from_directory(tokenizer_dir);
  const auto meta =
      data::write_token_shards(tokenizer, inputs, output, tokenizer.token_to_id(eos_token),
                               shard_tokens, text_field, threads);
  std::cout << "wrote " << meta["tokens"].get<int64_t>() << " tokens of "
            << meta["documents"].get<int64_t>() << " documents in " << meta["shards"].size()
            << " shard(s); metadata " << output << ".json\n";
  return 0;
}

}  // namespace titan::cli
