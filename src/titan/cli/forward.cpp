// titan forward: logits of a Hugging Face model directory for given token ids, written as
// safetensors (key `logits`, [S, V], float32), for parity checks against transformers.
// --grads-output also runs the causal-LM loss (labels = the tokens, Hugging Face's shift and
// mean) plus any auxiliary loss, backpropagates, and writes `loss` and `grad.<name>` for
// every parameter.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "titan/checkpoint/safetensors.h"
#include "titan/cli/commands.h"
#include "titan/cli/model_source.h"
#include "titan/common/error.h"
#include "titan/config/field_values.h"
#include "titan/models/model_spec.h"

namespace titan::cli {
namespace {

constexpr const char* kUsage =
    "usage: titan forward --model HF_DIR_OR_CHECKPOINT_OR_ADAPTER (--tokens 1,2,3 |\n"
    "                     --tokens-file ids.json) [--base HF_DIR]\n"
    "                     [--backend native|transformers] [--dtype float32|bfloat16]\n"
    "                     --output logits.safetensors [--grads-output grads.safetensors]\n"
    "\n"
    "Computes the logits [S, V] of the model in HF_DIR (config.json + safetensors weights),\n"
    "or of a training checkpoint (step-N folder), or of a PEFT adapter folder on its base (the\n"
    "Hugging Face folder --base names, else the one its adapter_config.json names),\n"
    "with titan's native model, or with --backend transformers Transformers' own model of it,\n"
    "for one sequence and writes them, as float32 under the key `logits`, to --output.\n"
    "  --dtype          the dtype the weights are loaded and computed in (from_pretrained's\n"
    "                   dtype); default float32\n"
    "  --grads-output   also compute the causal-LM loss with labels = the tokens (shifted\n"
    "                   inside, mean over predicted tokens, plus the MoE auxiliary loss when\n"
    "                   config.json has output_router_logits=true), backpropagate, and\n"
    "                   write `loss` and `grad.<parameter name>` (float32) to this file\n";

struct ForwardOptions {
  std::string model_dir;
  std::string tokens;
  std::string tokens_file;
  std::string backend = "native";
  std::string dtype = "float32";
  std::string output;
  std::string grads_output;
  std::string base;
};

ForwardOptions parse_options(const Args& args) {
  const FlagParser flags(args, "forward",
                         {"--model", "--tokens", "--tokens-file", "--backend", "--dtype",
                          "--output", "--grads-output", "--base"});
  ForwardOptions o;
  o.model_dir = flags.require("--model");
  o.tokens = flags.get("--tokens");
  o.tokens_file = flags.get("--tokens-file");
  o.backend = flags.get("--backend", "native");
  o.dtype = flags.get("--dtype", "float32");
  o.output = flags.require("--output");
  o.grads_output = flags.get("--grads-output");
  o.base = flags.get("--base");
  TITAN_CHECK(o.tokens.empty() != o.tokens_file.empty(),
              "titan forward: give exactly one of --tokens and --tokens-file");
  TITAN_CHECK(o.backend == "native" || o.backend == "transformers", "titan forward: --backend '",
              o.backend, "' is not native or transformers");
  TITAN_CHECK(o.dtype == "float32" || o.dtype == "bfloat16", "titan forward: --dtype '", o.dtype,
              "' is not float32 or bfloat16");
  return o;
}

std::vector<int64_t> parse_token_list(const std::string& text) {
  std::vector<int64_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t first = item.find_first_not_of(" \t");
    const size_t last = item.find_last_not_of(" \t");
    int64_t value = 0;
    const std::string trimmed =
        first == std::string::npos ? std::string() : item.substr(first, last - first + 1);
    TITAN_CHECK(config::parse_int64(trimmed, value), "titan forward: --tokens value '", item,
                "' is not an integer");
    ids.push_back(value);
  }
  return ids;
}

std::vector<int64_t> read_token_file(const std::string& path) {
  std::ifstream in(path);
  TITAN_CHECK(in, "titan forward: cannot open --tokens-file ", path);
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": invalid JSON: ", e.what());
  }
  // One sequence: [1, 2, 3] (or [[1, 2, 3]]).
  if (json.is_array() && json.size() == 1 && json[0].is_array()) json = json[0];
  TITAN_CHECK(json.is_array(), path, ": expected a JSON array of token ids");
  std::vector<int64_t> ids;
  for (const auto& v : json) {
    TITAN_CHECK(v.is_number_integer(), path, ": token id ", v.dump(), " is not an integer");
    ids.push_back(v.get<int64_t>());
  }
  return ids;
}

// Hugging Face ForCausalLMLoss: labels padded with one -100 and shifted left, cross-entropy in
// float32 with ignore_index -100, mean over the counted targets.
at::Tensor causal_lm_loss(const at::Tensor& logits, const at::Tensor& ids) {
  const at::Tensor labels =
      at::cat({ids.slice(1, 1), at::full({ids.size(0), 1}, -100, ids.options())}, 1);
  return at::cross_entropy_loss(logits.to(at::kFloat).reshape({-1, logits.size(-1)}),
                                labels.reshape({-1}), /*weight=*/{}, at::Reduction::Mean,
                                /*ignore_index=*/-100);
}

}  // namespace

int run_forward(const Args& args) {
  if (wants_help(args)) {
    std::cout << kUsage;
    return 0;
  }
  const ForwardOptions o = parse_options(args);
  const std::vector<int64_t> tokens =
      o.tokens_file.empty() ? parse_token_list(o.tokens) : read_token_file(o.tokens_file);
  TITAN_CHECK(!tokens.empty(), "titan forward: no token ids given");

  models::BuildOptions build;
  build.compute_dtype = o.dtype == "bfloat16" ? at::kBFloat16 : at::kFloat;
  build.param_dtype = build.compute_dtype;  // loaded in that dtype, as from_pretrained(dtype=)
  LoadedModel loaded =
      load_model(o.model_dir, build, o.backend == "transformers" ? "transformers" : "", o.base);
  models::Model* model = loaded.model.get();
  const int64_t vocab = model->output_weight().size(0);
  for (int64_t id : tokens) {
    TITAN_CHECK(id >= 0 && id < vocab, "titan forward: token id ", id,
                " is outside the vocabulary [0, ", vocab, ") of ", o.model_dir);
  }

  const at::Tensor ids = at::tensor(tokens, at::kLong).view({1, -1});
  if (o.grads_output.empty()) {
    at::NoGradGuard no_grad;
    const at::Tensor logits = models::logits(*model, ids)[0].to(at::kFloat).contiguous();
    checkpoint::write_safetensors(o.output, {{"logits", logits}});
    return 0;
  }
  const models::ModelOutput out = model->forward(ids);
  const at::Tensor logits =
      at::linear(out.hidden, model->output_weight().to(out.hidden.scalar_type()));
  at::Tensor loss = causal_lm_loss(logits, ids);
  if (out.extra_loss.defined()) loss = loss + out.extra_loss;
  loss.backward();
  checkpoint::write_safetensors(o.output,
                                {{"logits", logits[0].detach().to(at::kFloat).contiguous()}});
  std::vector<std::pair<std::string, at::Tensor>> grads;
  grads.emplace_back("loss", loss.detach().to(at::kFloat));
  for (const auto& [name, p] : model->named_parameters()) {
    const at::Tensor g = p.grad().defined() ? p.grad() : at::zeros_like(p);
    grads.emplace_back("grad." + name, g.to(at::kFloat).contiguous());
  }
  checkpoint::write_safetensors(o.grads_output, grads);
  return 0;
}

}  // namespace titan::cli
