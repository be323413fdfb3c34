"""Memory at real sizes, scaled down to seconds: QLoRA's start-up never holds its base whole at
full precision, `titan forward` loads in the dtype asked for, and a model whose state cannot fit
the machine stops at start-up with what would fit (docs/operations.md, "Memory")."""
import os
import re
import shutil
import subprocess
import sys
import threading
import time

import torch
from safetensors.torch import save_file

from conftest import TITAN, read_metrics, run_titan


def qwen3_config(**overrides):
    from transformers import Qwen3Config

    settings = dict(vocab_size=151936, hidden_size=1024, intermediate_size=4096,
                    num_hidden_layers=24, num_attention_heads=8, num_key_value_heads=4,
                    head_dim=128, max_position_embeddings=512, tie_word_embeddings=True)
    settings.update(overrides)
    return Qwen3Config(**settings)


def parameter_count(config):
    """The model's parameters, counted by transformers on the meta device (no memory)."""
    from transformers import Qwen3ForCausalLM

    with torch.device("meta"):
        model = Qwen3ForCausalLM(config)
    return sum(p.numel() for p in model.parameters())


def peak_rss_of(*args):
    """Runs titan ARGS in a fresh Python whose only child it is; returns (process, its peak RSS
    in bytes, from getrusage of the children)."""
    probe = ("import resource, subprocess, sys\n"
             "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
             "sys.stdout.write(p.stdout); sys.stderr.write(p.stderr)\n"
             "print('PEAK_RSS_KIB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
             "sys.exit(p.returncode)\n")
    proc = subprocess.run([sys.executable, "-c", probe, str(TITAN), *map(str, args)],
                          capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    peak = [line for line in proc.stdout.splitlines() if line.startswith("PEAK_RSS_KIB")]
    return proc, int(peak[-1].split()[1]) * 1024


def test_qlora_start_up_holds_less_than_the_base_at_full_precision(tokenizer_dir, small_corpus,
                                                                    tmp_path):
    """24 layers whose projections are 1.5 GB in float32: QLoRA builds the model as shapes,
    draws each weight and quantises it at once, so the whole run (start-up and a step) peaks
    below the base's float32 size, which building it whole first would exceed."""
    config = qwen3_config()
    assets = tmp_path / "assets"
    config.save_pretrained(assets)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizer_dir / name, assets / name)
    base_bytes = 4 * parameter_count(config)
    proc, peak = peak_rss_of(
        "train", "--module", "qwen3", "--config", "qwen3_debugmodel", "--model.flavor", "auto",
        "--model.hf_assets_path", assets, "--training.dataset_path", small_corpus,
        "--model.converters", "lora", "--lora.base_quantization", "nf4",
        "--training.steps", 1, "--training.seq_len", 32, "--training.local_batch_size", 1,
        "--job.dump_folder", tmp_path / "job")
    assert "with its projections in NF4" in proc.stdout
    assert peak < 0.8 * base_bytes, (peak, base_bytes)


def random_bf16_model(model_dir, config):
    """A checkpoint of `config` with random bfloat16 weights; returns their float32 size."""
    from transformers import Qwen3ForCausalLM

    with torch.device("meta"):
        model = Qwen3ForCausalLM(config)
    config.save_pretrained(model_dir)
    gen = torch.Generator().manual_seed(0)
    weights = {name: (torch.randn(p.shape, generator=gen) * 0.02).to(torch.bfloat16)
               for name, p in model.state_dict().items() if name != "lm_head.weight"}
    save_file(weights, model_dir / "model.safetensors", metadata={"format": "pt"})
    return 4 * sum(w.numel() for w in weights.values())


def test_forward_loads_the_weights_in_the_dtype_asked_for(tmp_path):
    """A bfloat16 checkpoint read with --dtype bfloat16 is held in bfloat16, read tensor by
    tensor: what the process holds beyond a tiny model's run is about half the weights' float32
    size (they used to be loaded in float32 whatever the dtype)."""
    float32_bytes = random_bf16_model(tmp_path / "model",
                                      qwen3_config(vocab_size=1000, num_hidden_layers=16))
    random_bf16_model(tmp_path / "tiny", qwen3_config(vocab_size=1000, hidden_size=64,
                                                      intermediate_size=64, num_hidden_layers=1,
                                                      num_attention_heads=2,
                                                      num_key_value_heads=1, head_dim=32))
    peaks = {}
    for name in ("tiny", "model"):
        out = tmp_path / f"{name}.safetensors"
        _, peaks[name] = peak_rss_of("forward", "--model", tmp_path / name, "--tokens", "1,2,3,4",
                                     "--dtype", "bfloat16", "--output", out)
        assert out.exists()
    held = peaks["model"] - peaks["tiny"]
    assert held < 0.75 * float32_bytes, (held, float32_bytes)


def peak_anonymous_memory_of(*args):
    """Runs titan ARGS, sampling its RssAnon (what it allocated, not the file pages it maps);
    returns (stdout, its peak in bytes)."""
    proc = subprocess.Popen([str(TITAN), *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))
    peak = 0

    def sample():
        nonlocal peak
        while proc.poll() is None:
            try:
                status = open(f"/proc/{proc.pid}/status").read()
                peak = max(peak, int(re.search(r"RssAnon:\s+(\d+)", status).group(1)) * 1024)
            except (OSError, AttributeError):
                pass
            time.sleep(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    out = proc.communicate(timeout=600)[0]
    sampler.join()
    assert proc.returncode == 0, out[-3000:]
    return out, peak


def test_qlora_of_a_bf16_checkpoint_never_holds_a_tensor_in_float32(tokenizer_dir, small_corpus,
                                                                   tmp_path):
    """Qwen3's 151936-row embedding in bfloat16 (594 MiB here) is the frozen base's largest
    tensor: a bfloat16 run reads it into bfloat16 in one copy at most. It used to pass through
    float32 on the way (1.2 GB more): about three times the base at the peak."""
    model = tmp_path / "model"
    config = qwen3_config(hidden_size=2048, intermediate_size=2048, num_hidden_layers=4,
                          num_attention_heads=16)
    random_bf16_model(model, config)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizer_dir / name, model / name)
    embedding_bytes = config.vocab_size * config.hidden_size * 2  # bfloat16
    out, peak = peak_anonymous_memory_of(
        "train", "--module", "qwen3", "--config", "qwen3_debugmodel", "--model.flavor", "auto",
        "--checkpoint.initial_load_path", model, "--checkpoint.initial_load_in_hf",
        "--training.dataset_path", small_corpus, "--model.converters", "lora",
        "--lora.base_quantization", "nf4", "--training.mixed_precision_param", "bfloat16",
        "--training.steps", 1, "--training.seq_len", 32, "--training.local_batch_size", 1,
        "--job.dump_folder", tmp_path / "job")
    # "holds A MiB of parameters, ...: C MiB, ...; and D MiB of frozen base"
    line = next(line for line in out.splitlines() if " holds " in line)
    state = (float(re.search(r": ([0-9.]+) MiB,", line).group(1)) +
             float(re.search(r"and ([0-9.]+) MiB of frozen base", line).group(1))) * 2**20
    assert state > embedding_bytes, line
    assert peak < state + embedding_bytes, (peak, state)


def test_a_model_whose_state_cannot_fit_stops_at_start_up_with_what_would(tokenizer_dir,
                                                                          small_corpus, tmp_path):
    """Qwen3-14B's full fine-tune needs ~220 GiB of model state: titan says so before building
    anything, with LoRA and QLoRA's sizes, instead of being killed while loading."""
    proc = run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel",
                     "--model.flavor", "14B", "--model.hf_assets_path", tokenizer_dir,
                     "--training.dataset_path", small_corpus, "--training.steps", 1,
                     "--job.dump_folder", tmp_path / "job", check=False, timeout=120)
    assert proc.returncode != 0
    message = proc.stderr + proc.stdout
    assert "the model state needs about" in message, message[-2000:]
    assert "available" in message and "QLoRA: --model.converters lora" in message, message[-2000:]
    assert "data_parallel_shard_degree" in message, message[-2000:]
    assert not (tmp_path / "job" / "metrics.jsonl").exists()
