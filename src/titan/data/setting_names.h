// How the user of this process names the data settings that messages advise. titan train and
// the commands that read a job's config use the config keys (training.dataset_text_field,
// training.sft = true); a command with flags of its own (titan eval) sets its flags once, before
// any data is read, so that an error never advises a setting the command does not have.
#pragma once

#include <string>
#include <utility>

namespace titan::data {

struct SettingNames {
  std::string text_field = "training.dataset_text_field";  // names the record's text field
  std::string sft = "training.sft = true";                 // reads records as conversations
  std::string max_length = "dpo.max_length";               // cuts preference pairs
};

// One per process (inline: the Arrow sources, a library of their own, read it too).
inline SettingNames& mutable_setting_names() {
  static SettingNames names;
  return names;
}
inline const SettingNames& setting_names() { return mutable_setting_names(); }
// Call before reading data (the prefetch thread reads the names too).
inline void set_setting_names(SettingNames names) { mutable_setting_names() = std::move(names); }

}  // namespace titan::data
