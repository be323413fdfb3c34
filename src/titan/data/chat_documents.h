// SFT documents: chat conversations, one per .jsonl record ({"messages": [{"role", "content",
// ...}, ...], "tools": [...] optional}, the layout of Hugging Face chat datasets), rendered with
// the tokenizer's chat template (chat_template.h), tokenized, and followed by the eos id. Only
// the assistant turns are trained: in the rendered ChatML text (Qwen's templates), each
// "<|im_start|>assistant\n" header opens a span that runs to its "<|im_end|>" inclusive; the
// tokens inside spans are trainable, the rest (system, user and tool turns, the headers, the
// eos between conversations) are not, so their labels are ignored (-100).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "titan/data/chat_template.h"
#include "titan/data/document_source.h"
#include "titan/data/token_documents.h"
#include "titan/data/tokenizer/tokenizer.h"

namespace titan::data {

struct RenderedChat {
  std::string text;
  std::vector<int32_t> ids;        // of text (no eos)
  std::vector<uint8_t> trainable;  // one flag per id
};

// One record's conversation; `where` names it in errors (file:line). Throws DataReadError when
// the record is not a conversation or the template rejects it.
RenderedChat render_chat(const nlohmann::ordered_json& record, const ChatTemplate& chat_template,
                         const Tokenizer& tokenizer, const std::string& where);

// Byte ranges [begin, end) of the assistant turns of a ChatML text (see above).
std::vector<std::pair<size_t, size_t>> assistant_spans(const std::string& text);

class ChatDocuments : public TokenDocuments {
 public:
  ChatDocuments(std::unique_ptr<DocumentSource> source, std::shared_ptr<const Tokenizer> tokenizer,
                std::shared_ptr<const ChatTemplate> chat_template, int32_t eos_id);
  int64_t size() const override { return source_->size(); }
  void read(int64_t index, std::vector<int32_t>& out) override;
  void read_masked(int64_t index, std::vector<int32_t>& out,
                   std::vector<uint8_t>& trainable) override;
  const std::string& path() const override { return source_->path(); }

 private:
  std::unique_ptr<DocumentSource> source_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::shared_ptr<const ChatTemplate> chat_template_;
  int32_t eos_id_;
};

}  // namespace titan::data
