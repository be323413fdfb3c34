"""CPU training throughput: native titan, titan with the Transformers modeling backend, and
Hugging Face Transformers trained in Python (eager PyTorch), on the same Qwen3 config, batch
and data, measured in one run. Prints tokens/s, the ratios, and the Python overhead per step of
the Transformers backend (its step time minus the native model's: the same trainer, loss and
optimizer around Transformers' own Python modules).

Both train from the same random HF checkpoint (written here with transformers), with AdamW
and fp32 on the CPU, OMP_NUM_THREADS threads. titan's figures are the tps of its step lines
after warm-up; the peer's are timed around its own steps after warm-up. With --repeats R the
titan and HF runs alternate R times (a shared machine's load drifts). The summary gives, for
each side, the median and the best step over all runs; the ratios are of the medians.

--profile also traces three steps of each side (titan's profiling.* traces, torch.profiler for
HF) and prints, for the fastest of the three (the least disturbed by other load), both sides'
top CPU ops by self time and the GEMMs' share of the step
(bench/profile_table.py). --bf16 adds titan with training.mixed_precision_param bfloat16 (bf16
compute on float32 master weights) when the CPU has AVX512_BF16 or AMX. --baseline BIN adds
another titan binary (a build of an earlier commit) to the same run. --no-backend skips the
Transformers-backend run.

usage: build/python bench/cpu_tokens_per_second.py [--moe] [--steps 8] [--batch 4] [--seq 256]
           [--repeats 1] [--profile] [--bf16] [--baseline BIN] [--no-backend]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))
sys.path.insert(0, str(REPO / "bench"))

from profile_table import self_time_table  # noqa: E402


def cpu_has_bf16():
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return any(f in flags.split() for f in ("avx512_bf16", "amx_bf16"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--moe", action="store_true")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--baseline", help="another titan binary to measure in the same run")
    ap.add_argument("--no-backend", action="store_true")
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
    tokens = args.batch * args.seq
    new_bin = os.environ.get("TITAN_BIN", str(REPO / "build" / "bin" / "titan"))

    def titan_run(label, backend, binary=new_bin, extra=(), steps=args.steps, profile=False):
        """Per-step tps after warm-up; with `profile`, the fastest traced step's trace."""
        dump = tmp / f"{label}-{time.monotonic_ns()}"
        cmd = [binary, "train", "--module", "qwen3", "--config", "qwen3_debugmodel",
               "--model.name", backend, "--model.flavor", "auto", "--model.hf_assets_path",
               str(src), "--checkpoint.initial_load_in_hf", "--training.steps", str(steps),
               "--training.local_batch_size", str(args.batch), "--training.seq_len",
               str(args.seq), "--metrics.log_freq", "1", "--job.dump_folder", str(dump), *extra]
        if profile:
            cmd += ["--profiling.enable_profiling", "--profiling.profile_freq", "2"]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        rows = [json.loads(l) for l in (dump / "metrics.jsonl").read_text().splitlines()]
        if profile:
            traced = [r for r in rows if r["step"] % 2 == 0]
            best = max(traced, key=lambda r: r["tps"])["step"]
            return dump / "profile_traces" / f"iteration_{best}" / "rank0_trace.json"
        return [r["tps"] for r in rows[args.warmup:]]

    # Peer: the same model in eager PyTorch, AdamW (fused CPU kernel), same batch shape.
    model = model.float().train()
    model.config._attn_implementation = "sdpa"
    opt = torch.optim.AdamW(model.parameters(), lr=8e-4, betas=(0.9, 0.95), weight_decay=0.1,
                            fused=True)
    gen = torch.Generator().manual_seed(0)

    def hf_step():
        x = torch.randint(0, 151643, (args.batch, args.seq + 1), generator=gen)
        logits = model(x[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), x[:, 1:].flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    def hf_run():
        times = []
        for _ in range(args.steps):
            t0 = time.perf_counter()
            hf_step()
            times.append(time.perf_counter() - t0)
        return [tokens / t for t in times[args.warmup:]]

    bf16 = args.bf16 and cpu_has_bf16()
    if args.bf16 and not bf16:
        print("[bench] this CPU has neither AVX512_BF16 nor AMX: no bfloat16 run", flush=True)
    bf16_args = ("--training.mixed_precision_param", "bfloat16")
    runs = {"titan": [], "hf": []}
    if args.baseline:
        runs["titan_baseline"] = []
    if bf16:
        runs["titan_bf16"] = []
    if not args.no_backend:
        runs["titan_transformers_backend"] = []
    for _ in range(args.repeats):
        runs["titan"].append(titan_run("titan", "qwen3"))
        runs["hf"].append(hf_run())
        if args.baseline:
            runs["titan_baseline"].append(titan_run("baseline", "qwen3", binary=args.baseline))
        if bf16:
            runs["titan_bf16"].append(titan_run("bf16", "qwen3", extra=bf16_args))
        if not args.no_backend:
            runs["titan_transformers_backend"].append(titan_run("backend", "transformers"))
    tps = {k: statistics.median(sum(v, [])) for k, v in runs.items()}
    best = {k: max(sum(v, [])) for k, v in runs.items()}

    kind = "Qwen3-MoE debugmodel_moe" if args.moe else "Qwen3 debugmodel"
    summary = {"case": kind, "threads": args.threads, "batch": args.batch, "seq": args.seq,
               "repeats": args.repeats}
    for k, v in tps.items():
        summary[f"{k}_tps"] = round(v, 1)
        summary[f"{k}_best_tps"] = round(best[k], 1)
        if k != "hf":
            summary[f"{k}_ratio"] = round(v / tps["hf"], 3)
            summary[f"{k}_best_ratio"] = round(best[k] / best["hf"], 3)
    summary["runs"] = {k: [round(statistics.median(x), 1) for x in v] for k, v in runs.items()}
    if not args.no_backend:
        summary["backend_overhead_ms_per_step"] = round(
            1000 * (tokens / tps["titan_transformers_backend"] - tokens / tps["titan"]), 1)

    if args.profile:
        tables = {"titan": titan_run("titan-profile", "qwen3", steps=7, profile=True)}
        if args.baseline:
            tables["titan_baseline"] = titan_run("baseline-profile", "qwen3", args.baseline,
                                                 steps=7, profile=True)
        if bf16:
            tables["titan_bf16"] = titan_run("bf16-profile", "qwen3", extra=bf16_args, steps=7,
                                             profile=True)
        hf_step()  # warm
        hf_traces = []
        for k in range(3):
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                t0 = time.perf_counter()
                hf_step()
                seconds = time.perf_counter() - t0
            hf_traces.append((seconds, tmp / f"hf_trace{k}.json"))
            prof.export_chrome_trace(str(hf_traces[-1][1]))
        tables["hf"] = min(hf_traces)[1]
        for name, trace in tables.items():
            text, step_ms, gemm_ms = self_time_table(trace, args.top)
            summary[f"{name}_profiled_step_ms"] = round(step_ms, 1)
            summary[f"{name}_gemm_share"] = round(gemm_ms / step_ms, 3)
            print(f"\n### {name}: the fastest of three profiled steps\n\n{text}", flush=True)

    print(json.dumps(summary))
    cells = " | ".join(f"{k} {v:,.0f} tok/s" for k, v in tps.items())
    ratios = ", ".join(f"{k} {v / tps['hf']:.2f}x" for k, v in tps.items() if k != "hf")
    print(f"| {kind} | {cells} | ratios to HF eager: {ratios} |")


if __name__ == "__main__":
    main()
