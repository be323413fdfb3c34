"""The data pipeline against its peers, in one run:

1. Tokenizer throughput on one corpus (default assets/corpus/python_stdlib.jsonl, Python
   sources): titan (`titan tokenize` into token shards, at 1 thread and at every core) against
   Hugging Face `tokenizers` (an encode loop on 1 thread, encode_batch on every core) and
   `bpe-qwen` (a Rust BPE specialised for Qwen: an encode loop, encode_batch_parallel). MB/s of
   UTF-8 text and tokens/s, best of N; the ids of all three are checked identical. titan runs as a
   process: its start-up (loading libtorch and tokenizer.json) is timed on a one-line input and
   shown apart, and subtracted. The Python peers are timed in process, loading shown apart.
2. The loader's wait per step: `titan train` of the debug model with training.prefetch_batches
   0 (batches read, tokenized and packed on the training thread) and 2 (a background thread),
   from metrics.jsonl's data_loading_s (the time next() took), mean over the steps after the first.

usage: build/python bench/data_pipeline.py [--corpus FILE] [--repeats 3] [--steps 20]
"""
import argparse
import atexit
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

REPO = Path(__file__).resolve().parents[1]
EOS = "<|endoftext|>"


def timed(cmd):
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed:\n{proc.stderr[-3000:]}")
    return elapsed


def bpe_qwen_folder(tokenizer_dir, out):
    """bpe-qwen reads vocab.json + merges.txt: written from tokenizer.json's BPE model."""
    model = json.loads((Path(tokenizer_dir) / "tokenizer.json").read_text())["model"]
    out.mkdir(parents=True, exist_ok=True)
    (out / "vocab.json").write_text(json.dumps(model["vocab"], ensure_ascii=False))
    with open(out / "merges.txt", "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for m in model["merges"]:
            f.write((" ".join(m) if isinstance(m, list) else m) + "\n")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (out / name).write_bytes((Path(tokenizer_dir) / name).read_bytes())
    return out


def shard_ids(prefix):
    """The ids of `titan tokenize` shards, one list per document (eos dropped)."""
    meta = json.loads(prefix.with_suffix(".json").read_text())
    docs = []
    for shard in meta["shards"]:
        raw = (prefix.parent / shard["file"]).read_bytes()
        # README "Token shards": magic, u32 version, u32 id width, u64 tokens, u64 documents.
        width = int(np.frombuffer(raw, dtype="<u4", count=1, offset=12)[0])
        tokens, count = (int(x) for x in np.frombuffer(raw, dtype="<u8", count=2, offset=16))
        ends = np.frombuffer(raw, dtype="<u8", count=count, offset=32)
        ids = np.frombuffer(raw, dtype="<u4" if width == 4 else "<u2", count=tokens,
                            offset=32 + 8 * count)
        start = 0
        for end in ends:
            docs.append(ids[start:int(end) - 1].tolist())
            start = int(end)
    return docs


def tokenizer_table(args, texts, megabytes):
    titan, tok_dir = str(args.titan), str(args.tokenizer)
    work = Path(tempfile.mkdtemp(prefix="titan_bench_"))
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    one = work / "one.jsonl"
    one.write_text(json.dumps({"text": "x"}) + "\n")
    rows, titan_docs = [], None
    threads_all = os.cpu_count()
    for threads in (1, threads_all):
        base = ["tokenize", "--tokenizer", tok_dir, "--threads", str(threads)]
        startup = min(timed([titan, *base, "--input", one, "--output", work / "s"])
                      for _ in range(args.repeats))
        whole = min(timed([titan, *base, "--input", args.corpus, "--output", work / f"t{threads}"])
                    for _ in range(args.repeats))
        rows.append((f"titan tokenize ({threads} thread{'s' if threads > 1 else ''})",
                     max(whole - startup, 1e-9)))
        titan_docs = shard_ids(work / f"t{threads}")
    titan_startup = startup

    start = time.perf_counter()
    hf = Tokenizer.from_file(str(Path(tok_dir) / "tokenizer.json"))
    hf_load = time.perf_counter() - start
    hf_ids = None

    def best(fn):
        nonlocal hf_ids
        t = float("inf")
        for _ in range(args.repeats):
            s = time.perf_counter()
            out = fn()
            t = min(t, time.perf_counter() - s)
        return t, out

    t, hf_ids = best(lambda: [hf.encode(x).ids for x in texts])
    rows.append(("HF tokenizers encode loop (1 thread)", t))
    t, _ = best(lambda: hf.encode_batch(texts))
    rows.append((f"HF tokenizers encode_batch ({threads_all} threads)", t))

    import bpe_qwen

    folder = bpe_qwen_folder(tok_dir, work / "bpe_qwen")
    start = time.perf_counter()
    bq = bpe_qwen.QwenTokenizer(str(folder))
    bq_load = time.perf_counter() - start
    t, bq_ids = best(lambda: [bq.encode(x) for x in texts])
    rows.append(("bpe-qwen encode loop (1 thread)", t))
    t, _ = best(lambda: bq.encode_batch_parallel(texts))
    rows.append((f"bpe-qwen encode_batch_parallel ({threads_all} threads)", t))

    tokens = sum(len(i) for i in hf_ids)
    same_titan = sum(a == b for a, b in zip(titan_docs, hf_ids))
    same_bq = sum(list(a) == b for a, b in zip(bq_ids, hf_ids))
    print(f"\n### Tokenizer: {args.corpus}, {len(texts)} documents, {megabytes:.2f} MB, "
          f"{tokens} tokens, best of {args.repeats}\n")
    print("| tokenizer | MB/s | M tokens/s | seconds |")
    print("|---|---:|---:|---:|")
    for name, seconds in rows:
        print(f"| {name} | {megabytes / seconds:.2f} | {tokens / seconds / 1e6:.2f} | {seconds:.3f} |")
    print(f"\nstart-up: titan process {titan_startup:.3f} s (libtorch + tokenizer.json), "
          f"HF Tokenizer.from_file {hf_load:.3f} s, bpe-qwen QwenTokenizer {bq_load:.3f} s")
    print(f"ids identical to HF: titan {same_titan}/{len(texts)}, bpe-qwen {same_bq}/{len(texts)}")
    if same_titan != len(texts):
        raise SystemExit("titan's ids differ from HF tokenizers")


def loader_wait(args):
    print(f"\n### Loader wait per step (debug model, {args.steps} steps, batch 4 x seq 256, "
          "CPU)\n")
    print("| data | training.prefetch_batches | data_loading_s per step (mean) | max | "
          "step time (s) |")
    print("|---|---:|---:|---:|---:|")
    chats = REPO / "assets/sft/chat.jsonl"
    cases = [("pre-training text (jsonl, tokenized on the fly)", "qwen3_debugmodel", args.corpus),
             ("SFT chats (chat template rendered on the fly)", "qwen3_debugmodel_sft", chats)]
    for name, config, data in cases:
        for prefetch in (0, 2):
            dump = Path(tempfile.mkdtemp(prefix="titan_wait_"))
            atexit.register(shutil.rmtree, dump, ignore_errors=True)
            timed([str(args.titan), "train", "--module", "qwen3", "--config", config,
                   "--training.steps", str(args.steps), "--metrics.log_freq", "1",
                   "--training.local_batch_size", "4",
                   "--training.prefetch_batches", str(prefetch),
                   "--training.dataset_path", data, "--model.hf_assets_path", args.tokenizer,
                   "--job.dump_folder", dump])
            metrics = [json.loads(l) for l in (dump / "metrics.jsonl").read_text().splitlines()]
            waits = [m["data_loading_s"] for m in metrics[1:]]  # the first includes start-up
            step = statistics.mean(4 * 256 / m["tps"] for m in metrics[1:])
            print(f"| {name} | {prefetch} | {statistics.mean(waits) * 1e3:.3f} ms | "
                  f"{max(waits) * 1e3:.3f} ms | {step:.3f} |")


def big_corpus(args, texts):
    """A corpus of --big-mb MB (the corpus repeated, each copy's documents numbered so that no
    two are alike) through `titan tokenize` at every core, then 2 training steps on the shards."""
    work = Path(tempfile.mkdtemp(prefix="titan_big_"))
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    big = work / "big.jsonl"
    size, copy = 0, 0
    with open(big, "w", encoding="utf-8") as f:
        while size < args.big_mb * 1e6:
            for i, t in enumerate(texts):
                line = json.dumps({"text": f"# copy {copy} document {i}\n" + t}) + "\n"
                f.write(line)
                size += len(line.encode())
            copy += 1
    text_mb = sum(len(json.loads(l)["text"].encode()) for l in open(big, encoding="utf-8")) / 1e6
    rates = {}
    for threads in (1, os.cpu_count()):
        seconds = timed([str(args.titan), "tokenize", "--tokenizer", args.tokenizer, "--input",
                         big, "--output", work / "shards" / "big", "--threads", str(threads)])
        rates[threads] = seconds
    meta = json.loads((work / "shards" / "big.json").read_text())
    dump = work / "run"
    train = timed([str(args.titan), "train", "--module", "qwen3", "--config", "qwen3_debugmodel",
                   "--training.steps", "2", "--training.dataset_path", work / "shards" / "big.json",
                   "--model.hf_assets_path", args.tokenizer, "--job.dump_folder", dump])
    losses = [json.loads(l)["loss"] for l in (dump / "metrics.jsonl").read_text().splitlines()]
    print(f"\n### titan tokenize of a {size / 1e6:.0f} MB jsonl ({text_mb:.0f} MB of text)\n")
    for threads, seconds in rates.items():
        print(f"- {threads} thread(s): {seconds:.1f} s whole process, {text_mb / seconds:.2f} MB/s")
    print(f"- {meta['documents']} documents, {meta['tokens']} tokens in {len(meta['shards'])} "
          f"shard(s); training on the shards: 2 steps in {train:.1f} s, losses "
          f"{[round(x, 3) for x in losses]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=str(REPO / "assets/corpus/python_stdlib.jsonl"))
    parser.add_argument("--titan", default=os.environ.get("TITAN_BIN", REPO / "build/bin/titan"))
    parser.add_argument("--tokenizer", default=str(REPO / "assets/qwen3-tokenizer"))
    parser.add_argument("--repeats", type=int, default=3, help="best of N runs")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--skip-tokenizer", action="store_true")
    parser.add_argument("--big-mb", type=float, default=0,
                        help="also tokenize a corpus of this many MB into shards and train on it")
    args = parser.parse_args()
    texts = [json.loads(line)["text"] for line in
             Path(args.corpus).read_text(encoding="utf-8").splitlines() if line.strip()]
    megabytes = sum(len(t.encode()) for t in texts) / 1e6
    if not args.skip_tokenizer:
        tokenizer_table(args, texts, megabytes)
    loader_wait(args)
    if args.big_mb > 0:
        big_corpus(args, texts)


if __name__ == "__main__":
    main()
