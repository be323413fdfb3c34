// Where a tensor lies across ranks: the vocabulary that FSDP, tensor and expert parallelism,
// checkpoints and the Hugging Face import/export share (PyTorch DTensor's placements, without
// the tensor). Torch-free, so it is unit-tested on its own (docs/distributed.md, "Placements").
//
// A tensor has a global shape and is laid over a list of mesh dimensions, each a process group
// ("dp_shard", "tp", "ep", ...). On each it is either replicated (every rank of the dimension
// holds the same values) or sharded on one tensor dimension, or owned: held whole by this
// coordinate alone, the other coordinates holding other tensors (a pipeline stage's tensors
// on pp; each stage writes its own to checkpoints). The list is in application order:
// each entry splits what the entries before it left on this rank. So tensor parallelism then
// FSDP on dim 0 (a column-parallel weight) is [tp: Shard(0), dp_shard: Shard(0)]: the TP rank's
// rows, split again by FSDP.
//
// A split is even with zero padding, as the collectives need equal pieces: a length L over P
// ranks gives every rank ceil(L / P) entries, the last ones padded (possibly all padding). The
// padding of a split is split too by a later entry; the real data always sits at the start of
// the local tensor. The box of a rank is the real part: per dimension, its offset in the global
// tensor and its length.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace titan {

struct Placement {
  static constexpr int64_t kOwned = -2;
  int64_t dim = -1;  // the tensor dimension split; -1: replicated; kOwned: owned

  static Placement replicate() { return {}; }
  static Placement shard(int64_t dim) { return {dim}; }
  static Placement owned() { return {kOwned}; }
  bool is_shard() const { return dim >= 0; }
  bool is_owned() const { return dim == kOwned; }
  bool operator==(const Placement& other) const { return dim == other.dim; }
};

// One mesh dimension a tensor is laid over, as this rank sees it.
struct PlacedOn {
  std::string mesh_dim;  // the group's name
  int64_t size = 1;      // ranks in it
  int64_t index = 0;     // this rank's place in it
  Placement placement;
};

struct TensorPlacement {
  std::vector<int64_t> global_shape;
  std::vector<PlacedOn> on;  // application order (see above)

  // Whole on every rank: no entry, or replicated on every one.
  bool whole() const;
  // The mesh dimensions the tensor is sharded over, in application order.
  std::vector<std::string> sharded_over() const;
  // Appends one more mesh dimension (it splits what is left on this rank).
  TensorPlacement then(const PlacedOn& more) const;
};

// A box of a tensor: per dimension, the offset of the first entry and the number of entries.
// A 0-dim tensor's box has no dimensions and one entry.
struct Box {
  std::vector<int64_t> offset;
  std::vector<int64_t> length;

  int64_t numel() const;
  bool empty() const { return numel() == 0; }
  bool operator==(const Box& other) const {
    return offset == other.offset && length == other.length;
  }
};

// The even split of `length` entries over `parts` ranks, for rank `index`.
struct EvenSplit {
  int64_t part = 0;   // entries every rank holds (padding included)
  int64_t begin = 0;  // first entry of this rank's part
  int64_t real = 0;   // entries of the part that are not padding
};
EvenSplit even_split(int64_t length, int64_t parts, int64_t index);

Box whole_box(const std::vector<int64_t>& shape);
// The entries both boxes hold (lengths 0 where they do not meet).
Box intersect(const Box& a, const Box& b);

// The local tensor's shape, padding included (the same on every rank of each dimension).
std::vector<int64_t> local_shape(const TensorPlacement& placement);
// This rank's real entries, in global coordinates; they sit at the local tensor's origin.
Box local_box(const TensorPlacement& placement);
// Whether this rank writes its piece (to checkpoints): the first rank of every dimension the
// tensor is replicated over, so that the pieces written tile the tensor exactly once.
bool writes_piece(const TensorPlacement& placement);
// Whether this rank writes a tensor that is whole wherever `placement`'s tensor lies (its
// optimizer step counter): the first rank of every dimension but those it is owned on.
bool writes_companion(const TensorPlacement& placement);

// "[tp: Shard(0), dp_shard: Shard(0)]", for messages and the startup log.
std::string describe(const TensorPlacement& placement);
std::string describe(const Box& box);

}  // namespace titan
