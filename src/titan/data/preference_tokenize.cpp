#include "titan/data/preference_tokenize.h"

#include <algorithm>

#include "titan/common/error.h"

namespace titan::data {
namespace {

using Json = nlohmann::ordered_json;

Json concatenated(const Json& a, const Json& b) {
  Json out = a;
  for (const Json& m : b) out.push_back(m);
  return out;
}

std::string with_eos(const std::string& text, const std::string& eos) {
  return text.ends_with(eos) ? text : text + eos;
}

}  // namespace

size_t common_prefix_length(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  return static_cast<size_t>(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first -
                             a.begin());
}

TokenizedPair tokenize_preference(const PreferenceRecord& record, const Tokenizer& tokenizer,
                                  const ChatTemplate* chat_template, const std::string& eos_token) {
  std::vector<int32_t> prompt, prompt_chosen, prompt_rejected;
  if (record.conversational) {
    TITAN_CHECK(chat_template != nullptr,
                "conversational preference records are rendered with the tokenizer's chat "
                "template, and the tokenizer folder has none");
    const auto render = [&](const Json& messages, bool add_generation_prompt) {
      return tokenizer.encode(chat_template->render(messages, record.tools, add_generation_prompt,
                                                    record.chat_template_kwargs));
    };
    prompt = render(record.prompt, /*add_generation_prompt=*/true);
    prompt_chosen = render(concatenated(record.prompt, record.chosen), false);
    prompt_rejected = render(concatenated(record.prompt, record.rejected), false);
  } else {
    const std::string& text = record.prompt.get_ref<const std::string&>();
    prompt = tokenizer.encode(text);
    prompt_chosen =
        tokenizer.encode(text + with_eos(record.chosen.get_ref<const std::string&>(), eos_token));
    prompt_rejected =
        tokenizer.encode(text + with_eos(record.rejected.get_ref<const std::string&>(), eos_token));
  }
  const size_t prompt_length = std::min(common_prefix_length(prompt, prompt_chosen),
                                        common_prefix_length(prompt, prompt_rejected));
  TokenizedPair out;
  out.prompt_cut = prompt_length < prompt.size();
  out.prompt.assign(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(prompt_length));
  out.chosen.assign(prompt_chosen.begin() + static_cast<std::ptrdiff_t>(prompt_length),
                    prompt_chosen.end());
  out.rejected.assign(prompt_rejected.begin() + static_cast<std::ptrdiff_t>(prompt_length),
                      prompt_rejected.end());
  return out;
}

}  // namespace titan::data
