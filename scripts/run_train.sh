#!/usr/bin/env bash
# The embedded default job of `make train`: a small Qwen3 trained on the corpus assembled at
# set-up, with the real Qwen3 tokenizer, ending with a Hugging Face export.
# Extra arguments are passed on as overrides (e.g. --training.steps 50).
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
exec build/bin/titan train --module qwen3 --config qwen3_debugmodel_default_job "$@"
