"""GPU training throughput: native titan vs Hugging Face Transformers eager, same shapes and
batch, measured in one run (docs/architecture.md section 5 setting: fp32 master weights, bf16 compute,
fused AdamW). Prints one JSON line per case and a table.

usage: python3 bench/gpu_throughput.py --titan build-cuda/bin/titan [--steps 10] [--out DIR]
"""
import argparse
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


def run_titan(titan, cfg_dir, batch, seq, steps, dump):
    cmd = [titan, "train", "--module", "qwen3", "--config", "qwen3_debugmodel",
           "--model.flavor", "auto", "--model.hf_assets_path", str(cfg_dir),
           "--training.device", "cuda", "--training.mixed_precision_param", "bfloat16",
           "--training.steps", str(steps), "--training.local_batch_size", str(batch),
           "--training.seq_len", str(seq), "--metrics.log_freq", "1",
           "--lr_scheduler.warmup_steps", "2", "--job.dump_folder", str(dump)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": (proc.stderr or proc.stdout)[-600:]}
    rows = [json.loads(l) for l in (dump / "metrics.jsonl").read_text().splitlines()]
    tail = rows[3:] or rows
    return {"tps": sum(r["tps"] for r in tail) / len(tail), "mfu": tail[-1].get("mfu"),
            "memory_gib": max(r["memory_gib"] for r in rows), "loss_first": rows[0]["loss"],
            "loss_last": rows[-1]["loss"]}


def run_hf(cfg, moe, batch, seq, steps):
    from transformers import Qwen3ForCausalLM, Qwen3MoeForCausalLM
    torch.manual_seed(0)
    model = (Qwen3MoeForCausalLM if moe else Qwen3ForCausalLM)(cfg).cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(steps):
        x = torch.randint(0, 151643, (batch, seq + 1), device="cuda")
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(x[:, :-1], labels=x[:, :-1])
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    tail = times[3:] or times
    res = {"tps": batch * seq / (sum(tail) / len(tail)),
           "memory_gib": torch.cuda.max_memory_allocated() / 2**30}
    del model, opt
    torch.cuda.empty_cache()
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--titan", required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--out", default=".")
    ap.add_argument("--cases", default=",".join(CASES))
    args = ap.parse_args()
    rows = []
    for name in args.cases.split(","):
        kwargs, moe, batch, seq = CASES[name]
        cfg = make_config(kwargs, moe)
        tmp = Path(tempfile.mkdtemp(prefix="titan-gpu-"))
        cfg.save_pretrained(tmp)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(REPO / "assets" / "qwen3-tokenizer" / f, tmp / f)
        ours = run_titan(args.titan, tmp, batch, seq, args.steps, tmp / "dump")
        try:
            peer = run_hf(cfg, moe, batch, seq, args.steps)
        except Exception as e:  # report, keep the other cases
            peer = {"error": str(e)[-300:]}
        row = {"case": name, "batch": batch, "seq": seq, "titan": ours, "hf_eager": peer}
        if "tps" in ours and "tps" in peer:
            row["ratio"] = ours["tps"] / peer["tps"]
        print(json.dumps(row), flush=True)
        with open(Path(args.out) / "gpu_throughput.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        rows.append(row)
    print("\n| case | titan tok/s | HF eager tok/s | ratio | titan mem GiB | HF mem GiB |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        t, h = r["titan"], r["hf_eager"]
        print(f"| {r['case']} | {t.get('tps', float('nan')):,.0f} | {h.get('tps', float('nan')):,.0f}"
              f" | {r.get('ratio', float('nan')):.2f} | {t.get('memory_gib', float('nan')):.1f}"
              f" | {h.get('memory_gib', float('nan')):.1f} |")


if __name__ == "__main__":
    main()
