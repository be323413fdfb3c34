"""GPU training throughput, four trainers on the same shapes and batch in one run: titan's
reference path, titan's kernels path (the fused kernels through override.imports), Hugging Face
Transformers eager and HF with torch.compile (docs/architecture.md section 5 setting: fp32
master weights, bf16 compute, fused AdamW). Prints one JSON line per case, then a table of
tokens/s, MFU (torchtitan's formula, 6N + 12 L H d S per token, and the causal one, which
halves the attention term) and peak memory, and appends the table to --results when given.

usage: python3 bench/gpu_throughput.py --titan build-cuda/bin/titan [--steps 10] [--out DIR]
           [--cases NAME,...] [--results bench/RESULTS.md]
"""
import argparse
import atexit
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]

CASES = {
    # name: (config kwargs, moe, batch, seq)
    "qwen3-0.6B dense": (dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                              num_attention_heads=16, num_key_value_heads=8,
                              tie_word_embeddings=True), False, 4, 4096),
    "qwen3-30B-A3B shape 4 layers": (dict(hidden_size=2048, intermediate_size=6144,
                                           num_hidden_layers=4, num_attention_heads=32,
                                           num_key_value_heads=4, moe_intermediate_size=768,
                                           num_experts=128, num_experts_per_tok=8,
                                           norm_topk_prob=True, tie_word_embeddings=False),
                                      True, 4, 4096),
}


def make_config(kwargs, moe):
    from transformers import Qwen3Config, Qwen3MoeConfig
    common = dict(vocab_size=151936, head_dim=128, max_position_embeddings=40960, rope_theta=1e6,
                  rms_norm_eps=1e-6, attn_implementation="sdpa")
    return (Qwen3MoeConfig if moe else Qwen3Config)(**common, **kwargs)


PEAK_BF16 = 989e12  # H100/H200 dense bf16
KERNELS = ["--override.imports", "moe_experts=fused,rms_norm=fused,rope=fused,cross_entropy=fused",
           "--override.fallback", "true"]


def flops_per_token(cfg, moe, seq, causal):
    """torchtitan's count: 6 x matmul parameters (active experts only, output head included,
    embedding excluded) + 12 L H d S attention (halved when causal)."""
    h, layers, d = cfg.hidden_size, cfg.num_hidden_layers, cfg.head_dim
    nq, nkv = cfg.num_attention_heads, cfg.num_key_value_heads
    attn = h * nq * d * 2 + h * nkv * d * 2
    if moe:
        mlp = h * cfg.num_experts + cfg.num_experts_per_tok * 3 * h * cfg.moe_intermediate_size
    else:
        mlp = 3 * h * cfg.intermediate_size
    n = layers * (attn + mlp) + cfg.vocab_size * h
    attention = 12 * layers * nq * d * seq
    return 6 * n + (attention / 2 if causal else attention)


def run_titan(titan, cfg_dir, batch, seq, steps, dump, extra=()):
    cmd = [titan, "train", "--module", "qwen3", "--config", "qwen3_debugmodel",
           "--model.flavor", "auto", "--model.hf_assets_path", str(cfg_dir),
           "--training.device", "cuda", "--training.mixed_precision_param", "bfloat16",
           "--training.steps", str(steps), "--training.local_batch_size", str(batch),
           "--training.seq_len", str(seq), "--metrics.log_freq", "1",
           "--lr_scheduler.warmup_steps", "2", "--job.dump_folder", str(dump), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": (proc.stderr or proc.stdout)[-600:]}
    rows = [json.loads(l) for l in (dump / "metrics.jsonl").read_text().splitlines()]
    tail = rows[3:] or rows
    return {"tps": sum(r["tps"] for r in tail) / len(tail), "mfu": tail[-1].get("mfu"),
            "memory_gib": max(r["memory_gib"] for r in rows), "loss_first": rows[0]["loss"],
            "loss_last": rows[-1]["loss"]}


def run_hf(cfg, moe, batch, seq, steps, compiled=False):
    from transformers import Qwen3ForCausalLM, Qwen3MoeForCausalLM
    torch.manual_seed(0)
    model = (Qwen3MoeForCausalLM if moe else Qwen3ForCausalLM)(cfg).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    forward = torch.compile(model) if compiled else model
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(steps):
        x = torch.randint(0, 151643, (batch, seq + 1), device="cuda")
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = forward(x[:, :-1], labels=x[:, :-1])
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    tail = times[3:] or times  # the compile happens in the first steps
    res = {"tps": batch * seq / (sum(tail) / len(tail)),
           "memory_gib": torch.cuda.max_memory_allocated() / 2**30}
    del model, opt, forward
    torch.cuda.empty_cache()
    return res


TRAINERS = ["titan reference", "titan kernels", "HF eager", "HF compiled"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--titan", required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--out", default=".")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--results", default="", help="markdown file to append the table to")
    ap.add_argument("--profile", action="store_true",
                    help="also trace the last step of each titan run and print its top kernels")
    args = ap.parse_args()
    rows = []
    for name in args.cases.split(","):
        kwargs, moe, batch, seq = CASES[name]
        cfg = make_config(kwargs, moe)
        tmp = Path(tempfile.mkdtemp(prefix="titan-gpu-"))
        atexit.register(shutil.rmtree, tmp, ignore_errors=True)
        cfg.save_pretrained(tmp)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(REPO / "assets" / "qwen3-tokenizer" / f, tmp / f)
        trace = (["--profiling.enable_profiling", "true", "--profiling.profile_freq",
                  str(args.steps)] if args.profile else [])
        results = {
            "titan reference": run_titan(args.titan, tmp, batch, seq, args.steps, tmp / "ref",
                                         trace),
            "titan kernels": run_titan(args.titan, tmp, batch, seq, args.steps, tmp / "kernels",
                                       KERNELS + trace),
        }
        if args.profile:
            from profile_table import top_ops
            for path in ("ref", "kernels"):
                for t in (tmp / path / "profile_traces").glob("iteration_*/rank0_trace.json"):
                    kind, rows = top_ops(t, 15)
                    print(f"\n{name}, titan {path}, step trace {t}:\n| {kind} | ms | calls | share |")
                    print("|---|---|---|---|")
                    for op, ms, calls, share in rows:
                        print(f"| {op[:80]} | {ms:.2f} | {calls} | {share:.1f}% |")
        for trainer, compiled in (("HF eager", False), ("HF compiled", True)):
            try:
                results[trainer] = run_hf(cfg, moe, batch, seq, args.steps, compiled)
            except Exception as e:  # report, keep the other cases
                results[trainer] = {"error": str(e)[-300:]}
        for r in results.values():
            if "tps" in r:
                r["mfu_torchtitan"] = 100 * r["tps"] * flops_per_token(cfg, moe, seq, False) / PEAK_BF16
                r["mfu_causal"] = 100 * r["tps"] * flops_per_token(cfg, moe, seq, True) / PEAK_BF16
        row = {"case": name, "batch": batch, "seq": seq, **results}
        print(json.dumps(row), flush=True)
        with open(Path(args.out) / "gpu_throughput.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        rows.append(row)
    nan = float("nan")
    lines = ["", f"GPU throughput ({time.strftime('%Y-%m-%d')}, `gpu_throughput.py`, "
             f"{torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU'}):", "",
             "| case | trainer | tok/s | vs HF eager | MFU torchtitan | MFU causal | peak GiB |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        eager = r["HF eager"].get("tps", nan)
        for trainer in TRAINERS:
            t = r[trainer]
            if "tps" not in t:
                lines.append(f"| {r['case']} | {trainer} | error: {t.get('error', '')[:80]} | | | | |")
                continue
            lines.append(f"| {r['case']} | {trainer} | {t['tps']:,.0f} | {t['tps'] / eager:.2f}x"
                         f" | {t['mfu_torchtitan']:.1f}% | {t['mfu_causal']:.1f}%"
                         f" | {t.get('memory_gib', nan):.1f} |")
    print("\n".join(lines))
    if args.results:
        with open(args.results, "a") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
