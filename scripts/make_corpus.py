"""Assemble the default training corpus without any download.

Writes the Python standard library sources of the running interpreter as a
jsonl file (one {"text": ...} document per module), in a fixed order, up to a
size limit, so that the default job is the same on every machine.
"""
import argparse
import json
import os
import sysconfig
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--output", required=True)
    ap.add_argument("--max-bytes", type=int, default=8_000_000)
    args = ap.parse_args()
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    skip = {"test", "tests", "idlelib", "site-packages", "lib2to3", "ensurepip", "turtledemo"}
    files = sorted(
        p for p in stdlib.rglob("*.py") if not (set(p.relative_to(stdlib).parts) & skip)
    )
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    total = 0
    with open(tmp, "w", encoding="utf-8") as f:
        for p in files:
            try:
                text = p.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            if not text.strip():
                continue
            f.write(json.dumps({"text": text}) + "\n")
            total += len(text.encode("utf-8"))
            if total >= args.max_bytes:
                break
    os.replace(tmp, out)
    print(f"[setup] corpus: {out} ({total / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
