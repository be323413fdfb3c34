"""The debug model's default job (`make train`: config qwen3_debugmodel_default_job, the bundled
python_stdlib corpus) with two titan binaries in one run: this build and --baseline (a build
of an earlier commit). The runs alternate (baseline, new, baseline, new, ...) so that both see
the same load on a shared machine; each trains --steps steps without checkpoints. Prints, per
binary, the median tokens/s of the steps after --warmup (metrics.jsonl) over all its runs and
the median wall time of a run, then the ratio new / baseline.

usage: build/python bench/default_job_speed.py --baseline BIN [--steps 20] [--rounds 2]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(binary, steps, dump):
    cmd = [binary, "train", "--module", "qwen3", "--config", "qwen3_debugmodel_default_job",
           "--training.steps", str(steps), "--checkpoint.enable", "false",
           "--metrics.log_freq", "1", "--job.dump_folder", str(dump)]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    rows = [json.loads(l) for l in (dump / "metrics.jsonl").read_text().splitlines()]
    return wall, [r["tps"] for r in rows if "tps" in r]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", required=True, help="titan binary of an earlier commit")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    binaries = {"baseline": args.baseline,
                "titan": os.environ.get("TITAN_BIN", str(REPO / "build" / "bin" / "titan"))}
    tps = {k: [] for k in binaries}
    walls = {k: [] for k in binaries}
    with tempfile.TemporaryDirectory(prefix="titan-default-job-") as tmp:
        for r in range(args.rounds):
            for label, binary in binaries.items():
                wall, steps = run(binary, args.steps, Path(tmp) / f"{label}-{r}")
                walls[label].append(wall)
                tps[label].extend(steps[args.warmup:])
    result = {k: {"tps": round(statistics.median(tps[k]), 1),
                  "wall_s": round(statistics.median(walls[k]), 2)} for k in binaries}
    result["ratio"] = round(result["titan"]["tps"] / result["baseline"]["tps"], 3)
    print(json.dumps({"job": "qwen3_debugmodel_default_job", "steps": args.steps,
                      "threads": args.threads, **result}))
    print(f"| default job, {args.steps} steps | titan {result['titan']['tps']:.0f} tok/s, "
          f"{result['titan']['wall_s']:.1f} s | baseline {result['baseline']['tps']:.0f} tok/s, "
          f"{result['baseline']['wall_s']:.1f} s | {result['ratio']:.2f}x |")


if __name__ == "__main__":
    main()
