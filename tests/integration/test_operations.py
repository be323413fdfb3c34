"""Operating a run: a signal stops it with a checkpoint that resumes to the uninterrupted losses,
non-finite steps stop or are skipped as configured, the validator's held-out loss, the progress
line on a terminal only, a full disk that keeps the previous checkpoint, and a data file that
breaks mid-run."""
import json
import os
import pty
import resource
import signal
import subprocess
import time

import pytest

from conftest import TITAN, read_metrics, run_titan

STEPS = 6


def base_args(dump, corpus, tokenizer_dir, steps=STEPS):
    return ["train", "--module", "qwen3", "--config", "qwen3_debugmodel",
            "--training.local_batch_size", "1", "--training.seq_len", "32",
            "--training.steps", str(steps), "--metrics.log_freq", "1",
            "--job.dump_folder", str(dump), "--training.dataset_path", str(corpus),
            "--model.hf_assets_path", str(tokenizer_dir)]


def losses_by_step(dump):
    """The last logged loss of every step (a resumed run appends to metrics.jsonl)."""
    return {m["step"]: m["loss"] for m in read_metrics(dump)}


def start(args, **kwargs):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.Popen([str(TITAN), *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, **kwargs)


def wait_for_step(dump, step, proc, timeout=120):
    deadline = time.time() + timeout
    metrics = dump / "metrics.jsonl"
    while time.time() < deadline:
        assert proc.poll() is None, proc.communicate()
        if metrics.exists() and any(json.loads(line)["step"] >= step
                                    for line in metrics.read_text().splitlines() if line):
            return
        time.sleep(0.05)
    raise AssertionError(f"step {step} not reached")


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, small_corpus, tokenizer_dir):
    dump = tmp_path_factory.mktemp("uninterrupted")
    run_titan(*base_args(dump, small_corpus, tokenizer_dir))
    return losses_by_step(dump)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_checkpoints_and_the_same_command_resumes(tmp_path, small_corpus, tokenizer_dir,
                                                         uninterrupted, sig):
    args = base_args(tmp_path, small_corpus, tokenizer_dir) + [
        "--checkpoint.enable", "true", "--checkpoint.interval", "100"]
    proc = start(args + ["--debug.step_delay_ms", "400"])
    wait_for_step(tmp_path, 2, proc)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    name = "SIGTERM" if sig == signal.SIGTERM else "SIGINT"
    line = [l for l in out.splitlines() if l.startswith(f"[titan] stopped by {name}")]
    assert line and "checkpoint at " in line[0], out
    stopped = max(losses_by_step(tmp_path))
    assert 2 <= stopped < STEPS
    assert (tmp_path / "checkpoint" / f"step-{stopped}" / "manifest.json").exists()
    assert line[0].endswith(f"after step {stopped}; checkpoint at "
                            f"{tmp_path}/checkpoint/step-{stopped} (the same command resumes "
                            "from it)")
    resumed = run_titan(*args)
    assert "[titan] resumed from training checkpoint" in resumed.stdout
    assert losses_by_step(tmp_path) == uninterrupted


def test_second_signal_exits_at_once(tmp_path, small_corpus, tokenizer_dir):
    proc = start(base_args(tmp_path, small_corpus, tokenizer_dir, steps=3) +
                 ["--debug.step_delay_ms", "20000"])
    wait_for_step(tmp_path, 1, proc)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    begin = time.time()
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=10)
    assert proc.returncode == 128 + signal.SIGTERM
    assert time.time() - begin < 5


def test_signal_without_checkpointing_says_nothing_was_saved(tmp_path, small_corpus,
                                                             tokenizer_dir):
    proc = start(base_args(tmp_path, small_corpus, tokenizer_dir) +
                 ["--debug.step_delay_ms", "400"])
    wait_for_step(tmp_path, 1, proc)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "checkpointing is off (checkpoint.enable), nothing was saved" in out


def test_nonfinite_loss_stops_with_the_step_by_default(tmp_path, small_corpus, tokenizer_dir):
    proc = run_titan(*base_args(tmp_path, small_corpus, tokenizer_dir),
                     "--debug.inject_nonfinite_at_step", "3", check=False)
    assert proc.returncode != 0
    assert "step 3: the loss is nan; stopped before updating the weights" in proc.stderr
    assert "training.skip_nonfinite_steps" in proc.stderr
    assert max(losses_by_step(tmp_path)) == 2


def test_nonfinite_step_is_skipped_and_counted(tmp_path, small_corpus, tokenizer_dir,
                                               uninterrupted):
    proc = run_titan(*base_args(tmp_path, small_corpus, tokenizer_dir),
                     "--debug.inject_nonfinite_at_step", "3",
                     "--training.skip_nonfinite_steps", "true")
    assert "[titan] step 3 skipped: the loss is nan (1 skipped so far)" in proc.stdout
    assert "(1 steps skipped: non-finite loss or gradient)" in proc.stdout
    metrics = {m["step"]: m for m in read_metrics(tmp_path)}
    assert [metrics[s]["skipped_steps"] for s in range(1, STEPS + 1)] == [0, 0, 1, 1, 1, 1]
    assert metrics[3]["loss"] is None  # NaN in JSON
    # Before the bad step nothing differs; after it the weights are still finite and training
    # goes on (the skipped step's batch is consumed, so later losses differ from a plain run).
    assert [metrics[s]["loss"] for s in (1, 2)] == [uninterrupted[1], uninterrupted[2]]
    for s in range(4, STEPS + 1):
        assert metrics[s]["loss"] == metrics[s]["loss"] and metrics[s]["loss"] < 20


def test_validator_logs_the_heldout_loss_without_changing_training(tmp_path, small_corpus,
                                                                    tokenizer_dir, uninterrupted):
    args = base_args(tmp_path, small_corpus, tokenizer_dir) + [
        "--validator.enable", "true", "--validator.freq", "2", "--validator.steps", "2",
        "--validator.dataset_path", small_corpus]
    proc = run_titan(*args)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("validate step:")]
    assert [l.split()[2] for l in lines] == ["2", "4", "6"], proc.stdout
    metrics = {m["step"]: m for m in read_metrics(tmp_path)}
    for step, line in zip((2, 4, 6), lines):
        assert abs(metrics[step]["validation_metrics/loss"] - float(line.split()[-1])) < 1e-4
    assert "validation_metrics/loss" not in metrics[3]
    assert losses_by_step(tmp_path) == uninterrupted
    # Same batches every time: a second run gives the same held-out losses.
    again = tmp_path / "again"
    run_titan(*base_args(again, small_corpus, tokenizer_dir), "--validator.enable", "true",
              "--validator.freq", "2", "--validator.steps", "2",
              "--validator.dataset_path", small_corpus)
    assert [m.get("validation_metrics/loss") for m in read_metrics(again)] == \
           [m.get("validation_metrics/loss") for m in read_metrics(tmp_path)]


def test_validator_needs_a_dataset(tmp_path, small_corpus, tokenizer_dir):
    proc = run_titan(*base_args(tmp_path, small_corpus, tokenizer_dir),
                     "--validator.enable", "true", check=False)
    assert proc.returncode != 0
    assert "validator.dataset_path is empty" in proc.stderr


def test_progress_line_on_a_terminal_only(tmp_path, small_corpus, tokenizer_dir):
    args = base_args(tmp_path / "tty", small_corpus, tokenizer_dir) + ["--metrics.log_freq", "3"]
    master, slave = pty.openpty()
    proc = subprocess.Popen([str(TITAN), *map(str, args)], stdout=slave, stderr=subprocess.PIPE,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=120)
    os.close(master)
    shown = b"".join(chunks).decode()
    assert proc.returncode == 0
    assert f"[titan] step 2/{STEPS}" in shown and "steps/s  ETA 0:00:" in shown, shown
    # Piped (not a terminal): only the plain step lines.
    piped = run_titan(*base_args(tmp_path / "pipe", small_corpus, tokenizer_dir),
                      "--metrics.log_freq", "3")
    assert "ETA" not in piped.stdout and "\r" not in piped.stdout


def test_full_disk_during_a_save_keeps_the_previous_checkpoint(tmp_path, small_corpus,
                                                               tokenizer_dir, uninterrupted):
    ckpt = ["--checkpoint.enable", "true", "--checkpoint.interval", "3"]
    run_titan(*base_args(tmp_path, small_corpus, tokenizer_dir, steps=3), *ckpt)
    assert (tmp_path / "checkpoint" / "step-3" / "manifest.json").exists()

    def file_size_limit():  # 1 MB per file: metrics fit, a model file does not
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))

    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run([str(TITAN), *base_args(tmp_path, small_corpus, tokenizer_dir), *ckpt],
                          capture_output=True, text=True, env=env, preexec_fn=file_size_limit,
                          timeout=300)
    assert proc.returncode != 0
    assert "cannot write training checkpoint" in proc.stderr and "step-6" in proc.stderr
    assert "the disk is full or a file-size limit was reached" in proc.stderr, proc.stderr
    folders = sorted(p.name for p in (tmp_path / "checkpoint").iterdir())
    assert folders == ["step-3"], folders  # no half-written folder left behind
    # The previous checkpoint still resumes, to the uninterrupted losses.
    run_titan(*base_args(tmp_path, small_corpus, tokenizer_dir), *ckpt)
    assert losses_by_step(tmp_path) == uninterrupted


def test_data_file_that_breaks_mid_run_stops_after_a_checkpoint(tmp_path, tokenizer_dir):
    # Many short documents, so every step reads new lines from the file.
    corpus = tmp_path / "short.jsonl"
    lines = [json.dumps({"text": f"def f{i}(x):\n    return x + {i}\n"}) for i in range(400)]
    corpus.write_text("\n".join(lines) + "\n")
    text = corpus.read_text()
    dump = tmp_path / "run"
    # One lr schedule for every run below, whatever its training.steps: the loader's prefetch
    # thread has batches read before the truncation, so the error may surface a few steps later.
    schedule = ["--lr_scheduler.total_steps", "40"]
    args = base_args(dump, corpus, tokenizer_dir, steps=40) + schedule + [
        "--checkpoint.enable", "true", "--checkpoint.interval", "100"]
    proc = start(args + ["--debug.step_delay_ms", "300"])
    wait_for_step(dump, 2, proc)
    with open(corpus, "r+") as f:  # in place: the running process reads the same file
        f.truncate(0)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode != 0
    assert f"dataset file {corpus}:" in err and "cannot read the line" in err, err
    saved = [l for l in out.splitlines() if l.startswith("[titan] saved training checkpoint")]
    assert saved, out
    last = max(losses_by_step(dump))
    assert saved[-1].endswith(f"step-{last}")
    # With the file back, the same command resumes and trains on.
    corpus.write_text(text)
    run_titan(*args, "--training.steps", str(last + 2))
    straight = tmp_path / "straight"
    run_titan(*base_args(straight, corpus, tokenizer_dir, steps=last + 2), *schedule)
    assert losses_by_step(dump) == losses_by_step(straight)
