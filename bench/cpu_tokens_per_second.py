"""CPU training throughput: native titan (and, optionally, titan in bfloat16, another titan
binary, titan with the Transformers modeling backend) against Hugging Face Transformers trained
in Python (eager PyTorch), on the same Qwen3 config, batch and data, measured in one run.

Both train from the same random HF checkpoint (written here with transformers), with AdamW and
fp32 on the CPU, OMP_NUM_THREADS threads. The steps are interleaved: titan runs with a pause
after each step (debug.step_delay_ms), and in that pause it is stopped (SIGSTOP) while the
peer runs one step in this process, then continued. Every titan step is thus next in time to
one HF step, which matters on a shared machine whose load changes from one minute to the next:
the ratio is the median over those pairs of titan's tps (its own step line) over HF's (timed
around its step). The medians of each side's tps are printed too.

--profile also traces three steps of each side (titan's profiling.* traces, torch.profiler for
HF) and prints, for the fastest of the three (the least disturbed by other load), both sides'
top CPU ops by self time and the GEMMs' share of the step (bench/profile_table.py). --bf16
adds titan with training.mixed_precision_param bfloat16 (bf16 compute on float32 master
weights) when the CPU has AVX512_BF16 or AMX. --baseline BIN adds another titan binary (a
build of an earlier commit); --variant LABEL=ARGS adds titan with extra arguments (e.g.
"ref_ce=--override.imports cross_entropy=reference"); --backend adds titan with the
Transformers modeling backend.

usage: build/python bench/cpu_tokens_per_second.py [--moe] [--steps 10] [--batch 4] [--seq 128]
           [--profile] [--bf16] [--baseline BIN] [--variant LABEL=ARGS] [--backend]
"""
import argparse
import atexit
import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from profile_table import self_time_table  # noqa: E402


def cpu_has_bf16():
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return any(f in flags.split() for f in ("avx512_bf16", "amx_bf16"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--moe", action="store_true")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--baseline", help="another titan binary to measure in the same run")
    ap.add_argument("--variant", action="append", default=[], help="LABEL=extra titan args")
    ap.add_argument("--backend", action="store_true", help="titan + Transformers backend too")
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
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)  # checkpoints: GiB at real shapes
    src = tmp / "model"
    model.save_pretrained(src)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        (src / f).write_bytes((REPO / "assets" / "qwen3-tokenizer" / f).read_bytes())
    tokens = args.batch * args.seq
    new_bin = os.environ.get("TITAN_BIN", str(REPO / "build" / "bin" / "titan"))

    # Peer: the same model in eager PyTorch, AdamW (fused CPU kernel), same batch shape.
    model = model.float().train()
    model.config._attn_implementation = "sdpa"
    opt = torch.optim.AdamW(model.parameters(), lr=8e-4, betas=(0.9, 0.95), weight_decay=0.1,
                            fused=True)
    gen = torch.Generator().manual_seed(0)

    def hf_step():
        x = torch.randint(0, 151643, (args.batch, args.seq + 1), generator=gen)
        t0 = time.perf_counter()
        logits = model(x[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), x[:, 1:].flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return tokens / (time.perf_counter() - t0)

    for _ in range(args.warmup):
        hf_step()

    def titan_cmd(label, backend, binary, extra, steps):
        dump = tmp / f"{label}-{time.monotonic_ns()}"
        return dump, [binary, "train", "--module", "qwen3", "--config", "qwen3_debugmodel",
                      "--model.name", backend, "--model.flavor", "auto",
                      "--model.hf_assets_path", str(src), "--checkpoint.initial_load_in_hf",
                      "--training.steps", str(steps), "--training.local_batch_size",
                      str(args.batch), "--training.seq_len", str(args.seq),
                      "--metrics.log_freq", "1", "--job.dump_folder", str(dump), *extra]

    def paired_run(label, backend="qwen3", binary=new_bin, extra=()):
        """titan's tps and the HF step run in its pause after each step, from step warmup+1."""
        dump, cmd = titan_cmd(label, backend, binary,
                              [*extra, "--debug.step_delay_ms", "300"], args.steps)
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
        metrics, seen, hf = dump / "metrics.jsonl", 0, []
        while proc.poll() is None:
            lines = len(metrics.read_text().splitlines()) if metrics.exists() else 0
            if lines > seen:
                seen = lines
                if seen > args.warmup and seen < args.steps:
                    os.kill(proc.pid, signal.SIGSTOP)
                    try:
                        hf.append(hf_step())
                    finally:
                        os.kill(proc.pid, signal.SIGCONT)
            time.sleep(0.005)
        assert proc.returncode == 0, f"{label}: titan exited {proc.returncode}"
        rows = [json.loads(l) for l in metrics.read_text().splitlines()]
        # Titan's step k+1 ran right after the HF step of pause k.
        titan = [r["tps"] for r in rows[args.warmup + 1:]]
        n = min(len(titan), len(hf))
        return titan[:n], hf[:n]

    def profiled_trace(label, binary=new_bin, extra=()):
        """The trace of the fastest of titan's traced steps 2, 4 and 6."""
        dump, cmd = titan_cmd(label, "qwen3", binary,
                              [*extra, "--profiling.enable_profiling",
                               "--profiling.profile_freq", "2"], 7)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        rows = [json.loads(l) for l in (dump / "metrics.jsonl").read_text().splitlines()]
        best = max((r for r in rows if r["step"] % 2 == 0), key=lambda r: r["tps"])["step"]
        return dump / "profile_traces" / f"iteration_{best}" / "rank0_trace.json"

    bf16 = args.bf16 and cpu_has_bf16()
    if args.bf16 and not bf16:
        print("[bench] this CPU has neither AVX512_BF16 nor AMX: no bfloat16 run", flush=True)
    variants = {"titan": dict()}
    if args.baseline:
        variants["titan_baseline"] = dict(binary=args.baseline)
    if bf16:
        variants["titan_bf16"] = dict(extra=("--training.mixed_precision_param", "bfloat16"))
    for v in args.variant:
        label, _, text = v.partition("=")
        variants[label] = dict(extra=tuple(shlex.split(text)))
    if args.backend:
        variants["titan_transformers_backend"] = dict(backend="transformers")

    kind = "Qwen3-MoE debugmodel_moe" if args.moe else "Qwen3 debugmodel"
    summary = {"case": kind, "threads": args.threads, "batch": args.batch, "seq": args.seq,
               "pairs_per_variant": args.steps - args.warmup - 1}
    cells = []
    for name, kw in variants.items():
        titan, hf = paired_run(name, **kw)
        ratio = statistics.median(t / h for t, h in zip(titan, hf))
        summary[name] = {"tps": round(statistics.median(titan), 1),
                         "hf_tps": round(statistics.median(hf), 1), "ratio": round(ratio, 3),
                         "titan_steps": [round(x) for x in titan],
                         "hf_steps": [round(x) for x in hf]}
        cells.append(f"{name} {statistics.median(titan):,.0f} vs HF "
                     f"{statistics.median(hf):,.0f} tok/s: {ratio:.2f}x")
        print(f"[bench] {name}: {summary[name]}", flush=True)

    if args.profile:
        tables = {}
        for name, kw in variants.items():
            if kw.get("backend") is None:
                tables[name] = profiled_trace(f"{name}-profile", kw.get("binary", new_bin),
                                              kw.get("extra", ()))
        hf_traces = []
        for k in range(3):
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                speed = hf_step()
            hf_traces.append((-speed, tmp / f"hf_trace{k}.json"))
            prof.export_chrome_trace(str(hf_traces[-1][1]))
        tables["hf"] = min(hf_traces)[1]
        for name, trace in tables.items():
            text, step_ms, gemm_ms = self_time_table(trace, args.top)
            summary.setdefault("profiles", {})[name] = {
                "step_ms": round(step_ms, 1), "gemm_ms": round(gemm_ms, 1),
                "gemm_share": round(gemm_ms / step_ms, 3)}
            print(f"\n### {name}: the fastest of three profiled steps\n\n{text}", flush=True)

    print(json.dumps(summary))
    print(f"| {kind}, batch {args.batch} x {args.seq}, {args.threads} threads | "
          + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
