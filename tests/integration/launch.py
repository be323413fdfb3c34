"""Multi-process runs of titan under torchrun (Gloo on the CPU, one thread a rank) and the
curves they log, shared by the distributed tests."""
import os
import subprocess
import sys
from pathlib import Path

from conftest import TITAN, read_metrics

TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]


def torchrun(nproc, args, *, torchrun_args=(), check=True, timeout=400, program=None):
    """`torchrun --nproc_per_node=NPROC titan ARGS`; with check=True a failure fails the test with
    its output. Every rank's lines are in stdout, prefixed [rankN]:."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [*TORCHRUN, "--no-python", f"--nproc_per_node={nproc}", "--rdzv_backend", "c10d",
           *(torchrun_args or ["--rdzv_endpoint=localhost:0"]), "--role", "rank", "--tee", "3",
           str(program or TITAN), *map(str, args)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}\n"
                             f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")
    return proc


def curves(dump):
    """The logged losses and gradient norms, one a step."""
    m = read_metrics(dump)
    return [r["loss"] for r in m], [r["grad_norm"] for r in m]


def assert_close(a, b, what, rel=1e-5):
    assert len(a) == len(b), (what, a, b)
    for x, y in zip(a, b):
        assert abs(x - y) <= rel * abs(y), (what, a, b)


def rank_pid(agent_pid, rank):
    """The pid of the child of a torchrun agent that has RANK=rank, or None."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            env = (proc / "environ").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if parent == agent_pid and f"RANK={rank}".encode() in env:
            return int(proc.name)
    return None
