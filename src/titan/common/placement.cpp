#include "titan/common/placement.h"

#include <algorithm>

#include "titan/common/error.h"

namespace titan {

bool TensorPlacement::whole() const {
  return std::none_of(on.begin(), on.end(),
                      [](const PlacedOn& p) { return p.placement.is_shard() && p.size > 1; });
}

std::vector<std::string> TensorPlacement::sharded_over() const {
  std::vector<std::string> out;
  for (const PlacedOn& p : on)
    if (p.placement.is_shard() && p.size > 1) out.push_back(p.mesh_dim);
  return out;
}

TensorPlacement TensorPlacement::then(const PlacedOn& more) const {
  TensorPlacement out = *this;
  out.on.push_back(more);
  return out;
}

int64_t Box::numel() const {
  int64_t n = 1;
  for (int64_t l : length) n *= l;
  return n;
}

EvenSplit even_split(int64_t length, int64_t parts, int64_t index) {
  TITAN_CHECK(length >= 0 && parts >= 1 && index >= 0 && index < parts, "even_split: ", length,
              " entries over ", parts, " parts, index ", index);
  EvenSplit s;
  s.part = (length + parts - 1) / parts;
  s.begin = std::min(index * s.part, length);
  s.real = std::min(length, s.begin + s.part) - s.begin;
  return s;
}

Box whole_box(const std::vector<int64_t>& shape) {
  return {std::vector<int64_t>(shape.size(), 0), shape};
}

Box intersect(const Box& a, const Box& b) {
  TITAN_CHECK(a.offset.size() == b.offset.size(), "intersect: boxes of ", a.offset.size(), " and ",
              b.offset.size(), " dimensions");
  Box out = a;
  for (size_t d = 0; d < a.offset.size(); ++d) {
    const int64_t begin = std::max(a.offset[d], b.offset[d]);
    const int64_t end = std::min(a.offset[d] + a.length[d], b.offset[d] + b.length[d]);
    out.offset[d] = begin;
    out.length[d] = std::max<int64_t>(0, end - begin);
  }
  return out;
}

namespace {

void check_entry(const TensorPlacement& p, const PlacedOn& on) {
  TITAN_CHECK(on.size >= 1 && on.index >= 0 && on.index < on.size, "placement ", describe(p),
              ": index ", on.index, " outside mesh dimension ", on.mesh_dim, " of size ", on.size);
  TITAN_CHECK(on.placement.dim < static_cast<int64_t>(p.global_shape.size()), "placement ",
              describe(p), ": a tensor of ", p.global_shape.size(), " dimensions has no dimension ",
              on.placement.dim);
}

}  // namespace

// Walks the entries, keeping per dimension where the local tensor starts in the global one
// (padding counted) and how long it is.
std::vector<int64_t> local_shape(const TensorPlacement& p) {
  std::vector<int64_t> extent = p.global_shape;
  for (const PlacedOn& on : p.on) {
    check_entry(p, on);
    if (!on.placement.is_shard()) continue;
    int64_t& e = extent[static_cast<size_t>(on.placement.dim)];
    e = even_split(e, on.size, on.index).part;
  }
  return extent;
}

Box local_box(const TensorPlacement& p) {
  // Per dimension: where the local tensor starts in the global one, its extent (padding
  // counted), and where the real entries of its ancestors end: a split's padding may reach past
  // its parent's piece, into another rank's entries, and is not real there.
  std::vector<int64_t> start(p.global_shape.size(), 0), extent = p.global_shape;
  std::vector<int64_t> real_end = p.global_shape;
  for (const PlacedOn& on : p.on) {
    check_entry(p, on);
    if (!on.placement.is_shard()) continue;
    const size_t d = static_cast<size_t>(on.placement.dim);
    const EvenSplit s = even_split(extent[d], on.size, on.index);
    real_end[d] = std::min(real_end[d], start[d] + extent[d]);
    start[d] += on.index * s.part;
    extent[d] = s.part;
  }
  Box box;
  for (size_t d = 0; d < start.size(); ++d) {
    const int64_t begin = std::min(start[d], real_end[d]);
    const int64_t end = std::min(start[d] + extent[d], real_end[d]);
    box.offset.push_back(begin);
    box.length.push_back(std::max<int64_t>(0, end - begin));
  }
  return box;
}

bool writes_piece(const TensorPlacement& p) {
  return std::all_of(p.on.begin(), p.on.end(), [](const PlacedOn& on) {
    return on.placement.is_shard() || on.placement.is_owned() || on.index == 0;
  });
}

bool writes_companion(const TensorPlacement& p) {
  return std::all_of(p.on.begin(), p.on.end(),
                     [](const PlacedOn& on) { return on.placement.is_owned() || on.index == 0; });
}

std::string describe(const TensorPlacement& p) {
  std::string out = "[";
  for (size_t i = 0; i < p.on.size(); ++i) {
    const PlacedOn& on = p.on[i];
    out += (i ? ", " : "") + on.mesh_dim + ": " +
           (on.placement.is_shard()   ? "Shard(" + std::to_string(on.placement.dim) + ")"
            : on.placement.is_owned() ? std::string("Owned")
                                      : std::string("Replicate"));
  }
  return out + "]";
}

std::string describe(const Box& box) {
  std::string out = "[";
  for (size_t d = 0; d < box.offset.size(); ++d) {
    out += (d ? ", " : "") + std::to_string(box.offset[d]) + ":" +
           std::to_string(box.offset[d] + box.length[d]);
  }
  return out + "]";
}

}  // namespace titan
