// titan render-chat --tokenizer DIR --input FILE.jsonl: what SFT trains on, record by record.
#include <iostream>

#include <nlohmann/json.hpp>

#include "titan/cli/commands.h"
#include "titan/cli/flag_parser.h"
#include "titan/common/error.h"
#include "titan/data/chat_documents.h"
#include "titan/data/document_source.h"
#include "titan/data/tokenizer/tokenizer.h"

namespace titan::cli {
namespace {

constexpr const char* kUsage =
    "usage: titan render-chat --tokenizer DIR --input FILE [--limit N]\n"
    "\n"
    "Shows how SFT (training.sft) reads chat records: each record of FILE (.jsonl, .jsonl.gz,\n"
    ".jsonl.zst, a folder or a glob; {\"messages\": [...], \"tools\": [...]}) is rendered with\n"
    "DIR's chat template (as transformers' apply_chat_template(tokenize=False) renders it) and\n"
    "tokenized. Prints one JSON object per record: {\"text\", \"ids\", \"trainable\"}, where\n"
    "trainable[i] is 1 for the ids the loss learns to predict (the assistant turns).\n"
    "\n"
    "  --tokenizer DIR  folder holding tokenizer.json and the chat template\n"
    "  --input FILE     the records\n"
    "  --limit N        the first N records only\n";

}  // namespace

int run_render_chat(const Args& args) {
  if (wants_help(args)) {
    std::cout << kUsage;
    return 0;
  }
  const FlagParser flags(args, "render-chat", {"--tokenizer", "--input", "--limit"});
  const std::string dir = flags.require("--tokenizer");
  const auto tokenizer = data::Tokenizer::from_directory(dir);
  const auto chat_template = data::load_chat_template(dir);
  const auto source = data::DocumentSource::open(flags.require("--input"));
  const int64_t limit = flags.get_int("--limit", source->size());
  TITAN_CHECK(limit >= 0, "titan render-chat: --limit must be >= 0");
  for (int64_t i = 0; i < std::min(limit, source->size()); ++i) {
    const data::RenderedChat chat =
        data::render_chat(source->record(i), *chat_template, tokenizer, source->location(i));
    std::cout << nlohmann::json{{"text", chat.text},
                                {"ids", chat.ids},
                                {"trainable", chat.trainable}}
                     .dump()
              << "\n";
  }
  std::cout.flush();
  return 0;
}

}  // namespace titan::cli
