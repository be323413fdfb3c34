"""The data loader's work per rank under data parallelism, in one run: titan trains the debug
model at dp = 1, 2 and 4 (FSDP, Gloo on the CPU) on the same global batch, with shared reading
(each rank tokenizes its share of the documents; the default) and without it (every rank reads
and tokenizes every document, as the loader did before; debug.shared_reading false). Prints, for
each case, the documents each rank tokenized (from its closing line) and the loader's wait per
step (data_loading_s of metrics.jsonl, rank 0, without prefetching so the wait is the work).

usage: build/python bench/per_rank_data.py [--steps 6] [--batch 8] [--seq 512] [--documents 20000]
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


def corpus(path, count):
    """Short prose documents (10-40 tokens), so that a step reads many of them."""
    words = ("the loader of every rank reads its share of the documents and all of them pack "
             "one stream of tokens cut into windows").split()
    with open(path, "w") as f:
        for i in range(count):
            text = " ".join(words[(i * 7 + j) % len(words)] for j in range(8 + i % 25))
            f.write(json.dumps({"text": f"{i}: {text}."}) + "\n")


def run(nproc, shared, args, data, dump):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--no-python",
           f"--nproc_per_node={nproc}", "--rdzv_backend", "c10d", "--rdzv_endpoint=localhost:0",
           "--role", "rank", "--tee", "3", str(TITAN), "train", "--module", "qwen3",
           "--config", "qwen3_debugmodel", "--training.steps", str(args.steps),
           "--training.seq_len", str(args.seq),
           "--training.local_batch_size", str(args.batch // nproc), "--metrics.log_freq", "1",
           "--training.prefetch_batches", "0", "--debug.shared_reading", str(shared).lower(),
           "--training.dataset_path", str(data),
           "--model.hf_assets_path", str(REPO / "assets" / "qwen3-tokenizer"),
           "--job.dump_folder", str(dump)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    read = [int(d) for _, d in
            re.findall(r"\[titan\] rank (\d+) of \d+ read (\d+) documents", proc.stdout)]
    metrics = [json.loads(line) for line in (dump / "metrics.jsonl").read_text().splitlines()]
    waits = [m["data_loading_s"] for m in metrics if m["step"] > 1]
    return {"dp": nproc, "shared": shared, "read_per_rank": read,
            "wait_ms": 1000 * sum(waits) / len(waits), "loss": metrics[-1]["loss"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--documents", type=int, default=20000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "short.jsonl"
        corpus(data, args.documents)
        rows = []
        for nproc in (1, 2, 4):
            for shared in ((True, False) if nproc > 1 else (True,)):
                rows.append(run(nproc, shared, args, data, Path(tmp) / f"d{nproc}{shared}"))
    alone = max(rows[0]["read_per_rank"])
    print(f"global batch {args.batch} x {args.seq}, {args.steps} steps, short documents; "
          f"one process reads {alone} documents")
    print("| dp | loader | documents tokenized per rank | of one process's | wait per step | loss |")
    print("|---:|---|---|---:|---:|---:|")
    for r in rows:
        mode = "shared reading" if r["shared"] else "every rank reads all (before)"
        share = max(r["read_per_rank"]) / alone
        print(f"| {r['dp']} | {mode} | {', '.join(map(str, r['read_per_rank']))} | {share:.2f} | "
              f"{r['wait_ms']:.2f} ms | {r['loss']:.5f} |")


if __name__ == "__main__":
    main()
