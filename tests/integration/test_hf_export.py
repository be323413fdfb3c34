"""titan's HF export against its peers: the shard plan and index of huggingface_hub's
split_torch_state_dict_into_shards (what save_pretrained uses), the bytes of Python's
safetensors, parse_size against huggingface_hub's parser, and a directory that transformers'
AutoModelForCausalLM loads with the same logits. A stand-in model (a list of tensors) is
exported, so this needs no native model."""
import json
import os
import subprocess

import pytest
import torch
from huggingface_hub import split_torch_state_dict_into_shards
from huggingface_hub.serialization._base import parse_size_to_int
from safetensors.torch import load_file, save_file

from conftest import TITAN

TOOL = TITAN.parent / "titan_safetensors_tool"


def run_tool(*args, check=True):
    assert TOOL.exists(), f"{TOOL} not built; run `make build`"
    proc = subprocess.run([str(TOOL), *map(str, args)], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"))
    if check and proc.returncode != 0:
        raise AssertionError(f"{args} exited {proc.returncode}: {proc.stderr}")
    return proc


def export(tmp_path, tensors, config, dtype, max_shard_size, tokenizer_dir="", out="hf"):
    weights = tmp_path / "input.safetensors"
    save_file(tensors, weights)
    job = {"weights": str(weights), "order": list(tensors), "config": config,
           "out": str(tmp_path / out), "dtype": dtype, "max_shard_size": max_shard_size,
           "tokenizer_dir": str(tokenizer_dir)}
    (tmp_path / "job.json").write_text(json.dumps(job))
    run_tool("export-hf", tmp_path / "job.json")
    return tmp_path / out


def toy_state_dict():
    g = torch.Generator().manual_seed(0)
    # state-dict order, with one tensor (the 3rd) larger than the 20 KB limit used below
    shapes = [("model.embed_tokens.weight", (40, 64)), ("model.layers.0.q.weight", (64, 64)),
              ("model.layers.0.big.weight", (256, 64)), ("model.layers.0.norm.weight", (64,)),
              ("model.layers.1.q.weight", (64, 64)), ("model.layers.1.k.weight", (32, 64)),
              ("model.layers.1.norm.weight", (64,)), ("model.norm.weight", (64,)),
              ("lm_head.weight", (40, 64))]
    return {name: torch.randn(*shape, generator=g) for name, shape in shapes}


CONFIG = {"model_type": "qwen3", "rms_norm_eps": 1e-06, "initializer_range": 0.02,
          "attention_dropout": 0, "bos_token_id": 151643, "eos_token_id": 151645,
          "transformers_version": "5.17.0"}


def test_shards_index_and_bytes_match_huggingface_hub_and_safetensors(tmp_path):
    tensors = toy_state_dict()
    out = export(tmp_path, tensors, CONFIG, "bfloat16", "20KB")
    expected_tensors = {k: v.to(torch.bfloat16) for k, v in tensors.items()}
    split = split_torch_state_dict_into_shards(expected_tensors, max_shard_size="20KB",
                                               filename_pattern="model{suffix}.safetensors")
    assert split.is_sharded
    index = {"metadata": {"total_parameters": sum(t.numel() for t in tensors.values()),
                          **split.metadata},
             "weight_map": split.tensor_to_filename}
    assert (out / "model.safetensors.index.json").read_text() == \
        json.dumps(index, indent=2, sort_keys=True) + "\n"
    for file, names in split.filename_to_tensors.items():
        reference = tmp_path / f"reference-{file}"
        save_file({n: expected_tensors[n] for n in names}, reference, metadata={"format": "pt"})
        assert (out / file).read_bytes() == reference.read_bytes(), file
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [*split.filename_to_tensors, "model.safetensors.index.json", "config.json",
         "generation_config.json"])


def test_config_and_generation_config_are_written_like_transformers(tmp_path):
    out = export(tmp_path, toy_state_dict(), CONFIG, "float16", "5GB")
    assert (out / "model.safetensors").exists()
    assert not (out / "model.safetensors.index.json").exists()
    text = (out / "config.json").read_text()
    config = json.loads(text)
    assert text == json.dumps(config, indent=2, sort_keys=True) + "\n"
    assert isinstance(config["rms_norm_eps"], float) and config["rms_norm_eps"] == 1e-06
    assert isinstance(config["attention_dropout"], float)  # written as 0.0, not 0
    assert config["dtype"] == config["torch_dtype"] == "float16"
    generation = json.loads((out / "generation_config.json").read_text())
    assert generation == {"bos_token_id": 151643, "eos_token_id": 151645,
                          "transformers_version": "5.17.0"}
    for name, tensor in load_file(out / "model.safetensors").items():
        assert tensor.dtype == torch.float16
        assert torch.equal(tensor, toy_state_dict()[name].to(torch.float16)), name


@pytest.mark.parametrize("text", ["5GB", "500MB", "1.5GB", "20KB", "3TB", " 7 mb ", "2gb"])
def test_parse_size_matches_huggingface_hub(text):
    assert int(run_tool("parse-size", text).stdout) == parse_size_to_int(text)


@pytest.mark.parametrize("text,power", [("2GiB", 30), ("3MiB", 20), ("1KiB", 10)])
def test_parse_size_binary_units(text, power):
    assert int(run_tool("parse-size", text).stdout) == int(text[0]) * 2**power


def test_parse_size_error_names_the_value():
    proc = run_tool("parse-size", "5 parsecs", check=False)
    assert proc.returncode == 1 and "'5 parsecs'" in proc.stderr


def test_transformers_loads_the_export_with_identical_logits(tmp_path):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.Qwen3Config(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, tie_word_embeddings=True,
        max_position_embeddings=64, attn_implementation="eager")
    model = transformers.Qwen3ForCausalLM(config).eval()
    source = tmp_path / "source"
    model.save_pretrained(source)
    (source / "tokenizer_config.json").write_text('{"model_max_length": 64}\n')
    saved = load_file(source / "model.safetensors")
    assert "lm_head.weight" not in saved  # tied: the export must not add it either
    hf_config = json.loads((source / "config.json").read_text())

    # float32: exact; small shards so transformers has to follow the index
    out = export(tmp_path, saved, hf_config, "float32", "10KB", tokenizer_dir=source)
    assert (out / "model.safetensors.index.json").exists()
    assert (out / "tokenizer_config.json").read_bytes() == \
        (source / "tokenizer_config.json").read_bytes()
    ids = torch.randint(0, 128, (2, 9), generator=torch.Generator().manual_seed(1))
    loaded = transformers.AutoModelForCausalLM.from_pretrained(
        out, attn_implementation="eager").eval()
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, model(ids).logits)

    # bfloat16: every weight is the round-to-nearest-even cast of the original
    out = export(tmp_path, saved, hf_config, "bfloat16", "5GB", out="hf_bf16")
    loaded = transformers.AutoModelForCausalLM.from_pretrained(out)
    assert loaded.dtype == torch.bfloat16
    reloaded = loaded.state_dict()
    for name, tensor in saved.items():
        assert torch.equal(reloaded[name], tensor.to(torch.bfloat16)), name
