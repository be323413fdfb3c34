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


def test_tensorboard_scalars_equal_metrics_jsonl(run_with_tensorboard):
    files = glob.glob(str(run_with_tensorboard / "board" / "events.out.tfevents.*"))
    assert len(files) == 1, files
    events = list(event_file_loader.LegacyEventFileLoader(files[0]).Load())
    assert events[0].file_version == "brain.Event:2"
    scalars = {}
    for e in events[1:]:
        for v in e.summary.value:
            scalars[(e.step, v.tag)] = v.simple_value
    records = read_metrics(run_with_tensorboard)
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5]
    compared = 0
    for r in records:
        for key, value in r.items():
            if key == "step" or not isinstance(value, (int, float)):
                continue
            assert math.isclose(scalars.pop((r["step"], key)), value, rel_tol=1e-6,
                                abs_tol=1e-12), (r["step"], key)
            compared += 1
    assert not scalars, f"scalars that metrics.jsonl does not have: {sorted(scalars)}"
    assert compared >= 5 * 8
    assert any(k == "validation_metrics/loss" for r in records for k in r)


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
