// SFT documents: chat conversations, one per .jsonl record ({"messages": [{"role", "content",
// ...}, ...], "tools": [...] optional}, the layout of Hugging Face chat datasets; or ShareGPT's
// {"conversations": [{"from", "value"}, ...], "system": ...}, read as Axolotl and LLaMA-Factory
// read it: human -> user, gpt -> assistant, observation -> tool), rendered with
// the tokenizer's chat template (chat_template.h), tokenized, and followed by the eos id. Only
// the assistant turns are trained: in the rendered ChatML text (Qwen's templates), each
// "<|im_start|>assistant\n" header opens a span that runs to its "<|im_end|>" inclusive; the
// tokens inside spans are trainable, the rest (system, user and tool turns, the headers, the
// eos between conversations) are not, so their labels are ignored (-100).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
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

// The messages of a record: its "messages", or its ShareGPT "conversations" (and "system")
// turned into messages. Throws DataReadError naming `where` when it has neither.
nlohmann::ordered_json chat_messages(const nlohmann::ordered_json& record,
                                     const std::string& where);

// The roles a ChatML template renders; a message of any other role renders as nothing.
bool is_chatml_role(const std::string& role);

// One record's conversation; `where` names it in errors (file:line). Throws DataReadError when
// the record is not a conversation or the template rejects it.
RenderedChat render_chat(const nlohmann::ordered_json& record, const ChatTemplate& chat_template,
                         const Tokenizer& tokenizer, const std::string& where);

// What the records read so far hold that trains nothing, silently otherwise: messages of roles
// the template does not render, conversations without an assistant turn, records that render
// as no text. Each record counts once however often it is read.
struct ChatRecordTally {
  int64_t records = 0;  // distinct records read
  struct Kind {
    int64_t records = 0;
    std::string first;  // where the first one is (file:line)
  };
  std::map<std::string, Kind> unknown_roles;  // by role
  Kind without_assistant, rendered_empty;
  // One line per kind found, e.g. "12 of 40 records have messages of role 'human', which the
  // chat template does not render (the first: chat.jsonl:3)"; none when all is well.
  std::vector<std::string> lines() const;
  // Records with something to train on are none: why, in one sentence.
  std::string why_nothing_trains() const;
};

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
  std::vector<std::string> report() const override;
  std::string why_nothing_trains() const override;

 private:
  void count(int64_t index, const nlohmann::ordered_json& messages, const RenderedChat& chat);

  std::unique_ptr<DocumentSource> source_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::shared_ptr<const ChatTemplate> chat_template_;
  int32_t eos_id_;
  // Read by the prefetch thread, reported from the training thread.
  mutable std::mutex tally_mutex_;
  ChatRecordTally tally_;
  std::vector<bool> counted_;  // by record index
};

}  // namespace titan::data
