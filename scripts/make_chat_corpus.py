"""Assemble a small chat corpus for SFT without any download.

Writes conversations about the Python standard library of the running interpreter as jsonl
({"messages": [...]} records, the layout of Hugging Face chat datasets): a system prompt, a user
asking what a documented function does, the assistant answering with its docstring's first
paragraph, and sometimes a follow-up turn asking for its signature. Parsed with `ast` (nothing is
imported), in a fixed order, so the corpus is the same on every machine. `qwen3_debugmodel_sft`
trains on it.
"""
import argparse
import ast
import json
import os
import sysconfig
from pathlib import Path

SYSTEM = "You are a helpful assistant who knows the Python standard library."


def conversations(stdlib, limit):
    skip = {"test", "tests", "idlelib", "site-packages", "lib2to3", "ensurepip", "turtledemo"}
    count = 0
    for path in sorted(stdlib.rglob("*.py")):
        if set(path.relative_to(stdlib).parts) & skip:
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, OSError, ValueError):
            continue
        module = ".".join(path.relative_to(stdlib).with_suffix("").parts)
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef) or node.name.startswith("_"):
                continue
            doc = ast.get_docstring(node)
            if not doc:
                continue
            answer = doc.split("\n\n")[0].strip()
            if not 20 <= len(answer) <= 600:
                continue
            messages = [{"role": "system", "content": SYSTEM},
                        {"role": "user", "content": f"What does `{module}.{node.name}` do?"},
                        {"role": "assistant", "content": answer}]
            if count % 3 == 0:
                messages += [{"role": "user", "content": "What are its parameters?"},
                             {"role": "assistant",
                              "content": f"`{node.name}({ast.unparse(node.args)})`"}]
            yield {"messages": messages}
            count += 1
            if count >= limit:
                return


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--output", required=True)
    ap.add_argument("--conversations", type=int, default=2000)
    args = ap.parse_args()
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for record in conversations(Path(sysconfig.get_paths()["stdlib"]), args.conversations):
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    os.replace(tmp, out)


if __name__ == "__main__":
    main()
