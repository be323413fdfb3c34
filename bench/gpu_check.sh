#!/usr/bin/env bash
# The one prepared call on the GPU machine (it has torch in python3 but no package registry):
# build with CUDA against python3's torch, run the GPU checks (the fused kernels against
# reference, the three training paths), the kernel and throughput benchmarks, and print a short
# table last. Logs go to $OUT (or the first argument).
#   bash bench/gpu_check.sh [OUT_DIR]       (carry build-deps/ and assets/ to that machine)
set -u -o pipefail
OUT=${1:-${OUT:-/tmp/titan-gpu}}
mkdir -p "$OUT"
PY=${TITAN_PYTHON:-python3}
B=build-cuda
start=$(date +%s)
stamp() { echo "[gpu_check +$(( $(date +%s) - start ))s] $*"; }

DEPS=""
[ -d build-deps ] && DEPS="-DTITAN_DEPS_PREFIX=$PWD/build-deps"
stamp "configure"
# The H200's architecture, rather than asking torch to detect the GPU at configure time.
export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0a}
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DTITAN_CUDA=ON \
  -DTITAN_PYTHON_EXE="$(command -v $PY)" $DEPS > "$OUT/configure.log" 2>&1 \
  || { tail -40 "$OUT/configure.log"; exit 1; }
stamp "build"
cmake --build $B -j "$(nproc)" --target titan titan_train_tests titan_models_tests \
  titan_kernels_tests titan_kernel_bench \
  > "$OUT/build.log" 2>&1 || { grep -E "error|FAILED" "$OUT/build.log" | head -30; tail -20 "$OUT/build.log"; exit 1; }

declare -A result
stamp "unit tests (train, models) on the CUDA build"
OMP_NUM_THREADS=4 $B/bin/titan_train_tests > "$OUT/train_tests.log" 2>&1 && result[unit_train]=pass || result[unit_train]=FAIL
OMP_NUM_THREADS=4 $B/bin/titan_models_tests > "$OUT/models_tests.log" 2>&1 && result[unit_models]=pass || result[unit_models]=FAIL

stamp "fused kernels against reference on CUDA (fp32 and bf16 in each test)"
$B/bin/titan_kernels_tests --gtest_filter='*Fused*:*Nf4*' > "$OUT/kernels_tests.log" 2>&1
k_pass=$(grep -c '^\[       OK \].*cuda' "$OUT/kernels_tests.log")
k_fail=$(grep -c '^\[  FAILED  \].*cuda' "$OUT/kernels_tests.log")
k_skip=$(grep -c '^\[  SKIPPED \].*cuda' "$OUT/kernels_tests.log")
result[kernels_cuda]="$k_pass passed, $k_fail failed, $k_skip skipped"
grep -E '^\[  FAILED  \]|Failure|result' "$OUT/kernels_tests.log" | head -20

stamp "kernel benchmark on CUDA (fused vs reference, forward + backward)"
for dt in bfloat16 float32; do
  $B/bin/titan_kernel_bench --device cuda --dtype $dt --sizes debug,30b-a3b --reps 20 \
    > "$OUT/kernel_bench_$dt.md" 2>&1 || echo "kernel bench $dt FAILED: $(tail -2 "$OUT/kernel_bench_$dt.md")"
  cat "$OUT/kernel_bench_$dt.md"
done

stamp "the three training paths on CUDA, 20 steps each (bf16 compute, fp32 master weights)"
declare -A path_config=(
  [path1_transformers]="transformers_modeling_backend transformers_modeling_backend_debugmodel_moe"
  [path2_native]="qwen3 qwen3_debugmodel_moe"
  [path3_kernels]="qwen3 titan_kernels_qwen3_debugmodel")
for p in path1_transformers path2_native path3_kernels; do
  read -r module config <<< "${path_config[$p]}"
  if $B/bin/titan train --module $module --config $config --training.device cuda \
      --training.steps 20 --training.local_batch_size 8 --training.seq_len 512 --metrics.log_freq 10 \
      --training.mixed_precision_param bfloat16 --job.dump_folder "$OUT/$p" > "$OUT/$p.log" 2>&1; then
    result[$p]=$(grep '^step: 20' "$OUT/$p.log" | head -1)
  else
    result[$p]="FAIL: $(grep -m1 -i error "$OUT/$p.log")"
  fi
  grep '^\[override\]' "$OUT/$p.log"
done

stamp "LoRA and QLoRA (nf4_linear's CUDA kernel) on CUDA, 20 steps each (bf16 compute)"
for kind in lora qlora; do
  if $B/bin/titan train --module qwen3 --config qwen3_debugmodel_$kind --training.device cuda \
      --training.steps 20 --training.local_batch_size 8 --training.seq_len 512 --metrics.log_freq 10 \
      --training.mixed_precision_param bfloat16 --job.dump_folder "$OUT/$kind" > "$OUT/$kind.log" 2>&1; then
    result[$kind]=$(grep '^step: 20' "$OUT/$kind.log" | head -1)
  else
    result[$kind]="FAIL: $(grep -m1 -i error "$OUT/$kind.log")"
  fi
done

stamp "reference vs kernels path, 50 bf16 steps on CUDA: losses within bf16 tolerance"
for p in ref50:qwen3_debugmodel_moe kern50:titan_kernels_qwen3_debugmodel; do
  $B/bin/titan train --module qwen3 --config ${p#*:} --training.device cuda --training.steps 50 \
    --training.local_batch_size 8 --training.seq_len 512 --metrics.log_freq 1 \
    --training.mixed_precision_param bfloat16 --job.dump_folder "$OUT/${p%%:*}" > "$OUT/${p%%:*}.log" 2>&1
done
result[paths_50_steps]=$($PY - "$OUT/ref50/metrics.jsonl" "$OUT/kern50/metrics.jsonl" <<'PYEOF' 2>&1 | tail -1
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(f)] for f in sys.argv[1:3])
assert len(a) == len(b) == 50, (len(a), len(b))
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b))
print(f"{'pass' if worst < 2e-2 else 'FAIL'}: max rel loss diff {worst:.2e} over 50 steps, last {a[-1]:.4f} / {b[-1]:.4f}")
PYEOF
)

stamp "debug model trains on CUDA (bf16 compute, fp32 master weights)"
if $B/bin/titan train --module qwen3 --config qwen3_debugmodel_moe --training.device cuda \
    --training.steps 30 --training.local_batch_size 8 --training.seq_len 512 --metrics.log_freq 10 \
    --optimizer.lr 2e-3 --job.dump_folder "$OUT/debug_moe" --checkpoint.last_save_in_hf \
    > "$OUT/debug_moe.log" 2>&1; then
  result[cuda_train_moe]=$(grep '^step: 30' "$OUT/debug_moe.log" | head -1)
else
  result[cuda_train_moe]="FAIL: $(tail -2 "$OUT/debug_moe.log" | tr '\n' ' ')"
fi
grep -E '^step' "$OUT/debug_moe.log" | head -4

stamp "CUDA export loads in transformers with equal logits (bf16 compute vs HF bf16)"
$PY - "$OUT/debug_moe/hf/step-30" "$B/bin/titan" > "$OUT/export_check.log" 2>&1 <<'PYEOF' && result[export_logits]=$(tail -1 "$OUT/export_check.log") || result[export_logits]="FAIL: $(tail -1 "$OUT/export_check.log")"
import subprocess, sys, tempfile, torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM
d, titan = sys.argv[1], sys.argv[2]
toks = [9707, 11, 1879, 0, 576, 3974, 13876, 38835, 34208, 916, 279, 15678]
m = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
with torch.no_grad():
    ref = m(torch.tensor([toks])).logits[0]
f = tempfile.mktemp(suffix=".safetensors")
subprocess.run([titan, "forward", "--model", d, "--tokens", ",".join(map(str, toks)), "--output", f], check=True)
ours = load_file(f)["logits"]
err = ((ours - ref).abs().max() / ref.abs().max()).item()
print(f"rel err fp32 {err:.2e}")
assert err < 1e-5
PYEOF

stamp "FSDP over Gloo with CPU tensors, 2 ranks (the multi-process path on a one-GPU machine)"
if OMP_NUM_THREADS=4 $PY -m torch.distributed.run --no-python --nproc_per_node=2 --rdzv_backend c10d \
    --rdzv_endpoint=localhost:0 --role rank --tee 3 $B/bin/titan train --module qwen3 \
    --config qwen3_debugmodel --training.device cpu --training.steps 5 --training.local_batch_size 2 \
    --training.seq_len 128 --metrics.log_freq 1 --job.dump_folder "$OUT/fsdp_cpu" \
    > "$OUT/fsdp_cpu.log" 2>&1; then
  result[fsdp_gloo_2]=$(grep '^\[rank0\]:step: 5' "$OUT/fsdp_cpu.log" | head -1)
else
  result[fsdp_gloo_2]="FAIL: $(grep -m1 error "$OUT/fsdp_cpu.log")"
fi

stamp "throughput: titan reference and kernels paths vs HF eager and HF compiled"
$PY bench/gpu_throughput.py --titan $B/bin/titan --steps 10 --out "$OUT" --profile \
  --results "$OUT/RESULTS_gpu.md" 2>&1 | tee "$OUT/throughput.log" | grep -v '^{' 

stamp "summary"
for k in "${!result[@]}"; do printf '%-16s %s\n' "$k" "${result[$k]}"; done
