#include "titan/distributed/pipeline/schedule_kind.h"

#include <cctype>
#include <vector>

#include "titan/common/error.h"
#include "titan/common/strings.h"
#include "titan/config/validate.h"

namespace titan::distributed::pipeline {
namespace {

const std::vector<std::pair<std::string, ScheduleKind>>& kinds() {
  static const std::vector<std::pair<std::string, ScheduleKind>> all = {
      {"GPipe", ScheduleKind::kGPipe},
      {"1F1B", ScheduleKind::k1F1B},
      {"Interleaved1F1B", ScheduleKind::kInterleaved1F1B},
      {"InterleavedZeroBubble", ScheduleKind::kInterleavedZeroBubble},
      {"ZBVZeroBubble", ScheduleKind::kZBVZeroBubble}};
  return all;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

ScheduleKind parse_schedule(const std::string& name) {
  for (const auto& [known, kind] : kinds())
    if (lower(known) == lower(name)) return kind;
  config::check_pipeline_schedule(name);  // words the error, with a did-you-mean
  fail("parallelism.pipeline_parallel_schedule = \"", name, "\": accepted values are ",
       join(config::pipeline_schedule_names()));
}

std::string schedule_name(ScheduleKind kind) {
  for (const auto& [known, k] : kinds())
    if (k == kind) return known;
  return "?";
}

bool single_stage(ScheduleKind kind) {
  return kind == ScheduleKind::kGPipe || kind == ScheduleKind::k1F1B;
}

bool v_placement(ScheduleKind kind) { return kind == ScheduleKind::kZBVZeroBubble; }

bool splits_backward(ScheduleKind kind) {
  return kind == ScheduleKind::kInterleavedZeroBubble || kind == ScheduleKind::kZBVZeroBubble;
}

}  // namespace titan::distributed::pipeline
