// Preference records (training.objective dpo; docs/preference.md) in the three layouts of TRL's
// DPOTrainer (trl 1.16):
//   standard        {"prompt": "...", "chosen": "...", "rejected": "..."}
//   conversational  {"prompt": [messages], "chosen": [assistant messages], "rejected": [...]}
//                   with optional "tools" (a list of schemas, or that list as a JSON string) and
//                   "chat_template_kwargs" (template variables, e.g. {"enable_thinking": false})
//   implicit prompt {"chosen": ..., "rejected": ...} (text or messages) without "prompt": the
//                   prompt is their shared beginning, found as TRL's extract_prompt finds it.
// A record that cannot make a pair is not an error: it is skipped and counted by its problem
// (a missing or ill-typed field, an empty completion, chosen == rejected, ...), as SFT counts
// the records that train nothing, so that one bad line does not stop a long run.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace titan::data {

struct PreferenceRecord {
  // True when prompt, chosen and rejected are lists of messages (rendered with the chat
  // template), false when they are text.
  bool conversational = false;
  bool implicit_prompt = false;  // the prompt was extracted from chosen and rejected
  nlohmann::ordered_json prompt, chosen, rejected;
  nlohmann::ordered_json tools;                 // null or a list of schemas
  nlohmann::ordered_json chat_template_kwargs;  // an object, maybe empty
};

// Why a record makes no pair: `kind` is the line the run's report counts it under ("have no
// \"rejected\""), `detail` says more about this record for a message naming it.
struct RecordProblem {
  std::string kind;
  std::string detail;
};

// The record's pair, or its problem.
struct ParsedPreference {
  std::optional<PreferenceRecord> record;
  std::optional<RecordProblem> problem;
};

// Reads one record (a JSON object). Never throws for a bad record: it returns its problem.
ParsedPreference parse_preference_record(const nlohmann::ordered_json& record);

// TRL's extract_prompt (trl/data_utils.py) on two texts, by Unicode code points as Python
// indexes strings: the prompt is chosen up to the first code point where chosen and rejected
// differ, a space just before it going to the completions. TRL's edge cases are kept: when one
// text is a prefix of the other, the last code point of the shorter one starts the
// completions; when they differ at their first code point and chosen ends with a space, that
// space (Python's chosen[-1]) moves the split to the last code point of each. Both must be
// non-empty.
struct ExtractedPrompt {
  nlohmann::ordered_json prompt, chosen, rejected;
};
ExtractedPrompt extract_prompt(const std::string& chosen, const std::string& rejected);
// The same on two lists of messages, compared as whole messages.
ExtractedPrompt extract_prompt(const nlohmann::ordered_json& chosen,
                               const nlohmann::ordered_json& rejected);

}  // namespace titan::data
