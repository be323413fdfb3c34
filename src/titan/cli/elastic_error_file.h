// torchrun's error file: torchrun gives every worker a path in TORCHELASTIC_ERROR_FILE and,
// when a worker fails, prints what that file holds in its failure summary (else
// "error_file: <N/A>" and a pointer to its docs, with the worker's own message scrolled away).
// Python workers write it through torch.distributed.elastic's @record; titan writes the same
// JSON for the error it exits with, so the summary shows titan's "error: ..." line.
#pragma once

#include <string>

namespace titan::cli {

// Writes {"message": {"message": ..., "extraInfo": {"py_callstack": "error: " + message,
// "timestamp": ...}}} to $TORCHELASTIC_ERROR_FILE (atomically); does nothing when it is unset or
// empty, and never throws (the error being reported matters more).
void write_elastic_error_file(const std::string& message);

}  // namespace titan::cli
