// titan generate --model DIR --prompt TEXT [--max-new-tokens N --temperature T --top-k K]
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/grad_mode.h>

#include <iostream>
#include <nlohmann/json.hpp>

#include "titan/cli/commands.h"
#include "titan/cli/model_source.h"
#include "titan/common/error.h"
#include "titan/data/chat_template.h"
#include "titan/data/tokenizer/tokenizer.h"
#include "titan/models/generation.h"
#include "titan/train/precision.h"

namespace titan::cli {
namespace {

constexpr const char* kHelp =
    R"(usage: titan generate --model HF_DIR_OR_CHECKPOINT_OR_ADAPTER --prompt TEXT [--max-new-tokens 64]
                      [--temperature 0.7] [--top-k 20] [--seed 0] [--tokenizer DIR]
                      [--device auto|cpu|cuda] [--print-ids] [--ignore-eos]
                      [--base HF_DIR] [--chat] [--chat-template-kwargs JSON]
                      [--backend native|transformers]

Continues TEXT with the model, decoding incrementally with a KV cache. --temperature 0 is
greedy decoding; otherwise tokens are sampled from the softmax of logits/temperature,
restricted to the top-k most likely (0 = no restriction), with a seeded generator. Stops at
the model's eos tokens unless --ignore-eos. --print-ids adds the generated ids as a JSON array
on a last line.

--model may be a PEFT adapter folder (adapter_config.json + adapter_model.safetensors, as titan's
LoRA export or PEFT's save_pretrained writes it): it runs on its base, the Hugging Face folder
--base names, else the one adapter_config.json's base_model_name_or_path names.
--chat takes TEXT as a user's message: the tokenizer's chat template renders it with the prompt
of an assistant's reply (apply_chat_template(..., add_generation_prompt=True)), and only the
reply is printed. --chat-template-kwargs JSON passes more variables to the template, as
apply_chat_template's keyword arguments: '{"enable_thinking": false}' makes Qwen3 answer without
its thinking block.
--backend transformers runs a Hugging Face folder with Transformers' own model (its own KV cache,
docs/transformers_backend.md) instead of titan's native one; a training checkpoint runs with the
model it was trained with.
)";

std::vector<int64_t> eos_ids(const nlohmann::json& hf_config) {
  std::vector<int64_t> ids;
  if (!hf_config.contains("eos_token_id")) return ids;
  const auto& e = hf_config["eos_token_id"];
  if (e.is_number_integer()) ids.push_back(e.get<int64_t>());
  if (e.is_array())
    for (const auto& v : e) ids.push_back(v.get<int64_t>());
  return ids;
}

int64_t pick_token(const at::Tensor& logits, double temperature, int64_t top_k,
                   at::Generator& gen) {
  const at::Tensor last = logits.to(at::kFloat).cpu();
  if (temperature <= 0) return last.argmax().item<int64_t>();
  at::Tensor scaled = last / temperature;
  if (top_k > 0 && top_k < scaled.size(0)) {
    const at::Tensor kth = std::get<0>(scaled.topk(top_k)).min();
    scaled = scaled.masked_fill(scaled < kth, -std::numeric_limits<float>::infinity());
  }
  return at::multinomial(scaled.softmax(0), 1, false, gen).item<int64_t>();
}

}  // namespace

int run_generate(const Args& args) {
  if (wants_help(args)) {
    std::cout << kHelp;
    return 0;
  }
  const FlagParser flags(
      args, "generate",
      {"--model", "--prompt", "--max-new-tokens", "--temperature", "--top-k", "--seed",
       "--tokenizer", "--device", "--base", "--chat-template-kwargs", "--backend"},
      {"--print-ids", "--ignore-eos", "--chat"});
  const int64_t max_new = flags.get_int("--max-new-tokens", 64);
  const double temperature = flags.get_double("--temperature", 0.7);
  const int64_t top_k = flags.get_int("--top-k", 20);
  TITAN_CHECK(max_new >= 0 && temperature >= 0 && top_k >= 0,
              "titan generate: --max-new-tokens, --temperature and --top-k must not be negative");
  models::BuildOptions options;
  options.device = train::resolve_device(flags.get("--device", "auto"));
  if (options.device.is_cuda()) options.compute_dtype = options.param_dtype = at::kBFloat16;
  LoadedModel loaded =
      load_model(flags.require("--model"), options, backend_spec(flags), flags.get("--base"));
  const std::string tokenizer_dir = flags.get("--tokenizer", loaded.tokenizer_dir);
  TITAN_CHECK(!tokenizer_dir.empty(), "titan generate: no tokenizer.json next to the model; ",
              "pass --tokenizer DIR");
  const data::Tokenizer tokenizer = data::Tokenizer::from_directory(tokenizer_dir);
  std::string prompt = flags.require("--prompt");
  const bool chat = flags.has("--chat");
  nlohmann::ordered_json variables;
  if (flags.has("--chat-template-kwargs")) {
    TITAN_CHECK(chat, "titan generate: --chat-template-kwargs applies only with --chat");
    const std::string text = flags.get("--chat-template-kwargs");
    variables = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    TITAN_CHECK(variables.is_object(), "titan generate: --chat-template-kwargs ", text,
                ": expected a JSON object, e.g. '{\"enable_thinking\": false}'");
  }
  if (chat) {
    const nlohmann::ordered_json messages = {{{"role", "user"}, {"content", prompt}}};
    prompt =
        data::load_chat_template(tokenizer_dir)
            ->render(messages, nlohmann::ordered_json(), /*add_generation_prompt=*/true, variables);
  }
  const std::vector<int32_t> prompt_ids = tokenizer.encode(prompt);
  TITAN_CHECK(!prompt_ids.empty(), "titan generate: the prompt is empty");
  const std::vector<int64_t> stops = flags.has("--ignore-eos")
                                         ? std::vector<int64_t>{}
                                         : eos_ids(loaded.model->hf_config("float32"));

  models::IncrementalDecoder* decoder = loaded.model->incremental_decoder();
  TITAN_CHECK(decoder != nullptr, "titan generate: model '", loaded.spec->name,
              "' does not support incremental decoding");
  at::Generator gen = at::detail::createCPUGenerator(flags.get_int("--seed", 0));
  at::NoGradGuard no_grad;
  models::KVCache cache;
  at::Tensor input = at::tensor(std::vector<int64_t>(prompt_ids.begin(), prompt_ids.end()))
                         .unsqueeze(0)
                         .to(options.device);
  std::vector<int32_t> generated;
  if (!chat) std::cout << prompt << std::flush;  // a chat prints the reply only
  std::string printed;
  for (int64_t i = 0; i < max_new; ++i) {
    const at::Tensor logits = decoder->forward_cached(input, cache);
    const int64_t next = pick_token(logits[0][-1], temperature, top_k, gen);
    if (std::find(stops.begin(), stops.end(), next) != stops.end()) break;
    generated.push_back(static_cast<int32_t>(next));
    // Print the text as it grows; decoding the whole continuation keeps multi-byte
    // characters split across tokens intact.
    const std::string text = tokenizer.decode(generated);
    if (text.size() > printed.size() && text.compare(0, printed.size(), printed) == 0) {
      std::cout << text.substr(printed.size()) << std::flush;
      printed = text;
    }
    input = at::full({1, 1}, next, at::dtype(at::kLong).device(options.device));
  }
  std::cout << "\n";
  if (flags.has("--print-ids")) std::cout << nlohmann::json(generated).dump() << "\n";
  return 0;
}

}  // namespace titan::cli
