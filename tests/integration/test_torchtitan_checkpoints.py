"""torchtitan's DCP checkpoints in and out (docs/from_torchtitan.md, "Your checkpoints"), against
torchtitan 0.3.0 itself (tests/integration/torchtitan_trainer.py; skipped where it is not
installed beside the venv): what torchtitan's adapters and trainer write, titan reads (as
convert's input, as checkpoint.initial_load_path, and as a step to resume in the dump folder,
whose next losses are torchtitan's own continuation's); what titan writes, torchtitan loads
(the same weights through its adapter, the same logits) and resumes; a .metadata pickle that
would run code is refused before it runs."""
import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from conftest import CORPUS, REPO, read_metrics, run_titan
from hf_models import make_hf_model, make_llama_model

TORCHTITAN_DIR = Path(os.environ.get("TITAN_TORCHTITAN_DIR",
                                     Path.home() / ".cache" / "titan-cpp" / "torchtitan-0.3.0"))
PEER = REPO / "tests" / "integration" / "torchtitan_trainer.py"
pytestmark = pytest.mark.skipif(not (TORCHTITAN_DIR / "torchtitan").is_dir(),
                                reason="torchtitan 0.3.0 is not installed beside the venv")

SIZES = dict(vocab_size=151936, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16)
MODELS = {
    "dense": dict(SIZES, hidden_dim=96, tied=True),
    "moe": dict(SIZES, moe_hidden_dim=32, num_experts=4, top_k=2, tied=True),
    "llama": dict(SIZES, family="llama3", hidden_dim=96, tied=False, rope_theta=10000.0),
}
# The titan config that builds each family from its config.json.
CONFIGS = {"dense": ["--module", "qwen3", "--config", "qwen3_debugmodel"],
           "moe": ["--module", "qwen3", "--config", "qwen3_debugmodel_moe"],
           "llama": ["--module", "llama3", "--config", "llama3_debugmodel"]}


def peer(*args, timeout=600):
    proc = subprocess.run([sys.executable, str(PEER), *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def hf(tmp_path_factory, tokenizer_dir):
    """A small random Hugging Face model of each family, and its torchtitan MODEL.json."""
    root = tmp_path_factory.mktemp("tt")
    out = {}
    for kind in MODELS:
        path = root / kind
        if kind == "llama":
            make_llama_model(path, tied=False, tokenizer_dir=tokenizer_dir, seed=3)
        else:
            make_hf_model(path, moe=kind == "moe", tokenizer_dir=tokenizer_dir, seed=1)
        spec = root / f"{kind}.json"
        spec.write_text(json.dumps(MODELS[kind]))
        out[kind] = (path, spec)
    return out


@pytest.fixture(scope="module")
def torchtitan_written(hf, tmp_path_factory):
    """Each model as torchtitan saves a model-only checkpoint: its adapter's from_hf names and
    layouts, written by dcp.save."""
    root = tmp_path_factory.mktemp("dcp")
    out = {}
    for kind, (path, spec) in hf.items():
        out[kind] = root / kind / "step-0"
        peer("from_hf", spec, path, out[kind])
    return out


def errors(proc):
    """stderr but its warnings (a debug-size run's warmup is clipped, and says so)."""
    return [l for l in proc.stderr.strip().splitlines() if not l.startswith("[titan] warning")]


def same_tensors(a, b):
    assert sorted(a) == sorted(b)
    for name in a:
        assert torch.equal(a[name], b[name]), name


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_titan_reads_the_model_only_checkpoints_torchtitan_writes(kind, hf, torchtitan_written,
                                                                  tmp_path):
    path, _ = hf[kind]
    run_titan("convert", "--from-torchtitan", torchtitan_written[kind], "--to", "hf",
              tmp_path / "back", *CONFIGS[kind], "--model.flavor", "auto",
              "--model.hf_assets_path", path)
    same_tensors(load_file(tmp_path / "back" / "model.safetensors"),
                 load_file(path / "model.safetensors"))


@pytest.mark.parametrize("kind", ["dense", "moe"])
def test_a_model_only_dcp_checkpoint_as_initial_load_path(kind, hf, torchtitan_written,
                                                          tmp_path):
    """torchtitan's initial_load_model_only: the first loss equals the Hugging Face folder's."""
    path, _ = hf[kind]
    common = [*CONFIGS[kind], "--model.flavor", "auto", "--model.hf_assets_path", path,
              "--training.steps", "1", "--training.seq_len", "32",
              "--training.local_batch_size", "2", "--training.dataset_path", CORPUS]
    run_titan("train", *common, "--checkpoint.initial_load_path", path,
              "--job.dump_folder", tmp_path / "hf")
    proc = run_titan("train", *common, "--checkpoint.initial_load_path",
                     torchtitan_written[kind], "--job.dump_folder", tmp_path / "dcp")
    assert f"initial load of torchtitan checkpoint {torchtitan_written[kind]}" in proc.stdout
    assert read_metrics(tmp_path / "dcp")[0]["loss"] == read_metrics(tmp_path / "hf")[0]["loss"]


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_torchtitan_loads_what_titan_writes(kind, hf, tmp_path):
    """`titan convert --to torchtitan`, loaded by torchtitan's model as its CheckpointManager
    loads a model-only checkpoint: its adapter's to_hf gives the source weights back, and (Qwen3
    dense) its logits are the source model's."""
    path, spec = hf[kind]
    out = tmp_path / "step-0"
    run_titan("convert", "--from", path, "--to", "torchtitan", out)
    peer("to_hf", spec, out, tmp_path / "back.safetensors")
    back = load_file(tmp_path / "back.safetensors")
    source = load_file(path / "model.safetensors")
    same_tensors(back, source)
    if kind != "dense":
        return
    from transformers import AutoModelForCausalLM
    tokens = [[9707, 11, 1879, 0, 576, 374, 264, 1273, 151643, 42]]
    (tmp_path / "tokens.json").write_text(json.dumps(tokens))
    peer("logits", spec, out, tmp_path / "tokens.json", tmp_path / "logits.pt")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    with torch.no_grad():
        expected = model(torch.tensor(tokens)).logits
    got = torch.load(tmp_path / "logits.pt")
    assert (got - expected).abs().max().item() <= 1e-5 * expected.abs().max().item()


class _RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_metadata_pickle_that_would_run_code_is_refused(hf, tmp_path):
    step = tmp_path / "checkpoint" / "step-3"
    step.mkdir(parents=True)
    marker = tmp_path / "marker"
    (step / ".metadata").write_bytes(pickle.dumps({"state_dict_metadata": _RunsCode(marker)}))
    (step / "__0_0.distcp").write_bytes(b"")
    path, _ = hf["dense"]
    proc = run_titan("convert", "--from-torchtitan", step, "--to", "hf", tmp_path / "out",
                     *CONFIGS["dense"], "--model.flavor", "auto", "--model.hf_assets_path", path,
                     check=False)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr
    assert f"{step}/.metadata: refused to read this pickle: it names the global " \
           f"{os.system.__module__}.system" in lines[0], lines[0]
    assert not marker.exists() and not (tmp_path / "out").exists()
    proc = run_titan("train", *CONFIGS["dense"], "--model.flavor", "auto",
                     "--model.hf_assets_path", path, "--checkpoint.initial_load_path", step,
                     "--training.steps", "1", "--job.dump_folder", tmp_path / "job",
                     check=False)
    assert proc.returncode != 0 and "refused to read this pickle" in proc.stderr, proc.stderr
    assert not marker.exists()


def test_a_checkpoint_of_another_model_is_one_error_naming_both(torchtitan_written, tmp_path):
    proc = run_titan("convert", "--from-torchtitan", torchtitan_written["dense"], "--to", "hf",
                     tmp_path / "out", *CONFIGS["dense"], check=False)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr
    assert ("is a torchtitan checkpoint of Qwen3 dense, 2 layers, dim 64, vocabulary 151936, "
            "but this run's model is qwen3, flavor debugmodel (Qwen3 dense, 4 layers, dim 256, "
            "vocabulary 151936)") in lines[0], lines[0]


# Training: torchtitan's own run and titan's, on the same rows.

TRAIN = ["--training.steps", "4", "--training.seq_len", "32", "--training.local_batch_size", "2"]


def torchtitan_run(spec, data, tokenizer_dir, dump, *extra):
    proc = peer("train", spec, data, "--module", "qwen3", "--config", "qwen3_debugmodel",
                "--hf_assets_path", tokenizer_dir, "--dataloader.dataset", "local", *TRAIN,
                "--checkpoint.enable", "--checkpoint.interval", "2",
                "--checkpoint.no-last-save-model-only", "--dump_folder", dump, *extra,
                "activation-checkpoint:none")
    return {json.loads(l[7:])["step"]: json.loads(l[7:])["loss"]
            for l in proc.stdout.splitlines() if l.startswith("TTSTEP ")}


def titan_args(path, data, dump):
    """torchtitan's qwen3_debugmodel settings, on this model: its packing, AdamW over every
    parameter, warmup 2 then linear decay over 80% of the steps."""
    return ["train", *CONFIGS["dense"], "--model.flavor", "auto", "--model.hf_assets_path", path,
            "--training.dataset_path", data, "--training.packing", "torchtitan", *TRAIN,
            "--optimizer.param_groups", "*=0.1", "--lr_scheduler.warmup_steps", "2",
            "--lr_scheduler.decay_ratio", "0.8", "--lr_scheduler.decay_type", "linear",
            "--lr_scheduler.min_lr_factor", "0", "--checkpoint.enable",
            "--checkpoint.interval", "2", "--job.dump_folder", dump]


@pytest.fixture(scope="module")
def train_data(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "data.jsonl"
    path.write_text("\n".join(CORPUS.read_text(encoding="utf-8").splitlines()[:30]) + "\n",
                    encoding="utf-8")
    return path


def test_a_torchtitan_training_checkpoint_resumed_by_titan(hf, train_data, tokenizer_dir,
                                                           tmp_path):
    """torchtitan trains 4 steps, saving a full checkpoint at step 2; titan, finding that step-2
    in its dump folder, resumes from it: its steps 3 and 4 are torchtitan's own (same rows: the
    data position is carried)."""
    path, spec = hf["dense"]
    reference = torchtitan_run(spec, train_data, tokenizer_dir, tmp_path / "tt")
    dump = tmp_path / "titan"
    shutil.copytree(tmp_path / "tt" / "checkpoint" / "step-2", dump / "checkpoint" / "step-2")
    proc = run_titan(*titan_args(path, train_data, dump))
    assert "resumed from torchtitan checkpoint" in proc.stdout, proc.stdout
    losses = {m["step"]: m["loss"] for m in read_metrics(dump)}
    assert sorted(losses) == [3, 4]
    for step in (3, 4):
        assert losses[step] == pytest.approx(reference[step], abs=1e-5), (losses, reference)
    # Packed otherwise, the data position is not carried, and one warning says so.
    other = tmp_path / "other"
    shutil.copytree(tmp_path / "tt" / "checkpoint" / "step-2", other / "checkpoint" / "step-2")
    args = titan_args(path, train_data, other)
    args[args.index("--training.packing") + 1] = "hf_flattening"
    proc = run_titan(*args)
    warnings = [l for l in proc.stderr.splitlines() if "not carried over" in l]
    assert len(warnings) == 1, proc.stderr
    assert "the data position: this run's training.packing is not torchtitan" in warnings[0]


def test_a_full_torchtitan_export_resumed_by_torchtitan(hf, train_data, tokenizer_dir, tmp_path):
    """titan trains 2 steps; `convert --to torchtitan --full` of its step-2, resumed by
    torchtitan (without a data position: both start the data over), gives titan's own next
    losses."""
    path, spec = hf["dense"]
    dump = tmp_path / "titan"
    run_titan(*titan_args(path, train_data, dump))
    step2 = dump / "checkpoint" / "step-2"
    resumed = tmp_path / "resumed"
    shutil.copytree(step2, resumed / "checkpoint" / "step-2")
    run_titan(*titan_args(path, train_data, resumed), "--checkpoint.exclude_from_loading",
              "dataloader,rng")
    ours = {m["step"]: m["loss"] for m in read_metrics(resumed)}
    run_titan("convert", "--from", step2, "--to", "torchtitan",
              tmp_path / "tt" / "checkpoint" / "step-2", "--full")
    theirs = torchtitan_run(spec, train_data, tokenizer_dir, tmp_path / "tt",
                            "--checkpoint.exclude-from-loading", "dataloader")
    assert sorted(theirs) == [3, 4], theirs
    for step in (3, 4):
        assert theirs[step] == pytest.approx(ours[step], abs=1e-5), (theirs, ours)


def test_a_torchtitan_checkpoint_in_the_dump_folder_is_never_passed_over(hf, torchtitan_written,
                                                                         tmp_path):
    """With checkpointing off, titan does not resume; a torchtitan step in the dump folder is
    then one error naming it and the flag, not a fresh start beside it. With it on, the step is
    loaded (step-0, a seed checkpoint: the weights)."""
    path, _ = hf["dense"]
    dump = tmp_path / "job"
    shutil.copytree(torchtitan_written["dense"], dump / "checkpoint" / "step-0")
    common = ["train", *CONFIGS["dense"], "--model.flavor", "auto", "--model.hf_assets_path",
              path, "--training.steps", "1", "--training.seq_len", "32",
              "--training.dataset_path", CORPUS, "--job.dump_folder", dump]
    proc = run_titan(*common, check=False)
    lines = errors(proc)
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr
    assert f"{dump / 'checkpoint' / 'step-0'} is a torchtitan checkpoint" in lines[0], lines[0]
    assert "--checkpoint.enable" in lines[0], lines[0]
    proc = run_titan(*common, "--checkpoint.enable")
    assert f"resumed from torchtitan checkpoint {dump / 'checkpoint' / 'step-0'}" in proc.stdout
    # A model-only step past 0 (torchtitan's last_save_model_only) cannot be resumed from: one
    # error pointing at initial_load_path.
    later = tmp_path / "later"
    shutil.copytree(torchtitan_written["dense"], later / "checkpoint" / "step-5")
    common[common.index("--job.dump_folder") + 1] = later
    proc = run_titan(*common, "--checkpoint.enable", "--training.steps", "6", check=False)
    lines = errors(proc)
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr
    assert "is a model-only torchtitan checkpoint" in lines[0], lines[0]
    assert "--checkpoint.initial_load_path" in lines[0], lines[0]
    assert sorted(p.name for p in later.iterdir()) == ["checkpoint"]
