#include "titan/data/chat_documents.h"

#include <algorithm>

#include "titan/common/error.h"

namespace titan::data {
namespace {

constexpr std::string_view kAssistantHeader = "<|im_start|>assistant\n";
constexpr std::string_view kTurnEnd = "<|im_end|>";

// The index of the first of `ids` whose text starts at or after byte `offset` of `text`: the
// length of the common prefix of the ids of text[0, offset) and of the whole text. Tokens never
// cross a special token, so at a turn's end the split is exact; a token that straddles a span's
// start (rare: a merge of the header's newline with the turn's first characters) counts as
// trained.
size_t token_at(const Tokenizer& tokenizer, const std::string& text, size_t offset,
                const std::vector<int32_t>& ids) {
  if (offset == 0) return 0;
  if (offset >= text.size()) return ids.size();
  const std::vector<int32_t> prefix = tokenizer.encode(std::string_view(text).substr(0, offset));
  return static_cast<size_t>(
      std::mismatch(prefix.begin(), prefix.end(), ids.begin(), ids.end()).first - prefix.begin());
}

void check_messages(const nlohmann::ordered_json& messages, const std::string& where) {
  for (size_t i = 0; i < messages.size(); ++i) {
    const nlohmann::ordered_json& m = messages[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      fail_read("dataset file ", where, ": message ", i,
                " is not an object with a string \"role\"");
    }
  }
}

// ShareGPT's speakers as Axolotl and LLaMA-Factory map them; others keep their name (and are
// reported as roles the template does not render).
std::string sharegpt_role(const std::string& from) {
  if (from == "human") return "user";
  if (from == "gpt") return "assistant";
  if (from == "observation") return "tool";
  return from;  // system, user, assistant, tool, ...
}

nlohmann::ordered_json sharegpt_messages(const nlohmann::ordered_json& record,
                                         const std::string& where) {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  if (record.contains("system") && record["system"].is_string() &&
      !record["system"].get_ref<const std::string&>().empty())
    messages.push_back({{"role", "system"}, {"content", record["system"]}});
  const nlohmann::ordered_json& turns = record["conversations"];
  for (size_t i = 0; i < turns.size(); ++i) {
    const nlohmann::ordered_json& t = turns[i];
    if (t.is_object() && t.contains("role")) {  // OpenAI-style turns under "conversations"
      messages.push_back(t);
      continue;
    }
    if (!t.is_object() || !t.contains("from") || !t["from"].is_string() || !t.contains("value")) {
      fail_read("dataset file ", where, ": conversations[", i,
                "] is not a ShareGPT turn {\"from\": ..., \"value\": ...}");
    }
    messages.push_back(
        {{"role", sharegpt_role(t["from"].get<std::string>())}, {"content", t["value"]}});
  }
  return messages;
}

// The record's tools: a list of function schemas, or (LLaMA-Factory) that list as a JSON string.
nlohmann::ordered_json record_tools(const nlohmann::ordered_json& record,
                                    const std::string& where) {
  if (!record.contains("tools") || record["tools"].is_null()) return nlohmann::ordered_json();
  nlohmann::ordered_json tools = record["tools"];
  if (tools.is_string()) {
    const std::string text = tools.get<std::string>();
    if (text.empty()) return nlohmann::ordered_json();
    tools = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  }
  if (!tools.is_array())
    fail_read("dataset file ", where, ": \"tools\" must be a list of function schemas");
  return tools;
}

std::string first_of(const ChatRecordTally::Kind& kind) {
  return kind.first.empty() ? "" : " (the first: " + kind.first + ")";
}

}  // namespace

bool is_chatml_role(const std::string& role) {
  return role == "system" || role == "user" || role == "assistant" || role == "tool";
}

nlohmann::ordered_json chat_messages(const nlohmann::ordered_json& record,
                                     const std::string& where) {
  nlohmann::ordered_json messages;
  if (record.contains("messages") && record["messages"].is_array()) {
    messages = record["messages"];
  } else if (record.contains("conversations") && record["conversations"].is_array()) {
    messages = sharegpt_messages(record, where);
  } else {
    fail_read("dataset file ", where,
              ": an SFT record needs a list \"messages\" of {\"role\", \"content\"} (or "
              "ShareGPT's \"conversations\" of {\"from\", \"value\"})");
  }
  if (messages.empty()) fail_read("dataset file ", where, ": the conversation has no message");
  check_messages(messages, where);
  return messages;
}

std::vector<std::string> ChatRecordTally::lines() const {
  std::vector<std::string> out;
  const std::string of = " of " + std::to_string(records) + " records read ";
  for (const auto& [role, kind] : unknown_roles) {
    out.push_back(std::to_string(kind.records) + of + (kind.records == 1 ? "has" : "have") +
                  " messages of role '" + role +
                  "', which the chat template does not render: they are left out" + first_of(kind));
  }
  if (without_assistant.records > 0) {
    out.push_back(std::to_string(without_assistant.records) + of +
                  (without_assistant.records == 1 ? "has" : "have") +
                  " no assistant turn: nothing of them is trained" + first_of(without_assistant));
  }
  if (rendered_empty.records > 0) {
    out.push_back(std::to_string(rendered_empty.records) + of +
                  (rendered_empty.records == 1 ? "renders" : "render") + " as no text" +
                  first_of(rendered_empty));
  }
  return out;
}

std::string ChatRecordTally::why_nothing_trains() const {
  std::string why =
      "none of its " + std::to_string(records) + " records has an assistant turn to train";
  const std::vector<std::string> found = lines();
  for (size_t i = 0; i < found.size(); ++i) why += (i ? "; " : ": ") + found[i];
  return why;
}

std::vector<std::pair<size_t, size_t>> assistant_spans(const std::string& text) {
  std::vector<std::pair<size_t, size_t>> spans;
  size_t at = 0;
  while ((at = text.find(kAssistantHeader, at)) != std::string::npos) {
    const size_t begin = at + kAssistantHeader.size();
    size_t end = text.find(kTurnEnd, begin);
    end = end == std::string::npos ? text.size() : end + kTurnEnd.size();
    spans.emplace_back(begin, end);
    at = end;
  }
  return spans;
}

RenderedChat render_chat(const nlohmann::ordered_json& record, const ChatTemplate& chat_template,
                         const Tokenizer& tokenizer, const std::string& where) {
  const nlohmann::ordered_json messages = chat_messages(record, where);
  RenderedChat out;
  try {
    out.text = chat_template.render(messages, record_tools(record, where),
                                    /*add_generation_prompt=*/false, nullptr);
  } catch (const DataReadError&) {
    throw;
  } catch (const Error& e) {
    fail_read("dataset file ", where, ": ", e.what());
  }
  out.ids = tokenizer.encode(out.text);
  out.trainable.assign(out.ids.size(), 0);
  for (const auto& [begin, end] : assistant_spans(out.text)) {
    const size_t first = token_at(tokenizer, out.text, begin, out.ids);
    const size_t last = token_at(tokenizer, out.text, end, out.ids);
    std::fill(out.trainable.begin() + first, out.trainable.begin() + last, uint8_t{1});
  }
  return out;
}

ChatDocuments::ChatDocuments(std::unique_ptr<DocumentSource> source,
                             std::shared_ptr<const Tokenizer> tokenizer,
                             std::shared_ptr<const ChatTemplate> chat_template, int32_t eos_id)
    : source_(std::move(source)),
      tokenizer_(std::move(tokenizer)),
      chat_template_(std::move(chat_template)),
      eos_id_(eos_id) {}

void ChatDocuments::read(int64_t index, std::vector<int32_t>& out) {
  std::vector<uint8_t> trainable;
  read_masked(index, out, trainable);
}

void ChatDocuments::read_masked(int64_t index, std::vector<int32_t>& out,
                                std::vector<uint8_t>& trainable) {
  const nlohmann::ordered_json record = source_->record(index);
  RenderedChat chat = render_chat(record, *chat_template_, *tokenizer_, source_->location(index));
  count(index, chat_messages(record, source_->location(index)), chat);
  out = std::move(chat.ids);
  trainable = std::move(chat.trainable);
  out.push_back(eos_id_);  // between conversations: never a target
  trainable.push_back(0);
}

}  // namespace titan::data

namespace titan::data {

void ChatDocuments::count(int64_t index, const nlohmann::ordered_json& messages,
                          const RenderedChat& chat) {
  std::lock_guard<std::mutex> lock(tally_mutex_);
  if (counted_.empty()) counted_.resize(static_cast<size_t>(source_->size()), false);
  if (counted_[static_cast<size_t>(index)]) return;
  counted_[static_cast<size_t>(index)] = true;
  ++tally_.records;
  const auto note = [&](ChatRecordTally::Kind& kind) {
    if (kind.records++ == 0) kind.first = source_->location(index);
  };
  std::vector<std::string> roles;
  for (const auto& m : messages) {
    const std::string role = m["role"].get<std::string>();
    if (!is_chatml_role(role) && std::find(roles.begin(), roles.end(), role) == roles.end()) {
      roles.push_back(role);
      note(tally_.unknown_roles[role]);
    }
  }
  if (std::find(chat.trainable.begin(), chat.trainable.end(), uint8_t{1}) == chat.trainable.end())
    note(tally_.without_assistant);
  if (chat.text.empty()) note(tally_.rendered_empty);
}

std::vector<std::string> ChatDocuments::report() const {
  std::lock_guard<std::mutex> lock(tally_mutex_);
  std::vector<std::string> lines = tally_.lines();
  for (std::string& line : lines) line = "dataset " + source_->path() + ": " + line;
  return lines;
}

std::string ChatDocuments::why_nothing_trains() const {
  std::lock_guard<std::mutex> lock(tally_mutex_);
  return tally_.why_nothing_trains();
}

}  // namespace titan::data
