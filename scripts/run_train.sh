#!/usr/bin/env bash
# Launches `titan train` under torchrun, as torchtitan's run_train.sh does. Environment:
#   NGPU      processes on this machine (default 1; on the CPU each is a rank using Gloo)
#   MODULE    config module (default qwen3)
#   CONFIG    config function (default qwen3_debugmodel_default_job, the `make train` job)
#   LOG_RANK  local ranks whose output is shown (default 0; e.g. 0,1)
# Extra arguments are passed on as overrides (e.g. --training.steps 50). For several machines
# run it on each with TORCHRUN_ARGS="--nnodes 2 --node_rank R --rdzv_endpoint HOST:PORT".
# With NGPU > 1 the job keeps the global batch it has on one process (its rows per step are
# split over the ranks: local_batch_size = global / NGPU, so the losses are the one-process
# ones) unless the arguments set a batch size, and writes to <job.dump_folder>-ngpuN unless they
# set job.dump_folder, so it neither resumes from nor overwrites the one-process run's outputs.
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
TITAN="$ROOT/build/bin/titan"

EXTRA=()
if [ "$NGPU" -gt 1 ]; then
  # Whether the arguments after the key set it (--key value or --key=value).
  given() { local key=$1; shift; printf '%s\n' "$@" | grep -q -- "^--$key\(=\|$\)"; }
  # The resolved job, as the arguments make it on one process.
  printed=$("$TITAN" configs --module "$MODULE" --config "$CONFIG" "$@" --print)
  value() { printf '%s\n' "$printed" | sed -n "s/^$1 = //p" | head -n 1 | tr -d '"'; }
  if ! given training.local_batch_size "$@" && ! given training.global_batch_size "$@"; then
    local_batch=$(value local_batch_size)
    global_batch=$(value global_batch_size)
    [ "$global_batch" = "-1" ] && global_batch=$local_batch
    if [ $((global_batch % NGPU)) -eq 0 ]; then
      EXTRA+=(--training.global_batch_size "$global_batch"
              --training.local_batch_size $((global_batch / NGPU)))
    else
      echo "[run_train] the global batch $global_batch does not split over NGPU=$NGPU ranks:" \
           "each rank takes $local_batch rows" >&2
    fi
  fi
  if ! given job.dump_folder "$@"; then
    EXTRA+=(--job.dump_folder "$(value dump_folder)-ngpu$NGPU")
  fi
fi
# shellcheck disable=SC2086
exec $TORCHRUN --no-python --nproc_per_node="$NGPU" --rdzv_backend c10d \
  --rdzv_endpoint="localhost:0" ${TORCHRUN_ARGS:-} --local-ranks-filter "$LOG_RANK" --role rank \
  --tee 3 "$TITAN" train --module "$MODULE" --config "$CONFIG" "$@" ${EXTRA[@]+"${EXTRA[@]}"}
