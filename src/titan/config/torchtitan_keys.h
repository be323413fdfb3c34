// torchtitan's config keys that titan's tree does not have, so that torchtitan's own TOML files
// (torchtitan 0.1 and 0.2, `torchtitan/models/*/train_configs/*.toml`) and habits
// (`--compile.enable false`) work. Each such key is one of:
//   renamed  torchtitan's name of a titan field (checkpoint.enable_checkpoint is
//            checkpoint.enable, validation.* is validator.*): the value goes there;
//   noted    a setting of something titan does not have, at a value that asks nothing of it
//            (compile.enable = false, metrics.enable_wandb = false, [quantize.linear.float8]
//            with no converter naming it): accepted, with a one-line note saying so;
//   refused  the same setting asking for it (compile.enable = true): one error naming the key
//            and what titan lacks.
// A key torchtitan does not have either is not here: the caller reports it as unknown.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace titan::config {

struct TorchtitanKey {
  enum class Action { kRename, kNote, kRefuse };
  Action action = Action::kNote;
  std::string titan_key;  // kRename: "section.field" of the titan field it sets
  int index = -1;         // kRename into one element of a list field (optimizer.beta1: 0)
  std::string value;      // kRename: the titan spelling of the value, when it differs ("1F1B")
  std::string message;    // kNote: the note; kRefuse: the error (both without the key's origin)
};

// The rule for torchtitan's `key` ("compile.enable", "quantize.linear.float8.filter_fqns") set to
// `value`, written as on the command line (true, 5, c4, a,b for a list); nullopt when torchtitan
// has no such key either.
std::optional<TorchtitanKey> torchtitan_key(const std::string& key, const std::string& value);

// torchtitan's keys under `section` ("validation": enable, enabled, freq, ...), for the error
// about one that is neither torchtitan's nor titan's.
std::vector<std::string> torchtitan_section_keys(const std::string& section);

// True when `section` holds only torchtitan keys ([compile], [quantize], [validation], ...): a
// section titan does not have but accepts key by key through torchtitan_key().
bool is_torchtitan_section(const std::string& section);

// torchtitan's datasets (torchtitan/hf_datasets/text_datasets.py), which it downloads from the
// hub: training.dataset may name them when training.dataset_path is given.
bool is_torchtitan_dataset(const std::string& name);

}  // namespace titan::config
