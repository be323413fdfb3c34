"""Tensor and expert parallelism under torchrun with Gloo on the CPU: every layout gives the
single-process losses and gradient norms (float32, 5 steps, 1e-5) for the same global batch;
checkpoints of these layouts reshard to others and their Hugging Face exports do not depend on
the layout; bad layouts fail with one clear error each."""
import json
import os
import shutil
import subprocess

import pytest
import torch
from safetensors.torch import load_file

from conftest import TITAN, TOKENIZER_DIR, read_metrics
from launch import assert_close, curves, torchrun

STEPS = 5
GLOBAL_BATCH = 4
MODELS = {
    "dense": ["--config", "qwen3_debugmodel"],
    # Expert-bias balancing: its token counts are summed over every rank before each update.
    "moe": ["--config", "qwen3_debugmodel_moe", "--model.moe_load_balancing", "expert_bias"],
    # The auxiliary loss: each rank's mean over its own tokens, averaged over the ranks as any
    # loss under data parallelism; its reference is therefore FSDP 2 (the same two halves of the
    # batch), not one process (one mean over the whole batch, another value).
    "moe_aux": ["--config", "qwen3_debugmodel_moe", "--model.moe_load_balancing", "aux_loss"],
}
REFERENCE_PROCESSES = {"dense": 1, "moe": 1, "moe_aux": 2}


def args(dump, corpus, kind, local_batch, *extra, steps=STEPS):
    return ["train", "--module", "qwen3", *MODELS[kind], "--training.seq_len", "32",
            "--training.steps", steps, "--lr_scheduler.warmup_steps", "2",
            "--lr_scheduler.total_steps", STEPS, "--metrics.log_freq", "1",
            "--training.local_batch_size", local_batch, "--training.dataset_path", corpus,
            "--model.hf_assets_path", TOKENIZER_DIR, "--job.dump_folder", dump, *extra]


@pytest.fixture(scope="module")
def single(tmp_path_factory, small_corpus):
    """One process, the whole global batch: the reference of every layout (checkpoints at
    steps 3 and 5)."""
    out = {}
    for kind in MODELS:
        dump = tmp_path_factory.mktemp("single") / kind
        n = REFERENCE_PROCESSES[kind]
        torchrun(n, args(dump, small_corpus, kind, GLOBAL_BATCH // n, "--checkpoint.enable",
                         "--checkpoint.interval", "3"))
        out[kind] = (curves(dump), dump)
    return out


# name: (processes, model, local batch, overrides)
LAYOUTS = {
    "ep2": (2, "moe", 2, ["--parallelism.expert_parallel_degree", "2"]),
    "ep2_fused": (2, "moe", 2, ["--parallelism.expert_parallel_degree", "2",
                                "--override.imports", "moe_experts=fused"]),
    "ep2_aux_loss": (2, "moe_aux", 2, ["--parallelism.expert_parallel_degree", "2"]),
    "tp2_sp": (2, "dense", 4, ["--parallelism.tensor_parallel_degree", "2"]),
    "tp2": (2, "dense", 4, ["--parallelism.tensor_parallel_degree", "2",
                            "--parallelism.enable_sequence_parallel", "false"]),
    "tp2_fsdp2": (4, "dense", 2, ["--parallelism.tensor_parallel_degree", "2"]),
    "tp2_ep2_moe": (4, "moe", 2, ["--parallelism.tensor_parallel_degree", "2",
                                  "--parallelism.expert_parallel_degree", "2"]),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_layout_matches_one_process(tmp_path, small_corpus, single, layout):
    nproc, kind, local_batch, extra = LAYOUTS[layout]
    dump = tmp_path / "run"
    proc = torchrun(nproc, args(dump, small_corpus, kind, local_batch, *extra,
                                "--checkpoint.enable", "--checkpoint.interval", "5"))
    (ref_losses, ref_norms), ref_dump = single[kind]
    losses, norms = curves(dump)
    assert_close(losses, ref_losses, "loss")
    assert_close(norms, ref_norms, "grad_norm")
    # The step-1 loss is the loss of the same weights: loss parallel equals the chunked loss.
    assert abs(losses[0] - ref_losses[0]) <= 1e-6 * ref_losses[0]
    # Each rank holds its share of the model, and says under which layout.
    shares = [float(line.split("optimizer state: ")[1].split(" MiB, ")[1].split("%")[0])
              for line in proc.stdout.splitlines() if "% of the model's" in line]
    assert len(shares) == nproc and all(share < 100 for share in shares), proc.stdout[-3000:]
    for flag, value in zip(extra[::2], extra[1::2]):
        dim = {"--parallelism.tensor_parallel_degree": "tp",
               "--parallelism.expert_parallel_degree": "ep"}.get(flag)
        if dim:
            assert f"{dim}={value}" in proc.stdout
    if kind == "moe":
        # The expert biases took the same updates (and did move).
        ours = load_file(dump / "checkpoint" / "step-5" / "model-rank0.safetensors")
        theirs = load_file(ref_dump / "checkpoint" / "step-5" / "model.safetensors")
        biases = [n for n in theirs if n.endswith("mlp.expert_bias")]
        assert biases and any(theirs[n].abs().max() > 0 for n in biases)
        for name in biases:
            assert torch.allclose(ours[name], theirs[name], atol=1e-7), name


def test_expert_parallel_checkpoints_reshard_and_export_the_same(tmp_path, small_corpus, single):
    """EP 2 x FSDP 2 (4 ranks) -> 1 process and -> FSDP 4 resume to the uninterrupted losses;
    the HF export of one state is the same bytes whatever the layout that writes it."""
    (ref_losses, _), _ = single["moe"]
    split = tmp_path / "split"
    torchrun(4, args(split, small_corpus, "moe", 1, "--parallelism.expert_parallel_degree", "2",
                     "--checkpoint.enable", "--checkpoint.interval", "3",
                     "--checkpoint.last_save_in_hf", steps=3))
    assert_close(curves(split)[0], ref_losses[:3], "EP 2 x FSDP 2")
    manifest = json.loads((split / "checkpoint" / "step-3" / "manifest.json").read_text())
    assert manifest["mesh"]["dims"]["ep"] == 2 and manifest["mesh"]["dims"]["dp_shard"] == 4
    exported = (split / "hf" / "step-3" / "model.safetensors").read_bytes()
    for nproc, local_batch in ((1, 4), (4, 1)):
        dump = tmp_path / f"resume{nproc}"
        shutil.copytree(split / "checkpoint", dump / "checkpoint")
        # Export the same state under the other layout, then train on to step 5.
        torchrun(nproc, args(dump, small_corpus, "moe", local_batch, "--checkpoint.enable",
                             "--checkpoint.last_save_in_hf", steps=3))
        assert (dump / "hf" / "step-3" / "model.safetensors").read_bytes() == exported
        torchrun(nproc, args(dump, small_corpus, "moe", local_batch, "--checkpoint.enable"))
        assert_close([m["loss"] for m in read_metrics(dump)][-2:], ref_losses[3:],
                     f"EP 2 x FSDP 2 -> {nproc} ranks")


def test_tensor_parallel_checkpoint_reshards_to_fsdp(tmp_path, small_corpus, single):
    (ref_losses, _), ref_dump = single["dense"]
    split = tmp_path / "tp"
    torchrun(2, args(split, small_corpus, "dense", 4, "--parallelism.tensor_parallel_degree", "2",
                     "--checkpoint.enable", "--checkpoint.interval", "3",
                     "--checkpoint.last_save_in_hf", steps=3))
    dump = tmp_path / "fsdp"
    shutil.copytree(split / "checkpoint", dump / "checkpoint")
    torchrun(2, args(dump, small_corpus, "dense", 2, "--checkpoint.enable"))
    assert_close([m["loss"] for m in read_metrics(dump)][-2:], ref_losses[3:], "TP 2 -> FSDP 2")
    # The TP export equals the single process's export of its own step-3 checkpoint.
    one = tmp_path / "one"
    shutil.copytree(split / "checkpoint", one / "checkpoint")
    torchrun(1, args(one, small_corpus, "dense", 4, "--checkpoint.enable",
                     "--checkpoint.last_save_in_hf", steps=3))
    assert ((one / "hf" / "step-3" / "model.safetensors").read_bytes() ==
            (split / "hf" / "step-3" / "model.safetensors").read_bytes())


@pytest.mark.parametrize("nproc, kind, extra, needle", [
    (2, "dense", ["--parallelism.tensor_parallel_degree", "3"],
     "tensor_parallel_degree=3"),  # the product names every degree
    (3, "dense", ["--parallelism.tensor_parallel_degree", "3"],
     "tensor_parallel_degree = 3 must divide the attention heads (8)"),
    (3, "moe", ["--parallelism.expert_parallel_degree", "3"],
     "expert_parallel_degree = 3 must divide the number of experts (8)"),
    (2, "dense", ["--parallelism.expert_parallel_degree", "2"],
     "expert_parallel_degree = 2: the model has no routed experts"),
])
def test_bad_layouts_fail_with_one_clear_error(tmp_path, small_corpus, nproc, kind, extra, needle):
    proc = torchrun(nproc, args(tmp_path / "bad", small_corpus, kind, 1, *extra), check=False,
                    timeout=200)
    assert proc.returncode != 0
    assert needle in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]


def test_configs_print_shows_the_mesh_torch_lays_out(tmp_path):
    """The groups of rank 0 are the slices of torch.arange(world) viewed as the mesh
    [pp, dp_replicate, dp_shard, cp, tp] (torchtitan's layout), ep the inner ep ranks of
    dp_shard x cp x tp."""
    proc = subprocess.run([str(TITAN), "configs", "--module", "qwen3", "--config",
                           "qwen3_debugmodel_moe", "--parallelism.expert_parallel_degree", "4",
                           "--parallelism.tensor_parallel_degree", "2", "--print"],
                          capture_output=True, text=True, env=dict(os.environ, WORLD_SIZE="8"))
    assert proc.returncode == 0, proc.stderr
    mesh = torch.arange(8).view(1, 1, 4, 1, 2)  # pp, dp_replicate, dp_shard, cp, tp
    expected = {
        "tp": mesh[0, 0, 0, 0, :], "dp_shard": mesh[0, 0, :, 0, 0], "dp": mesh[0, :, :, 0, 0],
        "ep": mesh[0, 0].flatten()[:4], "efsdp": mesh[0, 0].flatten()[::4],
    }
    text = proc.stdout
    assert "dp_shard 4, cp 1, tp 2, ep 4, efsdp 2" in text, text
    for group, ranks in expected.items():
        line = f"{group} of rank 0: ranks " + ", ".join(str(int(r)) for r in ranks.flatten())
        assert line in text, (line, text)


def test_the_transformers_backend_refuses_expert_bias(tmp_path, small_corpus):
    module = "transformers_modeling_backend"
    proc = torchrun(1, ["train", "--module", module, "--config", f"{module}_debugmodel_moe",
                        "--model.moe_load_balancing", "expert_bias", "--training.steps", "1",
                        "--training.dataset_path", small_corpus, "--job.dump_folder",
                        tmp_path / "hf"], check=False, timeout=200)
    assert proc.returncode != 0
    assert 'model.moe_load_balancing = "expert_bias": the Transformers backend' in (
        proc.stdout + proc.stderr)
