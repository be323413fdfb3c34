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

void check_conversation(const nlohmann::ordered_json& record, const std::string& where) {
  if (!record.contains("messages") || !record["messages"].is_array() ||
      record["messages"].empty()) {
    fail_read("dataset file ", where,
              ": an SFT record needs a non-empty list \"messages\" of {\"role\", \"content\"}");
  }
  for (size_t i = 0; i < record["messages"].size(); ++i) {
    const nlohmann::ordered_json& m = record["messages"][i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      fail_read("dataset file ", where, ": message ", i,
                " is not an object with a string \"role\"");
    }
  }
  if (record.contains("tools") && !record["tools"].is_null() && !record["tools"].is_array())
    fail_read("dataset file ", where, ": \"tools\" must be a list of function schemas");
}

}  // namespace

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
  check_conversation(record, where);
  RenderedChat out;
  try {
    out.text = chat_template.render(
        record["messages"], record.contains("tools") ? record["tools"] : nlohmann::ordered_json(),
        /*add_generation_prompt=*/false);
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
  RenderedChat chat =
      render_chat(source_->record(index), *chat_template_, *tokenizer_, source_->location(index));
  out = std::move(chat.ids);
  trainable = std::move(chat.trainable);
  out.push_back(eos_id_);  // between conversations: never a target
  trainable.push_back(0);
}

}  // namespace titan::data
