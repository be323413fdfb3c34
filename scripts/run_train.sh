#!/usr/bin/env bash
# Launches `titan train` under torchrun, as torchtitan's run_train.sh does. Environment:
#   NGPU         processes on this machine (default 1; on the CPU each is a rank using Gloo)
#   CONFIG_FILE  a TOML job file (torchtitan 0.1/0.2's way): `--job.config_file CONFIG_FILE`;
#                alone when it names the model ([model] name and flavor), or over MODULE/CONFIG
#                when those are set too
#   MODULE       config module (default qwen3; MODEL is taken as another name for it)
#   CONFIG       config function (default qwen3_debugmodel_default_job, the `make train` job)
#   LOG_RANK     local ranks whose output is shown (default 0; e.g. 0,1)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
NGPU=${NGPU:-1}
LOG_RANK=${LOG_RANK:-0}
MODULE=${MODULE:-${MODEL:-}}
# What names the job: the config file, the config function, or both.
JOB=()
if [ -n "${CONFIG_FILE:-}" ]; then
  if [ ! -f "$CONFIG_FILE" ]; then
    echo "error: CONFIG_FILE=$CONFIG_FILE: no such file (a TOML job file, as torchtitan's" \
         "run_train.sh takes)" >&2
    exit 2
  fi
  [ -n "$MODULE" ] && JOB+=(--module "$MODULE")
  [ -n "${CONFIG:-}" ] && JOB+=(--config "$CONFIG")
  JOB+=(--job.config_file "$CONFIG_FILE")
else
  JOB=(--module "${MODULE:-qwen3}" --config "${CONFIG:-qwen3_debugmodel_default_job}")
fi
# Threads per rank: the machine's cores shared by the ranks on it.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( $(nproc) / NGPU > 0 ? $(nproc) / NGPU : 1 ))}
TORCHRUN=${TORCHRUN:-$ROOT/build/bin/torchrun}
TITAN="$ROOT/build/bin/titan"

EXTRA=()
if [ "$NGPU" -gt 1 ]; then
  # Whether the arguments after the key set it (--key value or --key=value).
  given() { local key=$1; shift; printf '%s\n' "$@" | grep -q -- "^--$key\(=\|$\)"; }
  # The resolved job, as the arguments make it on one process.
  printed=$("$TITAN" configs "${JOB[@]}" "$@" --print)
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
  --tee 3 "$TITAN" train "${JOB[@]}" "$@" ${EXTRA[@]+"${EXTRA[@]}"}
