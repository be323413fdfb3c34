"""Full fine-tuning vs LoRA vs QLoRA on the CPU, titan against its peers in one run: Hugging Face
Transformers trained in Python (full), PEFT (LoRA) and PEFT + bitsandbytes (QLoRA, NF4 with
double-quantised scales), on the same random checkpoint of the debug model's shape (vocabulary
151936, hidden 256, 4 layers), batch and data, fp32, OMP_NUM_THREADS threads.

For each of the six runs, each in a process of its own: the peak resident memory of that process
(ru_maxrss, from wait4), the bytes of model state (parameters, gradients and AdamW's two moments
of what trains, plus the frozen base as it is held: titan's start-up line; the peers' tensors
counted in the loop) and the median step time over the steps after the first two. LoRA: rank 8,
alpha 16 on every attention and MLP projection.

Then the same model-state bytes computed for Qwen3-0.6B and Qwen3-8B (their published
config.json shapes): fp32 master weights, gradients and AdamW moments for full fine-tuning; a
frozen fp32 (or bf16) base plus the adapters' 16 bytes a parameter for LoRA (rank 16); the
projections in NF4 (4 bits, plus 8 bits a 64-block and 32 bits a 16384-block of double-quantised
scales) for QLoRA.

usage: build/python bench/lora_finetune.py [--steps 6] [--batch 4] [--seq 128] [--rank 8]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def make_base(path):
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM
    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=151936, hidden_size=256, intermediate_size=768,
                         num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4,
                         head_dim=64, tie_word_embeddings=True, max_position_embeddings=4096)
    Qwen3ForCausalLM(config).save_pretrained(path)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (path / name).write_bytes((REPO / "assets" / "qwen3-tokenizer" / name).read_bytes())


def windows(args):
    """The batches titan packs from the default corpus (documents + eos, seq + 1 windows)."""
    sys.path.insert(0, str(REPO / "tests" / "integration"))
    from hf_models import packed_windows
    corpus = REPO / "assets" / "corpus" / "python_stdlib.jsonl"
    return packed_windows(corpus, REPO / "assets" / "qwen3-tokenizer", args.seq,
                          args.steps * args.batch)


def run_child(cmd, env, what):
    """Runs `cmd` to its end; returns (stdout, peak resident memory in MiB) from wait4."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed:\n{stdout[-2000:]}\n{stderr[-3000:]}")
    return stdout, usage.ru_maxrss / 1024.0


def titan_run(kind, base, job, args, env):
    cmd = [str(REPO / "build" / "bin" / "titan"), "train", "--module", "qwen3", "--config",
           "qwen3_debugmodel", "--model.flavor", "auto", "--model.hf_assets_path", str(base),
           "--checkpoint.initial_load_path", str(base), "--checkpoint.initial_load_in_hf",
           "--training.steps", str(args.steps), "--training.local_batch_size", str(args.batch),
           "--training.seq_len", str(args.seq), "--job.dump_folder", str(job),
           "--training.dataset_path", str(REPO / "assets/corpus/python_stdlib.jsonl"),
           "--optimizer.lr", "1e-4", "--lr_scheduler.warmup_steps", "0"]
    if kind != "full":
        cmd += ["--model.converters", "lora", "--lora.rank", str(args.rank), "--lora.alpha",
                str(2 * args.rank)]
    if kind == "qlora":
        cmd += ["--lora.base_quantization", "nf4"]
    start = time.time()
    out, rss = run_child(cmd, env, f"titan {kind}")
    metrics = [json.loads(l) for l in (job / "metrics.jsonl").read_text().splitlines()]
    tokens = args.batch * args.seq
    steps = [tokens / m["tps"] for m in metrics[2:]]
    # "holds A MiB of parameters, as much again of gradients and B MiB of optimizer state:
    # C MiB, ...; and D MiB of frozen base"
    line = next(l for l in out.splitlines() if " holds " in l)
    state = float(re.search(r": ([0-9.]+) MiB,", line).group(1))
    frozen = re.search(r"and ([0-9.]+) MiB of frozen base", line)
    state += float(frozen.group(1)) if frozen else 0.0
    return {"state_mib": state, "rss_mib": rss, "step_s": statistics.median(steps),
            "loss": metrics[-1]["loss"], "wall_s": time.time() - start}


def peer_main(kind, base, args):
    """One peer run in this (child) process; prints a JSON line."""
    import torch
    import peft
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig
    torch.manual_seed(0)
    if kind == "qlora":
        quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                   bnb_4bit_use_double_quant=True,
                                   bnb_4bit_compute_dtype=torch.float32)
        model = AutoModelForCausalLM.from_pretrained(base, quantization_config=quant,
                                                     device_map="cpu", dtype=torch.float32)
        model = peft.prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
    else:
        model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32,
                                                     attn_implementation="sdpa")
    if kind != "full":
        model = peft.get_peft_model(model, peft.LoraConfig(r=args.rank, lora_alpha=2 * args.rank,
                                                           target_modules=PROJECTIONS))
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    data = windows(args)
    times, loss = [], None
    for step in range(args.steps):
        batch = torch.tensor(data[step * args.batch:(step + 1) * args.batch])
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
    state = (4 * trained + frozen) / 2**20  # weights, gradients, two moments; frozen base
    print(json.dumps({"state_mib": state, "step_s": statistics.median(times[2:]),
                      "loss": loss}))


def peer_run(kind, base, args, env):
    cmd = [sys.executable, __file__, "--peer", kind, "--base", str(base), "--steps",
           str(args.steps), "--batch", str(args.batch), "--seq", str(args.seq), "--rank",
           str(args.rank)]
    out, rss = run_child(cmd, env, f"peer {kind}")
    result = json.loads(out.strip().splitlines()[-1])
    result["rss_mib"] = rss
    return result


def computed_state(name, hidden, intermediate, layers, heads, kv_heads, head_dim, vocab, tied,
                   rank):
    """Model-state bytes of full fine-tuning, LoRA and QLoRA for a published dense Qwen3."""
    q, kv = heads * head_dim, kv_heads * head_dim
    shapes = [(q, hidden), (kv, hidden), (kv, hidden), (hidden, q), (intermediate, hidden),
              (intermediate, hidden), (hidden, intermediate)]
    projections = layers * sum(o * i for o, i in shapes)
    adapters = layers * sum(rank * (o + i) for o, i in shapes)
    norms = layers * (2 * hidden + 2 * head_dim) + hidden
    embeddings = vocab * hidden * (1 if tied else 2)
    total = projections + norms + embeddings
    nf4 = projections * (0.5 + 1 / 64 + 4 / (64 * 256))  # codes + double-quantised scales
    gib = 2**30
    return {
        "model": name, "parameters": total, "adapters": adapters,
        "full": 16 * total / gib,
        "lora_fp32_base": (4 * total + 16 * adapters) / gib,
        "lora_bf16_base": (2 * total + 16 * adapters) / gib,
        "qlora": (nf4 + 4 * (norms + embeddings) + 16 * adapters) / gib,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--peer")
    ap.add_argument("--base")
    args = ap.parse_args()
    if args.peer:
        return peer_main(args.peer, Path(args.base), args)
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(os.cpu_count()))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        make_base(tmp / "base")
        rows = []
        for kind in ("full", "lora", "qlora"):
            t = titan_run(kind, tmp / "base", tmp / f"titan_{kind}", args, env)
            p = peer_run(kind, tmp / "base", args, env)
            rows.append((kind, t, p))
    print(f"\ndebug model (vocab 151936, hidden 256, 4 layers), batch {args.batch} x {args.seq}, "
          f"fp32, {env['OMP_NUM_THREADS']} threads, LoRA rank {args.rank}\n")
    print("| run | titan peak RSS | peer peak RSS | titan model state | peer model state | "
          "titan step | peer step | step ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    peers = {"full": "HF eager", "lora": "PEFT", "qlora": "PEFT + bitsandbytes"}
    for kind, t, p in rows:
        print(f"| {kind} (peer: {peers[kind]}) | {t['rss_mib']:.0f} MiB | {p['rss_mib']:.0f} MiB | "
              f"{t['state_mib']:.1f} MiB | {p['state_mib']:.1f} MiB | {t['step_s']:.3f} s | "
              f"{p['step_s']:.3f} s | {p['step_s'] / t['step_s']:.2f}x |")
    print("\ncomputed model state (GiB), LoRA rank 16 on every projection:\n")
    print("| model | parameters | adapters | full fine-tune | LoRA, fp32 base | LoRA, bf16 base "
          "| QLoRA |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for c in (computed_state("Qwen3-0.6B", 1024, 3072, 28, 16, 8, 128, 151936, True, 16),
              computed_state("Qwen3-8B", 4096, 12288, 36, 32, 8, 128, 151936, False, 16)):
        print(f"| {c['model']} | {c['parameters'] / 1e9:.2f} B | {c['adapters'] / 1e6:.1f} M | "
              f"{c['full']:.2f} | {c['lora_fp32_base']:.2f} | {c['lora_bf16_base']:.2f} | "
              f"{c['qlora']:.2f} |")


if __name__ == "__main__":
    main()
