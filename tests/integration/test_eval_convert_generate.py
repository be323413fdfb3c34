"""titan eval / convert / generate against transformers on the same checkpoints."""
import json

import pytest
import torch
from safetensors.torch import load_file
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM

from conftest import run_titan
from hf_models import make_hf_model, packed_windows, rel_err

@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory, tokenizer_dir):
    path = tmp_path_factory.mktemp("hf") / "model"
    make_hf_model(path, moe=True, tied=False, seed=3, tokenizer_dir=tokenizer_dir)
    return path


def test_eval_matches_transformers(hf_dir, small_corpus, tokenizer_dir):
    seq_len, steps = 32, 3
    out = run_titan("eval", "--model", hf_dir, "--data", small_corpus, "--seq-len", seq_len,
                    "--steps", steps)
    ours = json.loads(out.stdout.strip().splitlines()[-1])
    model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for w in packed_windows(small_corpus, tokenizer_dir, seq_len, steps):
            x = torch.tensor([w])
            logits = model(x[:, :-1]).logits[0]
            total += torch.nn.functional.cross_entropy(logits, x[0, 1:], reduction="sum").item()
            count += seq_len
    assert ours["tokens"] == count
    assert ours["loss"] == pytest.approx(total / count, rel=1e-5)


def test_convert_hf_to_checkpoint_and_back(hf_dir, tmp_path):
    ckpt = tmp_path / "ckpt" / "step-0"
    run_titan("convert", "--from", hf_dir, "--to", ckpt)
    assert (ckpt / "manifest.json").exists()
    back = tmp_path / "back"
    run_titan("convert", "--from", ckpt, "--to", back)
    a, b = load_file(hf_dir / "model.safetensors"), load_file(back / "model.safetensors")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    model, info = AutoModelForCausalLM.from_pretrained(back, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]


def test_eval_of_checkpoint_equals_eval_of_hf_dir(hf_dir, tmp_path, small_corpus):
    ckpt = tmp_path / "ckpt" / "step-0"
    run_titan("convert", "--from", hf_dir, "--to", ckpt)
    a = run_titan("eval", "--model", hf_dir, "--data", small_corpus, "--seq-len", 16, "--steps", 2)
    b = run_titan("eval", "--model", ckpt, "--data", small_corpus, "--seq-len", 16, "--steps", 2)
    assert json.loads(a.stdout.splitlines()[-1]) == json.loads(b.stdout.splitlines()[-1])


def test_greedy_generate_matches_transformers(hf_dir, tokenizer_dir):
    prompt = "def fibonacci(n):"
    out = run_titan("generate", "--model", hf_dir, "--prompt", prompt, "--max-new-tokens", 12,
                    "--temperature", 0, "--print-ids")
    ours = json.loads(out.stdout.strip().splitlines()[-1])
    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    ids = torch.tensor([tok.encode(prompt).ids])
    model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        ref = model.generate(ids, max_new_tokens=12, do_sample=False, eos_token_id=None,
                             pad_token_id=0)[0, ids.shape[1]:].tolist()
    assert ours == ref


def test_sampling_is_seeded(hf_dir):
    args = ["generate", "--model", hf_dir, "--prompt", "hello", "--max-new-tokens", 8,
            "--temperature", 0.8, "--top-k", 20, "--print-ids"]
    a = run_titan(*args, "--seed", 1).stdout.splitlines()[-1]
    b = run_titan(*args, "--seed", 1).stdout.splitlines()[-1]
    assert a == b and len(json.loads(a)) == 8


def test_bad_model_paths_fail_cleanly(tmp_path, small_corpus):
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run_titan("eval", "--model", empty, "--data", small_corpus, check=False)
    assert proc.returncode != 0 and str(empty) in proc.stderr
    (empty / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    proc = run_titan("convert", "--from", empty, "--to", tmp_path / "x", check=False)
    assert proc.returncode != 0 and "gpt2" in proc.stderr
    assert not (tmp_path / "x").exists()
