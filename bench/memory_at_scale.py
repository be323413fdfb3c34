"""Memory and step time at real Qwen3 sizes on this machine, titan against its peer in one run:
random weights in the published shapes (Qwen3-0.6B, -1.7B, -4B, -8B config.json values, saved as
bfloat16 safetensors shards, cached under ~/.cache/titan-cpp/bench-models), batch 1 x 512 of
the default corpus, OMP_NUM_THREADS threads (default: all cores).

Cases (each run in a process of its own; the peer in a Python child):
  0.6B full fine-tune, float32          titan                      HF eager + AdamW
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

Also: titan's start-up estimate against the resident memory of a run at 16 tokens (where
activations are negligible), for the 0.6B full fine-tune and the 4B QLoRA.

usage: build/python bench/memory_at_scale.py [--cases all|0.6B|1.7B|4B|8B] [--match TEXT] [--steps 3]
                                             [--write-results]
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


def titan_case(case, base, job, args, env):
    cmd = [str(REPO / "build" / "bin" / "titan"), "train", "--module", "qwen3", "--config",
           "qwen3_debugmodel", "--model.flavor", "auto", "--model.hf_assets_path", str(base),
           "--checkpoint.initial_load_path", str(base), "--checkpoint.initial_load_in_hf",
           "--training.steps", str(case.get("steps", args.steps)),
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
    stdout, stderr, code, rss, anon = run_child(cmd, env)
    result = {"rss": rss, "anon": anon, "code": code}
    if code != 0:
        result["error"] = (stderr.strip().splitlines() or ["?"])[-1][:200]
        return result
    metrics = [json.loads(l) for l in (job / "metrics.jsonl").read_text().splitlines()]
    tokens = case.get("seq", 512)
    times = [tokens / m["tps"] for m in metrics[1:]] or [tokens / metrics[0]["tps"]]
    result.update(step=statistics.median(times), loss=metrics[-1]["loss"])
    # "holds A MiB of parameters, as much again of gradients and B MiB of optimizer state:
    # C MiB, ...; and D MiB of frozen base"
    line = next(l for l in stdout.splitlines() if " holds " in l)
    state = float(re.search(r": ([0-9.]+) MiB,", line).group(1))
    frozen = re.search(r"and ([0-9.]+) MiB of frozen base", line)
    result["state"] = (state + (float(frozen.group(1)) if frozen else 0.0)) * 2**20
    return result


def peer_main(case, base, steps):
    """One peer run in this (child) process; prints a JSON line."""
    import torch
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    sys.path.insert(0, str(REPO / "tests" / "integration"))
    from hf_models import packed_windows

    torch.manual_seed(0)
    dtype = torch.bfloat16 if case["dtype"] == "bfloat16" else torch.float32
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
    data = packed_windows(REPO / "assets" / "corpus" / "python_stdlib.jsonl",
                          REPO / "assets" / "qwen3-tokenizer", seq, steps)
    times, loss = [], None
    for step in range(steps):
        batch = torch.tensor(data[step:step + 1])
        start = time.perf_counter()
        out = model(batch[:, :-1], labels=batch[:, 1:])
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - start)
        loss = out.loss.item()
    trained = sum(p.numel() * p.element_size() for p in params)
    seen = {id(p) for p in params}
    frozen = sum(t.numel() * t.element_size() for t in list(model.parameters()) +
                 list(model.buffers()) if id(t) not in seen)
    # The optimizer's state as it holds it (bitsandbytes' maps are shared by every parameter).
    moments = {id(t): t.numel() * t.element_size() for s in opt.state.values()
               for t in s.values() if torch.is_tensor(t) and t.numel() > 1}
    print(json.dumps({"state": 2 * trained + sum(moments.values()) + frozen,
                      "step": statistics.median(times[1:]), "loss": loss}))


def peer_case(case, base, args, env):
    cmd = [sys.executable, __file__, "--peer", json.dumps(case), "--base", str(base), "--steps",
           str(case.get("steps", args.steps))]
    stdout, stderr, code, rss, anon = run_child(cmd, env)
    result = {"rss": rss, "anon": anon, "code": code}
    if code != 0:
        lines = [l for l in stderr.strip().splitlines() if l.strip()] or ["?"]
        result["error"] = f"exit {code}: {lines[-1][:200]}"
        return result
    result.update(json.loads(stdout.strip().splitlines()[-1]))
    return result


CASES = [
    # size, kind, dtype, activation checkpointing, label, peer
    dict(size="0.6B", kind="full", dtype="float32", peer="HF eager + AdamW"),
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


def row(case, t, p):
    def step(r):
        if "step" in r:
            return f"{r['step']:.1f} s"
        # Refused at start-up (titan's memory check), stopped above the limit, or killed.
        error = r.get("error", "")
        memory = ("stopped by the benchmark" in error or "model state needs" in error or
                  "out of memory" in error.lower() or r.get("code") in (-9, 137))
        return "does not fit" if memory else "failed"
    ratio = f"{p['step'] / t['step']:.2f}" if "step" in t and p and "step" in p else "-"
    peer = p or {}
    peer_name = case.get("peer") or "-"
    cells = [describe(case), peer_name, step(t), step(peer) if p else "-", ratio,
             gib(t["rss"]), gib(t["anon"]), gib(t.get("state")),
             gib(peer.get("rss")), gib(peer.get("anon")), gib(peer.get("state"))]
    line = "| " + " | ".join(cells) + " |"
    notes = []
    if "error" in t:
        notes.append(f"titan: {t['error']}")
    if p and "error" in p:
        notes.append(f"peer: {p['error']}")
    return line, notes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--cases", default="all")
    ap.add_argument("--match", default="",
                    help="only the cases whose description contains this (e.g. AdamW8bit)")
    ap.add_argument("--write-results", action="store_true")
    ap.add_argument("--peer")
    ap.add_argument("--base")
    args = ap.parse_args()
    if args.peer:
        return peer_main(json.loads(args.peer), Path(args.base), args.steps)
    if args.write_results and args.match:
        ap.error("--write-results rewrites the whole section: run every case (no --match)")
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(os.cpu_count()))
    sizes = list(SHAPES) if args.cases == "all" else args.cases.split(",")
    lines = [f"Random weights in the published shapes, batch 1 x 512 (unless the case says), {env['OMP_NUM_THREADS']} "
             f"threads, {args.steps} steps (median after the first), one process each; "
             f"RSS: ru_maxrss (mapped checkpoint pages included), anon: peak RssAnon sampled; "
             f"state: titan's start-up line, the peer's tensors.", "",
             "| case | peer | titan step | peer step | ratio (peer/titan) | titan peak RSS | "
             "titan peak anon | titan state | peer peak RSS | peer peak anon | peer state |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    notes = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        def chosen(cases):
            return [c for c in cases if c["size"] in sizes and args.match in describe(c)]

        for i, case in enumerate(chosen(CASES)):
            base = model_dir(case["size"])
            t = titan_case(case, base, tmp / f"titan{i}", args, env)
            p = peer_case(case, base, args, env) if case.get("peer") else None
            line, why = row(case, t, p)
            print(line, flush=True)
            lines.append(line)
            notes += why
        lines += ["", "Start-up estimate of the model state against the peak of a run at 16 "
                  "tokens a step (activations negligible; the process itself, libtorch and the "
                  "tokenizer, is part of the measured figure):", "",
                  "| case | estimate | peak anon | peak RSS | estimate / anon |",
                  "|---|---:|---:|---:|---:|"]
        for i, case in enumerate(chosen(ESTIMATE_CASES)):
            t = titan_case(case, model_dir(case["size"]), tmp / f"estimate{i}", args, env)
            if "state" not in t:
                notes.append(f"estimate {describe(case)}: {t.get('error')}")
                continue
            line = (f"| {describe(case)} | {gib(t['state'])} | {gib(t['anon'])} | {gib(t['rss'])} "
                    f"| {t['state'] / t['anon']:.2f} |")
            print(line, flush=True)
            lines.append(line)
    if notes:
        lines += ["", "Failures:", ""] + [f"- {n}" for n in notes]
    text = "\n".join(lines)
    print("\n" + text)
    if args.write_results:
        results = REPO / "bench" / "RESULTS.md"
        heading = "## Memory at real sizes (bench/memory_at_scale.py)"
        body = results.read_text()
        start = body.find(heading)
        section = f"{heading}\n\n{text}\n"
        if start >= 0:
            end = body.find("\n## ", start + len(heading))
            body = body[:start] + section + (body[end + 1:] if end >= 0 else "")
        else:
            body = body.rstrip("\n") + "\n\n" + section
        results.write_text(body)


if __name__ == "__main__":
    main()
