"""Pipeline parallelism under torchrun with Gloo on the CPU: every schedule, and the pipeline
composed with FSDP, tensor and expert parallelism, gives the single-process losses and gradient
norms (float32, 5 steps, 1e-5) for the same global batch; checkpoints move between pipeline
degrees and the Hugging Face export does not depend on them; validation runs the forward-only
schedule; a two-node launch splits the pipeline across the nodes; bad inputs fail with one
clear error each and a stage that dies stops the others, naming it."""
import json
import os
import shutil
import signal
import socket
import subprocess
import time

import pytest
import torch
from safetensors.torch import load_file

from conftest import TITAN, TOKENIZER_DIR, read_metrics
from launch import TORCHRUN, assert_close, curves, rank_pid, torchrun

STEPS = 5
GLOBAL_BATCH = 4
SCHEDULES = ["GPipe", "1F1B", "Interleaved1F1B", "InterleavedZeroBubble"]
MODELS = {
    # Tied embeddings: the first and the last stage each hold the table.
    "dense": ["--config", "qwen3_debugmodel"],
    # Hugging Face's auxiliary loss over every layer, split over the stages.
    "moe": ["--config", "qwen3_debugmodel_moe", "--model.moe_load_balancing", "aux_loss"],
    # Expert-bias counts summed over the ranks of each stage.
    "moe_bias": ["--config", "qwen3_debugmodel_moe", "--model.moe_load_balancing", "expert_bias"],
}
# The reference of each model: one process, the whole global batch. The auxiliary loss is a mean
# over each forward's tokens, so its reference runs one forward per pipeline microbatch (one row
# each, gradient accumulation over the four).
REFERENCE = {
    "dense": ["--training.local_batch_size", "4"],
    "moe": ["--training.local_batch_size", "1", "--training.global_batch_size", "4"],
    "moe_bias": ["--training.local_batch_size", "4"],
}


def args(dump, corpus, kind, *extra, steps=STEPS, hf_assets=TOKENIZER_DIR):
    return ["train", "--module", "qwen3", *MODELS[kind], "--training.seq_len", "32",
            "--training.steps", steps, "--lr_scheduler.warmup_steps", "2",
            "--lr_scheduler.total_steps", STEPS, "--metrics.log_freq", "1",
            "--training.dataset_path", corpus, "--model.hf_assets_path", hf_assets,
            "--job.dump_folder", dump, *extra]


def pp(degree, schedule="1F1B", local_batch=4):
    return ["--parallelism.pipeline_parallel_degree", degree,
            "--parallelism.pipeline_parallel_schedule", schedule,
            "--training.local_batch_size", local_batch]


def validation(corpus):
    return ["--validator.enable", "--validator.dataset_path", corpus, "--validator.steps", "2",
            "--validator.freq", "5"]


@pytest.fixture(scope="module")
def single(tmp_path_factory, small_corpus):
    """One process per model (checkpoints at steps 3 and 5; the dense one validates)."""
    out = {}
    for kind in MODELS:
        dump = tmp_path_factory.mktemp("single") / kind
        extra = validation(small_corpus) if kind == "dense" else []
        torchrun(1, args(dump, small_corpus, kind, *REFERENCE[kind], "--checkpoint.enable",
                         "--checkpoint.interval", "3", *extra))
        out[kind] = (curves(dump), dump)
    return out


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("kind", ["dense", "moe"])
def test_each_schedule_matches_one_process(tmp_path, small_corpus, single, schedule, kind):
    dump = tmp_path / "run"
    extra = validation(small_corpus) if (kind, schedule) == ("dense", "1F1B") else []
    proc = torchrun(2, args(dump, small_corpus, kind, *pp(2, schedule), *extra))
    (ref_losses, ref_norms), ref_dump = single[kind]
    losses, norms = curves(dump)
    assert_close(losses, ref_losses, f"{schedule} loss")
    assert_close(norms, ref_norms, f"{schedule} grad_norm")
    # Each rank says which stages it holds; the interleaved schedules two per rank.
    stages = 2 if schedule in ("GPipe", "1F1B") else 4
    for stage in range(stages):
        assert f"pipeline stage {stage} of {stages}:" in proc.stdout, proc.stdout[-3000:]
    if extra:
        # Validation runs the forward-only schedule: the held-out loss of one process.
        ours = [m["validation_metrics/loss"] for m in read_metrics(dump)
                if "validation_metrics/loss" in m]
        theirs = [m["validation_metrics/loss"] for m in read_metrics(ref_dump)
                  if "validation_metrics/loss" in m]
        assert ours and len(ours) == len(theirs)
        assert_close(ours, theirs, "validation loss")


UNTIED = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151936,
          "hidden_size": 256, "intermediate_size": 768, "num_hidden_layers": 4,
          "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 64,
          "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "max_position_embeddings": 40960,
          "tie_word_embeddings": False, "bos_token_id": 151643, "eos_token_id": 151645}


def test_zbv_zero_bubble_matches_one_process(tmp_path, small_corpus):
    """ZBVZeroBubble holds the first and the last stage on rank 0 (a V): an untied model, whose
    reference is its own one-process run."""
    assets = tmp_path / "untied"
    assets.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TOKENIZER_DIR / name, assets / name)
    (assets / "config.json").write_text(json.dumps(UNTIED))
    untied = ["--model.flavor", "auto"]
    one, v = tmp_path / "one", tmp_path / "v"
    torchrun(1, args(one, small_corpus, "dense", *untied, "--training.local_batch_size", "4",
                     hf_assets=assets))
    proc = torchrun(2, args(v, small_corpus, "dense", *untied, *pp(2, "ZBVZeroBubble"),
                            hf_assets=assets))
    assert "rank 0 of 2: pipeline stage 3 of 4: the final norm and head" in proc.stdout
    (ref_losses, ref_norms), (losses, norms) = curves(one), curves(v)
    assert_close(losses, ref_losses, "ZBV loss")
    assert_close(norms, ref_norms, "ZBV grad_norm")


# name: (processes, model, overrides); every layout reads the same 4 rows a step.
LAYOUTS = {
    # FSDP within each stage, each stage's blocks recomputed in backward.
    "pp2_fsdp2_ac": (4, "dense", [*pp(2, "1F1B", 2), "--activation_checkpoint.mode", "full"]),
    "pp2_tp2": (4, "dense", [*pp(2, "GPipe"), "--parallelism.tensor_parallel_degree", "2"]),
    "pp2_ep2": (4, "moe_bias", [*pp(2, "Interleaved1F1B", 2),
                                "--parallelism.expert_parallel_degree", "2"]),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_pipeline_composes_with_other_parallelisms(tmp_path, small_corpus, single, layout):
    nproc, kind, extra = LAYOUTS[layout]
    dump = tmp_path / "run"
    proc = torchrun(nproc, args(dump, small_corpus, kind, *extra, "--checkpoint.enable",
                                "--checkpoint.interval", "3"))
    (ref_losses, ref_norms), ref_dump = single[kind]
    losses, norms = curves(dump)
    assert_close(losses, ref_losses, f"{layout} loss")
    assert_close(norms, ref_norms, f"{layout} grad_norm")
    assert "pp=2" in proc.stdout
    # The checkpoint is the one process's: the same names, every stage's tensors written once.
    ours, theirs = {}, {}
    step = dump / "checkpoint" / "step-5"
    for f in step.glob("model-rank*.safetensors"):
        for name, t in load_file(f).items():
            ours.setdefault(name, []).append(t)
    for name, t in load_file(ref_dump / "checkpoint" / "step-5" / "model.safetensors").items():
        theirs[name] = t
    assert set(ours) == set(theirs), set(ours) ^ set(theirs)
    if kind == "moe_bias":
        # The expert biases took the same updates on every stage (and did move).
        biases = [n for n in theirs if n.endswith("mlp.expert_bias")]
        assert biases and any(theirs[n].abs().max() > 0 for n in biases)
        for name in biases:
            assert len(ours[name]) == 1, name
            assert torch.allclose(ours[name][0], theirs[name], atol=1e-7), name


def test_checkpoints_move_between_pipeline_degrees(tmp_path, small_corpus, single):
    """PP 2 -> one process, one process -> PP 2 and PP 2 x FSDP 2 -> FSDP 4 resume to the
    uninterrupted losses; the HF export of one state is the same bytes under PP 2 as in one
    process; titan eval reads a pipeline's checkpoint."""
    (ref_losses, _), ref_dump = single["dense"]
    split = tmp_path / "pp2"
    torchrun(2, args(split, small_corpus, "dense", *pp(2), "--checkpoint.enable",
                     "--checkpoint.interval", "3", "--checkpoint.last_save_in_hf", steps=3))
    manifest = json.loads((split / "checkpoint" / "step-3" / "manifest.json").read_text())
    assert manifest["mesh"]["dims"]["pp"] == 2
    exported = split / "hf" / "step-3" / "model.safetensors"
    # The same state exported by one process.
    one = tmp_path / "one"
    shutil.copytree(split / "checkpoint", one / "checkpoint")
    torchrun(1, args(one, small_corpus, "dense", "--training.local_batch_size", "4",
                     "--checkpoint.enable", "--checkpoint.last_save_in_hf", steps=3))
    assert (one / "hf" / "step-3" / "model.safetensors").read_bytes() == exported.read_bytes()
    # PP 2 -> one process, on to step 5.
    torchrun(1, args(one, small_corpus, "dense", "--training.local_batch_size", "4",
                     "--checkpoint.enable"))
    assert_close([m["loss"] for m in read_metrics(one)][-2:], ref_losses[3:], "PP 2 -> 1")
    # One process -> PP 2.
    back = tmp_path / "back"
    (back / "checkpoint").mkdir(parents=True)
    shutil.copytree(ref_dump / "checkpoint" / "step-3", back / "checkpoint" / "step-3")
    torchrun(2, args(back, small_corpus, "dense", *pp(2), "--checkpoint.enable"))
    assert_close([m["loss"] for m in read_metrics(back)][-2:], ref_losses[3:], "1 -> PP 2")
    # titan eval (one process) reads the pipeline's checkpoint as the one process's.
    evals = []
    for step_dir in (split / "checkpoint" / "step-3", ref_dump / "checkpoint" / "step-3"):
        out = subprocess.run([str(TITAN), "eval", "--model", str(step_dir), "--data",
                              str(small_corpus), "--seq-len", "32", "--steps", "2"],
                             capture_output=True, text=True, env=dict(os.environ,
                                                                      OMP_NUM_THREADS="1"))
        assert out.returncode == 0, out.stderr[-2000:]
        evals.append(json.loads(out.stdout.strip().splitlines()[-1])["loss"])
    assert abs(evals[0] - evals[1]) <= 1e-5 * evals[1], evals


def test_pipeline_and_fsdp_checkpoint_reshards_to_fsdp(tmp_path, small_corpus, single):
    (ref_losses, _), _ = single["dense"]
    split = tmp_path / "pp2_fsdp2"
    torchrun(4, args(split, small_corpus, "dense", *pp(2, "1F1B", 2), "--checkpoint.enable",
                     "--checkpoint.interval", "3", steps=3))
    dump = tmp_path / "fsdp4"
    shutil.copytree(split / "checkpoint", dump / "checkpoint")
    torchrun(4, args(dump, small_corpus, "dense", "--training.local_batch_size", "1",
                     "--checkpoint.enable"))
    assert_close([m["loss"] for m in read_metrics(dump)][-2:], ref_losses[3:],
                 "PP 2 x FSDP 2 -> FSDP 4")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_nodes_split_the_pipeline(tmp_path, small_corpus, single):
    """Two torchrun agents as two machines run them (--nnodes 2, one c10d endpoint): stage 0
    on node 0's two ranks and stage 1 on node 1's, FSDP within each node."""
    port = free_port()
    dump = tmp_path / "nodes"
    run = args(dump, small_corpus, "dense", *pp(2, "1F1B", 2))
    env = dict(os.environ, OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo")
    agents = [subprocess.Popen(
        [*TORCHRUN, "--no-python", "--nnodes", "2", "--node-rank", str(node),
         "--nproc_per_node", "2", "--rdzv_backend", "c10d", f"--rdzv_endpoint=127.0.0.1:{port}",
         "--rdzv_id", "pipeline", "--role", "rank", "--tee", "3", str(TITAN), *map(str, run)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) for node in (0, 1)]
    outputs = [a.communicate(timeout=400)[0] for a in agents]
    assert all(a.returncode == 0 for a in agents), outputs
    # Node 1's agent runs ranks 2 and 3: the last stage.
    assert "rank 2 of 4: pipeline stage 1 of 2" in outputs[1], outputs[1][-3000:]
    (ref_losses, ref_norms), _ = single["dense"]
    losses, norms = curves(dump)
    assert_close(losses, ref_losses, "two nodes loss")
    assert_close(norms, ref_norms, "two nodes grad_norm")


@pytest.mark.parametrize("extra, needle", [
    (pp(2, "Interleaved1F1"),
     'parallelism.pipeline_parallel_schedule = "Interleaved1F1" (did you mean '
     '"Interleaved1F1B"?)'),
    (pp(2) + ["--parallelism.pipeline_parallel_microbatch_size", "3"],
     "training.local_batch_size = 4 does not divide into pipeline microbatches of "
     "parallelism.pipeline_parallel_microbatch_size = 3"),
    # 4 layers, the embedding and the head as one more each: two stages of 4 hold 6.
    (pp(2) + ["--parallelism.pipeline_parallel_layers_per_stage", "4"],
     "the model's layers do not split into the pipeline's stages"),
    # 5 microbatches over 2 ranks make 2 rounds, which do not divide them.
    (pp(2, "Interleaved1F1B", 5), "5 microbatches"),
    (pp(2, "1F1B", 1), "1 microbatches (training.local_batch_size / "
                       "parallelism.pipeline_parallel_microbatch_size) must be at least"),
    (pp(2, "ZBVZeroBubble"), "a model with tied embeddings (tie_word_embeddings) cannot run"),
    (pp(2) + ["--model.converters", "lora"],
     "parallelism.pipeline_parallel_degree = 2: model.converters (LoRA) does not run under "
     "pipeline parallelism yet"),
])
def test_bad_pipelines_fail_with_one_clear_error(tmp_path, small_corpus, extra, needle):
    proc = torchrun(2, args(tmp_path / "bad", small_corpus, "dense", *extra), check=False,
                    timeout=200)
    assert proc.returncode != 0
    assert needle in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]


def test_configs_print_shows_the_pipeline_in_the_mesh():
    proc = subprocess.run([str(TITAN), "configs", "--module", "qwen3", "--config",
                           "qwen3_debugmodel", "--parallelism.pipeline_parallel_degree", "2",
                           "--parallelism.tensor_parallel_degree", "2", "--print"],
                          capture_output=True, text=True, env=dict(os.environ, WORLD_SIZE="8"))
    assert proc.returncode == 0, proc.stderr
    # torch.arange(8).view(pp 2, dp_replicate 1, dp_shard 2, cp 1, tp 2)
    mesh = torch.arange(8).view(2, 1, 2, 1, 2)
    assert "world 8: pp 2, dp_replicate 1, dp_shard 2, cp 1, tp 2" in proc.stdout
    for group, ranks in {"pp": mesh[:, 0, 0, 0, 0], "stage": mesh[0].flatten(),
                         "dp_shard": mesh[0, 0, :, 0, 0]}.items():
        line = f"{group} of rank 0: ranks " + ", ".join(str(int(r)) for r in ranks)
        assert line in proc.stdout, (line, proc.stdout)
    assert 'pipeline_parallel_schedule = "1F1B"' in proc.stdout


@pytest.mark.parametrize("how", ["killed", "stopped"])
def test_a_dead_stage_stops_the_pipeline_naming_it(tmp_path, small_corpus, how):
    """Stage 1 dies (or hangs) mid-schedule: stage 0, waiting for its gradients, stops within
    comm.train_timeout_seconds and names rank 1."""
    timeout_seconds = 5
    run = args(tmp_path / "long", small_corpus, "dense", *pp(2, "GPipe", 2), steps=100000) + [
        "--comm.train_timeout_seconds", timeout_seconds]
    agent = subprocess.Popen(
        [*TORCHRUN, "--no-python", "--nproc_per_node=2", "--rdzv_backend", "c10d",
         "--rdzv_endpoint=localhost:0", "--role", "rank", "--tee", "3", str(TITAN),
         *map(str, run)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=dict(os.environ, OMP_NUM_THREADS="1"))
    deadline = time.time() + 180
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
    error = [line for line in out.splitlines() if line.startswith("[rank0]:error:")]
    assert error and "rank 1 stopped responding" in error[0], out[-3000:]
    assert time.time() - start < 90
