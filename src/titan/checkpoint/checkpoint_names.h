// The one place where checkpoint folder names are built and parsed (in the manner of
// LevelDB's filename.h): training checkpoints are <folder>/step-N, Hugging Face exports are
// <dump_folder>/hf/step-N, and a save in progress is <folder>/.step-N.tmp-<pid>-<suffix>.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace titan::checkpoint {

// "step-12".
std::string step_folder_name(int64_t step);

// 12 for "step-12"; nullopt for anything else (including "step-", "step-1x", "step--1" and
// numbers that do not fit in int64).
std::optional<int64_t> parse_step_folder_name(const std::string& name);

// The step of a path whose last component is step-N; throws titan::Error naming the path when
// it is not one.
int64_t step_of_folder(const std::string& path);

// Prefix of the temporary folder a save of `step` writes before renaming it into place.
std::string staging_folder_prefix(int64_t step);
// Whether `name` is such a temporary folder (of any step and process).
bool is_staging_folder_name(const std::string& name);

// <dump_folder>/hf/step-N: kept apart from the training checkpoints so that resume never
// mistakes an export for one.
std::string hf_export_folder(const std::string& dump_folder, int64_t step);

}  // namespace titan::checkpoint
