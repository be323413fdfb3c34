#include "titan/data/preference_record.h"

#include <algorithm>
#include <vector>

namespace titan::data {
namespace {

using Json = nlohmann::ordered_json;

// Byte offsets of the code points of valid UTF-8 `text` (the JSON and Arrow readers check it).
std::vector<size_t> code_point_starts(const std::string& text) {
  std::vector<size_t> starts;
  for (size_t i = 0; i < text.size(); ++i)
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) starts.push_back(i);
  return starts;
}

// Python's text[:index] / text[index:] offset for an index that may be -1 (from the end).
size_t byte_offset(const std::vector<size_t>& starts, size_t size, int64_t index) {
  const int64_t n = static_cast<int64_t>(starts.size());
  if (index < 0) index += n;
  index = std::clamp<int64_t>(index, 0, n);
  return index == n ? size : starts[static_cast<size_t>(index)];
}

// Python's == on two JSON values: objects compare without regard to key order.
bool same_value(const Json& a, const Json& b) {
  return nlohmann::json::parse(a.dump()) == nlohmann::json::parse(b.dump());
}

bool is_message_list(const Json& value) {
  if (!value.is_array()) return false;
  return std::all_of(value.begin(), value.end(), [](const Json& m) {
    return m.is_object() && m.contains("role") && m["role"].is_string();
  });
}

ParsedPreference problem(std::string kind, std::string detail) {
  ParsedPreference out;
  out.problem = RecordProblem{std::move(kind), std::move(detail)};
  return out;
}

bool is_empty_completion(const Json& value) {
  return (value.is_string() && value.get_ref<const std::string&>().empty()) ||
         (value.is_array() && value.empty());
}

}  // namespace

ExtractedPrompt extract_prompt(const std::string& chosen, const std::string& rejected) {
  const std::vector<size_t> c = code_point_starts(chosen), r = code_point_starts(rejected);
  const auto code_point = [](const std::string& text, const std::vector<size_t>& starts, size_t i) {
    const size_t end = i + 1 < starts.size() ? starts[i + 1] : text.size();
    return std::string_view(text).substr(starts[i], end - starts[i]);
  };
  const size_t shorter = std::min(c.size(), r.size());
  // As TRL's loop: without a difference, idx is left at the last index it visited.
  int64_t idx = static_cast<int64_t>(shorter) - 1;
  for (size_t i = 0; i < shorter; ++i) {
    if (code_point(chosen, c, i) != code_point(rejected, r, i)) {
      idx = static_cast<int64_t>(i);
      // chosen[idx - 1], with Python's chosen[-1] at idx 0.
      const size_t before = i == 0 ? c.size() - 1 : i - 1;
      if (code_point(chosen, c, before) == " ") --idx;
      break;
    }
  }
  const size_t chosen_split = byte_offset(c, chosen.size(), idx);
  const size_t rejected_split = byte_offset(r, rejected.size(), idx);
  return {chosen.substr(0, chosen_split), chosen.substr(chosen_split),
          rejected.substr(rejected_split)};
}

ExtractedPrompt extract_prompt(const Json& chosen, const Json& rejected) {
  const size_t shorter = std::min(chosen.size(), rejected.size());
  size_t idx = shorter == 0 ? 0 : shorter - 1;
  for (size_t i = 0; i < shorter; ++i) {
    if (!same_value(chosen[i], rejected[i])) {
      idx = i;  // a message is never equal to " ": no space to move
      break;
    }
  }
  const auto slice = [](const Json& list, size_t begin, size_t end) {
    Json out = Json::array();
    for (size_t i = begin; i < end; ++i) out.push_back(list[i]);
    return out;
  };
  return {slice(chosen, 0, idx), slice(chosen, idx, chosen.size()),
          slice(rejected, idx, rejected.size())};
}

ParsedPreference parse_preference_record(const Json& record) {
  for (const char* field : {"chosen", "rejected"}) {
    if (!record.contains(field) || record[field].is_null())
      return problem(std::string("have no \"") + field + "\"",
                     std::string("the record has no \"") + field + "\"");
  }
  const Json& chosen = record["chosen"];
  const Json& rejected = record["rejected"];
  const bool has_prompt = record.contains("prompt") && !record["prompt"].is_null();
  for (const char* field : {"prompt", "chosen", "rejected"}) {
    if (!record.contains(field) || record[field].is_null()) continue;
    const Json& value = record[field];
    if (!value.is_string() && !is_message_list(value))
      return problem(std::string("have a \"") + field +
                         "\" that is neither text nor a list of {\"role\", ...} messages",
                     std::string("\"") + field + "\" is " + value.type_name() +
                         ", not text or a list of messages");
  }
  const bool conversational = chosen.is_array();
  if (rejected.is_array() != conversational ||
      (has_prompt && record["prompt"].is_array() != conversational))
    return problem("mix text and lists of messages in prompt, chosen and rejected",
                   "prompt, chosen and rejected must all be text or all lists of messages");
  for (const char* field : {"chosen", "rejected"}) {
    if (is_empty_completion(record[field]))
      return problem(std::string("have an empty \"") + field + "\"",
                     std::string("\"") + field + "\" is empty");
  }
  if (same_value(chosen, rejected))
    return problem("have the same chosen and rejected", "\"chosen\" equals \"rejected\"");

  PreferenceRecord out;
  out.conversational = conversational;
  if (has_prompt) {
    out.prompt = record["prompt"];
    out.chosen = chosen;
    out.rejected = rejected;
  } else {
    out.implicit_prompt = true;
    ExtractedPrompt split =
        conversational ? extract_prompt(chosen, rejected)
                       : extract_prompt(chosen.get<std::string>(), rejected.get<std::string>());
    out.prompt = std::move(split.prompt);
    out.chosen = std::move(split.chosen);
    out.rejected = std::move(split.rejected);
  }
  // The chat template is given at least one message (Transformers refuses an empty
  // conversation): an implicit prompt whose first messages already differ has none.
  if (conversational && out.prompt.empty())
    return problem("have no prompt message (chosen and rejected differ from their first message)",
                   "the prompt has no message");

  if (record.contains("tools") && !record["tools"].is_null()) {
    Json tools = record["tools"];
    if (tools.is_string()) {  // a JSON string, as TRL accepts (json.loads)
      const std::string& text = tools.get_ref<const std::string&>();
      tools = text.empty() ? Json() : Json::parse(text, nullptr, /*allow_exceptions=*/false);
    }
    if (!tools.is_null() && !tools.is_array())
      return problem("have \"tools\" that are not a list of function schemas",
                     "\"tools\" is not a list of function schemas (or that list as JSON text)");
    out.tools = std::move(tools);
  }
  out.chat_template_kwargs = Json::object();
  if (record.contains("chat_template_kwargs") && !record["chat_template_kwargs"].is_null()) {
    if (!record["chat_template_kwargs"].is_object())
      return problem("have \"chat_template_kwargs\" that are not an object",
                     "\"chat_template_kwargs\" is not an object of template variables");
    out.chat_template_kwargs = record["chat_template_kwargs"];
  }
  ParsedPreference parsed;
  parsed.record = std::move(out);
  return parsed;
}

}  // namespace titan::data
