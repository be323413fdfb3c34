"""CPU training throughput: native titan, titan with the Transformers modeling backend, and
Hugging Face Transformers trained in Python (eager PyTorch), on the same Qwen3 config, batch
and data, measured in one run. Prints tokens/s, the ratios, and the Python overhead per step of
the Transformers backend (its step time minus the native model's: the same trainer, loss and
optimizer around Transformers' own Python modules).

Both train from the same random HF checkpoint (written here with transformers), with AdamW
and fp32 on the CPU, OMP_NUM_THREADS threads. titan's figure is the mean tps of its step
lines after warm-up; the peer's is timed around its own steps after warm-up.

usage: build/python bench/cpu_tokens_per_second.py [--moe] [--steps 8] [--batch 4] [--seq 256]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--moe", action="store_true")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)

    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    # The debugmodel / debugmodel_moe flavors' shape, with the real Qwen3 vocabulary.
    common = dict(vocab_size=151936, hidden_size=256, num_hidden_layers=4, num_attention_heads=8,
                  num_key_value_heads=4, head_dim=64, intermediate_size=768,
                  max_position_embeddings=4096, rope_theta=1e6, tie_word_embeddings=True)
    if args.moe:
        cfg = Qwen3MoeConfig(**common, moe_intermediate_size=256, num_experts=8,
                             num_experts_per_tok=2, norm_topk_prob=True)
        model = Qwen3MoeForCausalLM(cfg)
    else:
        cfg = Qwen3Config(**common)
        model = Qwen3ForCausalLM(cfg)
    tmp = Path(tempfile.mkdtemp(prefix="titan-bench-"))
    src = tmp / "model"
    model.save_pretrained(src)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        (src / f).write_bytes((REPO / "assets" / "qwen3-tokenizer" / f).read_bytes())

    def titan_run(backend):
        dump = tmp / backend
        subprocess.run(
            [os.environ.get("TITAN_BIN", str(REPO / "build" / "bin" / "titan")), "train", "--module",
             "qwen3", "--config", "qwen3_debugmodel", "--model.name", backend, "--model.flavor",
             "auto", "--model.hf_assets_path", str(src), "--checkpoint.initial_load_in_hf",
             "--training.steps", str(args.steps), "--training.local_batch_size", str(args.batch),
             "--training.seq_len", str(args.seq), "--metrics.log_freq", "1", "--job.dump_folder",
             str(dump)], check=True, stdout=subprocess.DEVNULL)
        rows = [json.loads(l) for l in (dump / "metrics.jsonl").read_text().splitlines()]
        return sum(r["tps"] for r in rows[args.warmup:]) / len(rows[args.warmup:])

    titan_tps = titan_run("qwen3")
    backend_tps = titan_run("transformers")

    # Peer: the same model in eager PyTorch, AdamW (fused CPU kernel), same batch shape.
    model = model.float().train()
    model.config._attn_implementation = "sdpa"
    opt = torch.optim.AdamW(model.parameters(), lr=8e-4, betas=(0.9, 0.95), weight_decay=0.1,
                            fused=True)
    gen = torch.Generator().manual_seed(0)
    times = []
    for step in range(args.steps):
        x = torch.randint(0, 151643, (args.batch, args.seq + 1), generator=gen)
        t0 = time.perf_counter()
        logits = model(x[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), x[:, 1:].flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
    hf_tps = args.batch * args.seq / (sum(times[args.warmup:]) / len(times[args.warmup:]))

    kind = "Qwen3-MoE debugmodel_moe" if args.moe else "Qwen3 debugmodel"
    tokens = args.batch * args.seq
    overhead_ms = 1000 * (tokens / backend_tps - tokens / titan_tps)
    print(json.dumps({"case": kind, "threads": args.threads, "batch": args.batch, "seq": args.seq,
                      "titan_tps": round(titan_tps, 1),
                      "titan_transformers_backend_tps": round(backend_tps, 1),
                      "hf_eager_tps": round(hf_tps, 1), "ratio": round(titan_tps / hf_tps, 3),
                      "backend_ratio": round(backend_tps / hf_tps, 3),
                      "backend_overhead_ms_per_step": round(overhead_ms, 1)}))
    print(f"| {kind} | titan {titan_tps:,.0f} tok/s | titan + Transformers backend "
          f"{backend_tps:,.0f} tok/s | HF eager {hf_tps:,.0f} tok/s | ratios {titan_tps / hf_tps:.2f}x, "
          f"{backend_tps / hf_tps:.2f}x | backend overhead {overhead_ms:.0f} ms/step |")


if __name__ == "__main__":
    main()
