"""The Transformers modeling backend: Hugging Face Transformers' own model trained by titan.
From the same HF directory it trains to the native model's losses (dense and MoE, one process
and FSDP), starts at HF's own loss, exports what from_pretrained loads, trains a non-Qwen
family, and fails clearly on bad input."""
import json
import os
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

from conftest import TITAN, read_metrics, run_titan
from hf_models import make_hf_model, packed_windows, rel_err

MODULE = "transformers_modeling_backend"
STEPS = 5


def train(dump, corpus, *extra, backend="transformers", check=True, steps=STEPS):
    return run_titan(
        "train", "--module", MODULE, "--config", f"{MODULE}_debugmodel", "--model.name", backend,
        "--training.steps", str(steps), "--training.local_batch_size", "2",
        "--training.seq_len", "32", "--metrics.log_freq", "1", "--training.dataset_path", corpus,
        "--job.dump_folder", dump, *extra, check=check)


def losses(dump):
    return [m["loss"] for m in read_metrics(dump)]


def from_dir(hf_dir):
    return ["--model.flavor", "auto", "--model.hf_assets_path", hf_dir,
            "--checkpoint.initial_load_in_hf"]


@pytest.fixture(scope="module", params=["dense_tied", "moe_untied"])
def hf_dir(request, tmp_path_factory, tokenizer_dir):
    path = tmp_path_factory.mktemp("hf") / request.param
    make_hf_model(path, moe=request.param.startswith("moe"), tied=request.param.endswith("_tied"),
                  seed=5, tokenizer_dir=tokenizer_dir)
    return path


@pytest.fixture(scope="module")
def one_process(hf_dir, small_corpus, tmp_path_factory):
    """Path 1 on one process from `hf_dir`: the run the tests below compare with, checkpointed
    and exported (float32: the export must hold the trained weights exactly) at its last step."""
    dump = tmp_path_factory.mktemp("one") / "run"
    train(dump, small_corpus, *from_dir(hf_dir), "--checkpoint.enable", "--checkpoint.interval",
          STEPS, "--checkpoint.last_save_in_hf", "--checkpoint.export_dtype", "float32")
    return dump


def test_backend_trains_like_the_native_model(tmp_path, small_corpus, hf_dir, one_process):
    train(tmp_path / "native", small_corpus, *from_dir(hf_dir), backend="qwen3")
    a, b = losses(one_process), losses(tmp_path / "native")
    assert len(a) == len(b) == STEPS
    for x, y in zip(a, b):
        assert abs(x - y) <= 1e-5 * abs(y), (a, b)


def test_backend_under_fsdp_matches_one_process(tmp_path, small_corpus, hf_dir, one_process):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--no-python", "--nproc_per_node=2",
           "--rdzv_backend", "c10d", "--rdzv_endpoint=localhost:0", str(TITAN), "train",
           "--module", MODULE, "--config", f"{MODULE}_debugmodel", "--training.steps", str(STEPS),
           "--training.local_batch_size", "1", "--training.seq_len", "32",
           "--metrics.log_freq", "1", "--training.dataset_path", str(small_corpus),
           "--job.dump_folder", str(tmp_path / "fsdp"), *map(str, from_dir(hf_dir))]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=400)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    a, b = losses(tmp_path / "fsdp"), losses(one_process)
    assert len(a) == STEPS
    for x, y in zip(a, b):
        assert abs(x - y) <= 1e-5 * abs(y), (a, b)


def test_first_loss_is_transformers_own(small_corpus, tokenizer_dir, hf_dir, one_process):
    # The pitfalls of a deferred build (zero rotary inv_freq, trainer defaults over the HF
    # config's rope_theta / eps) would all show here.
    model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32).eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for w in packed_windows(small_corpus, tokenizer_dir, 32, 2):
            x = torch.tensor([w])
            logits = model(x[:, :-1]).logits[0]
            total += torch.nn.functional.cross_entropy(logits, x[0, 1:], reduction="sum").item()
            count += 32
    assert losses(one_process)[0] == pytest.approx(total / count, rel=1e-5)


def test_export_loads_in_transformers_with_the_trained_logits(tmp_path, one_process):
    export = one_process / "hf" / f"step-{STEPS}"
    model, info = AutoModelForCausalLM.from_pretrained(export, dtype=torch.float32,
                                                       output_loading_info=True)
    assert all(len(v) == 0 for v in info.values()), info
    tokens = [3, 1000, 2000, 151000, 42, 7]
    with torch.no_grad():
        want = model.eval()(torch.tensor([tokens])).logits[0]
    # The trained model is the training checkpoint; the export must give its logits.
    for source in (one_process / "checkpoint" / f"step-{STEPS}", export):
        out = tmp_path / "logits.safetensors"
        run_titan("forward", "--model", source, "--backend", "transformers", "--tokens",
                  ",".join(map(str, tokens)), "--output", out)
        assert rel_err(load_file(out)["logits"], want) < 1e-5, source
    assert json.loads((export / "config.json").read_text())["architectures"]


def test_a_llama_trains_through_the_same_code(tmp_path, small_corpus):
    dump = tmp_path / "llama"
    train(dump, small_corpus, "--model.hf_model", "llama", "--model.hf_config_overrides",
          "vocab_size=151936,hidden_size=64,intermediate_size=128,num_hidden_layers=2,"
          "num_attention_heads=4,num_key_value_heads=2,tie_word_embeddings=false",
          "--optimizer.lr", "3e-3", steps=8)
    got = losses(dump)
    assert got[0] > 11.0 and sum(got[-2:]) / 2 < got[0] - 0.1, got


def test_config_functions_differ_only_where_the_recipe_says(titan_bin):
    def printed(name):
        out = run_titan("configs", "--module", MODULE, "--config", name, "--print").stdout
        return [line for line in out.splitlines() if not line.startswith("#")]

    full, native = printed(f"{MODULE}_full"), printed(f"{MODULE}_native_qwen3")
    diff = [(a, b) for a, b in zip(full, native) if a != b]
    assert diff == [('name = "transformers"', 'name = "qwen3"')], diff
    sft = printed(f"{MODULE}_sft_full")
    assert "initial_load_in_hf = true" in sft and "initial_load_in_hf = false" in full
    for name in ("debugmodel", "debugmodel_moe", "native_qwen3_debugmodel"):
        assert printed(f"{MODULE}_{name}")


@pytest.mark.parametrize("name", ["debugmodel", "debugmodel_moe"])
def test_debug_config_functions_train(tmp_path, small_corpus, name):
    """Each debug function builds its fresh Transformers model (the MoE one sets head_dim, which
    Qwen3MoeConfig does not declare but its attention reads) and trains."""
    dump = tmp_path / name
    run_titan("train", "--module", MODULE, "--config", f"{MODULE}_{name}", "--training.steps", 1,
              "--training.seq_len", 16, "--training.local_batch_size", 1,
              "--training.dataset_path", small_corpus, "--job.dump_folder", dump)
    assert len(read_metrics(dump)) == 1


@pytest.mark.parametrize("args, needle", [
    (["--model.hf_model", "no_such_model"], "model.hf_model 'no_such_model'"),
    (["--model.hf_model", "t5", "--model.hf_config_overrides", ""],
     "'t5' is not a causal language model"),
    (["--model.hf_config_overrides", "no_such_field=1"], "has no field 'no_such_field'"),
])
def test_bad_input_is_one_clear_error(tmp_path, small_corpus, args, needle):
    proc = train(tmp_path / "bad", small_corpus, *args, check=False, steps=1)
    assert proc.returncode != 0
    assert needle in proc.stderr, proc.stderr
    # One error line (after the warnings of a one-step run: its warmup is clipped).
    lines = [l for l in proc.stderr.splitlines() if not l.startswith("[titan] warning: ")]
    assert len(lines) == 1 and lines[0].startswith("error:"), proc.stderr


def test_missing_transformers_is_named(tmp_path, small_corpus):
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    env = {"TITAN_PYTHON": str(venv / "bin" / "python")}
    proc = run_titan("train", "--module", MODULE, "--config", f"{MODULE}_debugmodel",
                     "--training.steps", "1", "--training.dataset_path", small_corpus,
                     "--job.dump_folder", tmp_path / "run", check=False, env=env)
    assert proc.returncode != 0
    assert "cannot import them" in proc.stderr and str(venv) in proc.stderr, proc.stderr


def test_native_paths_do_not_need_the_backend(tmp_path, small_corpus):
    env = {"TITAN_TRANSFORMERS_BACKEND": str(tmp_path / "missing.so")}
    assert run_titan("--help", env=env).returncode == 0
    run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel", "--training.steps", "1",
              "--training.local_batch_size", "1", "--training.seq_len", "16",
              "--training.dataset_path", small_corpus, "--job.dump_folder", tmp_path / "native",
              env=env)
    proc = run_titan("train", "--module", MODULE, "--config", f"{MODULE}_debugmodel",
                     "--training.steps", "1", "--training.dataset_path", small_corpus,
                     "--job.dump_folder", tmp_path / "hf", check=False, env=env)
    assert proc.returncode != 0 and "missing.so" in proc.stderr, proc.stderr
