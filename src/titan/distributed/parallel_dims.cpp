#include "titan/distributed/parallel_dims.h"

#include <algorithm>

#include "titan/common/error.h"
#include "titan/common/strings.h"
#include "titan/config/validate.h"

namespace titan::distributed {

std::vector<std::pair<std::string, int64_t>> ParallelDims::named() const {
  return {
      {"pp", pp}, {"dp_replicate", dp_replicate}, {"dp_shard", dp_shard}, {"cp", cp}, {"tp", tp},
      {"ep", ep}};
}

ParallelDims make_parallel_dims(const config::ParallelismConfig& p, int64_t world_size) {
  config::check_parallel_degrees(p, world_size);
  ParallelDims dims;
  dims.world_size = world_size;
  dims.pp = p.pipeline_parallel_degree;
  dims.dp_replicate = p.data_parallel_replicate_degree;
  dims.dp_shard = config::resolved_data_parallel_shard_degree(p, world_size);
  dims.cp = p.context_parallel_degree;
  dims.tp = p.tensor_parallel_degree;
  dims.ep = p.expert_parallel_degree;
  return dims;
}

MeshLayout::MeshLayout(const ParallelDims& dims) : dims_(dims) {
  const int64_t product = dims.pp * dims.dp_replicate * dims.dp_shard * dims.cp * dims.tp;
  TITAN_CHECK(product == dims.world_size, "mesh: degrees multiply to ", product,
              " but the world size is ", dims.world_size);
  TITAN_CHECK(dims.ep >= 1 && (dims.dp_shard * dims.cp * dims.tp) % dims.ep == 0,
              "mesh: expert degree ", dims.ep, " does not divide dp_shard x cp x tp");
}

const std::vector<std::string>& MeshLayout::group_names() {
  static const std::vector<std::string> names = {"world", "pp",    "dp_replicate", "dp_shard",
                                                 "dp",    "cp",    "tp",           "ep",
                                                 "efsdp", "dp_cp", "dp_shard_cp",  "stage"};
  return names;
}

std::vector<int64_t> MeshLayout::key(const std::string& group, int64_t rank) const {
  TITAN_CHECK(rank >= 0 && rank < dims_.world_size, "mesh: rank ", rank, " outside world of ",
              dims_.world_size);
  const ParallelDims& d = dims_;
  // Row-major coordinates, tp fastest.
  int64_t rest = rank;
  const int64_t t = rest % d.tp;
  rest /= d.tp;
  const int64_t c = rest % d.cp;
  rest /= d.cp;
  const int64_t s = rest % d.dp_shard;
  rest /= d.dp_shard;
  const int64_t r = rest % d.dp_replicate;
  const int64_t p = rest / d.dp_replicate;
  const int64_t flat = (s * d.cp + c) * d.tp + t;  // within dp_shard x cp x tp
  if (group == "world") return {};
  if (group == "pp") return {r, s, c, t};
  if (group == "dp_replicate") return {p, s, c, t};
  if (group == "dp_shard") return {p, r, c, t};
  if (group == "dp") return {p, c, t};
  if (group == "cp") return {p, r, s, t};
  if (group == "tp") return {p, r, s, c};
  if (group == "ep") return {p, r, flat / d.ep};
  if (group == "efsdp") return {p, r, flat % d.ep};
  if (group == "dp_cp") return {p, t};
  if (group == "dp_shard_cp") return {p, r, t};
  if (group == "stage") return {p};
  fail("mesh: no group named '", group, "'; the groups are ", join(group_names()));
}

std::vector<int64_t> MeshLayout::members(const std::string& group, int64_t rank) const {
  const std::vector<int64_t> mine = key(group, rank);
  std::vector<int64_t> out;
  for (int64_t other = 0; other < dims_.world_size; ++other)
    if (key(group, other) == mine) out.push_back(other);
  return out;
}

int64_t MeshLayout::index_in(const std::string& group, int64_t rank) const {
  const std::vector<int64_t> m = members(group, rank);
  return std::find(m.begin(), m.end(), rank) - m.begin();
}

int64_t MeshLayout::size_of(const std::string& group) const {
  return static_cast<int64_t>(members(group, 0).size());
}

std::vector<std::vector<int64_t>> MeshLayout::all_groups(const std::string& group) const {
  std::vector<std::vector<int64_t>> out;
  std::vector<bool> seen(static_cast<size_t>(dims_.world_size), false);
  for (int64_t rank = 0; rank < dims_.world_size; ++rank) {
    if (seen[static_cast<size_t>(rank)]) continue;
    out.push_back(members(group, rank));
    for (int64_t m : out.back()) seen[static_cast<size_t>(m)] = true;
  }
  return out;
}

}  // namespace titan::distributed
