"""Cross-entropy and the chunked fused linear + cross-entropy against
torch.nn.functional.cross_entropy(reduction="sum") / number of valid targets (ignore_index
-100), values and gradients, through tests/tools/optim_harness.cpp."""
import os
import subprocess
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

REPO = Path(__file__).resolve().parents[2]
_TITAN = Path(os.environ.get("TITAN_BIN", REPO / "build" / "bin" / "titan"))
HARNESS = Path(os.environ.get("TITAN_OPTIM_HARNESS", _TITAN.parent / "titan_optim_harness"))


@pytest.fixture(scope="module")
def harness():
    assert HARNESS.exists(), f"{HARNESS} not built; build the titan_optim_harness target"
    return HARNESS


def rel_err(a, b):
    a, b = a.double(), b.double()
    return ((a - b).abs().max() / max(b.abs().max().item(), 1e-12)).item()


def labels_with_ignored(shape, vocab, g, ignored_fraction=0.3):
    labels = torch.randint(0, vocab, shape, generator=g)
    labels[torch.rand(shape, generator=g) < ignored_fraction] = -100
    return labels


def peer_mean_loss(logits, labels):
    count = (labels != -100).sum()
    total = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1),
                            reduction="sum", ignore_index=-100)
    return total / count.clamp_min(1), total, count


def run(tmp_path, tensors, chunk, grad_scale):
    src, dst = tmp_path / "in.safetensors", tmp_path / "out.safetensors"
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(src))
    proc = subprocess.run(
        [str(HARNESS), "loss", "--input", str(src), "--output", str(dst), "--chunk", str(chunk),
         "--grad-scale", repr(grad_scale)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    return load_file(str(dst))


def make_case(seed, n_tokens, hidden_size, vocab, dtype, ignored_fraction=0.3):
    g = torch.Generator().manual_seed(seed)
    logits = (torch.randn(2, 5, vocab, generator=g) * 3).to(dtype)
    hidden = torch.randn(n_tokens, hidden_size, generator=g).to(dtype)
    weight = (torch.randn(vocab, hidden_size, generator=g) * 0.5).to(dtype)
    return dict(logits=logits, labels=labels_with_ignored((2, 5), vocab, g, ignored_fraction),
                hidden=hidden, weight=weight,
                hidden_labels=labels_with_ignored((n_tokens,), vocab, g, ignored_fraction))


@pytest.mark.parametrize("chunk", [0, 1, 4, 64])
def test_float32_losses_and_gradients_match_torch(harness, tmp_path, chunk):
    case = make_case(seed=chunk, n_tokens=37, hidden_size=8, vocab=19, dtype=torch.float32)
    grad_scale = 0.75  # backward must scale the precomputed gradients by grad_output
    got = run(tmp_path, case, chunk, grad_scale)

    logits = case["logits"].clone().requires_grad_(True)
    mean, total, count = peer_mean_loss(logits, case["labels"])
    (mean * grad_scale).backward()
    assert got["count"].item() == count.item()
    assert rel_err(got["ce_mean"], mean.detach()) <= 1e-6
    assert rel_err(got["ce_sum"], total.detach()) <= 1e-6
    assert rel_err(got["ce_grad_logits"], logits.grad) <= 1e-6

    hidden = case["hidden"].clone().requires_grad_(True)
    weight = case["weight"].clone().requires_grad_(True)
    mean, total, _ = peer_mean_loss(hidden @ weight.T, case["hidden_labels"])
    (mean * grad_scale).backward()
    assert rel_err(got["flce_mean"], mean.detach()) <= 1e-6
    assert rel_err(got["flce_sum"], total.detach()) <= 1e-6
    assert rel_err(got["flce_grad_hidden"], hidden.grad) <= 1e-5
    assert rel_err(got["flce_grad_weight"], weight.grad) <= 1e-5


def test_bfloat16_matmul_float32_softmax(harness, tmp_path):
    """bf16 hidden/weight: the matmul in bf16, softmax in fp32, as the unfused bf16 path."""
    case = make_case(seed=3, n_tokens=40, hidden_size=16, vocab=50, dtype=torch.bfloat16)
    got = run(tmp_path, case, chunk=8, grad_scale=1.0)
    hidden = case["hidden"].clone().requires_grad_(True)
    weight = case["weight"].clone().requires_grad_(True)
    mean, _, _ = peer_mean_loss(hidden @ weight.T, case["hidden_labels"])
    mean.backward()
    assert got["flce_mean"].dtype == torch.float32
    assert rel_err(got["flce_mean"], mean.detach()) <= 1e-6  # same bf16 logits, fp32 after
    assert got["flce_grad_hidden"].dtype == torch.bfloat16
    assert got["flce_grad_weight"].dtype == torch.bfloat16
    # torch rounds the whole grad_logits to bf16 before each matmul too; only the summation
    # order (chunks, fp32 accumulation of the weight gradient) differs.
    assert rel_err(got["flce_grad_hidden"], hidden.grad) <= 1e-2
    assert rel_err(got["flce_grad_weight"], weight.grad) <= 1e-2


def test_all_labels_ignored_gives_zero_not_nan(harness, tmp_path):
    case = make_case(seed=5, n_tokens=6, hidden_size=4, vocab=7, dtype=torch.float32,
                     ignored_fraction=1.0)
    got = run(tmp_path, case, chunk=0, grad_scale=1.0)
    hidden = case["hidden"].clone().requires_grad_(True)
    weight = case["weight"].clone().requires_grad_(True)
    _, total, count = peer_mean_loss(hidden @ weight.T, case["hidden_labels"])
    assert count.item() == 0 and got["count"].item() == 0
    assert got["flce_sum"].item() == total.item() == 0.0
    assert got["flce_mean"].item() == 0.0 and got["ce_mean"].item() == 0.0
    assert not got["flce_grad_hidden"].any() and not got["flce_grad_weight"].any()
