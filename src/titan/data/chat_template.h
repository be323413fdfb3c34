// A tokenizer's chat template (the Jinja template of tokenizer_config.json's "chat_template", or
// of chat_template.jinja beside it), rendered exactly as Hugging Face Transformers'
// apply_chat_template(..., tokenize=False) renders it: by Jinja2 itself, with the environment
// Transformers uses, in the embedded interpreter of titan's Python library (python_library.h).
// SFT (training.sft) renders each conversation with it. docs/architecture.md explains the
// choice: no C++ Jinja engine that renders Qwen3's template exactly is packaged for Debian or
// PyPI, and the template is not to be re-implemented by hand.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace titan::data {

class ChatTemplate {
 public:
  virtual ~ChatTemplate() = default;
  // The text of a conversation (ordered JSON: the template prints tools in their own key order):
  // `messages` a list of {"role", "content", ...} objects, `tools` null or a list of JSON schemas.
  // `variables`: more template variables, as apply_chat_template's keyword arguments pass them
  // (Qwen3's enable_thinking); an object, or null for none.
  // Throws titan::Error with the template's own message when it rejects the conversation
  // (raise_exception) or fails.
  virtual std::string render(
      const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
      bool add_generation_prompt,
      const nlohmann::ordered_json& variables = nlohmann::ordered_json()) const = 0;
};

// The template of the tokenizer folder `dir`, with its special tokens (bos_token, eos_token,
// pad_token, unk_token) as template variables. Throws titan::Error naming the folder when it has
// no chat template, and when the Python library cannot be loaded.
std::shared_ptr<const ChatTemplate> load_chat_template(const std::string& dir);

}  // namespace titan::data
