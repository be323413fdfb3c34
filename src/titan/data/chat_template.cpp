#include "titan/data/chat_template.h"

#include <filesystem>

#include "titan/common/error.h"
#include "titan/common/file_util.h"
#include "titan/common/python_library.h"

namespace fs = std::filesystem;

namespace titan::data {
namespace {

// tokenizer_config.json writes a special token as a string or as {"content": ...}.
std::string token_text(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string())
    return value["content"].get<std::string>();
  return "";
}

}  // namespace

std::shared_ptr<const ChatTemplate> load_chat_template(const std::string& dir) {
  const fs::path folder(dir);
  const fs::path config_path = folder / "tokenizer_config.json";
  nlohmann::json config = nlohmann::json::object();
  if (fs::exists(config_path)) {
    try {
      config = nlohmann::json::parse(read_text_file(config_path.string()));
    } catch (const nlohmann::json::exception& e) {
      fail(config_path.string(), " is not valid JSON: ", e.what());
    }
    TITAN_CHECK(config.is_object(), config_path.string(), " is not a JSON object");
  }
  // Transformers v5 saves the template as chat_template.jinja and prefers it.
  std::string source;
  if (fs::exists(folder / "chat_template.jinja")) {
    source = read_text_file((folder / "chat_template.jinja").string());
  } else if (config.contains("chat_template") && config["chat_template"].is_string()) {
    source = config["chat_template"].get<std::string>();
  }
  TITAN_CHECK(!source.empty(), "tokenizer folder ", dir,
              " has no chat template (neither chat_template.jinja nor a \"chat_template\" string "
              "in tokenizer_config.json); SFT (training.sft) and conversational preference records "
              "are rendered with it");
  nlohmann::json special = nlohmann::json::object();
  for (const char* key : {"bos_token", "eos_token", "pad_token", "unk_token"}) {
    if (config.contains(key)) {
      const std::string text = token_text(config[key]);
      if (!text.empty()) special[key] = text;
    }
  }
  using Make = ChatTemplate* (*)(const char* source, const char* special_tokens_json);
  auto make = reinterpret_cast<Make>(
      python_library_symbol("titan_make_chat_template", "the chat template renderer (SFT)"));
  return std::shared_ptr<const ChatTemplate>(make(source.c_str(), special.dump().c_str()));
}

}  // namespace titan::data
