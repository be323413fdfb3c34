"""Memory and step time at real Qwen3 sizes on this machine, titan against its peer in one run:
random weights in the published shapes (Qwen3-0.6B, -1.7B, -4B, -8B config.json values, saved as
bfloat16 safetensors shards, cached under ~/.cache/titan-cpp/bench-models), batch 1 x 512 of
the default corpus, OMP_NUM_THREADS threads (default: all cores).

Cases (each run in a process of its own; the peer in a Python child):
  0.6B full fine-tune, float32          titan                      HF eager + AdamW
  0.6B full fine-tune, bfloat16 compute titan (mixed_precision_param bfloat16, float32 master
                                        weights)                   HF under torch.autocast
                                                                   ("cpu", bfloat16) + AdamW
  0.6B full fine-tune, AdamW8bit        titan                      HF eager + bnb AdamW8bit
  1.7B full fine-tune, AdamW            titan                      HF eager + AdamW
  1.7B full fine-tune, AdamW8bit        titan                      HF eager + bnb AdamW8bit
  0.6B full, activation checkpointing   titan full / selective     HF eager + gradient_checkpointing
  0.6B LoRA r16, float32                titan                      PEFT
  0.6B QLoRA r16, bfloat16              titan                      PEFT + bitsandbytes
  4B   QLoRA r16, NF4 + double quant, bfloat16   titan             PEFT + bitsandbytes
  8B   QLoRA r16, NF4 + double quant, bfloat16   titan             PEFT + bitsandbytes

For each: the median step time after the first, the peak resident memory (ru_maxrss from wait4,
which counts the mapped checkpoint pages a process touched) and the peak anonymous memory
(RssAnon, sampled every 50 ms: what the process allocated), titan's start-up estimate of its
model state and the peer's tensors counted in its loop. A run that fails or is killed (the
kernel's OOM killer, or the 23 GiB limit this script sets per process) is reported as such.

Speed: with --rounds N each case runs titan, the peer, titan, the peer ... (N of each, in turn,
so that a change of the machine's load touches both); the step times are the medians over the
rounds and the ratio the median of each round's ratio. CPU "MFU": each side's achieved FLOP/s
(titan's own count, torchtitan's formula: 6 x parameters + attention, the same for the peer's
tokens) over the machine's GEMM ceiling for the row's compute dtype and tokens per step
(bench/gemm_ceiling.cpp, the best of oneDNN and MKL over the model's projection shapes; run
first, or read from --ceiling JSON). --profile traces one more step of each side (titan's
profiling.*, torch.profiler for the peer; not part of the step times) and adds the GEMMs' share
of the step and, per row, both sides' top CPU ops by self time (bench/profile_table.py).

Also: titan's start-up estimate against the resident memory of a run at 16 tokens (where
activations are negligible), for the 0.6B full fine-tune and the 4B QLoRA.

usage: build/python bench/memory_at_scale.py [--cases all|0.6B|1.7B|4B|8B] [--match TEXT] [--steps 3]
                                             [--rounds 1]
                                             [--profile] [--ceiling JSON] [--no-estimate]
                                             [--write-results]
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from profile_table import self_time_table  # noqa: E402
CACHE = Path(os.environ.get("TITAN_CACHE_DIR", Path.home() / ".cache" / "titan-cpp"))
PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
LIMIT_BYTES = 23 * 2**30  # per process: a run above this is reported as not fitting
GIB = 2**30

# The published config.json values (Qwen/Qwen3-0.6B, -1.7B, -4B, -8B).
SHAPES = {
    "0.6B": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                 num_attention_heads=16, num_key_value_heads=8, tie_word_embeddings=True),
    "1.7B": dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=28,
                 num_attention_heads=16, num_key_value_heads=8, tie_word_embeddings=True),
    "4B": dict(hidden_size=2560, intermediate_size=9728, num_hidden_layers=36,
               num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=True),
    "8B": dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
               num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=False),
}


def model_dir(size):
    """The random checkpoint of `size`, made once (bfloat16 shards of at most 2 GB)."""
    import torch
    from safetensors.torch import save_file
    from transformers import Qwen3Config, Qwen3ForCausalLM

    path = CACHE / "bench-models" / f"qwen3-{size}-random"
    if (path / "model.safetensors.index.json").exists():
        return path
    tmp = path.with_name(path.name + ".tmp")
    if tmp.exists():
        subprocess.run(["rm", "-rf", str(tmp)], check=True)
    tmp.mkdir(parents=True)
    config = Qwen3Config(vocab_size=151936, head_dim=128, max_position_embeddings=40960,
                         rope_theta=1000000.0, rms_norm_eps=1e-6, dtype="bfloat16",
                         **SHAPES[size])
    config.save_pretrained(tmp)
    with torch.device("meta"):
        shapes = {k: v.shape for k, v in Qwen3ForCausalLM(config).state_dict().items()}
    if config.tie_word_embeddings:
        shapes.pop("lm_head.weight")
    gen = torch.Generator().manual_seed(0)
    shard, shard_bytes, index, files = {}, 0, {}, []

    def flush():
        nonlocal shard, shard_bytes
        name = f"model-{len(files) + 1:05d}.safetensors"
        save_file(shard, tmp / name, metadata={"format": "pt"})
        files.append(name)
        index.update({k: name for k in shard})
        shard, shard_bytes = {}, 0

    for name, shape in shapes.items():
        t = torch.ones(shape) if len(shape) == 1 else torch.randn(shape, generator=gen) * 0.02
        shard[name] = t.to(torch.bfloat16)
        shard_bytes += shard[name].numel() * 2
        if shard_bytes >= 2 * 10**9:
            flush()
    if shard:
        flush()
    total = sum(s.numel() for s in shapes.values()) * 2
    (tmp / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": index}, indent=2))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (tmp / name).write_bytes((REPO / "assets" / "qwen3-tokenizer" / name).read_bytes())
    tmp.rename(path)
    return path


class AnonSampler(threading.Thread):
    """Samples a process's RssAnon (kB in /proc/PID/status) until it ends; keeps the peak."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak, self.done = pid, 0, False

    def run(self):
        while not self.done:
            try:
                text = Path(f"/proc/{self.pid}/status").read_text()
                kib = int(re.search(r"RssAnon:\s+(\d+)", text).group(1))
                self.peak = max(self.peak, kib * 1024)
            except (OSError, AttributeError):
                pass
            time.sleep(0.05)


def run_child(cmd, env):
    """Runs `cmd`, killing it above LIMIT_BYTES of anonymous memory (before the kernel's OOM
    killer would take the machine down); returns (stdout, stderr, exit code, peak RSS, peak
    anonymous memory), in bytes."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env=env)
        sampler = AnonSampler(proc.pid)
        sampler.start()
        killed_for_memory = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid != 0:
                break
            if sampler.peak > LIMIT_BYTES and not killed_for_memory:
                proc.kill()
                killed_for_memory = True
            time.sleep(0.05)
        sampler.done = True
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if killed_for_memory:
        stderr += f"\n(stopped by the benchmark: above {LIMIT_BYTES / GIB:.0f} GiB anonymous)"
    return stdout, stderr, code, usage.ru_maxrss * 1024, sampler.peak


def titan_case(case, base, job, args, env, profile=False):
    steps = case.get("steps", args.steps)
    cmd = [str(REPO / "build" / "bin" / "titan"), "train", "--module", "qwen3", "--config",
           "qwen3_debugmodel", "--model.flavor", "auto", "--model.hf_assets_path", str(base),
           "--checkpoint.initial_load_path", str(base), "--checkpoint.initial_load_in_hf",
           "--training.steps", str(steps + 1 if profile else steps),
           "--training.local_batch_size", "1", "--training.seq_len", str(case.get("seq", 512)),
           "--job.dump_folder", str(job),
           "--training.dataset_path", str(REPO / "assets/corpus/python_stdlib.jsonl"),
           "--optimizer.lr", "1e-5", "--lr_scheduler.warmup_steps", "0",
           "--metrics.log_freq", "1", "--optimizer.name", case.get("optimizer", "AdamW")]
    if case["kind"] != "full":
        cmd += ["--model.converters", "lora", "--lora.rank", "16", "--lora.alpha", "32"]
    if case["kind"] == "qlora":
        cmd += ["--lora.base_quantization", "nf4", "--lora.double_quantization", "true"]
    if case["dtype"] == "bfloat16":
        cmd += ["--training.mixed_precision_param", "bfloat16"]
    if case.get("ac"):
        cmd += ["--activation_checkpoint.mode", case["ac"]]
    if profile:  # one more step, traced, not among the timed ones
        cmd += ["--profiling.enable_profiling", "--profiling.profile_freq", str(steps + 1)]
    stdout, stderr, code, rss, anon = run_child(cmd, env)
    result = {"rss": rss, "anon": anon, "code": code}
    if code != 0:
        result["error"] = (stderr.strip().splitlines() or ["?"])[-1][:200]
        return result
    metrics = [json.loads(l) for l in (job / "metrics.jsonl").read_text().splitlines()]
    if profile:
        metrics = metrics[:-1]
        result["trace"] = job / "profile_traces" / f"iteration_{steps + 1}" / "rank0_trace.json"
    tokens = case.get("seq", 512)
    times = [tokens / m["tps"] for m in metrics[1:]] or [tokens / metrics[0]["tps"]]
    # torchtitan's FLOPs per token, as titan's step line counts them (tflops / tps).
    flops = [m["tflops"] * 1e12 / m["tps"] for m in metrics if m.get("tps")]
    result.update(step=statistics.median(times), loss=metrics[-1]["loss"],
                  flops_per_token=flops[-1] if flops else None)
    # "holds A MiB of parameters, as much again of gradients and B MiB of optimizer state:
    # C MiB, ...; and D MiB of frozen base"
    line = next(l for l in stdout.splitlines() if " holds " in l)
    state = float(re.search(r": ([0-9.]+) MiB,", line).group(1))
    frozen = re.search(r"and ([0-9.]+) MiB of frozen base", line)
    result["state"] = (state + (float(frozen.group(1)) if frozen else 0.0)) * 2**20
    return result


def peer_main(case, base, steps, trace=None):
    """One peer run in this (child) process; prints a JSON line. With `trace`, one more step is
    traced with torch.profiler (CPU ops) into that file, and not timed."""
    import torch
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    sys.path.insert(0, str(REPO / "tests" / "integration"))
    from hf_models import packed_windows

    torch.manual_seed(0)
    dtype = torch.bfloat16 if case["dtype"] == "bfloat16" else torch.float32
    # titan's bfloat16 compute of a full fine-tune (float32 master weights) against HF's
    # float32 model under autocast.
    autocast = case["kind"] == "full" and dtype == torch.bfloat16
    if autocast:
        dtype = torch.float32
    if case["kind"] == "qlora":
        import peft
        quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                   bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=dtype)
        model = AutoModelForCausalLM.from_pretrained(base, quantization_config=quant,
                                                     device_map="cpu", dtype=dtype)
        model = peft.prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
    else:
        model = AutoModelForCausalLM.from_pretrained(base, dtype=dtype,
                                                     attn_implementation="eager")
    if case.get("ac"):
        model.gradient_checkpointing_enable()
    if case["kind"] != "full":
        import peft
        model = peft.get_peft_model(model, peft.LoraConfig(r=16, lora_alpha=32,
                                                           target_modules=PROJECTIONS))
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    if case.get("optimizer") == "AdamW8bit":
        import bitsandbytes as bnb
        opt = bnb.optim.AdamW8bit(params, lr=1e-5, betas=(0.9, 0.95), weight_decay=0.1)
    else:
        opt = torch.optim.AdamW(params, lr=1e-5, betas=(0.9, 0.95), weight_decay=0.1,
                                fused=True)
    seq = case.get("seq", 512)
    total = steps + (1 if trace else 0)
    data = packed_windows(REPO / "assets" / "corpus" / "python_stdlib.jsonl",
                          REPO / "assets" / "qwen3-tokenizer", seq, total)
    times, loss = [], None

    def one_step(step):
        batch = torch.tensor(data[step:step + 1])
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = model(batch[:, :-1], labels=batch[:, 1:])
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return out.loss.item()

    for step in range(steps):
        start = time.perf_counter()
        loss = one_step(step)
        times.append(time.perf_counter() - start)
    if trace:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            one_step(steps)
        prof.export_chrome_trace(trace)
    trained = sum(p.numel() * p.element_size() for p in params)
    seen = {id(p) for p in params}
    frozen = sum(t.numel() * t.element_size() for t in list(model.parameters()) +
                 list(model.buffers()) if id(t) not in seen)
    # The optimizer's state as it holds it (bitsandbytes' maps are shared by every parameter).
    moments = {id(t): t.numel() * t.element_size() for s in opt.state.values()
               for t in s.values() if torch.is_tensor(t) and t.numel() > 1}
    print(json.dumps({"state": 2 * trained + sum(moments.values()) + frozen,
                      "step": statistics.median(times[1:]), "loss": loss}))


def peer_case(case, base, args, env, trace=None):
    cmd = [sys.executable, __file__, "--peer", json.dumps(case), "--base", str(base), "--steps",
           str(case.get("steps", args.steps))]
    if trace:
        cmd += ["--trace", str(trace)]
    stdout, stderr, code, rss, anon = run_child(cmd, env)
    result = {"rss": rss, "anon": anon, "code": code}
    if code != 0:
        lines = [l for l in stderr.strip().splitlines() if l.strip()] or ["?"]
        result["error"] = f"exit {code}: {lines[-1][:200]}"
        return result
    result.update(json.loads(stdout.strip().splitlines()[-1]))
    if trace:
        result["trace"] = trace
    return result


CASES = [
    # size, kind, dtype, activation checkpointing, label, peer
    dict(size="0.6B", kind="full", dtype="float32", peer="HF eager + AdamW"),
    dict(size="0.6B", kind="full", dtype="bfloat16", peer="HF eager + autocast bf16 + AdamW"),
    dict(size="0.6B", kind="full", dtype="float32", ac="full", peer="HF + gradient checkpointing"),
    dict(size="0.6B", kind="full", dtype="float32", ac="selective", peer=None),
    dict(size="0.6B", kind="full", dtype="float32", optimizer="AdamW8bit",
         peer="HF eager + bnb AdamW8bit"),
    # Qwen3-1.7B full fine-tuning: 16 bytes a parameter with AdamW (about 30 GiB) does not fit
    # the 23 GiB limit; AdamW8bit's 10 bytes a parameter do.
    dict(size="1.7B", kind="full", dtype="float32", peer="HF eager + AdamW"),
    dict(size="1.7B", kind="full", dtype="float32", optimizer="AdamW8bit",
         peer="HF eager + bnb AdamW8bit"),
    dict(size="0.6B", kind="lora", dtype="float32", peer="PEFT"),
    dict(size="0.6B", kind="qlora", dtype="bfloat16", peer="PEFT + bitsandbytes"),
    # The large bases at 128 tokens a step: on a 2-core machine a 512-token step of the 8B takes
    # minutes per side; the memory they show is the base's, which does not depend on the row.
    dict(size="4B", kind="qlora", dtype="bfloat16", seq=128, peer="PEFT + bitsandbytes"),
    dict(size="8B", kind="qlora", dtype="bfloat16", seq=128, peer="PEFT + bitsandbytes"),
]
# The start-up estimate against what a run holds when activations are negligible.
ESTIMATE_CASES = [
    dict(size="0.6B", kind="full", dtype="float32", seq=16, steps=2),
    dict(size="4B", kind="qlora", dtype="bfloat16", seq=16, steps=2),
]


def gib(bytes_):
    return f"{bytes_ / GIB:.1f} GiB" if bytes_ else "-"


def describe(case):
    text = {"full": "full fine-tune", "lora": "LoRA r16", "qlora": "QLoRA r16 NF4+dq"}[case["kind"]]
    if case["kind"] == "full":
        text += f", {case.get('optimizer', 'AdamW')}"
    if case.get("ac"):
        text += f", AC {case['ac']}"
    if case.get("seq", 512) != 512:
        text += f", 1 x {case['seq']}"
    return f"Qwen3-{case['size']} {text}, {case['dtype']}"


def gemm_ceiling(args, env):
    """{size: {dtype: {tokens: GFLOP/s}}} and the ceiling bench's markdown text."""
    if args.ceiling:
        return json.loads(Path(args.ceiling).read_text()), None
    sizes = sorted({c["size"] for c in CASES if c["size"] in selected_sizes(args)})
    tokens = sorted({str(c.get("seq", 512)) for c in CASES if c["size"] in sizes})
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "ceiling.json"
        text = subprocess.run([str(REPO / "build" / "bin" / "titan_gemm_ceiling"), "--models",
                               ",".join(sizes), "--tokens", ",".join(tokens), "--json", str(out)],
                              check=True, capture_output=True, text=True, env=env).stdout
        return json.loads(out.read_text()), text


def selected_sizes(args):
    return list(SHAPES) if args.cases == "all" else args.cases.split(",")


def mfu(case, r, flops_per_token, ceiling):
    """Achieved FLOP/s of a run over the ceiling of its dtype at its tokens per step, in %."""
    try:
        top = ceiling[case["size"]][case["dtype"]][str(case.get("seq", 512))] * 1e9
    except KeyError:
        return "-"
    if "step" not in r or not flops_per_token:
        return "-"
    return f"{100 * flops_per_token * case.get('seq', 512) / r['step'] / top:.1f}%"


def gemm_share(r):
    if not r.get("trace") or not Path(r["trace"]).exists():
        return "-"
    _, step_ms, gemm_ms = self_time_table(r["trace"], 1)
    return f"{100 * gemm_ms / step_ms:.0f}%"


def combine(runs):
    """One side's result over its rounds: the median step, the peaks' maximum."""
    ok = [r for r in runs if "step" in r]
    out = dict(runs[-1] if not ok else ok[-1])
    for key in ("rss", "anon"):
        out[key] = max(r.get(key, 0) for r in runs)
    if ok:
        out["step"] = statistics.median(r["step"] for r in ok)
        out["steps"] = [r["step"] for r in ok]
    return out


def row(case, t, p, ceiling, profile):
    def step(r):
        if "step" in r:
            return f"{r['step']:.1f} s"
        # Refused at start-up (titan's memory check), stopped above the limit, or killed.
        error = r.get("error", "")
        memory = ("stopped by the benchmark" in error or "model state needs" in error or
                  "out of memory" in error.lower() or r.get("code") in (-9, 137))
        return "does not fit" if memory else "failed"
    ratio = "-"
    if p and t.get("steps") and p.get("steps"):
        # each round's ratio, then their median
        ratio = f"{statistics.median(b / a for a, b in zip(t['steps'], p['steps'])):.2f}"
    peer = p or {}
    peer_name = case.get("peer") or "-"
    flops = t.get("flops_per_token")
    cells = [describe(case), peer_name, step(t), step(peer) if p else "-", ratio,
             mfu(case, t, flops, ceiling), mfu(case, peer, flops, ceiling) if p else "-"]
    if profile:
        cells += [gemm_share(t), gemm_share(peer) if p else "-"]
    cells += [gib(t["rss"]), gib(t["anon"]), gib(t.get("state")),
              gib(peer.get("rss")), gib(peer.get("anon")), gib(peer.get("state"))]
    line = "| " + " | ".join(cells) + " |"
    notes = []
    if "error" in t:
        notes.append(f"titan: {t['error']}")
    if p and "error" in p:
        notes.append(f"peer: {p['error']}")
    return line, notes


def profile_text(case, t, p, top):
    """Both sides' top CPU ops by self time, for a row."""
    parts = []
    for name, r in (("titan", t), (case.get("peer"), p)):
        if r and r.get("trace") and Path(r["trace"]).exists():
            table, _, _ = self_time_table(r["trace"], top)
            parts += [f"{describe(case)}: {name}, one step, {table}", ""]
    return parts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1, help="titan and the peer in turn, N each")
    ap.add_argument("--cases", default="all")
    ap.add_argument("--match", default="",
                    help="only the cases whose description contains this (e.g. AdamW8bit)")
    ap.add_argument("--profile", action="store_true", help="trace one more step of each side")
    ap.add_argument("--top", type=int, default=12, help="ops per profile table")
    ap.add_argument("--keep-traces", help="copy the profiled steps' traces into this folder")
    ap.add_argument("--ceiling", help="a titan_gemm_ceiling --json file instead of running it")
    ap.add_argument("--no-estimate", action="store_true", help="skip the start-up estimate rows")
    ap.add_argument("--write-results", action="store_true")
    ap.add_argument("--peer")
    ap.add_argument("--base")
    ap.add_argument("--trace")
    args = ap.parse_args()
    if args.peer:
        return peer_main(json.loads(args.peer), Path(args.base), args.steps, args.trace)
    if args.write_results and args.match:
        ap.error("--write-results rewrites the whole section: run every case (no --match)")
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(os.cpu_count()))
    sizes = selected_sizes(args)
    ceiling, ceiling_text = gemm_ceiling(args, env)
    if ceiling_text:
        print(ceiling_text, flush=True)
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [f"Random weights in the published shapes, batch 1 x 512 (unless the case says), "
             f"{env['OMP_NUM_THREADS']} threads, {args.steps} steps (median after the first), "
             f"{args.rounds} round(s) of titan then the peer, one process each; load average "
             f"at the start {load}; MFU: torchtitan's FLOPs of the step over the GEMM ceiling "
             f"of the row's dtype and tokens; RSS: ru_maxrss (mapped checkpoint pages included), "
             f"anon: peak RssAnon sampled; state: titan's start-up line, the peer's tensors.", "",
             "| case | peer | titan step | peer step | ratio (peer/titan) | titan MFU | peer MFU |"
             + (" titan GEMM share | peer GEMM share |" if args.profile else "") +
             " titan peak RSS | titan peak anon | titan state | peer peak RSS | peer peak anon | "
             "peer state |",
             "|---|---|---:|---:|---:|---:|---:|" + ("---:|---:|" if args.profile else "") +
             "---:|---:|---:|---:|---:|---:|"]
    notes, profiles = [], []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        def chosen(cases):
            return [c for c in cases if c["size"] in sizes and args.match in describe(c)]

        for i, case in enumerate(chosen(CASES)):
            base = model_dir(case["size"])
            ts, ps = [], []
            for k in range(args.rounds):
                last = k == args.rounds - 1
                prof = args.profile and last
                ts.append(titan_case(case, base, tmp / f"titan{i}-{k}", args, env, prof))
                if case.get("peer"):
                    ps.append(peer_case(case, base, args, env,
                                        tmp / f"peer{i}.json" if prof else None))
            t, p = combine(ts), combine(ps) if ps else None
            line, why = row(case, t, p, ceiling, args.profile)
            print(line, flush=True)
            lines.append(line)
            notes += why
            if args.profile:
                profiles += profile_text(case, t, p, args.top)
                if args.keep_traces:
                    keep = Path(args.keep_traces)
                    keep.mkdir(parents=True, exist_ok=True)
                    label = describe(case).replace(" ", "_").replace(",", "")
                    for side, r in (("titan", t), ("peer", p or {})):
                        if r.get("trace") and Path(r["trace"]).exists():
                            shutil.copy(r["trace"], keep / f"{label}.{side}.json")
        if not args.no_estimate:
            lines += ["", "Start-up estimate of the model state against the peak of a run at 16 "
                      "tokens a step (activations negligible; the process itself, libtorch and "
                      "the tokenizer, is part of the measured figure):", "",
                      "| case | estimate | peak anon | peak RSS | estimate / anon |",
                      "|---|---:|---:|---:|---:|"]
            for i, case in enumerate(chosen(ESTIMATE_CASES)):
                t = titan_case(case, model_dir(case["size"]), tmp / f"estimate{i}", args, env)
                if "state" not in t:
                    notes.append(f"estimate {describe(case)}: {t.get('error')}")
                    continue
                line = (f"| {describe(case)} | {gib(t['state'])} | {gib(t['anon'])} | "
                        f"{gib(t['rss'])} | {t['state'] / t['anon']:.2f} |")
                print(line, flush=True)
                lines.append(line)
        if profiles:
            lines += ["", "Profiles (one traced step each, CPU ops by self time):", ""] + profiles
    if notes:
        lines += ["", "Failures:", ""] + [f"- {n}" for n in notes]
    text = "\n".join(lines)
    print("\n" + text)
    if args.write_results:
        results = REPO / "bench" / "RESULTS.md"
        body = results.read_text()
        sections = [("## Memory at real sizes (bench/memory_at_scale.py)", text)]
        if ceiling_text:
            sections.insert(0, ("## GEMM ceiling (bench/gemm_ceiling.cpp)",
                                f"{env['OMP_NUM_THREADS']} threads, load average {load}.\n\n"
                                + ceiling_text.strip()))
        for heading, section_text in sections:
            start = body.find(heading)
            section = f"{heading}\n\n{section_text}\n"
            if start >= 0:
                end = body.find("\n## ", start + len(heading))
                body = body[:start] + section + (body[end + 1:] if end >= 0 else "")
            else:
                body = body.rstrip("\n") + "\n\n" + section
        results.write_text(body)


if __name__ == "__main__":
    main()
