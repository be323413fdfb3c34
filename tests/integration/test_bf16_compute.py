"""bfloat16 compute on the CPU (training.mixed_precision_param bfloat16: float32 master weights,
bfloat16 activations and GEMMs) against Hugging Face's own bfloat16 error, over 20 steps:

- a full fine-tune: titan's bfloat16 losses stay as close to its float32 ones as HF's do under
  the same precision policy (a bfloat16 copy of the float32 master weights runs forward and
  backward, its gradients update the master weights in float32: torchtitan's FSDP mixed
  precision). torch.autocast would be a looser peer: it keeps the residual stream, the norms and
  the softmax in float32;
- QLoRA: the fused nf4_linear (on CPUs with AMX, the AMX kernels: the model's projections are
  multiples of 64) against reference (the weight dequantised, one bfloat16 linear) differ no more
  than HF's bfloat16 training differs from itself across attention backends (eager, sdpa).

The model: a random Qwen3 whose every projection side is a multiple of 64."""
import torch

from conftest import read_metrics, run_titan
from hf_models import make_hf_model, packed_windows

STEPS, BATCH, SEQ = 20, 2, 32
SIZES = dict(hidden_size=128, intermediate_size=256, num_attention_heads=4, num_key_value_heads=2,
             head_dim=32)
BF16 = ("--training.mixed_precision_param", "bfloat16")


def base_model(tmp_path, tokenizer_dir):
    path = tmp_path / "base"
    make_hf_model(path, tokenizer_dir=tokenizer_dir, seed=5, **SIZES)
    return path


def train(base, job, corpus, *extra, lr=1e-3):
    run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel",
              "--model.flavor", "auto", "--model.hf_assets_path", base,
              "--checkpoint.initial_load_path", base, "--checkpoint.initial_load_in_hf",
              "--training.steps", STEPS, "--training.seq_len", SEQ,
              "--training.local_batch_size", BATCH, "--training.dataset_path", corpus,
              "--job.dump_folder", job, "--lr_scheduler.warmup_steps", 0, "--optimizer.lr", lr,
              "--metrics.log_freq", 1, *extra)
    return read_metrics(job)


def hf_losses(base, windows, lrs, precision, attention="eager"):
    """HF's model trained as titan trains it (mean token loss, gradients clipped to norm 1,
    AdamW with betas 0.9, 0.95 and weight decay 0.1 at titan's logged learning rates) on float32
    master weights; `precision`: "float32", "autocast" (the forward under torch.autocast to
    bfloat16) or "bfloat16" (forward and backward on a bfloat16 copy of the master weights, its
    gradients copied to the master weights in float32)."""
    import copy

    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32,
                                                 attn_implementation=attention)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    compute = model
    if precision == "bfloat16":
        compute = copy.deepcopy(model).to(torch.bfloat16)
        compute.train()
    compute_params = [p for p in compute.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lrs[0], betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    losses = []
    for step, lr in enumerate(lrs):
        for group in opt.param_groups:
            group["lr"] = lr
        batch = torch.tensor(windows[step * BATCH:(step + 1) * BATCH])
        if compute is not model:
            with torch.no_grad():
                for c, p in zip(compute_params, params):
                    c.copy_(p)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "autocast"):
            logits = compute(batch[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.size(-1)),
                                                 batch[:, 1:].reshape(-1))
        loss.backward()
        if compute is not model:
            for c, p in zip(compute_params, params):
                p.grad = c.grad.float()
                c.grad = None
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def max_gap(a, b):
    assert len(a) == len(b) == STEPS
    return max(abs(x - y) for x, y in zip(a, b))


def test_full_fine_tune_in_bf16_stays_within_hfs_own_bf16_error(tmp_path, small_corpus,
                                                               tokenizer_dir):
    base = base_model(tmp_path, tokenizer_dir)
    fp32 = train(base, tmp_path / "fp32", small_corpus)
    bf16 = train(base, tmp_path / "bf16", small_corpus, *BF16)
    lrs = [m["lr"] for m in fp32]
    windows = packed_windows(small_corpus, tokenizer_dir, SEQ, STEPS * BATCH)
    hf_fp32 = hf_losses(base, windows, lrs, "float32")
    hf_bf16 = hf_losses(base, windows, lrs, "bfloat16")
    ours = [m["loss"] for m in fp32]
    # The same training: titan's float32 run is HF's.
    assert max_gap(ours, hf_fp32) <= 1e-4 * max(ours), (ours, hf_fp32)
    theirs = max_gap(hf_bf16, hf_fp32)
    gap = max_gap([m["loss"] for m in bf16], ours)
    assert gap > 0  # it really computes in bfloat16
    assert gap <= 2 * theirs + 1e-4, (gap, theirs)
    assert bf16[-1]["loss"] < bf16[0]["loss"]  # and trains


def test_qlora_fused_nf4_in_bf16_stays_within_hfs_attention_backend_spread(
        tmp_path, small_corpus, tokenizer_dir):
    base = base_model(tmp_path, tokenizer_dir)
    qlora = ("--model.converters", "lora", "--lora.rank", 8, "--lora.alpha", 16,
             "--lora.base_quantization", "nf4", "--lora.double_quantization", "true", *BF16)
    fused = train(base, tmp_path / "fused", small_corpus, *qlora)
    reference = train(base, tmp_path / "reference", small_corpus, *qlora,
                      "--override.imports", "nf4_linear=reference")
    lrs = [m["lr"] for m in fused]
    windows = packed_windows(small_corpus, tokenizer_dir, SEQ, STEPS * BATCH)
    eager = hf_losses(base, windows, lrs, "bfloat16", attention="eager")
    sdpa = hf_losses(base, windows, lrs, "bfloat16", attention="sdpa")
    spread = max_gap(eager, sdpa)
    gap = max_gap([m["loss"] for m in fused], [m["loss"] for m in reference])
    assert gap <= 2 * spread + 1e-4, (gap, spread)
    assert fused[-1]["loss"] < fused[0]["loss"]
