"""Data-parallel training under torchrun with Gloo on the CPU: every layout (FSDP, DDP, HSDP,
gradient accumulation, two agents) gives the single-process losses and gradient norms for the
same global batch; checkpoints reshard across world sizes; HF exports do not depend on the
layout; bad layouts, dead or hung ranks and mismatched configs fail with a clear error."""
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, TITAN, TOKENIZER_DIR, read_metrics
from launch import TORCHRUN, assert_close, curves, rank_pid, torchrun

STEPS = 5
GLOBAL_BATCH = 4


def base_args(dump, corpus, config, steps=STEPS):
    return [
        "train", "--module", "qwen3", "--config", config,
        "--training.seq_len", "32", "--training.steps", str(steps),
        "--lr_scheduler.warmup_steps", "2", "--lr_scheduler.total_steps", str(STEPS),
        "--metrics.log_freq", "1", "--training.dataset_path", corpus,
        "--model.hf_assets_path", TOKENIZER_DIR, "--job.dump_folder", dump,
    ]

# (processes, local batch, extra overrides): each takes the same 4 rows per step.
LAYOUTS = {
    "fsdp2": (2, 2, []),
    "ddp2": (2, 2, ["--parallelism.data_parallel_replicate_degree", "2",
                    "--parallelism.data_parallel_shard_degree", "1"]),
    "hsdp2x2": (4, 1, ["--parallelism.data_parallel_replicate_degree", "2"]),
    "accumulation4": (1, 1, ["--training.global_batch_size", str(GLOBAL_BATCH)]),
}
MODELS = {
    "dense": ("qwen3_debugmodel", []),
    "moe": ("qwen3_debugmodel_moe", ["--model.moe_load_balancing", "expert_bias"]),
}


@pytest.fixture(scope="module")
def single_runs(tmp_path_factory, small_corpus):
    """The reference: one process, the whole global batch at once."""
    out = {}
    for kind, (config, extra) in MODELS.items():
        dump = tmp_path_factory.mktemp("single") / kind
        torchrun(1, base_args(dump, small_corpus, config) +
                 ["--training.local_batch_size", str(GLOBAL_BATCH), *extra])
        out[kind] = curves(dump)
    return out


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("kind", sorted(MODELS))
def test_layout_matches_one_process(tmp_path, small_corpus, single_runs, layout, kind):
    nproc, local_batch, layout_args = LAYOUTS[layout]
    config, extra = MODELS[kind]
    dump = tmp_path / "run"
    proc = torchrun(nproc, base_args(dump, small_corpus, config) +
                    ["--training.local_batch_size", str(local_batch), *layout_args, *extra])
    losses, norms = curves(dump)
    ref_losses, ref_norms = single_runs[kind]
    assert len(losses) == STEPS
    assert_close(losses, ref_losses, "loss")
    assert_close(norms, ref_norms, "grad_norm")
    # Every rank prints its step lines; only rank 0 writes metrics.jsonl (one line a step).
    assert f"[rank{nproc - 1}]:step: {STEPS}" in proc.stdout


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_agents_on_two_nodes_match_one_agent(tmp_path, small_corpus, single_runs):
    port = free_port()
    dump = tmp_path / "nodes"
    args = base_args(dump, small_corpus, "qwen3_debugmodel") + ["--training.local_batch_size", "2"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    agents = [subprocess.Popen(
        [*TORCHRUN, "--no-python", "--nnodes", "2", "--nproc_per_node", "1",
         "--rdzv_backend", "c10d", f"--rdzv_endpoint=127.0.0.1:{port}", "--rdzv_id", "nodes",
         "--role", "rank", "--tee", "3", str(TITAN), *map(str, args)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) for _ in range(2)]
    outputs = [a.communicate(timeout=400)[0] for a in agents]
    assert all(a.returncode == 0 for a in agents), outputs
    losses, norms = curves(dump)
    assert_close(losses, single_runs["dense"][0], "loss")
    assert_close(norms, single_runs["dense"][1], "grad_norm")


def test_checkpoint_reshards_across_world_sizes(tmp_path, small_corpus):
    cfg = "qwen3_debugmodel"
    straight = tmp_path / "straight"
    torchrun(2, base_args(straight, small_corpus, cfg) + ["--training.local_batch_size", "2"])
    expected, _ = curves(straight)
    split = tmp_path / "split"
    torchrun(2, base_args(split, small_corpus, cfg, steps=2) +
             ["--training.local_batch_size", "2", "--checkpoint.enable", "--checkpoint.interval",
              "2"])
    step2 = split / "checkpoint" / "step-2"
    assert (step2 / "model-rank0.safetensors").exists() and (step2 / "model-rank1.safetensors").exists()
    exports = {}
    for nproc, local_batch in ((1, 4), (4, 1)):
        dump = tmp_path / f"resume{nproc}"
        subprocess.run(["cp", "-r", str(split), str(dump)], check=True)
        # Resume and finish the run: the losses of steps 3..5 are the uninterrupted ones.
        torchrun(nproc, base_args(dump, small_corpus, cfg) +
                 ["--training.local_batch_size", str(local_batch), "--checkpoint.enable",
                  "--checkpoint.interval", "100"])
        losses = [m["loss"] for m in read_metrics(dump)][-(STEPS - 2):]
        assert_close(losses, expected[2:], f"resume with {nproc} ranks")
    # The HF export of one state does not depend on the world size that writes it.
    for nproc, local_batch in ((1, 4), (2, 2), (4, 1)):
        dump = tmp_path / f"export{nproc}"
        subprocess.run(["cp", "-r", str(split), str(dump)], check=True)
        torchrun(nproc, base_args(dump, small_corpus, cfg, steps=2) +
                 ["--training.local_batch_size", str(local_batch), "--checkpoint.enable",
                  "--checkpoint.last_save_in_hf"])
        exports[nproc] = (dump / "hf" / "step-2" / "model.safetensors").read_bytes()
    assert exports[1] == exports[2] == exports[4]


def test_degrees_that_do_not_fit_the_world_fail(tmp_path, small_corpus):
    for extra, needle in (
            (["--parallelism.data_parallel_shard_degree", "3"], "data_parallel_shard_degree"),
            (["--parallelism.pipeline_parallel_degree", "3"], "pipeline_parallel_degree=3")):
        proc = torchrun(2, base_args(tmp_path / "bad", small_corpus, "qwen3_debugmodel") +
                        ["--training.local_batch_size", "1", *extra], check=False, timeout=120)
        assert proc.returncode != 0
        assert needle in proc.stdout + proc.stderr


def test_ranks_with_different_configs_fail(tmp_path, small_corpus):
    # Each rank gets its own seed through a wrapper: the configs differ.
    wrapper = tmp_path / "titan_seed_per_rank.sh"
    wrapper.write_text(f'#!/bin/sh\nexec "{TITAN}" "$@" --training.seed "$RANK"\n')
    wrapper.chmod(0o755)
    proc = torchrun(2, base_args(tmp_path / "mismatch", small_corpus, "qwen3_debugmodel") +
                    ["--training.local_batch_size", "1"], program=wrapper, check=False,
                    timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "rank 1 resolved a different config than rank 0" in out, out[-3000:]


def start_long_run(tmp_path, small_corpus, timeout_seconds, config="qwen3_debugmodel", extra=()):
    args = base_args(tmp_path / "long", small_corpus, config, steps=100000) + [
        "--training.local_batch_size", "1", "--comm.train_timeout_seconds", str(timeout_seconds),
        *extra]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    agent = subprocess.Popen(
        [*TORCHRUN, "--no-python", "--nproc_per_node=2", "--rdzv_backend", "c10d",
         "--rdzv_endpoint=localhost:0", "--role", "rank", "--tee", "3", str(TITAN),
         *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    # Wait until both ranks train (step lines of rank 1), then find rank 1's process.
    deadline = time.time() + 120
    lines = []
    while time.time() < deadline:
        line = agent.stdout.readline()
        lines.append(line)
        if line.startswith("[rank1]:step: 3"):
            break
    pid = None
    while pid is None and time.time() < deadline:
        pid = rank_pid(agent.pid, 1)
    assert pid is not None, "".join(lines)
    return agent, pid, lines


# Expert parallelism exchanges tokens with an all-to-all in every MoE layer, forward and
# backward: a rank that dies or hangs there is caught as in FSDP's all-gathers.
LONG_RUNS = {"fsdp": ("qwen3_debugmodel", ()),
             "ep": ("qwen3_debugmodel_moe", ("--parallelism.expert_parallel_degree", "2"))}


@pytest.mark.parametrize("how", ["killed", "stopped"])
@pytest.mark.parametrize("layout", sorted(LONG_RUNS))
def test_a_dead_or_hung_rank_stops_the_job_with_an_error(tmp_path, small_corpus, how, layout):
    timeout_seconds = 5
    config, extra = LONG_RUNS[layout]
    agent, pid, lines = start_long_run(tmp_path, small_corpus, timeout_seconds, config, extra)
    start = time.time()
    os.kill(pid, signal.SIGKILL if how == "killed" else signal.SIGSTOP)
    try:
        out, _ = agent.communicate(timeout=120)
    finally:
        if agent.poll() is None:
            agent.kill()
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    out = "".join(lines) + out
    assert agent.returncode != 0
    if how == "stopped":
        # Rank 0 gives up after the collective timeout, naming the rank that stopped.
        error = [line for line in out.splitlines() if line.startswith("[rank0]:error:")]
        assert error and "rank 1 stopped responding" in error[0], out[-3000:]
    else:
        assert "local_rank: 1" in out or "rank 1" in out, out[-3000:]
    assert time.time() - start < 90


def short_documents(path, count=400):
    """Short documents (a few words each), so a few steps read many of them."""
    import json
    words = "every rank reads its share of the documents and all of them pack one stream".split()
    with open(path, "w", encoding="utf-8") as f:
        for i in range(count):
            text = " ".join(words[(i * 5 + j) % len(words)] for j in range(3 + i % 6))
            f.write(json.dumps({"text": f"{i}: {text}."}) + "\n")
    return path


def documents_read(output, nproc):
    """{rank: documents it read}, from each rank's closing line."""
    import re
    found = {int(m.group(1)): int(m.group(2)) for m in re.finditer(
        r"\[titan\] rank (\d+) of %d read (\d+) documents" % nproc, output)}
    assert len(found) == nproc, output[-3000:]
    return found


def test_each_rank_reads_its_share_of_the_documents(tmp_path):
    """Shared reading: with 4 ranks each tokenizes about a quarter of the documents one rank
    reads for the same steps, and the batches (so the losses) are the single process's."""
    corpus = short_documents(tmp_path / "short.jsonl")
    common = ["--training.prefetch_batches", "0"]
    one = torchrun(1, base_args(tmp_path / "one", corpus, "qwen3_debugmodel") +
                   ["--training.local_batch_size", "4", *common])
    alone = documents_read(one.stdout, 1)[0]
    four = torchrun(4, base_args(tmp_path / "four", corpus, "qwen3_debugmodel") +
                    ["--training.local_batch_size", "1", *common])
    shares = documents_read(four.stdout, 4)
    # A round reads about one pass of rows ahead: at most a pass's documents (4 rows of 33
    # tokens, ~10-token documents) beyond the quarter.
    assert alone > 40, alone
    for rank, count in shares.items():
        assert alone / 4 - 1 <= count <= alone / 4 + 8, (rank, count, alone)
    assert_close(curves(tmp_path / "four")[0], curves(tmp_path / "one")[0], "loss")
    # Without shared reading every rank reads what one rank reads (the loader before it).
    every = torchrun(2, base_args(tmp_path / "every", corpus, "qwen3_debugmodel") +
                     ["--training.local_batch_size", "2", "--debug.shared_reading", "false",
                      *common])
    assert set(documents_read(every.stdout, 2).values()) == {alone}
    assert_close(curves(tmp_path / "every")[0], curves(tmp_path / "one")[0], "loss")


def test_checkpoints_reshard_from_one_process_and_from_hsdp(tmp_path, small_corpus):
    """1 process -> 4 ranks (FSDP), and HSDP 2x2 -> FSDP 4: each resumes to the uninterrupted
    losses, and the data position carries over whatever the data-parallel degree."""
    cfg = "qwen3_debugmodel"
    straight = tmp_path / "straight"
    torchrun(1, base_args(straight, small_corpus, cfg) + ["--training.local_batch_size", "4"])
    expected, _ = curves(straight)
    starts = {
        "one": (1, ["--training.local_batch_size", "4"]),
        "hsdp": (4, ["--training.local_batch_size", "1",
                     "--parallelism.data_parallel_replicate_degree", "2"]),
    }
    for name, (nproc, layout) in starts.items():
        dump = tmp_path / name
        torchrun(nproc, base_args(dump, small_corpus, cfg, steps=2) +
                 [*layout, "--checkpoint.enable", "--checkpoint.interval", "2"])
        torchrun(4, base_args(dump, small_corpus, cfg) +
                 ["--training.local_batch_size", "1", "--checkpoint.enable",
                  "--checkpoint.interval", "100"])
        losses = [m["loss"] for m in read_metrics(dump)][-(STEPS - 2):]
        assert_close(losses, expected[2:], f"{name} -> FSDP 4")
