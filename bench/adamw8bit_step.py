"""One AdamW8bit optimizer step on the CPU, on the same tensors: titan's fused kernel and the
reference (bitsandbytes' sequence of ops in C++), bitsandbytes.optim.AdamW8bit's own CPU step,
and titan's fused float32 AdamW (at::_fused_adamw_) for scale. Float32 parameters split into
--tensors equal tensors, OMP_NUM_THREADS threads (default: all cores); the step time is the
least of --reps steps after a warm-up, with the process's CPU time per step beside it (steadier
on a busy machine).

usage: build/python bench/adamw8bit_step.py [--numel 50000000] [--tensors 8] [--reps 5]
                                            [--write-results]
"""
import argparse
import datetime
import json
import os
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "build" / "bin" / "titan_optimizer_step_bench"


def bitsandbytes_step(numel, tensors, reps, threads):
    import bitsandbytes as bnb
    import torch

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    each = numel // tensors
    params = [torch.nn.Parameter(torch.randn(each) * 0.02) for _ in range(tensors)]
    for p in params:
        p.grad = torch.randn(each) * 1e-3
    opt = bnb.optim.AdamW8bit(params, lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    wall, cpu = [], []
    for r in range(reps + 1):
        start, start_cpu = time.perf_counter(), time.process_time()
        opt.step()
        if r > 0:
            wall.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
    return {"impl": "bitsandbytes", "min_s": min(wall), "median_s": sorted(wall)[len(wall) // 2],
            "cpu_s": min(cpu)}


def titan_steps(numel, tensors, reps, env):
    out = subprocess.run([str(BENCH), "--numel", str(numel), "--tensors", str(tensors),
                          "--reps", str(reps)], capture_output=True, text=True, env=env,
                         check=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


NAMES = {"fused8bit": "titan AdamW8bit, fused kernel",
         "reference8bit": "titan AdamW8bit, reference (bitsandbytes' ops in C++)",
         "bitsandbytes": "bitsandbytes.optim.AdamW8bit (CPU)",
         "fused32": "titan AdamW float32, fused (at::_fused_adamw_)"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--numel", type=int, default=50_000_000)
    ap.add_argument("--tensors", type=int, default=8)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args()
    threads = int(os.environ.get("OMP_NUM_THREADS", os.cpu_count()))
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    rows = titan_steps(args.numel, args.tensors, args.reps, env)
    rows.insert(2, bitsandbytes_step(args.numel, args.tensors, args.reps, threads))
    fused = next(r for r in rows if r["impl"] == "fused8bit")
    lines = [f"{args.numel / 1e6:.0f}M float32 parameters in {args.tensors} tensors, {threads} "
             f"threads, least of {args.reps} steps after a warm-up (median beside it), and the "
             f"least CPU time of the process per step.", "",
             "| step | time | median | CPU time | time / titan's fused AdamW8bit |",
             "|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {NAMES[r['impl']]} | {r['min_s'] * 1e3:.0f} ms | "
                     f"{r['median_s'] * 1e3:.0f} ms | {r['cpu_s'] * 1e3:.0f} ms | "
                     f"{r['min_s'] / fused['min_s']:.2f} |")
    text = "\n".join(lines)
    print(text)
    if args.write_results:
        results = REPO / "bench" / "RESULTS.md"
        heading = "## AdamW8bit optimizer step on the CPU (`adamw8bit_step.py`"
        section = f"{heading}, {datetime.date.today()})\n\n{text}\n\n"
        body = results.read_text()
        start = body.find(heading)
        if start >= 0:
            end = body.find("\n## ", start + len(heading))
            body = body[:start] + section + (body[end + 1:] if end >= 0 else "")
        else:
            body = body.rstrip("\n") + "\n\n" + section
        results.write_text(body)


if __name__ == "__main__":
    main()
