// Context parallelism on the Transformers backend (docs/transformers_backend.md, "Context
// parallelism"): Transformers' attention goes through titan's context parallel attention (the
// keys and values all-gathered over cp, titan's context_attention op with the global places of
// this rank's queries and the rows' document ids), registered with Transformers' attention
// interface (context_attention.py). No family code is patched.
#pragma once

#include <cstdint>

#include "titan/models/parallel_context.h"
#include "titan/transformers_backend/transformers_model.h"

namespace titan::transformers_backend {

// From the next forward on, `model` attends through `parallel`'s context parallel attention
// with the context_attention kernel for its device and compute dtype. Throws naming the family
// and the reason when it cannot (context_attention.py, refusal).
void apply_context_parallel(TransformersModel& model, models::ParallelContext& parallel,
                            int64_t seq_len);

}  // namespace titan::transformers_backend
