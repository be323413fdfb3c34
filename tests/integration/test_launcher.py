"""build/bin/torchrun (scripts/torchrun.py), scripts/run_train.sh and build/bin/hf, as the README
uses them: Ctrl-C under torchrun checkpoints and exits 0, rank 0's progress line reaches the
terminal, `NGPU=2` keeps the one-process job's global batch (and losses) in a folder of its
own, and the Hugging Face CLI is beside torchrun."""
import math
import os
import pty
import select
import signal
import subprocess
import time

from conftest import REPO, TITAN, read_metrics

TORCHRUN = REPO / "build" / "bin" / "torchrun"
RUN_TRAIN = REPO / "scripts" / "run_train.sh"
ENV = dict(os.environ, OMP_NUM_THREADS="1")


def torchrun_train(nproc, dump, *overrides):
    return [str(TORCHRUN), "--no-python", f"--nproc_per_node={nproc}", "--rdzv_backend", "c10d",
            "--rdzv_endpoint=localhost:0", "--local-ranks-filter", "0", "--role", "rank",
            "--tee", "3", str(TITAN), "train", "--module", "qwen3", "--config",
            "qwen3_debugmodel", "--training.seq_len", "32", "--training.local_batch_size", "1",
            "--job.dump_folder", str(dump), *overrides]


def test_ctrl_c_under_torchrun_checkpoints_and_exits_0(tmp_path):
    """SIGINT to torchrun's process group, as a terminal's Ctrl-C sends it."""
    dump = tmp_path / "job"
    proc = subprocess.Popen(
        torchrun_train(2, dump, "--training.steps", "500", "--checkpoint.enable",
                       "--metrics.log_freq", "1", "--debug.step_delay_ms", "200"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV,
        start_new_session=True)
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            if "step: 2 " in line:
                os.killpg(proc.pid, signal.SIGINT)
                break
        rest = proc.stdout.read()
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    output = "".join(seen) + rest
    assert code == 0, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    assert "stopped by SIGINT after step" in output
    saved = sorted(p.name for p in (dump / "checkpoint").iterdir())
    assert saved and all(name.startswith("step-") for name in saved), saved
    assert (dump / "checkpoint" / saved[-1] / "manifest.json").exists()


def test_the_progress_line_reaches_the_terminal_under_torchrun(tmp_path):
    """The README's torchrun command at a terminal (a pseudo-terminal here): between logged
    steps rank 0's progress line, with steps/s and the ETA, is drawn."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        torchrun_train(1, tmp_path / "job", "--training.steps", "6", "--metrics.log_freq", "10",
                       "--debug.step_delay_ms", "300"),
        stdout=slave, stderr=slave, stdin=subprocess.DEVNULL, env=ENV)
    os.close(slave)
    data = b""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal's other end closed
                break
            if not chunk:
                break
            data += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    assert proc.wait(timeout=60) == 0, data.decode()[-3000:]
    text = data.decode()
    assert "\r\x1b[K[titan] step 3/6  " in text and " steps/s  ETA 0:00:0" in text, text[-3000:]
    assert "step: 6  loss:" in text


def test_ngpu_2_keeps_the_global_batch_in_a_folder_of_its_own(tmp_path):
    args = ["--training.steps", "2", "--training.seq_len", "32", "--lr_scheduler.warmup_steps",
            "1", "--metrics.log_freq", "1", "--checkpoint.last_save_in_hf", "false"]
    for ngpu in ("1", "2"):
        proc = subprocess.run([str(RUN_TRAIN), *args], cwd=tmp_path, capture_output=True,
                              text=True, env=dict(ENV, NGPU=ngpu), timeout=600)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    one = tmp_path / "outputs" / "default_job"
    two = tmp_path / "outputs" / "default_job-ngpu2"
    assert sorted(p.name for p in (tmp_path / "outputs").iterdir()) == [one.name, two.name]
    printed = subprocess.run([str(TITAN), "configs", "--module", "qwen3", "--config",
                              "qwen3_debugmodel_default_job", "--print"], capture_output=True,
                             text=True, check=True).stdout
    rows = int(next(l for l in printed.splitlines() if l.startswith("local_batch_size"))
               .split("=")[1])
    saved = (two / "config.toml").read_text()
    assert f"global_batch_size = {rows}" in saved and f"local_batch_size = {rows // 2}" in saved
    for a, b in zip(read_metrics(one), read_metrics(two)):
        assert math.isclose(a["loss"], b["loss"], rel_tol=1e-4), (a, b)


def test_hf_is_on_path_beside_torchrun():
    hf = TORCHRUN.parent / "hf"
    proc = subprocess.run([str(hf), "download", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "REPO_ID" in proc.stdout and "--local-dir" in proc.stdout


def test_a_titan_error_under_torchrun_is_not_followed_by_a_traceback(tmp_path):
    """torchrun's ChildFailedError, printed with the launcher's own traceback and a summary
    repeating the worker's line, is one line per failed rank; the exit code is titan's."""
    proc = subprocess.run(torchrun_train(2, tmp_path / "job", "--training.stepz", "3"),
                          capture_output=True, text=True, env=ENV, timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output[-3000:]
    assert "Traceback" not in output and "ChildFailedError" not in output, output[-3000:]
    errors = [l for l in output.splitlines() if "error: --training.stepz" in l]
    assert len(errors) == 1, output[-3000:]  # rank 0's, the only one shown
    assert output.count("[torchrun] ") == 2, output[-3000:]


def test_run_train_sh_honours_torchtitans_config_file(tmp_path):
    """torchtitan's launcher convention: CONFIG_FILE names the job, NGPU and LOG_RANK as
    torchtitan's run_train.sh takes them, the remaining arguments are overrides."""
    job = tmp_path / "job.toml"
    job.write_text('[job]\ndescription = "the CONFIG_FILE job"\ndump_folder = "from_file"\n'
                   '[model]\nname = "qwen3"\nflavor = "debugmodel"\n'
                   '[training]\nsteps = 5\nseq_len = 32\nlocal_batch_size = 1\n')
    proc = subprocess.run([str(RUN_TRAIN), "--training.steps", "2"], cwd=tmp_path,
                          env=dict(ENV, CONFIG_FILE=str(job), NGPU="1", LOG_RANK="0"),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "the CONFIG_FILE job" in proc.stdout
    assert [m["step"] for m in read_metrics(tmp_path / "from_file")] == [1, 2]
    assert not (tmp_path / "outputs").exists()  # not the built-in default job


def test_run_train_sh_refuses_a_missing_config_file(tmp_path):
    proc = subprocess.run([str(RUN_TRAIN)], cwd=tmp_path,
                          env=dict(ENV, CONFIG_FILE=str(tmp_path / "nope.toml")),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"CONFIG_FILE={tmp_path / 'nope.toml'}: no such file" in lines[0], \
        proc.stderr
    assert list(tmp_path.iterdir()) == []
