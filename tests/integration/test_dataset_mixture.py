"""Weighted dataset mixtures (training.dataset_path = "a.jsonl:2,b.jsonl.zst:1"): training on a
mixture sees the documents of the interleave the docs describe (smooth weighted round-robin over
the weights' smallest integer ratio, each source in its own order, wrapping on its own), written
here as one jsonl from the records themselves; the TOML array form is the same list; a resumed
run continues exactly; bad entries fail with one error naming the entry."""
import json
import math
import subprocess

import pytest

from conftest import read_metrics, run_titan

STEPS = 6


@pytest.fixture(scope="module")
def records(small_corpus):
    return [json.loads(line) for line in small_corpus.read_text().splitlines() if line.strip()]


def write_jsonl(path, records):
    path.write_text("".join(json.dumps({"text": r["text"]}) + "\n" for r in records),
                    encoding="utf-8")
    return path


def interleave(sources, counts):
    """One mixture epoch: cycles of sum(counts) picks by smooth weighted round-robin (the first
    source on a tie), until every source has given each of its documents once."""
    length = sum(counts)
    credit = [0] * len(counts)
    cycle = []
    for _ in range(length):
        credit = [c + w for c, w in zip(credit, counts)]
        best = max(range(len(counts)), key=lambda i: (credit[i], -i))
        credit[best] -= length
        cycle.append(best)
    cycles = max(math.ceil(len(s) / c) for s, c in zip(sources, counts))
    taken = [0] * len(sources)
    out = []
    for _ in range(cycles):
        for s in cycle:
            out.append(sources[s][taken[s] % len(sources[s])])
            taken[s] += 1
    return out


def train(dump, corpus, tokenizer_dir, steps, *extra):
    run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel",
              "--training.local_batch_size", "2", "--training.seq_len", "32",
              "--training.steps", steps, "--metrics.log_freq", "1", "--job.dump_folder", dump,
              "--lr_scheduler.total_steps", STEPS, "--lr_scheduler.warmup_steps", "2",
              "--model.hf_assets_path", tokenizer_dir,
              *(["--training.dataset_path", corpus] if corpus else []), *extra)
    return {m["step"]: m["loss"] for m in read_metrics(dump)}


@pytest.fixture(scope="module")
def sources(tmp_path_factory, records):
    """A (12 records, plain jsonl) and B (5 records, zstd), cut short so that a few steps read
    many documents: B is smaller and repeats."""
    folder = tmp_path_factory.mktemp("mixture")
    a_records = [{"text": r["text"][:80]} for r in records[:12]]
    a = write_jsonl(folder / "a.jsonl", a_records)
    b_records = [{"text": r["text"][-40:]} for r in records[20:25]]
    b_plain = write_jsonl(folder / "b.jsonl", b_records)
    b = folder / "b.jsonl.zst"
    subprocess.run(["zstd", "-q", "-f", str(b_plain), "-o", str(b)], check=True)
    b_plain.unlink()
    return folder, (a, a_records), (b, b_records)


def test_mixture_trains_on_the_interleave(tmp_path, tokenizer_dir, sources):
    folder, (a, a_records), (b, b_records) = sources
    # 0.4 : 0.6 is 2 : 3; the mixture must give the batches of the interleave written out.
    mixed = write_jsonl(tmp_path / "mixed.jsonl", interleave([a_records, b_records], [2, 3]))
    expected = train(tmp_path / "file", mixed, tokenizer_dir, STEPS)
    assert train(tmp_path / "cli", f"{a}:0.4,{b}:0.6", tokenizer_dir, STEPS) == expected
    # The TOML array form is the same list.
    job = tmp_path / "job.toml"
    job.write_text(f"[training]\ndataset_path = [{json.dumps(f'{a}:0.4')}, "
                   f"{json.dumps(f'{b}:0.6')}]\n")
    assert train(tmp_path / "toml", None, tokenizer_dir, STEPS, "--config-file", job) == expected


def test_resumed_mixture_run_continues_exactly(tmp_path, tokenizer_dir, sources):
    folder, (a, _), (b, _) = sources
    mixture = f"{a}:0.7,{b}:0.3"
    straight = train(tmp_path / "straight", mixture, tokenizer_dir, STEPS, "--checkpoint.enable",
                     "--checkpoint.interval", "100")
    split = tmp_path / "split"
    train(split, mixture, tokenizer_dir, STEPS // 2, "--checkpoint.enable",
          "--checkpoint.interval", "3")
    assert (split / "checkpoint" / "step-3" / "manifest.json").exists()
    resumed = train(split, mixture, tokenizer_dir, STEPS, "--checkpoint.enable",
                    "--checkpoint.interval", "3")
    for step in range(STEPS // 2 + 1, STEPS + 1):
        assert resumed[step] == straight[step], (step, resumed[step], straight[step])


def error_line(tmp_path, tokenizer_dir, path):
    proc = run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel",
                     "--training.steps", "1", "--training.seq_len", "32",
                     "--training.local_batch_size", "1", "--job.dump_folder", tmp_path / "e",
                     "--training.dataset_path", path, "--model.hf_assets_path", tokenizer_dir,
                     check=False)
    assert proc.returncode != 0
    lines = [l for l in proc.stderr.splitlines() if l.startswith("error:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_bad_entries_name_the_entry(tmp_path, tokenizer_dir, sources):
    folder, (a, _), (b, _) = sources
    for weight in ("0", "-0.5", "inf", "nan"):
        message = error_line(tmp_path, tokenizer_dir, f"{a}:1,{b}:{weight}")
        assert f'entry 2 ("{b}:{weight}")' in message and "positive finite" in message, message
    message = error_line(tmp_path, tokenizer_dir, f"{a}:1,,{b}:1")
    assert "entry 2 is empty" in message, message
    missing = folder / "missing.jsonl"
    message = error_line(tmp_path, tokenizer_dir, f"{a}:0.5,{missing}:0.5")
    assert f'entry 2 ("{missing}:0.5")' in message and "does not exist" in message, message
