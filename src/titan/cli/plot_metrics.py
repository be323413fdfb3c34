# `titan plot`: the metrics.jsonl of a run (finished or still going) as one PNG of four panels
# over steps: loss (and the validator's held-out loss), learning rate, tokens per second, and
# peak memory. Run by titan with the build's Python (matplotlib from the venv):
#   python - METRICS.jsonl OUTPUT.png TITLE
# Exit status 3: the file holds no metrics record; 4: matplotlib is missing. titan turns both
# into its own one-line error, so this script prints nothing for them.
import json
import sys

try:
    import matplotlib
except ImportError:
    sys.exit(4)

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

metrics_path, output, title = sys.argv[1], sys.argv[2], sys.argv[3]
records = []
with open(metrics_path, encoding="utf-8", errors="replace") as f:
    for line in f:
        # A running job may be writing its last line: only whole records count.
        if not line.endswith("\n"):
            break
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            break
        if not isinstance(record, dict) or not isinstance(record.get("step"), int):
            break
        records.append(record)
if not records:
    sys.exit(3)

# A resumed run appends to the same file: the latest record of each step wins.
by_step = {}
for r in records:
    by_step[r["step"]] = r
steps = sorted(by_step)


def series(key):
    xs, ys = [], []
    for s in steps:
        v = by_step[s].get(key)
        if isinstance(v, (int, float)):
            xs.append(s)
            ys.append(v)
    return xs, ys


fig, axes = plt.subplots(2, 2, figsize=(12, 8), dpi=100)
panels = [
    (axes[0][0], [("loss", "training loss"), ("validation_metrics/loss", "validation loss")],
     "loss (nats per token)"),
    (axes[0][1], [("lr", "learning rate")], "learning rate"),
    (axes[1][0], [("tps", "tokens/s per device")], "tokens per second"),
    (axes[1][1], [("memory_gib", "peak memory"), ("memory_reserved_gib", "reserved (CUDA)")],
     "memory (GiB)"),
]
for ax, keys, ylabel in panels:
    for key, label in keys:
        xs, ys = series(key)
        if xs and (key != "memory_reserved_gib" or any(ys)):
            ax.plot(xs, ys, marker="o" if len(xs) < 30 else None, markersize=3, label=label)
    ax.set_xlabel("step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    if len(ax.get_lines()) > 1:
        ax.legend()
axes[0][1].ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
last = by_step[steps[-1]]
fig.suptitle(f"{title}  (step {steps[-1]}, loss {last.get('loss', float('nan')):.4f})")
fig.tight_layout()
fig.savefig(output)
print(f"[titan] wrote {output} ({len(steps)} steps)")
