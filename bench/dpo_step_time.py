"""DPO step time and peak memory, titan against TRL 1.16's DPOTrainer in one run, on the CPU:
the same random checkpoint (the debug model's shape unless --shape 0.6b: vocabulary 151936,
hidden 256, 4 layers), the same pairs (--batch pairs of about --seq tokens a sequence), fp32,
OMP_NUM_THREADS threads (--layers N: the shape with N layers, for a quicker profile at the
0.6B vocabulary and width), for full fine-tuning (the reference a frozen copy: titan's copy of the
trained tensors, TRL's second model), full fine-tuning with the reference's log-probabilities
precomputed (full_precomputed: titan's dpo.precompute_reference, TRL's precompute_ref_log_probs;
neither keeps a reference model, and neither's step time counts the precomputation) and LoRA
(rank 8 on every projection, the reference the adapters off: titan's zeros, TRL's
disable_adapter()).

Each run is a process of its own: its peak resident memory (ru_maxrss, from wait4), its peak
anonymous memory (RssAnon sampled every 50 ms: what it allocated, without the checkpoint pages
it mapped) and the median step time over the steps after the first (titan: metrics.jsonl's
elapsed_s; TRL: a callback's clock around each optimizer step). A process above --limit-gib of
anonymous memory, or above what the machine had available at the row's start less 3 GiB, is
stopped (before the kernel's OOM killer would stop the shared machine's other work) and its row
says so, with the peak it had reached. The 1-minute load average before
and after each row is printed beside it: the machine may be shared.

--titan-env NAME=VALUE (repeatable) sets an environment variable for titan's process only, e.g.
MALLOC_MMAP_THRESHOLD_=4194304: glibc then serves blocks of 4 MiB and more with their own
mappings and gives them back when freed, where titan otherwise keeps freed blocks for reuse
(docs/preference.md, "Memory").

With --traces DIR, each side's last step is traced (titan's profiling.enable_profiling, TRL's
torch.profiler) into DIR/{titan,trl}_<kind>.json, for bench/profile_table.py; the traced step
is then one of those timed, so profile and time in separate runs.

usage: build/python bench/dpo_step_time.py [--steps 3] [--batch 2] [--seq 512] [--shape debug]
           [--layers N] [--kinds lora,full,full_precomputed] [--limit-gib 20] [--traces DIR]
           [--titan-env NAME=VALUE ...]
           (TITAN_BIN: the titan binary to run)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import re
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TITAN = Path(os.environ.get("TITAN_BIN", REPO / "build" / "bin" / "titan"))
GIB = 2**30
sys.path.insert(0, str(REPO / "tests" / "integration"))
sys.path.insert(0, str(REPO / "bench"))

from memory_at_scale import PROJECTIONS, AnonSampler  # noqa: E402

SHAPES = {
    "debug": dict(hidden_size=256, intermediate_size=768, num_hidden_layers=4,
                  num_attention_heads=8, num_key_value_heads=4, head_dim=64),
    "0.6b": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                 num_attention_heads=16, num_key_value_heads=8, head_dim=128),
}


def make_base(path, shape, layers=None):
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM
    torch.manual_seed(0)
    dims = dict(SHAPES[shape], **({"num_hidden_layers": layers} if layers else {}))
    config = Qwen3Config(vocab_size=151936, tie_word_embeddings=True,
                         max_position_embeddings=4096, **dims)
    Qwen3ForCausalLM(config).save_pretrained(path)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (path / name).write_bytes((REPO / "assets" / "qwen3-tokenizer" / name).read_bytes())


def make_pairs(path, count, seq):
    """Standard records from the default corpus: a prompt of about seq/2 tokens and two
    completions of about seq/2 (4 characters a token, roughly)."""
    docs = [json.loads(line)["text"] for line in
            (REPO / "assets/corpus/python_stdlib.jsonl").read_text().splitlines()[:4 * count]]
    text = " ".join(docs)
    chars = 2 * seq
    rows = []
    for i in range(count):
        at = i * 3 * chars
        rows.append({"prompt": text[at:at + chars], "chosen": text[at + chars:at + 2 * chars],
                     "rejected": text[at + 2 * chars:at + 3 * chars]})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def run_child(cmd, env, what, limit):
    """Runs `cmd`, stopping it above `limit` bytes of anonymous memory. Returns (stdout, peak
    RSS, peak anonymous memory, None) in bytes, or (None, ..., why) when it was stopped."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env=env)
        sampler = AnonSampler(proc.pid)
        sampler.start()
        stopped = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid != 0:
                break
            if sampler.peak > limit and not stopped:
                proc.kill()
                stopped = True
            time.sleep(0.05)
        sampler.done = True
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    rss = usage.ru_maxrss * 1024
    if stopped:
        return None, rss, sampler.peak, f"stopped above {limit / GIB:.1f} GiB anonymous"
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        if code == -9:  # the kernel's OOM killer (or someone): report it, do not fail the table
            return None, rss, sampler.peak, "killed (signal 9)"
        raise SystemExit(f"{what} failed:\n{stdout[-2000:]}\n{stderr[-3000:]}")
    return stdout, rss, sampler.peak, None


def titan_run(kind, base, data, job, args, env):
    cmd = [str(TITAN), "train", "--module", "qwen3", "--config",
           "qwen3_debugmodel", "--model.flavor", "auto", "--model.hf_assets_path", str(base),
           "--checkpoint.initial_load_path", str(base), "--checkpoint.initial_load_in_hf",
           "--training.objective", "dpo", "--training.shuffle", "false",
           "--training.steps", str(args.steps), "--training.local_batch_size", str(args.batch),
           "--dpo.max_length", str(args.seq), "--training.dataset_path", str(data),
           "--job.dump_folder", str(job), "--optimizer.lr", "1e-5",
           "--lr_scheduler.warmup_steps", "0"]
    if kind == "lora":
        cmd += ["--model.converters", "lora", "--lora.rank", "8", "--lora.alpha", "16",
                "--dpo.reference", "adapters_off"]
    if kind == "full_precomputed":
        cmd += ["--dpo.precompute_reference", "true"]
    if args.traces:
        cmd += ["--profiling.enable_profiling", "--profiling.profile_freq", str(args.steps)]
    env = dict(env, **dict(item.split("=", 1) for item in args.titan_env))
    out, rss, anon, why = run_child(cmd, env, f"titan {kind}", args.limit_gib * GIB)
    if why:
        return {"why": why, "rss": rss, "anon": anon}
    elapsed = [json.loads(line)["elapsed_s"] for line in (job / "metrics.jsonl").read_text()
               .splitlines()]
    steps = [b - a for a, b in zip(elapsed, elapsed[1:])]
    if args.traces:
        trace = job / "profile_traces" / f"iteration_{args.steps}" / "rank0_trace.json"
        Path(args.traces).mkdir(parents=True, exist_ok=True)
        (Path(args.traces) / f"titan_{kind}.json").write_bytes(trace.read_bytes())
    return {"step_s": statistics.median(steps), "rss": rss, "anon": anon}


def peer_main(kind, base, data, args):
    """TRL's DPOTrainer in this process (the child): the median step time as JSON."""
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl_dpo_peer import trl_dpo  # noqa: F401  (sets the offline environment)
    import trl_dpo_peer
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    times = []

    class Clock(TrainerCallback):
        profiler = None

        def on_step_begin(self, args_, state, *a, **k):
            if args.traces and state.global_step + 1 == args.steps:
                self.profiler = torch.profiler.profile(
                    activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True)
                self.profiler.__enter__()
            self.start = time.perf_counter()

        def on_step_end(self, *a, **k):
            times.append(time.perf_counter() - self.start)
            if self.profiler is not None:
                self.profiler.__exit__(None, None, None)
                self.profiler.export_chrome_trace(str(Path(args.traces) / f"trl_{kind}.json"))
                self.profiler = None

    rows = [json.loads(line) for line in Path(data).read_text().splitlines()]
    peft_config = None
    if kind == "lora":
        import peft
        peft_config = peft.LoraConfig(r=8, lora_alpha=16, target_modules=PROJECTIONS,
                                      lora_dropout=0.0)
    original = trl_dpo_peer.DPOTrainer

    class Timed(original):
        def __init__(self, *a, callbacks=None, **k):
            super().__init__(*a, callbacks=(callbacks or []) + [Clock()], **k)

    trl_dpo_peer.DPOTrainer = Timed
    trl_dpo_peer.trl_dpo(base, rows, steps=args.steps, batch=args.batch, lr=1e-5,
                         peft_config=peft_config, max_length=args.seq,
                         precompute=kind == "full_precomputed")
    print(json.dumps({"step_s": statistics.median(times[1:])}))


def peer_run(kind, base, data, args, env):
    cmd = [sys.executable, __file__, "--child", kind, "--base", str(base), "--data", str(data),
           "--steps", str(args.steps), "--batch", str(args.batch), "--seq", str(args.seq)]
    if args.traces:
        cmd += ["--traces", str(args.traces)]
    out, rss, anon, why = run_child(cmd, env, f"TRL {kind}", args.limit_gib * GIB)
    if why:
        return {"why": why, "rss": rss, "anon": anon}
    return dict(json.loads(out.strip().splitlines()[-1]), rss=rss, anon=anon)


def available_bytes():
    text = Path("/proc/meminfo").read_text()
    return int(re.search(r"MemAvailable:\s+(\d+)", text).group(1)) * 1024


def cells(result):
    """Step time, peak RSS and peak anonymous memory of one side; a stopped run's peaks are
    lower bounds."""
    at_least = ">= " if "why" in result else ""
    step = result["why"] if "why" in result else f"{result['step_s']:.1f} s"
    return [step] + [f"{at_least}{result[k] / GIB:.1f} GiB" for k in ("rss", "anon")]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--shape", choices=sorted(SHAPES), default="debug")
    p.add_argument("--layers", type=int, help="the shape with this many layers")
    p.add_argument("--kinds", default="full,lora")
    p.add_argument("--limit-gib", type=float, default=20.0)
    p.add_argument("--traces", help="trace each side's last step into this folder")
    p.add_argument("--titan-env", action="append", default=[], metavar="NAME=VALUE",
                   help="an environment variable for titan's process only")
    p.add_argument("--child")
    p.add_argument("--base")
    p.add_argument("--data")
    args = p.parse_args()
    if args.child:
        return peer_main(args.child, args.base, args.data, args)
    limit = args.limit_gib
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "2"),
               HF_HUB_OFFLINE="1")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        make_base(tmp / "base", args.shape, args.layers)
        make_pairs(tmp / "pairs.jsonl", args.steps * args.batch, args.seq)
        layers = f" with {args.layers} layers" if args.layers else ""
        titan_env = f", titan with {' '.join(args.titan_env)}" if args.titan_env else ""
        print(f"DPO, {args.shape} shape{layers}, {args.batch} pairs x ~{args.seq} tokens, "
              f"{args.steps} steps, fp32, {env['OMP_NUM_THREADS']} threads{titan_env}")
        print("| case | titan step | TRL step | speed-up | titan peak RSS | titan peak anon | "
              "TRL peak RSS | TRL peak anon | load average |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
        for kind in args.kinds.split(","):
            load = os.getloadavg()[0]
            # Room for the row on a shared machine: 3 GiB of what is available now stays free.
            args.limit_gib = min(limit, available_bytes() / GIB - 3)
            print(f"({kind}: each process stopped above {args.limit_gib:.1f} GiB)", flush=True)
            ours = titan_run(kind, tmp / "base", tmp / "pairs.jsonl", tmp / f"job_{kind}", args,
                             env)
            theirs = peer_run(kind, tmp / "base", tmp / "pairs.jsonl", args, env)
            speedup = ("-" if "why" in ours or "why" in theirs
                       else f"{theirs['step_s'] / ours['step_s']:.2f}x")
            o, t = cells(ours), cells(theirs)
            print(f"| {kind} | {o[0]} | {t[0]} | {speedup} | {o[1]} | {o[2]} | {t[1]} | {t[2]} | "
                  f"{load:.1f} -> {os.getloadavg()[0]:.1f} |", flush=True)


if __name__ == "__main__":
    main()
