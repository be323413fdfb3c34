#!/usr/bin/env bash
# Launches `titan train` under torchrun, as torchtitan's run_train.sh does. Environment:
#   NGPU      processes on this machine (default 1; on the CPU each is a rank using Gloo)
#   MODULE    config module (default qwen3)
#   CONFIG    config function (default qwen3_debugmodel_default_job, the `make train` job)
#   LOG_RANK  local ranks whose output is shown (default 0; e.g. 0,1)
# Extra arguments are passed on as overrides (e.g. --training.steps 50). For several machines
# run it on each with TORCHRUN_ARGS="--nnodes 2 --node_rank R --rdzv_endpoint HOST:PORT".
# It runs in the caller's directory: relative paths in the overrides, and the job's outputs
# (job.dump_folder), are the caller's; the built-in defaults are found beside the build.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
NGPU=${NGPU:-1}
MODULE=${MODULE:-qwen3}
CONFIG=${CONFIG:-qwen3_debugmodel_default_job}
LOG_RANK=${LOG_RANK:-0}
# Threads per rank: the machine's cores shared by the ranks on it.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( $(nproc) / NGPU > 0 ? $(nproc) / NGPU : 1 ))}
TORCHRUN=${TORCHRUN:-$ROOT/build/bin/torchrun}
# shellcheck disable=SC2086
exec $TORCHRUN --no-python --nproc_per_node="$NGPU" --rdzv_backend c10d \
  --rdzv_endpoint="localhost:0" ${TORCHRUN_ARGS:-} --local-ranks-filter "$LOG_RANK" --role rank \
  --tee 3 "$ROOT/build/bin/titan" train --module "$MODULE" --config "$CONFIG" "$@"
