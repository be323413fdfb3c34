// Collectives as autograd operations, for the parallelisms that run inside the forward: tensor
// parallelism's regions (Megatron's f and g, sequence parallelism's all-gather and
// reduce-scatter) and expert parallelism's all-to-all. Each backward is the collective that
// undoes the forward's (the gradient of an all-gather is a reduce-scatter, and so on). On a
// group of one every function is the identity.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "titan/distributed/group.h"

namespace titan::distributed {

// The identity; the gradient is summed over `group` (f: before column-parallel linears).
at::Tensor copy_to_group(const at::Tensor& x, const std::shared_ptr<Group>& group);
// Summed over `group`; the gradient passes unchanged (g: after row-parallel linears).
at::Tensor sum_over_group(const at::Tensor& x, const std::shared_ptr<Group>& group);
// Every member's x concatenated on `dim`, in rank order; the gradient is summed over the group
// and this member's slice kept (sequence parallelism's entry).
at::Tensor all_gather_along(const at::Tensor& x, int64_t dim, const std::shared_ptr<Group>& group);
// Summed over the group and split on `dim` (which the group's size must divide), this member's
// slice kept; the gradient is all-gathered (sequence parallelism's exit).
at::Tensor reduce_scatter_along(const at::Tensor& x, int64_t dim,
                                const std::shared_ptr<Group>& group);
// This member's slice of x (the same on every member) on `dim`, which the group's size must
// divide; the gradient is all-gathered (every member's slice of it).
at::Tensor split_along(const at::Tensor& x, int64_t dim, const std::shared_ptr<Group>& group);
// Every member's x concatenated on `dim`; the gradient (the same on every member) is split,
// this member's slice kept.
at::Tensor gather_split_along(const at::Tensor& x, int64_t dim,
                              const std::shared_ptr<Group>& group);
// The all-to-all of rows of kernels::ExpertGroup: send[m] rows to member m, receive[m] from it.
at::Tensor all_to_all_rows(const at::Tensor& rows, const std::vector<int64_t>& receive,
                           const std::vector<int64_t>& send, const std::shared_ptr<Group>& group);

}  // namespace titan::distributed
