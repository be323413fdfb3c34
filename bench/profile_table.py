"""The top ops of a titan step trace (profiling.enable_profiling), by total time: GPU kernels
when the trace has them, else CPU ops. Prints a markdown table.

usage: python3 bench/profile_table.py TRACE.json [--top 15] [--cpu]
"""
import argparse
import collections
import json


def top_ops(trace_path, top, cpu_only=False):
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--cpu", action="store_true", help="CPU ops even when kernels are present")
    args = ap.parse_args()
    kind, rows = top_ops(args.trace, args.top, args.cpu)
    print(f"| {kind} | total ms | calls | share |")
    print("|---|---|---|---|")
    for name, ms, calls, share in rows:
        print(f"| {name[:90]} | {ms:.2f} | {calls} | {share:.1f}% |")


if __name__ == "__main__":
    main()
