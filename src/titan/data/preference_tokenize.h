// A preference record's token ids, exactly as TRL 1.16's DPOTrainer makes them
// (DPOTrainer._prepare_dataset; docs/preference.md):
//   1. text records: the tokenizer's eos token is appended, as text, to chosen and rejected
//      unless they already end with it; conversations get none (their template ends the turn);
//   2. the prompt alone, and prompt + chosen and prompt + rejected each as one whole text, are
//      tokenized (conversations rendered with the chat template first, the prompt with the
//      generation prompt, the others without, tools and chat_template_kwargs passed to it);
//   3. the completions start where the tokenized prompt stops being a prefix of both: the
//      longest common prefix of the prompt's ids with each full sequence's ids, the shorter of
//      the two. So each training sequence is exactly the tokenization of prompt + completion.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "titan/data/chat_template.h"
#include "titan/data/preference_record.h"
#include "titan/data/tokenizer/tokenizer.h"

namespace titan::data {

// TRL's columns prompt_ids, chosen_ids and rejected_ids: the sequences are prompt + chosen and
// prompt + rejected.
struct TokenizedPair {
  std::vector<int32_t> prompt, chosen, rejected;
  // The tokenized prompt was longer than the common prefix (its end merged with the
  // completion, or the template renders the prompt alone differently): that end is left out
  // of the sequences, as TRL does (it warns once).
  bool prompt_cut = false;
};

// `eos_token` is the text appended to text completions (tokenizer_config.json's eos_token);
// `chat_template` renders conversations (null: a conversational record is an error saying the
// tokenizer has none). Throws titan::Error when the template rejects the conversation.
TokenizedPair tokenize_preference(const PreferenceRecord& record, const Tokenizer& tokenizer,
                                  const ChatTemplate* chat_template, const std::string& eos_token);

// Number of leading ids `a` and `b` share (TRL's common_prefix_length).
size_t common_prefix_length(const std::vector<int32_t>& a, const std::vector<int32_t>& b);

}  // namespace titan::data
