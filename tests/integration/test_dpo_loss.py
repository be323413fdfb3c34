"""The DPO loss and metrics (train/preference/dpo_loss.h) against TRL 1.16's own
DPOTrainer._compute_loss, through tests/tools/dpo_loss_harness.cpp: random per-token
log-probabilities, completion masks and reference log-probabilities in, the loss, its gradient
and TRL's logged metrics out, for every loss type titan has, alone and weighted together (the
sft term included); and a step split into micro-batches gives the same loss as one."""
import os
import subprocess
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import pytest
import torch
from safetensors.torch import load_file, save_file
from trl.trainer.dpo_trainer import DPOTrainer

REPO = Path(__file__).resolve().parents[2]
_TITAN = Path(os.environ.get("TITAN_BIN", REPO / "build" / "bin" / "titan"))
HARNESS = _TITAN.parent / "titan_dpo_loss_harness"
METRICS = ["rewards/chosen", "rewards/rejected", "rewards/accuracies", "rewards/margins",
           "logps/chosen", "logps/rejected"]


def rel_err(a, b):
    a, b = a.double(), b.double()
    return ((a - b).abs().max() / max(b.abs().max().item(), 1e-12)).item()


def make_case(seed, pairs=4, length=9):
    """Rows [chosen; rejected]: a prompt of 1-4 tokens, then a completion, then padding."""
    g = torch.Generator().manual_seed(seed)
    rows = 2 * pairs
    mask = torch.zeros(rows, length, dtype=torch.long)
    for r in range(rows):
        prompt = int(torch.randint(1, 4, (1,), generator=g))
        end = int(torch.randint(prompt + 1, length + 1, (1,), generator=g))
        mask[r, prompt:end] = 1
    log_probs = -torch.rand(rows, length - 1, generator=g) * 3 * mask[:, 1:]
    ref = log_probs.sum(1) + torch.randn(rows, generator=g) * 2
    return {"log_probs": log_probs.contiguous(), "completion_mask": mask, "ref_logps": ref}


class FakeAccelerator:
    device = torch.device("cpu")

    def gather(self, t):
        return t

    def gather_for_metrics(self, t):
        return t


class FakeModel(torch.nn.Module):
    """Stands for the policy: gives TRL's fused-head outputs for the given log-probabilities."""

    def __init__(self, log_probs):
        super().__init__()
        self.log_probs = log_probs

    def forward(self, input_ids, labels=None, **kwargs):
        shape = self.log_probs.shape
        # TRL's fused head gives 0 (a constant) where the next label is ignored.
        log_probs = self.log_probs * (labels[:, 1:] != -100)
        return SimpleNamespace(log_probs=log_probs, entropy=torch.zeros(shape),
                               mean_logits=torch.zeros(shape),
                               is_top1=torch.zeros(shape, dtype=torch.bool))


def trl_loss(case, loss_types, weights, beta, label_smoothing):
    """TRL's _compute_loss with the reference log-probabilities precomputed (no reference model),
    its gradient with respect to the per-token log-probabilities, and the metrics it logs."""
    log_probs = case["log_probs"].clone().requires_grad_(True)
    mask = case["completion_mask"]
    pairs = mask.shape[0] // 2
    trainer = SimpleNamespace(
        model=SimpleNamespace(training=True), accelerator=FakeAccelerator(),
        aux_loss_enabled=False, ld_alpha=None, precompute_ref_logps=True,
        f_divergence_type="reverse_kl", loss_types=loss_types, loss_weights=weights, beta=beta,
        label_smoothing=label_smoothing, use_weighting=False, _tp_size=1, _total_train_tokens=0,
        _metrics=defaultdict(lambda: defaultdict(list)), args=SimpleNamespace(discopop_tau=0.05))
    inputs = {"input_ids": torch.zeros_like(mask), "attention_mask": torch.ones_like(mask),
              "completion_mask": mask, "ref_chosen_logps": case["ref_logps"][:pairs],
              "ref_rejected_logps": case["ref_logps"][pairs:]}
    loss = DPOTrainer._compute_loss(trainer, FakeModel(log_probs), inputs, return_outputs=False)
    loss.backward()
    metrics = [trainer._metrics["train"][name][-1] for name in METRICS]
    return loss.detach(), log_probs.grad, torch.tensor(metrics, dtype=torch.float64)


def titan_loss(tmp_path, case, loss_types, weights, beta, label_smoothing, micro_batches=1):
    assert HARNESS.exists(), f"{HARNESS} not built; run `make build`"
    src, dst = tmp_path / "in.safetensors", tmp_path / "out.safetensors"
    save_file(case, str(src))
    args = [str(HARNESS), "--input", str(src), "--output", str(dst), "--beta", repr(beta),
            "--loss-types", ",".join(loss_types), "--loss-weights", ",".join(map(repr, weights)),
            "--label-smoothing", repr(label_smoothing), "--micro-batches", str(micro_batches)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    out = load_file(str(dst))
    return out["loss"], out["grad"], out["metrics"]


CASES = [
    (["sigmoid"], [1.0], 0.1, 0.0),
    (["ipo"], [1.0], 0.1, 0.0),
    (["hinge"], [1.0], 0.1, 0.0),
    (["robust"], [1.0], 0.1, 0.2),
    (["sigmoid_norm"], [1.0], 0.5, 0.0),
    (["bco_pair"], [1.0], 0.1, 0.0),
    (["nca_pair"], [1.0], 0.1, 0.0),
    (["sppo_hard"], [1.0], 0.3, 0.0),
    (["apo_zero"], [1.0], 0.1, 0.0),
    (["apo_down"], [1.0], 0.1, 0.0),
    (["exo_pair"], [1.0], 0.1, 0.1),
    (["sigmoid", "sft"], [1.0, 0.5], 0.1, 0.0),  # RPO: TRL's replacement of rpo_alpha
    (["ipo", "hinge", "sft"], [0.3, 1.5, 2.0], 0.2, 0.0),
]


@pytest.mark.parametrize("loss_types,weights,beta,label_smoothing", CASES,
                         ids=["+".join(c[0]) for c in CASES])
def test_loss_gradient_and_metrics_match_trl(tmp_path, loss_types, weights, beta, label_smoothing):
    case = make_case(seed=len(loss_types) * 7 + int(beta * 10))
    want_loss, want_grad, want_metrics = trl_loss(case, loss_types, weights, beta, label_smoothing)
    loss, grad, metrics = titan_loss(tmp_path, case, loss_types, weights, beta, label_smoothing)
    assert rel_err(loss, want_loss) <= 1e-6
    assert rel_err(grad, want_grad) <= 1e-5
    assert rel_err(metrics, want_metrics) <= 1e-6, (metrics, want_metrics)


@pytest.mark.parametrize("loss_types,weights", [(["sigmoid"], [1.0]), (["ipo", "sft"], [1.0, 0.7])])
def test_micro_batch_shares_add_up_to_the_step_loss(tmp_path, loss_types, weights):
    case = make_case(seed=3, pairs=4)
    whole = titan_loss(tmp_path, case, loss_types, weights, 0.1, 0.0, micro_batches=1)
    split = titan_loss(tmp_path, case, loss_types, weights, 0.1, 0.0, micro_batches=4)
    want_loss, want_grad, _ = trl_loss(case, loss_types, weights, 0.1, 0.0)
    for got in (whole, split):
        assert rel_err(got[0], want_loss) <= 1e-6
        assert rel_err(got[1], want_grad) <= 1e-5
    assert rel_err(split[2], whole[2]) <= 1e-12
