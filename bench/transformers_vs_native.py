"""Path 1 (the Transformers modeling backend, model.name transformers) against the native Qwen3
(model.name qwen3) at the same layouts on the CPU, in one run: the same random Qwen3 checkpoint
(written here with Transformers), the same job (transformers_modeling_backend_debugmodel with
model.flavor auto, so the two differ only in model.name), the same global batch, fp32. Layouts: 1
process, TP 2 (sequence parallelism off on both sides), CP 2 on one row of --cp-seq tokens
(with 1 process on that row beside it; cp2ac the same with full activation checkpointing on
both sides, for machines where two ranks at 4k do not fit) and PP 2 (1F1B), each by torchrun
(Gloo), the ranks sharing this machine's cores (OMP_NUM_THREADS = cores / ranks). The two
models run in turn layout by layout (--rounds > 1 runs each again and keeps each side's median
step and largest peak).

For each run: the step time (median of the differences of metrics' elapsed_s after the first
step), each rank's peak resident memory (VmHWM, sampled from /proc by context_parallel.py's
sampler, glibc's default mmap threshold; the maximum over the ranks is shown) and the last loss,
which must be the same on both sides (their difference is printed). Which side runs first
alternates from one layout (and round) to the next.

--shape debug is the debugmodel's (hidden 256, 4 layers, 8 / 4 heads of 64, vocab 151936, tied),
--shape 0.6b Qwen3-0.6B's (hidden 1024, 28 layers, 16 / 8 heads of 128, intermediate 3072, tied);
a 0.6B run holds about 10 GB a process: run it under the machine's heavy-work lock.

usage: build/python bench/transformers_vs_native.py [--shape debug|0.6b] [--steps 4]
           [--batch 4] [--seq 256] [--cp-seq 4096] [--layouts 1,tp2,cp2,pp2] [--rounds 1]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from context_parallel import REPO, TITAN, run_sampled  # noqa: E402

MODULE = "transformers_modeling_backend"
SHAPES = {
    "debug": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=8,
                  num_key_value_heads=4, head_dim=64, intermediate_size=768),
    "0.6b": dict(hidden_size=1024, num_hidden_layers=28, num_attention_heads=16,
                 num_key_value_heads=8, head_dim=128, intermediate_size=3072),
}
# name: (label, ranks, arguments, on the long row)
LAYOUTS = {
    "1": ("1 process", 1, [], False),
    "tp2": ("TP 2", 2, ["--parallelism.tensor_parallel_degree", "2",
                        "--parallelism.enable_sequence_parallel", "false"], False),
    "1long": ("1 process", 1, [], True),
    "cp2": ("CP 2", 2, ["--parallelism.context_parallel_degree", "2"], True),
    # Two 0.6B ranks at 4k hold ~11.5 GB each without it: more than a 24 GB machine has.
    "cp2ac": ("CP 2, full activation checkpointing", 2,
              ["--parallelism.context_parallel_degree", "2",
               "--activation_checkpoint.mode", "full"], True),
    "pp2": ("PP 2 (1F1B)", 2, ["--parallelism.pipeline_parallel_degree", "2",
                               "--parallelism.pipeline_parallel_schedule", "1F1B"], False),
}


def write_model(path, shape):
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=151936, max_position_embeddings=40960, rope_theta=1e6,
                         tie_word_embeddings=True, rms_norm_eps=1e-6, **SHAPES[shape])
    Qwen3ForCausalLM(config).float().save_pretrained(path)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (path / name).write_bytes((REPO / "assets" / "qwen3-tokenizer" / name).read_bytes())


def run(backend, nproc, layout, batch, seq, steps, model_dir, dump):
    # glibc's default mmap threshold, as context_parallel.py sets it: titan otherwise keeps
    # freed large blocks for reuse and the high-water mark would count fragmentation.
    env = dict(os.environ, OMP_NUM_THREADS=str(max(1, (os.cpu_count() or 1) // nproc)),
               MALLOC_MMAP_THRESHOLD_="131072")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--no-python",
           f"--nproc_per_node={nproc}", "--rdzv_backend", "c10d", "--rdzv_endpoint=localhost:0",
           "--role", "rank", "--tee", "3", str(TITAN), "train", "--module", MODULE,
           "--config", f"{MODULE}_debugmodel", "--model.name", backend,
           "--model.flavor", "auto", "--model.hf_assets_path", str(model_dir),
           "--checkpoint.initial_load_in_hf", "--training.steps", str(steps),
           "--training.local_batch_size", str(batch), "--training.seq_len", str(seq),
           "--metrics.log_freq", "1",
           "--training.dataset_path", str(REPO / "assets" / "corpus" / "python_stdlib.jsonl"),
           "--job.dump_folder", str(dump), *layout]
    sampler = run_sampled(cmd, env)
    metrics = [json.loads(line) for line in (dump / "metrics.jsonl").read_text().splitlines()]
    elapsed = [m["elapsed_s"] for m in metrics]
    return {"step_s": statistics.median(b - a for a, b in zip(elapsed[1:], elapsed[2:])),
            "peak_mib": max(sorted(sampler.peaks.values(), reverse=True)[:nproc]) / 1024,
            "loss": metrics[-1]["loss"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", choices=list(SHAPES), default="debug")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--cp-seq", type=int, default=4096)
    ap.add_argument("--layouts", default="1,tp2,1long,cp2,pp2")
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    assert args.steps >= 3, "the step time is taken after the first step"
    print(f"Qwen3 {args.shape} shape, fp32, {os.cpu_count()} cores shared by the ranks, "
          f"{args.steps} steps (median step after the first), load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at the start", flush=True)
    print("| shape | layout | tokens a step | native step | path 1 step | path 1 / native | "
          "native peak per rank | path 1 peak per rank | loss difference |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|", flush=True)
    with tempfile.TemporaryDirectory(prefix="titan-bench-") as tmp:
        model_dir = Path(tmp) / "model"
        write_model(model_dir, args.shape)
        for index, key in enumerate(args.layouts.split(",")):
            label, nproc, layout, long_row = LAYOUTS[key]
            batch, seq = (1, args.cp_seq) if long_row else (args.batch, args.seq)
            results = {"qwen3": [], "transformers": []}
            for r in range(args.rounds):
                for backend in (("qwen3", "transformers") if (index + r) % 2 == 0
                                else ("transformers", "qwen3")):
                    dump = Path(tmp) / f"{key}-{backend}-{r}"
                    results[backend].append(run(backend, nproc, layout, batch, seq, args.steps,
                                                model_dir, dump))
            native, path1 = ({"step_s": statistics.median(x["step_s"] for x in rs),
                              "peak_mib": max(x["peak_mib"] for x in rs), "loss": rs[-1]["loss"]}
                             for rs in (results["qwen3"], results["transformers"]))
            diff = abs(path1["loss"] - native["loss"]) / abs(native["loss"])
            print(f"| {args.shape} | {label} | {batch} x {seq} | {native['step_s']:.3f} s | "
                  f"{path1['step_s']:.3f} s | {path1['step_s'] / native['step_s']:.2f}x | "
                  f"{native['peak_mib']:.0f} MiB | {path1['peak_mib']:.0f} MiB | {diff:.1e} |",
                  flush=True)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end")


if __name__ == "__main__":
    main()
