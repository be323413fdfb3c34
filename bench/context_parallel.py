"""Context parallelism on the CPU, in one run: the debug model (qwen3_debugmodel, float32) trained
on one row of 4k, 8k and 16k tokens by 1 process and by CP 2 and CP 4 (torchrun, Gloo, the
processes sharing this machine's cores), a few steps each. For every run: each rank's peak
resident memory (VmHWM, sampled from /proc), the same at a short row (the model state,
libraries and buffers that do not grow with the sequence), their difference (what the sequence
costs a rank: activations, the gathered keys and values, the attention's pieces), the step time
(median of the steps after the first) and the losses, which must equal CP 1's at each length.

On a 2-core machine CP 2 and CP 4 share the 2 cores (OMP_NUM_THREADS = cores / processes): the
step times show the overheads, not the speed-up of more devices.

usage: build/python bench/context_parallel.py [--lengths 4096,8192,16384] [--cp 1,2,4]
                                              [--steps 3] [--write-results]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TITAN = Path(os.environ.get("TITAN_BIN", REPO / "build" / "bin" / "titan"))
SHORT = 256  # the row whose peak is each layout's base
VOCAB = 151936


def logits_buffer_mib(rows):
    """The fused cross-entropy's logits buffer for a rank's `rows` tokens, kept from one call to
    the next (kernels/cpu/cross_entropy.cpp: equal chunks of at most 2^27 float32 logits): a
    cost of the loss that stops growing at 512 MiB, not an activation."""
    most = max(1, min((1 << 27) // VOCAB, rows))
    chunks = -(-rows // most)
    return -(-rows // chunks) * VOCAB * 4 / 2**20


def descendants(pid):
    """Every process below `pid` (torchrun's agent and its workers)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            children = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        for c in map(int, children):
            out.append(c)
            todo.append(c)
    return out


class PeakSampler(threading.Thread):
    """The peak resident memory (VmHWM, kB) of every titan process under a torchrun, by pid."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peaks, self.done = pid, {}, False

    def run(self):
        while not self.done:
            for child in descendants(self.pid):
                try:
                    status = Path(f"/proc/{child}/status").read_text()
                    cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
                except OSError:
                    continue
                if b"titan" not in cmdline.split(b"\0")[0]:
                    continue
                m = re.search(r"VmHWM:\s+(\d+)", status)
                if m:
                    self.peaks[child] = max(self.peaks.get(child, 0), int(m.group(1)))
            time.sleep(0.05)


def run_sampled(cmd, env):
    """Runs `cmd` to its end while sampling its processes' memory; returns the sampler (its
    `peaks`). A failed run ends the bench with its output."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    sampler = PeakSampler(proc.pid)
    sampler.start()
    stdout, stderr = proc.communicate()
    sampler.done = True
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{stdout[-2000:]}\n{stderr[-2000:]}")
    return sampler


def run(seq, cp, steps, dump):
    threads = max(1, (os.cpu_count() or 1) // cp)
    # glibc's default mmap threshold: titan otherwise keeps freed large blocks in its heap for
    # reuse (common/heap_reuse.h), and the high-water mark would then count fragmentation, not
    # the memory a rank holds at once.
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MALLOC_MMAP_THRESHOLD_="131072")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--no-python",
           f"--nproc_per_node={cp}", "--rdzv_backend", "c10d", "--rdzv_endpoint=localhost:0",
           "--role", "rank", "--tee", "3", str(TITAN), "train", "--module", "qwen3",
           "--config", "qwen3_debugmodel", "--training.steps", str(steps),
           "--training.seq_len", str(seq), "--training.local_batch_size", "1",
           "--metrics.log_freq", "1", "--parallelism.context_parallel_degree", str(cp),
           "--training.dataset_path", str(REPO / "assets" / "corpus" / "python_stdlib.jsonl"),
           "--model.hf_assets_path", str(REPO / "assets" / "qwen3-tokenizer"),
           "--job.dump_folder", str(dump)]
    sampler = run_sampled(cmd, env)
    metrics = [json.loads(line) for line in (dump / "metrics.jsonl").read_text().splitlines()]
    # tps is per device: a rank's seq / cp tokens a step.
    step_s = [seq / cp / m["tps"] for m in metrics[1:]] or [seq / cp / metrics[0]["tps"]]
    peaks = sorted(sampler.peaks.values(), reverse=True)[:cp]
    return {"peak_mib": [p / 1024 for p in peaks], "step_s": statistics.median(step_s),
            "losses": [m["loss"] for m in metrics]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lengths", default="4096,8192,16384")
    ap.add_argument("--cp", default="1,2,4")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--write-results", action="store_true",
                    help="append the table to bench/RESULTS.md")
    args = ap.parse_args()
    lengths = [int(x) for x in args.lengths.split(",")]
    degrees = [int(x) for x in args.cp.split(",")]
    lines = [f"debug model (hidden 256, 4 layers, 8 heads / 4 kv heads of 64), float32, one row, "
             f"{args.steps} steps, {os.cpu_count()} cores shared by the ranks. Peak = max over "
             f"ranks of VmHWM; base = the same layout at {SHORT} tokens; sequence = peak - base "
             f"(glibc's default mmap threshold, so freed blocks are returned); logits = the growth of the "
             f"loss's logits buffer from the base (computed from its chunk rule); activations = "
             f"sequence - logits (the layers' saved tensors, gathered K/V, attention pieces); loss diff = max relative "
             f"difference of the {args.steps} losses from CP 1's.", "",
             "| tokens | CP | peak per rank | base | sequence per rank | logits | activations per "
             "rank | vs CP 1 | step | loss diff vs CP 1 |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    print("\n".join(lines), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        base = {cp: max(run(SHORT * cp, cp, 2, Path(tmp) / f"base{cp}")["peak_mib"])
                for cp in degrees}
        for seq in lengths:
            first = None
            for cp in degrees:
                r = run(seq, cp, args.steps, Path(tmp) / f"s{seq}cp{cp}")
                peak = max(r["peak_mib"])
                sequence = peak - base[cp]
                logits = logits_buffer_mib(seq // cp) - logits_buffer_mib(SHORT)
                activations = sequence - logits
                first = first or (activations, r["losses"])
                diff = max(abs(a - b) / abs(b) for a, b in zip(r["losses"], first[1]))
                line = (f"| {seq} | {cp} | {peak:.0f} MiB | {base[cp]:.0f} MiB | "
                        f"{sequence:.0f} MiB | {logits:.0f} MiB | {activations:.0f} MiB | "
                        f"{activations / first[0]:.2f}x | {r['step_s']:.2f} s | {diff:.1e} |")
                print(line, flush=True)
                lines.append(line)
    if args.write_results:
        with (REPO / "bench" / "RESULTS.md").open("a", encoding="utf-8") as f:
            f.write("\n## Context parallelism: memory per rank against sequence length "
                    "(`bench/context_parallel.py`)\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
