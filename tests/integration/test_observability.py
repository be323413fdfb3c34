"""Watching a run: TensorBoard event files hold the values of metrics.jsonl (read back with the
tensorboard package), and `titan plot` draws a finished or a still-running job as a PNG."""
import glob
import math

import pytest
from PIL import Image
from tensorboard.backend.event_processing import event_file_loader

from conftest import read_metrics, run_titan


def train(dump, corpus, tokenizer_dir, *extra):
    return run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel",
                     "--training.local_batch_size", "1", "--training.seq_len", "32",
                     "--training.steps", "5", "--metrics.log_freq", "1",
                     "--job.dump_folder", dump, "--training.dataset_path", corpus,
                     "--model.hf_assets_path", tokenizer_dir, *extra)


@pytest.fixture(scope="module")
def run_with_tensorboard(tmp_path_factory, small_corpus, tokenizer_dir):
    dump = tmp_path_factory.mktemp("tb_run")
    train(dump, small_corpus, tokenizer_dir, "--metrics.enable_tensorboard", "true",
          "--metrics.save_tb_folder", "board", "--validator.enable", "true",
          "--validator.freq", "2", "--validator.steps", "1",
          "--validator.dataset_path", small_corpus)
    return dump


# torchtitan's TensorBoard tags (torchtitan/components/metrics.py and train.py, release 0.2.2),
# and the metrics.jsonl key each holds.
TORCHTITAN_TAGS = {
    "loss_metrics/global_avg_loss": "loss",
    "loss_metrics/global_max_loss": "loss",  # one process: its loss is the largest
    "grad_norm": "grad_norm",
    "lr": "lr",
    "n_tokens_seen": None,
    "throughput(tps)": "tps",
    "tflops": "tflops",
    "time_metrics/end_to_end(s)": None,
    "time_metrics/data_loading(s)": "data_loading_s",  # log_freq 1: one step per window
    "time_metrics/data_loading(%)": None,
    "memory/max_active(GiB)": "memory_gib",
    "memory/max_active(%)": None,
    "memory/max_reserved(GiB)": "memory_reserved_gib",
    "memory/max_reserved(%)": None,
    "memory/num_alloc_retries": None,
    "memory/num_ooms": None,
}
# Logged when they exist: mfu(%) where the device's peak is known (not on the CPU), the
# validator's loss at validation steps; and titan's own count of skipped steps.
OPTIONAL_TAGS = {"mfu(%)": "mfu", "validation_metrics/loss": "validation_metrics/loss",
                 "skipped_steps": "skipped_steps"}


def test_tensorboard_tags_are_torchtitans_and_hold_the_metrics(run_with_tensorboard):
    files = glob.glob(str(run_with_tensorboard / "board" / "events.out.tfevents.*"))
    assert len(files) == 1, files
    events = list(event_file_loader.LegacyEventFileLoader(files[0]).Load())
    assert events[0].file_version == "brain.Event:2"
    scalars = {}
    for e in events[1:]:
        for v in e.summary.value:
            scalars.setdefault(e.step, {})[v.tag] = v.simple_value
    records = read_metrics(run_with_tensorboard)
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5] == sorted(scalars)
    tokens_per_step = 1 * 32
    for r in records:
        tags = scalars[r["step"]]
        assert set(TORCHTITAN_TAGS) <= set(tags), sorted(set(TORCHTITAN_TAGS) - set(tags))
        assert set(tags) - set(TORCHTITAN_TAGS) <= set(OPTIONAL_TAGS), sorted(tags)
        for tag, key in {**TORCHTITAN_TAGS, **OPTIONAL_TAGS}.items():
            if key is not None and tag in tags:
                assert math.isclose(tags[tag], r[key], rel_tol=1e-6, abs_tol=1e-9), (tag, r)
        assert tags["n_tokens_seen"] == r["step"] * tokens_per_step
        assert tags["memory/num_ooms"] == 0
        seconds = tags["time_metrics/end_to_end(s)"]
        assert 0 < seconds < 600
        assert math.isclose(tags["time_metrics/data_loading(%)"],
                            100 * r["data_loading_s"] / seconds, rel_tol=1e-3, abs_tol=1e-6)
    assert "mfu(%)" not in scalars[1]  # the CPU's peak is unknown
    assert any("validation_metrics/loss" in t for t in scalars.values())


def test_plot_of_a_finished_run(run_with_tensorboard, tmp_path):
    out = tmp_path / "loss.png"
    proc = run_titan("plot", run_with_tensorboard / "metrics.jsonl", "--output", out)
    assert "(5 steps)" in proc.stdout
    with Image.open(out) as img:
        assert img.format == "PNG"
        assert img.size == (1200, 800)
        # Not a blank canvas: the curves and axes give many distinct colours.
        assert len(img.convert("RGB").getcolors(1 << 20)) > 50


def test_plot_of_a_running_job_ignores_the_line_being_written(run_with_tensorboard, tmp_path):
    running = tmp_path / "metrics.jsonl"
    lines = (run_with_tensorboard / "metrics.jsonl").read_text().splitlines()
    running.write_text("\n".join(lines[:3]) + "\n" + lines[3][:25])  # a half-written record
    out = tmp_path / "running.png"
    proc = run_titan("plot", running, "--output", out, "--title", "still going")
    assert "(3 steps)" in proc.stdout
    with Image.open(out) as img:
        assert img.size == (1200, 800)


def test_plot_errors_name_the_file(tmp_path):
    proc = run_titan("plot", tmp_path / "nope.jsonl", "--output", tmp_path / "x.png",
                     check=False)
    assert proc.returncode != 0 and "nope.jsonl does not exist" in proc.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    proc = run_titan("plot", empty, "--output", tmp_path / "x.png", check=False)
    assert proc.returncode != 0 and "no complete metrics record" in proc.stderr
