"""Data-parallel scaling on the CPU, in one run: the debug model trained by 1 process and by 2
(FSDP, and DDP for comparison) on the same global batch, with Gloo. Prints the step time, the
tokens/s of the whole job, the peak memory of rank 0 and the model state (parameters +
gradients + optimizer state) each rank holds, which FSDP should bring close to 1/N.

On a 2-core machine each rank gets one core (OMP_NUM_THREADS=1), and the single process both:
the comparison is what a user of a small machine sees, not the scaling of a multi-GPU node.

usage: build/python bench/distributed_scaling.py [--steps 8] [--warmup 2] [--batch 4] [--seq 256]
                                                 [--config qwen3_debugmodel] [--append-results]
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


def run(nproc, layout_args, args, dump):
    threads = max(1, (os.cpu_count() or 1) // nproc)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--no-python",
           f"--nproc_per_node={nproc}", "--rdzv_backend", "c10d", "--rdzv_endpoint=localhost:0",
           "--role", "rank", "--tee", "3", str(TITAN), "train", "--module", "qwen3",
           "--config", args.config, "--training.steps", str(args.steps),
           "--training.seq_len", str(args.seq), "--training.local_batch_size",
           str(args.batch // nproc), "--metrics.log_freq", "1",
           "--training.dataset_path", str(REPO / "assets" / "corpus" / "python_stdlib.jsonl"),
           "--model.hf_assets_path", str(REPO / "assets" / "qwen3-tokenizer"),
           "--job.dump_folder", str(dump), *layout_args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    metrics = [json.loads(line) for line in (dump / "metrics.jsonl").read_text().splitlines()]
    steady = [m for m in metrics if m["step"] > args.warmup]
    tokens_per_rank = args.batch // nproc * args.seq
    step_seconds = sum(tokens_per_rank / m["tps"] for m in steady) / len(steady)
    state = re.findall(r"rank (\d+) of \d+ holds ([\d.]+) MiB of parameters", proc.stdout)
    state_mib = max(4 * float(mib) for _, mib in state)  # params + grads + 2 moments
    return {"ranks": nproc, "step_s": step_seconds, "job_tps": args.batch * args.seq / step_seconds,
            "peak_gib_rank0": max(m["memory_gib"] for m in metrics), "state_mib_per_rank": state_mib,
            "loss": metrics[-1]["loss"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--config", default="qwen3_debugmodel")
    ap.add_argument("--append-results", action="store_true")
    args = ap.parse_args()
    cases = [
        ("1 process", 1, []),
        ("FSDP, 2 ranks", 2, []),
        ("DDP, 2 ranks", 2, ["--parallelism.data_parallel_replicate_degree", "2",
                             "--parallelism.data_parallel_shard_degree", "1"]),
    ]
    rows = []
    with tempfile.TemporaryDirectory(prefix="titan-scaling-") as tmp:
        for name, nproc, layout in cases:
            r = run(nproc, layout, args, Path(tmp) / name.replace(" ", "_").replace(",", ""))
            r["case"] = name
            rows.append(r)
            print(json.dumps(r), flush=True)
    base = rows[0]
    table = ["| layout | step time | job tokens/s | vs 1 process | model state per rank | "
             "peak RSS rank 0 | final loss |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        table.append(f"| {r['case']} | {r['step_s']:.3f} s | {r['job_tps']:,.0f} | "
                     f"{r['job_tps'] / base['job_tps']:.2f}x | {r['state_mib_per_rank']:.0f} MiB "
                     f"({r['state_mib_per_rank'] / base['state_mib_per_rank']:.2f}) | "
                     f"{r['peak_gib_rank0']:.2f} GiB | {r['loss']:.5f} |")
    print("\n".join(table))
    if args.append_results:
        with open(REPO / "bench" / "RESULTS.md", "a") as out:
            out.write(f"\n### Data-parallel scaling ({args.config}, batch {args.batch} x "
                      f"{args.seq}, {args.steps} steps, {os.cpu_count()} cores)\n\n")
            out.write("\n".join(table) + "\n")


if __name__ == "__main__":
    main()
