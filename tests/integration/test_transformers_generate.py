"""titan generate and titan eval on the Transformers backend: Transformers' own model decoding
with its own KV cache gives Transformers' greedy tokens, and its evaluation loss is
Transformers' cross-entropy, on a Hugging Face folder (--backend transformers) and on a
training checkpoint of model.name transformers."""
import json

import pytest
import torch
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM

from conftest import run_titan
from hf_models import make_hf_model, packed_windows

MODULE = "transformers_modeling_backend"
PROMPT = "def fibonacci(n):"


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory, tokenizer_dir):
    path = tmp_path_factory.mktemp("hf") / "model"
    make_hf_model(path, moe=False, tied=True, seed=4, tokenizer_dir=tokenizer_dir)
    return path


def greedy(model_dir, tokenizer_dir, new_tokens):
    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    ids = torch.tensor([tok.encode(PROMPT).ids])
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=new_tokens, do_sample=False, eos_token_id=None,
                             pad_token_id=0)
    return out[0, ids.shape[1]:].tolist()


def generate(model, *extra, new_tokens=12):
    out = run_titan("generate", "--model", model, "--prompt", PROMPT, "--max-new-tokens",
                    new_tokens, "--temperature", 0, "--ignore-eos", "--print-ids", *extra)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_greedy_generate_is_transformers_own(hf_dir, tokenizer_dir):
    assert generate(hf_dir, "--backend", "transformers") == greedy(hf_dir, tokenizer_dir, 12)


def test_a_trained_checkpoint_generates_and_evaluates_as_its_export(tmp_path, small_corpus,
                                                                     hf_dir, tokenizer_dir):
    """A checkpoint of model.name transformers runs on the Transformers backend; its export is
    what Transformers generates from and evaluates."""
    dump = tmp_path / "run"
    run_titan("train", "--module", MODULE, "--config", f"{MODULE}_debugmodel", "--model.flavor",
              "auto", "--model.hf_assets_path", hf_dir, "--checkpoint.initial_load_in_hf",
              "--training.steps", 2, "--training.local_batch_size", 2, "--training.seq_len", 32,
              "--training.dataset_path", small_corpus, "--checkpoint.enable",
              "--checkpoint.interval", 2, "--checkpoint.last_save_in_hf",
              "--checkpoint.export_dtype", "float32", "--job.dump_folder", dump)
    checkpoint, export = dump / "checkpoint" / "step-2", dump / "hf" / "step-2"
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (export / name).write_bytes((tokenizer_dir / name).read_bytes())
    assert generate(checkpoint, "--tokenizer", tokenizer_dir) == greedy(export, tokenizer_dir, 12)
    seq_len, steps = 32, 2
    out = run_titan("eval", "--model", checkpoint, "--data", small_corpus, "--seq-len", seq_len,
                    "--steps", steps, "--tokenizer", tokenizer_dir)
    ours = json.loads(out.stdout.strip().splitlines()[-1])
    model = AutoModelForCausalLM.from_pretrained(export, dtype=torch.float32).eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for w in packed_windows(small_corpus, tokenizer_dir, seq_len, steps):
            x = torch.tensor([w])
            logits = model(x[:, :-1]).logits[0]
            total += torch.nn.functional.cross_entropy(logits, x[0, 1:], reduction="sum").item()
            count += seq_len
    assert ours["tokens"] == count
    assert ours["loss"] == pytest.approx(total / count, rel=1e-5)
