#include "titan/checkpoint/checkpoint_names.h"

#include <charconv>
#include <filesystem>

#include "titan/common/error.h"

namespace titan::checkpoint {
namespace {
constexpr std::string_view kStepPrefix = "step-";
}  // namespace

std::string step_folder_name(int64_t step) {
  return std::string(kStepPrefix) + std::to_string(step);
}

std::optional<int64_t> parse_step_folder_name(const std::string& name) {
  if (name.size() <= kStepPrefix.size() || name.compare(0, kStepPrefix.size(), kStepPrefix) != 0)
    return std::nullopt;
  const char* begin = name.data() + kStepPrefix.size();
  const char* end = name.data() + name.size();
  if (*begin < '0' || *begin > '9') return std::nullopt;  // no sign, no spaces
  int64_t step = 0;
  const auto [ptr, ec] = std::from_chars(begin, end, step);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return step;
}

int64_t step_of_folder(const std::string& path) {
  const std::string name = std::filesystem::path(path).filename().string();
  const std::optional<int64_t> step = parse_step_folder_name(name);
  TITAN_CHECK(step.has_value(), path, ": a training checkpoint folder must be named step-N");
  return *step;
}

std::string staging_folder_prefix(int64_t step) {
  // Appended piece by piece: GCC 12 warns falsely (-Wstringop-overflow) on "." + string.
  std::string prefix = ".";
  return prefix.append(step_folder_name(step)).append(".tmp-");
}

bool is_staging_folder_name(const std::string& name) {
  return name.size() > kStepPrefix.size() && name[0] == '.' &&
         name.compare(1, kStepPrefix.size(), kStepPrefix) == 0 &&
         name.find(".tmp-") != std::string::npos;
}

std::string hf_export_folder(const std::string& dump_folder, int64_t step) {
  return (std::filesystem::path(dump_folder) / "hf" / step_folder_name(step)).string();
}

}  // namespace titan::checkpoint
