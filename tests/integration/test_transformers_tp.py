"""Tensor parallelism on the Transformers backend, from each family's own tensor-parallel plan:
under torchrun (Gloo, CPU), Qwen3 (replicated q/k norms, the tied vocabulary-parallel lookup)
under TP 2 without sequence parallelism gives the one-process losses, gradient norms and
validation losses (float32, 3 steps, 1e-5) on the same global batch and the native Qwen3's TP 2
losses from one checkpoint, and resumes under FSDP 2 with the same export; what a plan cannot
honour is one error naming the family, the degree and why, as is a sequence that sequence
parallelism cannot split. TP 2 with sequence parallelism (Qwen3, Llama) and the other families'
distinct plans (Granite's, which Llama, Mistral and Qwen2 share, OLMo2's gathered projections,
Phi-3's fused ones) are cells of test_transformers_layouts.py."""
import shutil

import pytest
from transformers import AutoConfig

from conftest import read_metrics
from hf_families import make_family
from launch import assert_close, curves, torchrun

MODULE = "transformers_modeling_backend"
STEPS = 3
TP2 = ["--parallelism.tensor_parallel_degree", "2",
       "--parallelism.enable_sequence_parallel", "false"]


def args(dump, corpus, hf_dir, *extra, backend="transformers", steps=STEPS):
    return ["train", "--module", MODULE, "--config", f"{MODULE}_debugmodel",
            "--model.name", backend, "--model.flavor", "auto", "--model.hf_assets_path", hf_dir,
            "--checkpoint.initial_load_in_hf", "--model.moe_load_balancing", "none",
            "--training.steps", steps, "--training.local_batch_size", "2",
            "--training.seq_len", "32", "--lr_scheduler.warmup_steps", "2",
            "--metrics.log_freq", "1", "--training.dataset_path", corpus,
            "--validator.enable", "true", "--validator.freq", "2", "--validator.steps", "1",
            "--validator.dataset_path", corpus, "--job.dump_folder", dump, *extra]


def validation_losses(dump):
    return [m["validation_metrics/loss"] for m in read_metrics(dump)
            if "validation_metrics/loss" in m]


def one_error(proc):
    """The one error line (the same on every rank) of a run that failed."""
    assert proc.returncode != 0
    lines = proc.stdout.splitlines() + proc.stderr.splitlines()
    errors = {l.split(":", 1)[1].strip() for l in lines
              if l.split(":", 1)[-1].strip().startswith("error:")}
    assert len(errors) == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    return errors.pop()


@pytest.mark.parametrize("family, overrides, extra, needle", [
    ("qwen3_moe", {}, TP2, "packed [gate; up] (packed_colwise)"),
    ("qwen3", dict(num_key_value_heads=1), TP2, "does not divide the 4 attention heads and 1"),
    # Sequence parallelism (on by default) shards the rows, which the degree must divide.
    ("qwen3", {}, ["--parallelism.tensor_parallel_degree", "2", "--training.seq_len", "33"],
     "training.seq_len = 33: with sequence parallelism (parallelism.enable_sequence_parallel)"),
])
def test_what_tp_cannot_honour_is_one_error(tmp_path, small_corpus, tokenizer_dir, family,
                                             overrides, extra, needle):
    hf = tmp_path / "hf"
    make_family(hf, family, tokenizer_dir, **overrides)
    proc = torchrun(2, args(tmp_path / "run", small_corpus, hf, *extra, steps=1), check=False)
    error = one_error(proc)
    assert needle in error, error
    if "sequence" not in needle:
        assert "tensor_parallel_degree = 2" in error and family in error, error


def test_sequence_parallel_refuses_a_final_norm_it_cannot_place(tmp_path, small_corpus,
                                                                 tokenizer_dir):
    """GPT-NeoX's final norm is `final_layer_norm`, not the decoder's `norm`: titan cannot tell
    that it runs after the split of the sequence, so sequence parallelism is refused (one error
    naming the family and the parameter); its tensor-parallel plan is otherwise accepted."""
    hf = tmp_path / "gpt_neox"
    AutoConfig.for_model("gpt_neox", vocab_size=151936, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4).save_pretrained(hf)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizer_dir / name, hf / name)
    run = ["train", "--module", MODULE, "--config", f"{MODULE}_debugmodel", "--model.flavor",
           "auto", "--model.hf_assets_path", hf, "--parallelism.tensor_parallel_degree", 2,
           "--training.seq_len", 32, "--training.steps", 1, "--training.dataset_path",
           small_corpus, "--job.dump_folder", tmp_path / "run"]
    proc = torchrun(2, run, check=False)
    error = one_error(proc)
    assert ("parallelism.enable_sequence_parallel = true with tensor_parallel_degree = 2: the "
            "Transformers model GPTNeoXForCausalLM (model_type 'gpt_neox') cannot shard its "
            "sequence between the tensor-parallel regions: gpt_neox.final_layer_norm.weight lies "
            "outside the input embedding, the decoder layers, the final norm") in error, error


def test_tp2_qwen3_matches_one_process_and_native_and_resumes_under_fsdp2(
        tmp_path, small_corpus, tokenizer_dir):
    """Qwen3 (tied: the vocabulary-parallel lookup) under TP 2 gives the one-process run and the
    native Qwen3's TP 2 run; its checkpoint resumes under FSDP 2, which exports the same bytes the
    TP run exported and trains on to the one-process loss."""
    hf = tmp_path / "hf"
    make_family(hf, "qwen3", tokenizer_dir)
    one = tmp_path / "one"
    torchrun(1, args(one, small_corpus, hf, steps=STEPS + 1))
    ref_losses, _ = curves(one)
    save = ["--checkpoint.enable", "--checkpoint.interval", str(STEPS),
            "--checkpoint.last_save_in_hf", "--checkpoint.export_dtype", "float32"]
    split = tmp_path / "tp"
    proc = torchrun(2, args(split, small_corpus, hf, *TP2, *save))
    assert "tp=2" in proc.stdout
    (losses, norms), (_, ref_norms) = curves(split), curves(one)
    assert len(losses) == STEPS
    assert_close(losses, ref_losses[:STEPS], "TP 2 loss")
    assert_close(norms, ref_norms[:STEPS], "TP 2 grad_norm")
    assert len(validation_losses(one)) >= 1
    assert_close(validation_losses(split)[:1], validation_losses(one)[:1], "TP 2 validation loss")
    native = tmp_path / "native"
    torchrun(2, args(native, small_corpus, hf, *TP2, backend="qwen3"))
    assert_close(curves(native)[0], losses, "native Qwen3 under TP 2")
    fsdp = tmp_path / "fsdp"
    shutil.copytree(split / "checkpoint", fsdp / "checkpoint")
    one_row = ["--training.local_batch_size", "1"]
    torchrun(2, args(fsdp, small_corpus, hf, *one_row, *save))
    exported = f"hf/step-{STEPS}/model.safetensors"
    assert (fsdp / exported).read_bytes() == (split / exported).read_bytes()
    torchrun(2, args(fsdp, small_corpus, hf, *one_row, "--checkpoint.enable",
                     steps=STEPS + 1))
    assert_close([m["loss"] for m in read_metrics(fsdp)][-1:], ref_losses[STEPS:],
                 "TP 2 -> FSDP 2")
