"""Training checkpoints: a resumed run continues exactly, and a crash during a save never
costs the previous checkpoint."""
import os
import signal
import subprocess
import time
from pathlib import Path

from conftest import TITAN, read_metrics, run_titan

STEPS = 6


def args(dump, corpus, tokenizer_dir, steps, *extra):
    return [
        "train", "--module", "qwen3", "--config", "qwen3_debugmodel",
        "--training.local_batch_size", "2", "--training.seq_len", "32",
        "--metrics.log_freq", "1", "--training.steps", str(steps),
        "--lr_scheduler.total_steps", str(STEPS), "--lr_scheduler.warmup_steps", "2",
        "--training.dataset_path", corpus, "--model.hf_assets_path", tokenizer_dir,
        "--job.dump_folder", dump, "--checkpoint.enable", *extra,
    ]


def losses(dump):
    return {m["step"]: m["loss"] for m in read_metrics(dump)}


def test_resume_continues_exactly(tmp_path, small_corpus, tokenizer_dir):
    straight = tmp_path / "straight"
    run_titan(*args(straight, small_corpus, tokenizer_dir, STEPS, "--checkpoint.interval", "100"))
    split = tmp_path / "split"
    run_titan(*args(split, small_corpus, tokenizer_dir, STEPS // 2, "--checkpoint.interval", "3"))
    assert (split / "checkpoint" / "step-3" / "manifest.json").exists()
    proc = run_titan(*args(split, small_corpus, tokenizer_dir, STEPS, "--checkpoint.interval", "3"))
    assert "resumed from training checkpoint" in proc.stdout
    a, b = losses(straight), losses(split)
    for step in range(STEPS // 2 + 1, STEPS + 1):
        assert a[step] == b[step], (step, a[step], b[step])


def test_async_save_and_keep_latest_k(tmp_path, small_corpus, tokenizer_dir):
    dump = tmp_path / "run"
    run_titan(*args(dump, small_corpus, tokenizer_dir, STEPS, "--checkpoint.interval", "1",
                    "--checkpoint.async_mode", "async", "--checkpoint.keep_latest_k", "2"))
    steps = sorted(p.name for p in (dump / "checkpoint").iterdir())
    assert steps == ["step-5", "step-6"]


def test_kill_during_save_keeps_previous_checkpoint(tmp_path, small_corpus, tokenizer_dir):
    dump = tmp_path / "run"
    cmd = [str(TITAN), *map(str, args(dump, small_corpus, tokenizer_dir, STEPS,
                                      "--checkpoint.interval", "2",
                                      "--debug.checkpoint_write_delay_ms", "1500"))]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    ckpt = dump / "checkpoint"
    deadline = time.time() + 300
    # Wait until step-2 is complete and the save of step 4 is under way, then kill.
    while time.time() < deadline:
        if (ckpt / "step-2" / "manifest.json").exists() and any(
                p.name.startswith(".step-4") for p in ckpt.iterdir()):
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (ckpt / "step-4").exists()
    # The previous checkpoint loads and training resumes from it.
    done = run_titan(*args(dump, small_corpus, tokenizer_dir, STEPS, "--checkpoint.interval", "2"))
    assert "step-2 (step 2)" in done.stdout
    assert (ckpt / "step-6" / "manifest.json").exists()
    straight = tmp_path / "straight"
    run_titan(*args(straight, small_corpus, tokenizer_dir, STEPS, "--checkpoint.interval", "100"))
    a, b = losses(straight), losses(dump)
    for step in range(3, STEPS + 1):
        assert a[step] == b[step]


def test_failed_save_is_reported_sync_and_async(tmp_path, small_corpus, tokenizer_dir):
    # A file where the checkpoint folder should be: every save fails. The run must stop with
    # an error naming the checkpoint, also when the save ran in the background.
    for mode in ("disabled", "async"):
        dump = tmp_path / mode
        dump.mkdir()
        (dump / "blocker").write_text("not a folder")
        proc = run_titan(*args(dump, small_corpus, tokenizer_dir, 2, "--checkpoint.interval", "1",
                               "--checkpoint.folder", "blocker/ckpt",
                               "--checkpoint.async_mode", mode), check=False)
        assert proc.returncode != 0, (mode, proc.stdout)
        assert "cannot write training checkpoint" in proc.stderr, (mode, proc.stderr)
        assert "blocker" in proc.stderr, (mode, proc.stderr)
