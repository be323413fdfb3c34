"""Pipeline schedules on the CPU, in one run: the debug dense model (tied embeddings; ZBV, which
cannot hold a tied model, on the same model untied) and the debug MoE, by one process and by
pipelines of 2 and 4 Gloo ranks under every schedule that fits (Interleaved needs 2 stages per
rank: 8 stages do not fit 4 layers at PP 4), on the same global batch. For each: the step time
against one process's, the measured bubble (each rank's time waiting for activations and
gradients over its time in the schedule, after the first step: the mean over the ranks and the
largest) against the pipeline's (p-1)/(m+p-1), and each stage's peak memory (RSS).

On a 2-core machine the ranks share the cores (OMP_NUM_THREADS=1 each): a waiting rank yields its
core to the others, so the step times show the schedules' overheads against each other, not
the speed-up of p devices, and the measured bubble includes time a rank could not run.

usage: build/python bench/pipeline_schedules.py [--steps 6] [--batch 8] [--seq 64]
                                                [--write-results]
"""
import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TITAN = Path(os.environ.get("TITAN_BIN", REPO / "build" / "bin" / "titan"))
TOKENIZER = REPO / "assets" / "qwen3-tokenizer"
MODELS = {"dense": ["--config", "qwen3_debugmodel"],
          "dense untied": ["--config", "qwen3_debugmodel", "--model.flavor", "auto"],
          "moe": ["--config", "qwen3_debugmodel_moe", "--model.moe_load_balancing", "aux_loss"]}
UNTIED = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151936,
          "hidden_size": 256, "intermediate_size": 768, "num_hidden_layers": 4,
          "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 64,
          "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "max_position_embeddings": 40960,
          "tie_word_embeddings": False, "bos_token_id": 151643, "eos_token_id": 151645}
# (model, pp, schedule); pp 1 is the reference.
RUNS = [(m, 1, "-") for m in ("dense", "dense untied", "moe")]
for model in ("dense", "moe"):
    for schedule in ("GPipe", "1F1B", "Interleaved1F1B", "InterleavedZeroBubble"):
        RUNS.append((model, 2, schedule))
    for schedule in ("GPipe", "1F1B"):
        RUNS.append((model, 4, schedule))
RUNS.append(("dense untied", 2, "ZBVZeroBubble"))
LINE = re.compile(r"\[titan\] rank (\d+) of \d+ pipeline stages? ([\d, ]+): waited ([\d.]+) s of "
                  r"([\d.]+) s in the schedules \(bubble [\d.]+%\), peak memory ([\d.]+) GiB")


def run(model, pp, schedule, args, dump, assets):
    extra = [] if pp == 1 else ["--parallelism.pipeline_parallel_degree", str(pp),
                                "--parallelism.pipeline_parallel_schedule", schedule]
    # One forward per pipeline microbatch in the reference too: the MoE aux loss is a mean over
    # a forward's tokens.
    batch = ["--training.local_batch_size", str(args.batch)]
    if pp == 1 and model == "moe":
        batch = ["--training.local_batch_size", "1", "--training.global_batch_size",
                 str(args.batch)]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--no-python",
           f"--nproc_per_node={pp}", "--rdzv_backend", "c10d", "--rdzv_endpoint=localhost:0",
           "--role", "rank", "--tee", "3", str(TITAN), "train", "--module", "qwen3",
           *MODELS[model], "--training.steps", str(args.steps), "--training.seq_len",
           str(args.seq), *batch, "--metrics.log_freq", "1",
           "--training.dataset_path", str(REPO / "assets" / "corpus" / "python_stdlib.jsonl"),
           "--model.hf_assets_path", str(assets if "untied" in model else TOKENIZER),
           "--job.dump_folder", str(dump), *extra]
    env = dict(os.environ, OMP_NUM_THREADS=str(max(1, (os.cpu_count() or 1) // pp)))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    metrics = [json.loads(line) for line in (dump / "metrics.jsonl").read_text().splitlines()]
    steady = [m for m in metrics if m["step"] > 1]
    tokens = args.batch * args.seq
    r = {"step_s": sum(tokens / m["tps"] for m in steady) / len(steady),
         "loss": metrics[-1]["loss"], "stages": []}
    for rank, stages, waited, ran, peak in LINE.findall(proc.stdout):
        r["stages"].append((int(rank), stages.strip(), float(waited) / max(float(ran), 1e-9),
                            float(peak)))
    if pp == 1:
        r["stages"] = [(0, "all", 0.0, max(m["memory_gib"] for m in metrics))]
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args()
    lines = [f"global batch {args.batch} x {args.seq} (microbatches of 1 row: m = {args.batch}), "
             f"fp32, {args.steps} steps (step time: mean of steps 2-{args.steps})", "",
             "| model | pipeline | schedule | step | vs 1 process | bubble: mean / largest rank "
             "| (p-1)/(m+p-1) | peak memory per stage (GiB) | last loss |",
             "|---|---|---|---:|---:|---:|---:|---|---:|"]
    print("\n".join(lines), flush=True)
    base = {}
    with tempfile.TemporaryDirectory() as tmp:
        assets = Path(tmp) / "untied"
        assets.mkdir()
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(TOKENIZER / name, assets / name)
        (assets / "config.json").write_text(json.dumps(UNTIED))
        for i, (model, pp, schedule) in enumerate(RUNS):
            r = run(model, pp, schedule, args, Path(tmp) / f"run{i}", assets)
            if pp == 1:
                base[model] = r["step_s"]
                row = (f"| {model} | 1 process | - | {r['step_s']:.3f} s | 1.00x | - | - | "
                       f"{r['stages'][0][3]:.2f} | {r['loss']:.5f} |")
            else:
                bubbles = [b for _, _, b, _ in r["stages"]]
                theory = (pp - 1) / (args.batch + pp - 1)
                memory = ", ".join(f"{s}: {m:.2f}" for _, s, _, m in sorted(r["stages"]))
                row = (f"| {model} | PP {pp} | {schedule} | {r['step_s']:.3f} s | "
                       f"{r['step_s'] / base[model]:.2f}x | "
                       f"{100 * sum(bubbles) / len(bubbles):.0f}% / {100 * max(bubbles):.0f}% | "
                       f"{100 * theory:.0f}% | {memory} | {r['loss']:.5f} |")
            lines.append(row)
            print(row, flush=True)
    if args.write_results:
        results = REPO / "bench" / "RESULTS.md"
        today = datetime.date.today().isoformat()
        section = (f"\n## Pipeline schedules on the CPU (`pipeline_schedules.py`, {today})\n\n"
                   f"`build/python bench/pipeline_schedules.py`: " + "\n".join(lines) + "\n")
        results.write_text(results.read_text() + section)


if __name__ == "__main__":
    main()
