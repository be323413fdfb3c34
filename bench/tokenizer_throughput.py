"""Tokenizer throughput: `titan encode --jsonl` against Hugging Face `tokenizers` on the same
corpus (default assets/corpus/python_stdlib.jsonl), printing MB/s of UTF-8 text and the ratios.

titan is timed as a whole process and again with empty input; the difference is the encoding
time alone (start-up, mostly loading libtorch and tokenizer.json, is shown apart). HF is timed in
process: a single-threaded encode loop, and encode_batch (which uses all cores through Rayon).
It also checks that both give the same ids for every document.

usage: build/python bench/tokenizer_throughput.py [--corpus FILE] [--titan BIN] [--tokenizer DIR]
"""
import argparse
import json
import os
import subprocess
import time
from pathlib import Path

from tokenizers import Tokenizer

REPO = Path(__file__).resolve().parents[1]


def timed_run(cmd, payload):
    start = time.perf_counter()
    proc = subprocess.run(cmd, input=payload, capture_output=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr.decode()}")
    return elapsed, proc.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=REPO / "assets/corpus/python_stdlib.jsonl")
    parser.add_argument("--titan", default=os.environ.get("TITAN_BIN", REPO / "build/bin/titan"))
    parser.add_argument("--tokenizer", default=REPO / "assets/qwen3-tokenizer")
    parser.add_argument("--repeats", type=int, default=3, help="best of N runs")
    args = parser.parse_args()

    payload = Path(args.corpus).read_bytes()
    texts = [json.loads(line)["text"] for line in payload.decode().splitlines() if line.strip()]
    megabytes = sum(len(t.encode()) for t in texts) / 1e6
    print(f"corpus: {args.corpus}: {len(texts)} documents, {megabytes:.2f} MB of text")

    cmd = [str(args.titan), "encode", "--tokenizer", str(args.tokenizer), "--jsonl"]
    startup = min(timed_run(cmd, b"")[0] for _ in range(args.repeats))
    runs = [timed_run(cmd, payload) for _ in range(args.repeats)]
    total = min(r[0] for r in runs)
    titan_ids = [json.loads(line) for line in runs[0][1].decode().split("\n")[:-1]]
    titan_encode = max(total - startup, 1e-9)

    start = time.perf_counter()
    hf = Tokenizer.from_file(str(Path(args.tokenizer) / "tokenizer.json"))
    hf_load = time.perf_counter() - start
    hf_loop = float("inf")
    for _ in range(args.repeats):
        start = time.perf_counter()
        hf_ids = [hf.encode(t).ids for t in texts]
        hf_loop = min(hf_loop, time.perf_counter() - start)
    hf_batch = float("inf")
    for _ in range(args.repeats):
        start = time.perf_counter()
        hf.encode_batch(texts)
        hf_batch = min(hf_batch, time.perf_counter() - start)

    same = sum(a == b for a, b in zip(titan_ids, hf_ids))
    print(f"ids identical for {same}/{len(texts)} documents")
    rows = [
        ("titan encode --jsonl (encoding only)", titan_encode),
        ("titan encode --jsonl (whole process)", total),
        ("HF tokenizers encode loop (1 thread)", hf_loop),
        (f"HF tokenizers encode_batch ({os.cpu_count()} cores)", hf_batch),
    ]
    for name, seconds in rows:
        print(f"{name:48s} {megabytes / seconds:8.2f} MB/s  ({seconds:.3f} s)")
    print(f"start-up: titan process {startup:.3f} s, HF Tokenizer.from_file {hf_load:.3f} s")
    print(f"ratio titan/HF loop:  {hf_loop / titan_encode:.2f}x")
    print(f"ratio titan/HF batch: {hf_batch / titan_encode:.2f}x")
    if same != len(texts):
        raise SystemExit("token ids differ from HF")


if __name__ == "__main__":
    main()
