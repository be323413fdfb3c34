"""Checkpoints written before checkpoints held N-d boxes (format version 1, dim-0 row pieces, by
FSDP over 2 ranks; fixtures/make_checkpoint_v1.py made it with that commit's binary) still load
and resume: the run trains the losses of the binary that wrote it, and resuming its step-2
checkpoint on 1 process or 2 ranks gives the uninterrupted steps 3 and 4.

With the reference kernels and the float64 gradient norm of that binary the losses were the same
bit for bit (the parallelism seam changed no arithmetic); the exact blocked gradient norm and the
fused CPU cross-entropy since then round differently in the last bits, so the comparison is to
1e-6."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import TITAN, read_metrics

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "checkpoint_v1"


def train(dump, nproc, local_batch, steps, *extra):
    args = ["train", "--module", "qwen3", "--config", "qwen3_debugmodel", "--model.flavor", "auto",
            "--model.hf_assets_path", FIXTURE, "--training.dataset_path",
            FIXTURE / "corpus.jsonl", "--training.local_batch_size", local_batch,
            "--training.seq_len", "16", "--training.steps", steps,
            "--lr_scheduler.warmup_steps", "1", "--lr_scheduler.total_steps", "4",
            "--metrics.log_freq", "1", "--job.dump_folder", dump, *extra]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--no-python",
           f"--nproc_per_node={nproc}", "--rdzv_backend", "c10d", "--rdzv_endpoint=localhost:0",
           str(TITAN), *map(str, args)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def old_metrics():
    lines = (FIXTURE / "metrics_4_steps.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_the_fixture_is_the_previous_format():
    manifest = json.loads((FIXTURE / "step-2" / "manifest.json").read_text())
    assert manifest["format_version"] == 1 and "mesh" not in manifest
    assert {"model-rank0.safetensors", "model-rank1.safetensors"} <= set(manifest["files"])


def close(a, b, rel):
    return len(a) == len(b) and all(abs(x - y) <= rel * abs(y) for x, y in zip(a, b))


def test_training_is_what_the_previous_binary_trained(tmp_path):
    train(tmp_path / "now", 2, 2, 4)
    now, before = read_metrics(tmp_path / "now"), old_metrics()
    assert close([m["loss"] for m in now], [m["loss"] for m in before], 1e-6), (now, before)
    assert close([m["grad_norm"] for m in now], [m["grad_norm"] for m in before], 1e-6)


def test_a_previous_format_checkpoint_resumes_under_any_layout(tmp_path):
    expected = [m["loss"] for m in old_metrics()][2:]
    for nproc, local_batch in ((2, 2), (1, 4)):
        dump = tmp_path / f"resume{nproc}"
        (dump / "checkpoint").mkdir(parents=True)
        shutil.copytree(FIXTURE / "step-2", dump / "checkpoint" / "step-2")
        proc = train(dump, nproc, local_batch, 4, "--checkpoint.enable",
                     "--checkpoint.interval", "100")
        assert "resumed from training checkpoint" in proc.stdout
        losses = [m["loss"] for m in read_metrics(dump)]
        assert len(losses) == 2
        for got, want in zip(losses, expected):
            assert abs(got - want) <= 1e-5 * abs(want), (nproc, losses, expected)
        # What it saves now is the new format, with the mesh.
        saved = json.loads((dump / "checkpoint" / "step-4" / "manifest.json").read_text())
        assert saved["format_version"] == 2
        assert saved["mesh"]["world_size"] == nproc
