"""Per-rank model state and step time of the parallel layouts, in one run on the CPU: the debug
dense model and the debug MoE trained by 1 process and by 4 (Gloo) as FSDP 4, TP 2 x FSDP 2 and,
for the MoE, EP 2 x FSDP 2, on the same global batch. Prints each rank's model state
(parameters + gradients + AdamW's two moments, from its start-up line), its share of the whole
model's (expected 1/4 for all three layouts), the step time and its ratio to one process.

On a 2-core machine 4 ranks share 2 cores (OMP_NUM_THREADS=1 each): the step times show the
layouts' overheads against each other, not the speed-up of 4 devices.

usage: build/python bench/parallel_layouts.py [--steps 6] [--warmup 2] [--batch 4] [--seq 128]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TITAN = Path(os.environ.get("TITAN_BIN", REPO / "build" / "bin" / "titan"))
MODELS = {"dense": "qwen3_debugmodel", "moe": "qwen3_debugmodel_moe"}
LAYOUTS = [
    ("1 process", 1, []),
    ("FSDP 4", 4, []),
    ("TP 2 x FSDP 2", 4, ["--parallelism.tensor_parallel_degree", "2"]),
    ("EP 2 x FSDP 2", 4, ["--parallelism.expert_parallel_degree", "2"]),
]


def run(kind, nproc, layout, args, dump):
    env = dict(os.environ, OMP_NUM_THREADS=str(max(1, (os.cpu_count() or 1) // nproc)))
    tp = 2 if "--parallelism.tensor_parallel_degree" in layout else 1
    local_batch = args.batch * tp // nproc
    cmd = [sys.executable, "-m", "torch.distributed.run", "--no-python",
           f"--nproc_per_node={nproc}", "--rdzv_backend", "c10d", "--rdzv_endpoint=localhost:0",
           "--role", "rank", "--tee", "3", str(TITAN), "train", "--module", "qwen3",
           "--config", MODELS[kind], "--training.steps", str(args.steps),
           "--training.seq_len", str(args.seq), "--training.local_batch_size", str(local_batch),
           "--metrics.log_freq", "1", "--model.moe_load_balancing", "none",
           "--training.dataset_path", str(REPO / "assets" / "corpus" / "python_stdlib.jsonl"),
           "--model.hf_assets_path", str(REPO / "assets" / "qwen3-tokenizer"),
           "--job.dump_folder", str(dump), *layout]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    states = re.findall(r"optimizer state: ([\d.]+) MiB, ([\d.]+)% of the model's", proc.stdout)
    metrics = [json.loads(line) for line in (dump / "metrics.jsonl").read_text().splitlines()]
    steady = [m for m in metrics if m["step"] > args.warmup]
    tokens = local_batch * args.seq
    return {"state_mib": max(float(s) for s, _ in states),
            "share": max(float(p) for _, p in states),
            "step_s": sum(tokens / m["tps"] for m in steady) / len(steady),
            "loss": metrics[-1]["loss"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    args = ap.parse_args()
    print(f"global batch {args.batch} x {args.seq}, fp32, {args.steps} steps (mean of steps > "
          f"{args.warmup}); model state = parameters + gradients + 2 AdamW moments")
    print("| model | layout | state per rank (max) | share of the model | step | vs 1 process | last loss |")
    print("|---|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for kind in MODELS:
            base = None
            for name, nproc, layout in LAYOUTS:
                if name.startswith("EP") and kind == "dense":
                    continue
                r = run(kind, nproc, layout, args, Path(tmp) / f"{kind}{len(name)}{nproc}")
                base = base or r["step_s"]
                print(f"| {kind} | {name} | {r['state_mib']:.1f} MiB | {r['share']:.2f}% | "
                      f"{r['step_s']:.3f} s | {r['step_s'] / base:.2f}x | {r['loss']:.5f} |",
                      flush=True)


if __name__ == "__main__":
    main()
