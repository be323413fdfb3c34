"""Fetches a Qwen3 model's tokenizer files from the Hugging Face hub into a folder (used by
scripts/setup when no tokenizer is given). Exits non-zero, with the reason on stderr, when the
hub cannot be reached or the files are not there.

usage: .venv/bin/python scripts/download_tokenizer.py --repo Qwen/Qwen3-0.6B --output DIR
"""
import argparse
import shutil
import sys
from pathlib import Path

REQUIRED = ["tokenizer.json", "tokenizer_config.json"]
OPTIONAL = ["vocab.json", "merges.txt", "special_tokens_map.json", "generation_config.json"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", default="Qwen/Qwen3-0.6B")
    ap.add_argument("--output", required=True)
    args = ap.parse_args()
    from huggingface_hub import hf_hub_download

    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    for name in REQUIRED + OPTIONAL:
        try:
            path = hf_hub_download(repo_id=args.repo, filename=name, etag_timeout=10)
        except Exception as e:  # offline, unknown repo, missing file
            if name in REQUIRED:
                print(f"download_tokenizer: {args.repo}/{name}: {type(e).__name__}: {e}",
                      file=sys.stderr)
                return 1
            continue
        shutil.copy(path, out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
