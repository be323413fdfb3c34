"""Context parallelism on the Transformers backend (model.name transformers): Transformers' own
Qwen3 attends through titan's context attention (registered with Transformers' attention
interface), each cp rank running the decoder on its head-tail chunks of the rows. With packed
documents that cross the chunk boundaries, CP 2 gives the single-process losses, gradient
norms and validation losses (float32, 4 steps, 1e-5) for the same global batch; a family whose
attention titan's context attention cannot reproduce (a sliding window shorter than the rows)
is refused with one error."""
import json

import pytest
from transformers import AutoConfig

from conftest import TOKENIZER_DIR, read_metrics
from hf_models import make_hf_model
from launch import assert_close, curves, torchrun
from test_context_parallel import TEXTS

MODULE = "transformers_modeling_backend"
STEPS = 4


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("cp") / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS * 20), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("hf") / "qwen3"
    make_hf_model(path, tied=True, seed=11, tokenizer_dir=TOKENIZER_DIR)
    return path


def args(dump, corpus, model_dir, *extra, documents=True):
    return ["train", "--module", MODULE, "--config", f"{MODULE}_debugmodel",
            "--model.flavor", "auto", "--model.hf_assets_path", model_dir,
            "--checkpoint.initial_load_in_hf", "--training.seq_len", 32,
            "--training.steps", STEPS, "--lr_scheduler.warmup_steps", 2,
            "--lr_scheduler.total_steps", STEPS, "--metrics.log_freq", 1,
            "--training.local_batch_size", 4, "--training.dataset_path", corpus,
            "--training.document_masking", str(documents).lower(),
            "--validator.enable", "true", "--validator.freq", 2, "--validator.steps", 2,
            "--validator.dataset_path", corpus, "--job.dump_folder", dump, *extra]


def validation_losses(dump):
    return [m["validation_metrics/loss"] for m in read_metrics(dump)
            if "validation_metrics/loss" in m]


def test_cp2_with_documents_matches_one_process(tmp_path, corpus, hf_dir, documents=True):
    torchrun(1, args(tmp_path / "one", corpus, hf_dir, documents=documents))
    proc = torchrun(2, args(tmp_path / "cp2", corpus, hf_dir, "--parallelism.context_parallel_degree",
                            2, documents=documents))
    assert "parallelism.context_parallel_degree" not in proc.stderr
    (losses, norms), (ref_losses, ref_norms) = curves(tmp_path / "cp2"), curves(tmp_path / "one")
    assert len(ref_losses) == STEPS
    assert_close(losses, ref_losses, "loss")
    assert_close(norms, ref_norms, "grad_norm")
    assert len(validation_losses(tmp_path / "one")) == 2
    assert_close(validation_losses(tmp_path / "cp2"), validation_losses(tmp_path / "one"),
                 "validation loss")


def test_a_short_sliding_window_is_refused(tmp_path, corpus):
    """Mistral attends within a window; titan's context attention is causal over the rows."""
    model_dir = tmp_path / "mistral"
    AutoConfig.for_model("mistral", vocab_size=151936, hidden_size=64, intermediate_size=96,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=16, sliding_window=8).save_pretrained(model_dir)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (model_dir / name).write_bytes((TOKENIZER_DIR / name).read_bytes())
    proc = torchrun(2, ["train", "--module", MODULE, "--config", f"{MODULE}_debugmodel",
                        "--model.flavor", "auto", "--model.hf_assets_path", model_dir,
                        "--parallelism.context_parallel_degree", 2, "--training.seq_len", 32,
                        "--training.steps", 1, "--training.dataset_path", corpus,
                        "--job.dump_folder", tmp_path / "run"], check=False, timeout=200)
    assert proc.returncode != 0
    assert ("parallelism.context_parallel_degree = 2: the Transformers backend cannot run this "
            "model under context parallelism: ValueError: MistralConfig attends within a sliding "
            "window of 8 tokens, shorter than training.seq_len = 32") in proc.stdout + proc.stderr, \
        (proc.stdout + proc.stderr)[-3000:]
