"""Broken Hugging Face directories given to `titan train` as the initial load: each is one
clear error naming the file/tensor, and nothing is written."""
import json

import pytest
from safetensors.torch import load_file, save_file

from conftest import run_titan
from hf_models import make_hf_model


def try_finetune(tmp_path, src, corpus):
    dump = tmp_path / "run"
    proc = run_titan(
        "train", "--module", "qwen3", "--config", "qwen3_debugmodel", "--model.flavor", "auto",
        "--model.hf_assets_path", src, "--checkpoint.initial_load_in_hf",
        "--checkpoint.last_save_in_hf", "--training.steps", "1",
        "--training.local_batch_size", "1", "--training.seq_len", "16",
        "--training.dataset_path", corpus, "--job.dump_folder", dump, check=False)
    assert proc.returncode != 0, proc.stdout
    assert not (dump / "hf").exists()
    assert "error:" in proc.stderr
    return proc.stderr


@pytest.fixture
def src(tmp_path, tokenizer_dir):
    path = tmp_path / "src"
    make_hf_model(path, moe=False, tied=False, tokenizer_dir=tokenizer_dir)
    return path


def test_missing_config_json(tmp_path, src, small_corpus):
    (src / "config.json").unlink()
    assert "config.json" in try_finetune(tmp_path, src, small_corpus)


def test_config_of_another_architecture(tmp_path, src, small_corpus):
    cfg = json.loads((src / "config.json").read_text())
    cfg["model_type"] = "llama"
    (src / "config.json").write_text(json.dumps(cfg))
    assert "llama" in try_finetune(tmp_path, src, small_corpus)


def test_truncated_weights(tmp_path, src, small_corpus):
    f = src / "model.safetensors"
    f.write_bytes(f.read_bytes()[:-1000])
    assert "model.safetensors" in try_finetune(tmp_path, src, small_corpus)


def test_weight_map_naming_a_missing_file(tmp_path, src, small_corpus):
    weights = load_file(src / "model.safetensors")
    (src / "model.safetensors").unlink()
    names = sorted(weights)
    save_file({k: weights[k] for k in names[:5]}, src / "model-00001-of-00002.safetensors",
              metadata={"format": "pt"})
    index = {"metadata": {}, "weight_map": {k: ("model-00001-of-00002.safetensors" if i < 5 else
                                                "model-00002-of-00002.safetensors")
                                            for i, k in enumerate(names)}}
    (src / "model.safetensors.index.json").write_text(json.dumps(index))
    assert "model-00002-of-00002.safetensors" in try_finetune(tmp_path, src, small_corpus)


def test_tensor_of_the_wrong_shape(tmp_path, src, small_corpus):
    weights = load_file(src / "model.safetensors")
    key = "model.layers.1.mlp.down_proj.weight"
    weights[key] = weights[key][:, :-1].contiguous()
    save_file(weights, src / "model.safetensors", metadata={"format": "pt"})
    assert key in try_finetune(tmp_path, src, small_corpus)


def test_missing_key(tmp_path, src, small_corpus):
    weights = load_file(src / "model.safetensors")
    key = "model.layers.0.self_attn.k_norm.weight"
    del weights[key]
    save_file(weights, src / "model.safetensors", metadata={"format": "pt"})
    assert key in try_finetune(tmp_path, src, small_corpus)


@pytest.mark.parametrize("command", ["forward", "eval", "generate", "convert"])
def test_unsupported_model_type_is_one_error_listing_the_supported(tmp_path, src, small_corpus,
                                                                   command):
    cfg = json.loads((src / "config.json").read_text())
    cfg["model_type"] = "gpt2"
    cfg["architectures"] = ["GPT2LMHeadModel"]
    (src / "config.json").write_text(json.dumps(cfg))
    args = {
        "forward": ["--tokens", "1,2,3", "--output", tmp_path / "logits.safetensors"],
        "eval": ["--data", small_corpus, "--seq-len", "16", "--steps", "1"],
        "generate": ["--prompt", "def", "--max-new-tokens", "2"],
        "convert": ["--to", tmp_path / "out"],
    }[command]
    flag = "--from" if command == "convert" else "--model"
    proc = run_titan(command, flag, src, *args, check=False)
    assert proc.returncode != 0
    err = proc.stderr
    assert err.startswith("error:") and err.count("\n") == 1, err
    assert "model_type 'gpt2'" in err and "GPT2LMHeadModel" in err, err
    assert "qwen3" in err and "qwen3_moe" in err and "llama" in err, err
    assert not (tmp_path / "logits.safetensors").exists() and not (tmp_path / "out").exists()
