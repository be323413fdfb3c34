"""The user's round trip: a Hugging Face checkpoint made by transformers is fine-tuned with
`titan train`, exported, and loaded unchanged by AutoModelForCausalLM."""
import json
import logging

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

from conftest import read_metrics, run_titan
from hf_models import hf_logits, make_hf_model, rel_err

TOKENS = [9707, 11, 1879, 0, 576, 3974, 13876, 38835, 34208, 916, 279, 15678, 5562, 13]


def finetune(tmp_path, src, corpus, *extra):
    dump = tmp_path / "run"
    run_titan(
        "train", "--module", "qwen3", "--config", "qwen3_debugmodel",
        "--model.flavor", "auto", "--model.hf_assets_path", src,
        "--checkpoint.initial_load_in_hf", "--checkpoint.last_save_in_hf",
        "--training.steps", "3", "--training.local_batch_size", "2", "--training.seq_len", "32",
        "--optimizer.lr", "1e-2", "--lr_scheduler.warmup_steps", "0",
        "--training.dataset_path", corpus, "--job.dump_folder", dump, *extra,
    )
    return dump / "hf" / "step-3"


def load_clean(out):
    model, info = AutoModelForCausalLM.from_pretrained(
        out, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    for key in ("missing_keys", "unexpected_keys", "mismatched_keys"):
        assert not info[key], (key, info[key])
    return model


@pytest.mark.parametrize(
    "moe,tied,export_dtype,shard",
    [
        (False, True, "float32", None),
        (False, False, "bfloat16", None),
        (True, False, "float32", None),
        (True, True, "bfloat16", None),
        (False, False, "float32", "3MB"),
    ],
)
def test_finetune_export_loads_in_transformers(tmp_path, small_corpus, tokenizer_dir, moe, tied,
                                               export_dtype, shard):
    src = tmp_path / "src"
    make_hf_model(src, moe=moe, tied=tied, tokenizer_dir=tokenizer_dir)
    extra = ["--checkpoint.export_dtype", export_dtype]
    if shard:
        extra += ["--checkpoint.hf_max_shard_size", shard]
    out = finetune(tmp_path, src, small_corpus, *extra)

    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == ("qwen3_moe" if moe else "qwen3")
    assert config["tie_word_embeddings"] == tied
    assert (out / "tokenizer.json").exists() and (out / "generation_config.json").exists()
    if shard:
        index = json.loads((out / "model.safetensors.index.json").read_text())
        assert "metadata" in index and len(set(index["weight_map"].values())) > 1
    else:
        weights = load_file(out / "model.safetensors")
        expected = torch.bfloat16 if export_dtype == "bfloat16" else torch.float32
        assert all(t.dtype == expected for t in weights.values())
        assert ("lm_head.weight" in weights) == (not tied)
        if moe:
            assert "model.layers.0.mlp.experts.3.down_proj.weight" in weights

    model = load_clean(out)
    with torch.no_grad():
        theirs = model(torch.tensor([TOKENS])).logits[0]
    ours_file = tmp_path / "logits.safetensors"
    run_titan("forward", "--model", out, "--tokens", ",".join(map(str, TOKENS)),
              "--output", ours_file)
    ours = load_file(ours_file)["logits"]
    assert ours.shape == theirs.shape
    assert rel_err(ours, theirs) < 1e-5
    # Training happened: the exported model is not the initial one.
    assert rel_err(hf_logits(src, TOKENS), theirs) > 1e-3
