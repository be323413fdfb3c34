"""optimizer.name AdamW8bit on a model (docs/optimizers.md): six training steps of a random
Qwen3 against a plain PyTorch loop over transformers' Qwen3ForCausalLM with
bitsandbytes.optim.AdamW8bit on the same rows (weight decay on matrices only, gradients
clipped to 1), the 8-bit states after one step against bitsandbytes', an exact resume, FSDP 2
-> 1 process resharding of the 8-bit states, an AdamW checkpoint resumed with AdamW8bit, and
the memory the 8-bit states save; pipeline stages, gradient accumulation and LoRA on both model
paths."""
import json
import shutil

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

from conftest import read_metrics, run_titan
from hf_models import make_hf_model, packed_windows
from launch import assert_close, curves, torchrun
from test_memory import peak_anonymous_memory_of, qwen3_config

bnb = pytest.importorskip("bitsandbytes")

STEPS, BATCH, SEQ = 6, 2, 32
LR = 3e-3


def train_args(base, job, corpus, *extra, steps=STEPS, batch=BATCH, optimizer="AdamW8bit"):
    return ["train", "--module", "qwen3", "--config", "qwen3_debugmodel",
            "--model.flavor", "auto", "--checkpoint.initial_load_path", base,
            "--checkpoint.initial_load_in_hf", "--optimizer.name", optimizer,
            "--training.steps", steps, "--lr_scheduler.total_steps", STEPS,
            "--training.seq_len", SEQ, "--training.local_batch_size", batch,
            "--training.dataset_path", corpus, "--lr_scheduler.warmup_steps", 2,
            "--optimizer.lr", LR, "--metrics.log_freq", 1, "--job.dump_folder", job,
            "--checkpoint.enable", "--checkpoint.keep_latest_k", 0, *extra]


def saved_part(step_dir, part):
    """A checkpoint part's tensors, whole: the pieces of every rank's file put in their boxes
    (the manifest's global_shape and slice)."""
    manifest = json.loads((step_dir / "manifest.json").read_text())
    out = {}
    for file, entry in manifest["files"].items():
        if entry["part"] != part:
            continue
        for name, t in load_file(step_dir / file).items():
            info = entry["tensors"].get(name)
            if info is None or list(info["global_shape"]) == list(t.shape):
                out[name] = t
                continue
            whole = out.setdefault(name, torch.zeros(info["global_shape"], dtype=t.dtype))
            whole[tuple(slice(a, b) for a, b in info["slice"])] = t
    return out


@pytest.fixture(scope="module")
def base(tmp_path_factory, tokenizer_dir):
    path = tmp_path_factory.mktemp("adamw8bit") / "base"
    make_hf_model(path, tied=True, seed=11, tokenizer_dir=tokenizer_dir)
    return path


@pytest.fixture(scope="module")
def straight(base, small_corpus, tmp_path_factory):
    """Six steps in one process, a checkpoint after every step, the last one exported."""
    job = tmp_path_factory.mktemp("adamw8bit_straight") / "job"
    proc = run_titan(*train_args(base, job, small_corpus, "--checkpoint.interval", 1,
                                 "--checkpoint.last_save_in_hf"))
    assert "AdamW8bit: 8-bit moments for" in proc.stdout, proc.stdout
    return job


def bitsandbytes_loop(base, windows, lrs):
    """Transformers' Qwen3 trained as titan trains: the mean token loss of each step's rows,
    the gradient norm accumulated in float64 and clipped to 1, bitsandbytes' AdamW8bit
    (betas 0.9, 0.95, weight decay 0.1 on matrices only) at titan's logged learning rates.
    Returns the losses, the final weights and the optimizer state after the first step."""
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32,
                                                 attn_implementation="eager")
    model.train()
    named = list(model.named_parameters())
    params = [p for _, p in named]
    opt = bnb.optim.AdamW8bit(
        [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
         {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
        lr=lrs[0], betas=(0.9, 0.95), eps=1e-8)
    losses, first = [], None
    for step, lr in enumerate(lrs):
        for group in opt.param_groups:
            group["lr"] = lr
        batch = torch.tensor(windows[step * BATCH:(step + 1) * BATCH])
        logits = model(batch[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)),
                                                 batch[:, 1:].reshape(-1))
        loss.backward()
        norms = torch.stack([torch.linalg.vector_norm(p.grad, dtype=torch.float64)
                             for p in params])
        torch.nn.utils.clip_grads_with_norm_(params, 1.0, (norms * norms).sum().sqrt().float())
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
        if step == 0:
            first = {n: {k: v.clone() if torch.is_tensor(v) else v
                         for k, v in opt.state[p].items()} for n, p in named}
    return losses, {n: p.detach() for n, p in model.state_dict().items()}, first


def test_six_steps_equal_a_bitsandbytes_adamw8bit_loop(base, straight, small_corpus,
                                                       tokenizer_dir):
    metrics = read_metrics(straight)
    windows = packed_windows(small_corpus, tokenizer_dir, SEQ, STEPS * BATCH)
    losses, trained, first = bitsandbytes_loop(base, windows, [m["lr"] for m in metrics])
    assert_close([m["loss"] for m in metrics], losses, "loss", rel=1e-4)

    # Each tensor's update over the six steps, normwise.
    initial = load_file(base / "model.safetensors")
    exported = load_file(straight / "hf" / f"step-{STEPS}" / "model.safetensors")
    for k in initial:
        theirs = trained[k] - initial[k]
        err = (exported[k] - trained[k]).norm() / theirs.norm()
        assert err <= 1e-2, (k, err.item())

    # The states after one step: titan's checkpoint against bitsandbytes' own.
    state = saved_part(straight / "checkpoint" / "step-1", "optimizer")
    eight_bit = 0
    for name, want in first.items():
        if "absmax1" not in want:  # float32 states below min_8bit_size
            assert f"{name}.exp_avg" in state and f"{name}.exp_avg_codes" not in state, name
            continue
        eight_bit += 1
        for ours, theirs in (("exp_avg", "1"), ("exp_avg_sq", "2")):
            codes = state[f"{name}.{ours}_codes"]
            assert codes.dtype == torch.uint8 and codes.shape == want["state" + theirs].shape
            same = (codes == want["state" + theirs]).double().mean().item()
            assert same >= 0.999, (name, ours, same)
            absmax, theirs_absmax = state[f"{name}.{ours}_absmax"].flatten(), want["absmax" + theirs]
            assert absmax.shape == theirs_absmax.shape, name
            # Within 1e-6, and relatively within what the two models' gradients differ by.
            err = (absmax - theirs_absmax).abs()
            assert (err <= 1e-6).all() and (err <= 1e-5 * theirs_absmax).all(), (name, ours)
        assert state[f"{name}.step"].item() == want["step"] == 1
    assert eight_bit >= 5, eight_bit  # the embedding and the layers' large matrices


def test_resume_continues_exactly(base, straight, small_corpus, tmp_path):
    split = tmp_path / "split"
    run_titan(*train_args(base, split, small_corpus, "--checkpoint.interval", 3, steps=3))
    proc = run_titan(*train_args(base, split, small_corpus, "--checkpoint.interval", 3))
    assert "resumed from training checkpoint" in proc.stdout
    a = {m["step"]: m["loss"] for m in read_metrics(straight)}
    b = {m["step"]: m["loss"] for m in read_metrics(split)}
    for step in range(4, STEPS + 1):
        assert a[step] == b[step], (step, a[step], b[step])


def test_fsdp_states_reshard_to_one_process(base, straight, small_corpus, tmp_path):
    """Three steps under FSDP over 2 ranks, each quantising its rows; their checkpoint is the
    one process's (the blocks are the same: every piece starts on a block) and resumes in one
    process, which goes on as the one-process run does."""
    job = tmp_path / "fsdp"
    torchrun(2, train_args(base, job, small_corpus, "--checkpoint.interval", 3, steps=3,
                           batch=BATCH // 2))
    assert (job / "checkpoint" / "step-3" / "optimizer-rank1.safetensors").exists()
    sharded = saved_part(job / "checkpoint" / "step-3", "optimizer")
    whole = saved_part(straight / "checkpoint" / "step-3", "optimizer")
    assert sorted(sharded) == sorted(whole)
    # The runs differ in the last bits of their sums (FSDP adds the ranks' gradients), so a few
    # codes near a bucket's edge, and a few blocks' absmax, differ; a block put in the wrong place
    # would differ whole.
    for key, want in whole.items():
        have = sharded[key]
        assert have.shape == want.shape and have.dtype == want.dtype, key
        if want.dtype == torch.uint8:
            assert (have == want).double().mean().item() >= 0.99, key
        elif key.endswith("absmax"):
            close = (have - want).abs() <= 1e-3 * want.abs()
            assert close.double().mean().item() >= 0.999, key
    proc = run_titan(*train_args(base, job, small_corpus, "--checkpoint.interval", 3))
    assert "resumed from training checkpoint" in proc.stdout
    (ref, _), (losses, _) = curves(straight), curves(job)
    assert_close(losses[3:], ref[3:], "loss", rel=1e-4)


def test_a_layout_whose_pieces_cut_blocks_keeps_float32_and_resumes(small_corpus, tokenizer_dir,
                                                                    tmp_path):
    """Tensor parallelism 2 splits the debug model's down_proj [256, 768] into pieces of 384
    columns, 1.5 blocks: that parameter keeps float32 states under TP (and says so), and a
    one-process checkpoint, whose 8-bit states it cannot read piece by piece, resumes there
    (read whole and dequantised) to the same losses as the one process."""
    def args(job, steps):
        return ["train", "--module", "qwen3", "--config", "qwen3_debugmodel",
                "--training.local_batch_size", 2, "--training.seq_len", 32,
                "--metrics.log_freq", 1, "--training.steps", steps, "--lr_scheduler.total_steps", 4,
                "--training.dataset_path", small_corpus, "--model.hf_assets_path", tokenizer_dir,
                "--optimizer.name", "AdamW8bit", "--job.dump_folder", job, "--checkpoint.enable",
                "--checkpoint.interval", 2]

    run_titan(*args(tmp_path / "one", 4))
    run_titan(*args(tmp_path / "split", 2))
    proc = torchrun(2, args(tmp_path / "split", 4) + ["--parallelism.tensor_parallel_degree", 2])
    assert "resumed from training checkpoint" in proc.stdout
    assert "(float32 for model.layers.0.mlp.down_proj.weight" in proc.stdout, proc.stdout
    (ref, _), (losses, _) = curves(tmp_path / "one"), curves(tmp_path / "split")
    assert_close(losses[2:], ref[2:], "loss", rel=1e-5)


def test_pipeline_and_gradient_accumulation_go_as_one_process(base, straight, small_corpus,
                                                              tmp_path):
    """The same six steps as two pipeline stages (each rank updating its own layers, the tied
    embedding on both) and, in one process, as two micro-batches of one row accumulated: the
    losses of the one-process run, whose batch is both rows at once."""
    staged = tmp_path / "pp"
    proc = torchrun(2, train_args(base, staged, small_corpus,
                                  "--parallelism.pipeline_parallel_degree", 2))
    assert proc.stdout.count("AdamW8bit: 8-bit moments for") == 2, proc.stdout
    accumulated = tmp_path / "accumulated"
    run_titan(*train_args(base, accumulated, small_corpus, "--training.global_batch_size", BATCH,
                          batch=1))
    ref, _ = curves(straight)
    for job in (staged, accumulated):
        losses, _ = curves(job)
        assert_close(losses, ref, f"loss ({job.name})", rel=1e-4)


@pytest.mark.parametrize("backend", ["qwen3", "transformers"])
def test_lora_adapters_match_peft_with_bitsandbytes(base, small_corpus, tokenizer_dir, tmp_path,
                                                    backend):
    """LoRA trains the adapters alone; at rank 4 every adapter has fewer than 4096 elements, so
    each keeps float32 states under bitsandbytes' 32-bit update. Both model paths against PEFT
    with bitsandbytes.optim.AdamW8bit."""
    from test_lora import (BATCH as LORA_BATCH, LINEARS, SEQ as LORA_SEQ, STEPS as LORA_STEPS,
                           initial_adapter, normwise, peft_loop, train_titan as train_lora)

    adapter = initial_adapter(base, tmp_path / "initial", LINEARS)
    job = tmp_path / "job"
    proc = run_titan(*train_lora(base, job, small_corpus, "--checkpoint.enable",
                                 "--optimizer.name", "AdamW8bit", backend=backend,
                                 adapter=adapter))
    assert "AdamW8bit: 8-bit moments for 0 of" in proc.stdout, proc.stdout
    metrics = read_metrics(job)
    windows = packed_windows(small_corpus, tokenizer_dir, LORA_SEQ, LORA_STEPS * LORA_BATCH)
    losses, trained = peft_loop(base, adapter, windows, [m["lr"] for m in metrics],
                                optimizer=bnb.optim.AdamW8bit)
    assert_close([m["loss"] for m in metrics], losses, "loss", rel=1e-5)
    initial = load_file(adapter / "adapter_model.safetensors")
    exported = load_file(job / "hf" / f"step-{LORA_STEPS}-adapter" / "adapter_model.safetensors")
    ours = {k: exported[k] - initial[k] for k in initial}
    theirs = {k: trained[k] - initial[k] for k in initial}
    assert normwise(ours, theirs) <= 1e-3
    state = load_file(job / "checkpoint" / f"step-{LORA_STEPS}" / "optimizer.safetensors")
    assert state and all(".lora_A." in k or ".lora_B." in k for k in state)
    assert not any(k.endswith("_codes") for k in state)


def test_an_adamw_checkpoint_resumes_with_adamw8bit(base, small_corpus, tmp_path):
    job = tmp_path / "adamw"
    run_titan(*train_args(base, job, small_corpus, "--checkpoint.interval", 2, steps=2,
                          optimizer="AdamW"))
    proc = run_titan(*train_args(base, job, small_corpus, "--checkpoint.interval", 3, steps=3))
    assert "optimizer.name \"AdamW\" -> \"AdamW8bit\"" in proc.stderr, proc.stderr
    assert "that optimizer.name AdamW8bit keeps in 8-bit blocks: they were quantised" in proc.stderr
    state = saved_part(job / "checkpoint" / "step-3", "optimizer")
    assert "model.embed_tokens.weight.exp_avg_codes" in state
    assert len(read_metrics(job)) == 3


def test_eight_bit_states_take_less_memory(tokenizer_dir, small_corpus, tmp_path):
    """A model whose state dominates what the process holds (151936 x 768 embedding and head,
    untied: 247M parameters): at 64 tokens a step AdamW8bit's peak anonymous memory is at most
    0.75x AdamW's (16 bytes a parameter against about 10)."""
    assets = tmp_path / "assets"
    qwen3_config(hidden_size=768, intermediate_size=2048, num_hidden_layers=2,
                 tie_word_embeddings=False).save_pretrained(assets)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizer_dir / name, assets / name)
    peaks = {}
    for name in ("AdamW", "AdamW8bit"):
        out, peaks[name] = peak_anonymous_memory_of(
            "train", "--module", "qwen3", "--config", "qwen3_debugmodel", "--model.flavor", "auto",
            "--model.hf_assets_path", assets, "--training.dataset_path", small_corpus,
            "--optimizer.name", name, "--training.steps", 1, "--training.seq_len", 64,
            "--training.local_batch_size", 1, "--job.dump_folder", tmp_path / name)
    assert peaks["AdamW8bit"] <= 0.75 * peaks["AdamW"], peaks
