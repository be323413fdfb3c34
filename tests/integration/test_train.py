"""Training on the CPU through `titan train`: the loss falls, runs are reproducible, bad
input fails cleanly."""
import json

import pytest

from conftest import read_metrics, run_titan

# A debug model small enough for seconds per run on 2 cores.
BASE = [
    "train", "--module", "qwen3", "--config", "qwen3_debugmodel",
    "--training.local_batch_size", "2", "--training.seq_len", "64",
    "--metrics.log_freq", "1", "--lr_scheduler.warmup_steps", "2",
]


def train(tmp_path, name, corpus, tokenizer_dir, *extra, check=True):
    dump = tmp_path / name
    proc = run_titan(
        *BASE,
        "--job.dump_folder", dump,
        "--training.dataset_path", corpus,
        "--model.hf_assets_path", tokenizer_dir,
        *extra,
        check=check,
    )
    return proc, dump


def test_loss_falls_over_20_steps(tmp_path, small_corpus, tokenizer_dir):
    proc, dump = train(tmp_path, "run", small_corpus, tokenizer_dir, "--training.steps", "20",
                       "--optimizer.lr", "3e-3")
    losses = [m["loss"] for m in read_metrics(dump)]
    assert len(losses) == 20
    # From ~ln(151936) = 11.9 at init; unigram statistics alone take it well below.
    assert losses[0] > 11.0
    assert sum(losses[-3:]) / 3 < losses[0] - 2.0, losses
    assert "step: 1  loss:" in proc.stdout
    assert "tps:" in proc.stdout and "grad_norm:" in proc.stdout


def test_same_seed_gives_identical_losses(tmp_path, small_corpus, tokenizer_dir):
    runs = []
    for name in ("a", "b"):
        _, dump = train(tmp_path, name, small_corpus, tokenizer_dir, "--training.steps", "4",
                        "--training.seed", "7")
        runs.append([m["loss"] for m in read_metrics(dump)])
    assert runs[0] == runs[1]
    _, dump = train(tmp_path, "c", small_corpus, tokenizer_dir, "--training.steps", "4",
                    "--training.seed", "8")
    assert [m["loss"] for m in read_metrics(dump)] != runs[0]


def test_gradient_accumulation_matches_one_big_batch(tmp_path, small_corpus, tokenizer_dir):
    _, big = train(tmp_path, "big", small_corpus, tokenizer_dir, "--training.steps", "2",
                   "--training.local_batch_size", "4")
    _, acc = train(tmp_path, "acc", small_corpus, tokenizer_dir, "--training.steps", "2",
                   "--training.local_batch_size", "2", "--training.global_batch_size", "4")
    a = [m["loss"] for m in read_metrics(big)]
    b = [m["loss"] for m in read_metrics(acc)]
    assert a == pytest.approx(b, rel=1e-5)


def test_unknown_key_fails_cleanly(tmp_path, small_corpus, tokenizer_dir):
    proc, _ = train(tmp_path, "x", small_corpus, tokenizer_dir, "--training.stepz", "3",
                    check=False)
    assert proc.returncode != 0
    assert "training.stepz" in proc.stderr
    assert proc.stderr.count("\n") <= 3


def test_missing_dataset_fails_cleanly(tmp_path, tokenizer_dir):
    missing = tmp_path / "nope.jsonl"
    proc, _ = train(tmp_path, "x", missing, tokenizer_dir, check=False)
    assert proc.returncode != 0
    assert "nope.jsonl" in proc.stderr


def test_empty_dataset_fails_cleanly(tmp_path, tokenizer_dir):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    proc, _ = train(tmp_path, "x", empty, tokenizer_dir, check=False)
    assert proc.returncode != 0
    assert "empty.jsonl" in proc.stderr


def test_degrees_that_do_not_divide_the_world_size_fail(tmp_path, small_corpus, tokenizer_dir):
    dump = tmp_path / "x"
    proc = run_titan(*BASE, "--job.dump_folder", dump, "--training.dataset_path", small_corpus,
                     "--model.hf_assets_path", tokenizer_dir,
                     "--parallelism.data_parallel_shard_degree", "3", check=False,
                     env={"WORLD_SIZE": "2"})
    assert proc.returncode != 0
    assert "data_parallel_shard_degree" in proc.stderr and "2" in proc.stderr
