"""Pipeline parallelism on the Transformers backend (model.name transformers): Transformers' own
Qwen3 (4 layers, tied embeddings) cut into stages of its decoder layers, the embedding on the
first and the final norm and head on the last. Every schedule gives the single-process losses
and gradient norms (float32, 4 steps, 1e-5) for the same global batch, as does the pipeline
composed with FSDP and with context parallelism (packed documents); under PP 2 path 1 trains to
the native model's losses from the same checkpoint; a PP 2 checkpoint resumes on one process,
whose Hugging Face export of the same state is the same bytes; a family whose layers are not a plain sequence of
attention layers is refused with one error."""
import json
import shutil

import pytest
import torch
from transformers import AutoConfig, Qwen3Config, Qwen3ForCausalLM

from conftest import TOKENIZER_DIR, read_metrics
from launch import assert_close, curves, torchrun

MODULE = "transformers_modeling_backend"
STEPS = 4


def write_model(path, tied):
    torch.manual_seed(7)
    config = Qwen3Config(vocab_size=151936, hidden_size=64, intermediate_size=96,
                         num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=16, max_position_embeddings=512, rope_theta=1e6,
                         tie_word_embeddings=tied, rms_norm_eps=1e-6)
    Qwen3ForCausalLM(config).float().save_pretrained(path)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TOKENIZER_DIR / name, path / name)
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    return {"tied": write_model(root / "tied", True), "untied": write_model(root / "untied", False)}


def args(dump, corpus, model_dir, *extra, backend="transformers", steps=STEPS, local_batch=4):
    return ["train", "--module", MODULE, "--config", f"{MODULE}_debugmodel",
            "--model.name", backend, "--model.flavor", "auto", "--model.hf_assets_path",
            model_dir, "--checkpoint.initial_load_in_hf", "--training.seq_len", 32,
            "--training.steps", steps, "--lr_scheduler.warmup_steps", 2,
            "--lr_scheduler.total_steps", STEPS, "--metrics.log_freq", 1,
            "--training.local_batch_size", local_batch, "--training.dataset_path", corpus,
            "--job.dump_folder", dump, *extra]


def pp(schedule="1F1B", local_batch=4):
    return ["--parallelism.pipeline_parallel_degree", 2,
            "--parallelism.pipeline_parallel_schedule", schedule,
            "--training.local_batch_size", local_batch]


VALIDATION = ["--validator.enable", "true", "--validator.freq", 4, "--validator.steps", 2]


def validation_losses(dump):
    return [m["validation_metrics/loss"] for m in read_metrics(dump)
            if "validation_metrics/loss" in m]


SAVE = ["--checkpoint.enable", "--checkpoint.interval", 2, "--checkpoint.last_save_in_hf"]


@pytest.fixture(scope="module")
def single(tmp_path_factory, small_corpus, models):
    """One process per model (the tied one validates)."""
    out = {}
    for kind, model_dir in models.items():
        dump = tmp_path_factory.mktemp("single") / kind
        extra = [*VALIDATION, "--validator.dataset_path", small_corpus] if kind == "tied" else []
        torchrun(1, args(dump, small_corpus, model_dir, *extra))
        out[kind] = dump
    return out


@pytest.fixture(scope="module")
def pp2(tmp_path_factory, small_corpus, models):
    """PP 2 (1F1B) on the tied model: validates, checkpoints at steps 2 and 4, exports at 4."""
    dump = tmp_path_factory.mktemp("pp2") / "run"
    torchrun(2, args(dump, small_corpus, models["tied"], *pp(), *SAVE, *VALIDATION,
                     "--validator.dataset_path", small_corpus))
    return dump


def test_pp2_matches_one_process(pp2, single):
    (losses, norms), (ref_losses, ref_norms) = curves(pp2), curves(single["tied"])
    assert len(ref_losses) == STEPS
    assert_close(losses, ref_losses, "loss")
    assert_close(norms, ref_norms, "grad_norm")
    assert len(validation_losses(single["tied"])) == 1
    assert_close(validation_losses(pp2), validation_losses(single["tied"]), "validation loss")


# name: (processes, model, overrides)
LAYOUTS = {
    "Interleaved1F1B": (2, "tied", pp("Interleaved1F1B")),
    "InterleavedZeroBubble": (2, "tied", pp("InterleavedZeroBubble")),
    # The first and the last stage on one rank: an untied model.
    "ZBVZeroBubble": (2, "untied", pp("ZBVZeroBubble")),
    # FSDP 2 within each stage, the blocks recomputed in backward.
    "pp2_fsdp2_ac": (4, "tied", [*pp("1F1B", 2), "--activation_checkpoint.mode", "full"]),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_layout_matches_one_process(tmp_path, small_corpus, models, single, layout):
    nproc, kind, extra = LAYOUTS[layout]
    dump = tmp_path / "run"
    torchrun(nproc, args(dump, small_corpus, models[kind], *extra))
    (losses, norms), (ref_losses, ref_norms) = curves(dump), curves(single[kind])
    assert len(ref_losses) == STEPS
    assert_close(losses, ref_losses, f"{layout} loss")
    assert_close(norms, ref_norms, f"{layout} grad_norm")


def test_path1_matches_the_native_model_under_pp2(tmp_path, small_corpus, models, pp2):
    native = tmp_path / "native"
    torchrun(2, args(native, small_corpus, models["tied"], *pp(), backend="qwen3"))
    assert_close(curves(pp2)[0], curves(native)[0], "loss")


def test_pp2_resumes_on_one_process_with_the_same_export(tmp_path, small_corpus, models, pp2):
    """Checkpoints hold each stage's tensors under the whole model's names: the PP 2 run's
    step-2 checkpoint resumes on one process to its losses, and its step-4 state exported by
    one process is the same bytes as the PP 2 run's export."""
    resumed, same = tmp_path / "resumed", tmp_path / "same"
    for dump, step in ((resumed, 2), (same, 4)):
        (dump / "checkpoint").mkdir(parents=True)
        # (A link, not a copy: the step is only read.)
        (dump / "checkpoint" / f"step-{step}").symlink_to(pp2 / "checkpoint" / f"step-{step}")
        torchrun(1, args(dump, small_corpus, models["tied"], *SAVE))
    assert_close(curves(resumed)[0], curves(pp2)[0][2:], "PP 2 -> 1 loss")
    ours = same / "hf" / "step-4" / "model.safetensors"
    assert ours.read_bytes() == (pp2 / "hf" / "step-4" / "model.safetensors").read_bytes()


def test_layers_that_are_not_a_plain_sequence_are_refused(tmp_path, small_corpus):
    """Qwen3-Next interleaves linear-attention layers (layer_types)."""
    model_dir = tmp_path / "qwen3_next"
    AutoConfig.for_model("qwen3_next", vocab_size=151936, hidden_size=64, intermediate_size=96,
                         num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=16, num_experts=4, num_experts_per_tok=2,
                         moe_intermediate_size=32, shared_expert_intermediate_size=32,
                         linear_num_value_heads=4, linear_num_key_heads=2).save_pretrained(model_dir)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TOKENIZER_DIR / name, model_dir / name)
    proc = torchrun(2, ["train", "--module", MODULE, "--config", f"{MODULE}_debugmodel",
                        "--model.flavor", "auto", "--model.hf_assets_path", model_dir, *pp(),
                        "--training.seq_len", 32, "--training.steps", 1,
                        "--training.dataset_path", small_corpus, "--job.dump_folder",
                        tmp_path / "run"], check=False, timeout=200)
    assert proc.returncode != 0
    assert ("parallelism.pipeline_parallel_degree > 1: the Transformers backend cannot cut this "
            "model into pipeline stages: ValueError: Qwen3NextForCausalLM has layers of type "
            "linear_attention (layer_types)") in proc.stdout + proc.stderr, \
        (proc.stdout + proc.stderr)[-3000:]
