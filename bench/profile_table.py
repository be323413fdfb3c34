"""The top ops of a step trace (titan's profiling.enable_profiling, or torch.profiler's
export_chrome_trace for a peer), by total time: GPU kernels when the trace has them, else CPU
ops. Prints a markdown table; with --self, CPU ops by self time (their own time, children
excluded) and the GEMMs' share of the step.

--shapes: the GEMMs (GEMM_OPS) grouped by their input shapes (the traces record them), by time.

usage: python3 bench/profile_table.py TRACE.json [--top 15] [--cpu] [--self] [--shapes]
"""
import argparse
import collections
import json

# The matrix multiplications (leaf ops: aten::matmul and aten::linear call these).
GEMM_OPS = {"aten::mm", "aten::addmm", "aten::addmm_", "aten::bmm", "aten::baddbmm",
            "aten::addbmm", "aten::_addmm_activation",
            "titan::gemm",  # titan's CPU kernels' float32 GEMMs on oneDNN (kernels/cpu/gemm.h)
            # titan's NF4 GEMMs on AMX, their dequantisation included (kernels/cpu/nf4_amx.h)
            "titan::nf4_amx_forward", "titan::nf4_amx_backward",
            # bfloat16 products on float32 master weights on AMX (kernels/cpu/amx_linear.h)
            "titan::amx_linear_forward", "titan::amx_linear_backward", "titan::amx_weight_grad"}


def load_events(trace_path):
    with open(trace_path) as f:
        return json.load(f)["traceEvents"]


def top_ops(trace_path, top, cpu_only=False):
    events = load_events(trace_path)
    kernels = [e for e in events if e.get("cat") == "kernel" and "dur" in e]
    chosen = kernels if kernels and not cpu_only else [
        e for e in events if e.get("cat") == "cpu_op" and "dur" in e]
    total = collections.Counter()
    count = collections.Counter()
    for e in chosen:
        total[e["name"]] += e["dur"]
        count[e["name"]] += 1
    whole = sum(total.values()) or 1
    kind = "GPU kernel" if chosen is kernels else "CPU op (inclusive)"
    return kind, [(name, us / 1000, count[name], 100 * us / whole)
                  for name, us in total.most_common(top)]


def cpu_step_profile(trace_path):
    """Per CPU op name: (self ms, inclusive ms, calls), the step's wall time in ms (first op
    start to last op end) and the GEMMs' inclusive ms (GEMM_OPS, never nested in each other)."""
    ops = [e for e in load_events(trace_path) if e.get("cat") == "cpu_op" and "dur" in e]
    self_us = collections.Counter()
    incl_us = collections.Counter()
    calls = collections.Counter()
    by_thread = collections.defaultdict(list)
    for e in ops:
        by_thread[(e.get("pid"), e.get("tid"))].append(e)
    for events in by_thread.values():
        events.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []  # (end, name)
        for e in events:
            while stack and stack[-1][0] <= e["ts"]:
                stack.pop()
            if stack:
                self_us[stack[-1][1]] -= e["dur"]
            self_us[e["name"]] += e["dur"]
            incl_us[e["name"]] += e["dur"]
            calls[e["name"]] += 1
            stack.append((e["ts"] + e["dur"], e["name"]))
    start = min(e["ts"] for e in ops)
    end = max(e["ts"] + e["dur"] for e in ops)
    gemm_us = sum(incl_us[n] for n in GEMM_OPS)
    table = {n: (self_us[n] / 1000, incl_us[n] / 1000, calls[n]) for n in incl_us}
    return table, (end - start) / 1000, gemm_us / 1000


def self_time_table(trace_path, top):
    """Markdown rows of the top ops by self time, and the GEMM share of the step."""
    table, step_ms, gemm_ms = cpu_step_profile(trace_path)
    rows = sorted(table.items(), key=lambda kv: -kv[1][0])[:top]
    # The op calls of the step: on a loaded machine each parallel region can wait a scheduler
    # time slice for its other threads, so the count matters as well as the work.
    ops = sum(n for _, _, n in table.values())
    lines = [f"step {step_ms:.0f} ms, GEMMs {gemm_ms:.0f} ms = {100 * gemm_ms / step_ms:.1f}% "
             f"of the step, {ops} op calls", "",
             "| CPU op | self ms | inclusive ms | calls | self ms per call | self share |",
             "|---|---|---|---|---|---|"]
    for name, (s, inc, n) in rows:
        lines.append(f"| {name[:80]} | {s:.1f} | {inc:.1f} | {n} | {s / max(n, 1):.2f} | "
                     f"{100 * s / step_ms:.1f}% |")
    return "\n".join(lines), step_ms, gemm_ms


def gemm_shapes_table(trace_path, top):
    """Markdown rows of the GEMMs by op and input shapes: total ms, calls, share of all GEMMs."""
    total, count = collections.Counter(), collections.Counter()
    for e in load_events(trace_path):
        if e.get("cat") == "cpu_op" and e.get("name") in GEMM_OPS and "dur" in e:
            dims = e.get("args", {}).get("Input Dims", [])
            key = (e["name"], " x ".join(str(d) for d in dims if d))
            total[key] += e["dur"]
            count[key] += 1
    whole = sum(total.values()) or 1
    lines = ["| GEMM | input shapes | ms | calls | share of GEMMs |", "|---|---|---:|---:|---:|"]
    for (name, dims), us in total.most_common(top):
        lines.append(f"| {name} | {dims} | {us / 1000:.1f} | {count[(name, dims)]} | "
                     f"{100 * us / whole:.1f}% |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--cpu", action="store_true", help="CPU ops even when kernels are present")
    ap.add_argument("--self", action="store_true", help="CPU ops by self time, GEMM share")
    ap.add_argument("--shapes", action="store_true", help="GEMMs by input shapes")
    args = ap.parse_args()
    if args.shapes:
        print(gemm_shapes_table(args.trace, args.top))
        return
    if args.self:
        print(self_time_table(args.trace, args.top)[0])
        return
    kind, rows = top_ops(args.trace, args.top, args.cpu)
    print(f"| {kind} | total ms | calls | share |")
    print("|---|---|---|---|")
    for name, ms, calls, share in rows:
        print(f"| {name[:90]} | {ms:.2f} | {calls} | {share:.1f}% |")


if __name__ == "__main__":
    main()
