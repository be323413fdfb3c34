"""AdamW, the lr schedule and gradient clipping against their real peers: torch.optim.AdamW
(fused / foreach / for-loop), torch.optim.lr_scheduler.LambdaLR with torchtitan's
warmup-stable-decay lambda, and torch.nn.utils.clip_grads_with_norm_ (with the norm accumulated
in float64, as titan does), all from the venv's torch.

The C++ side runs in tests/tools/optim_harness.cpp (target titan_optim_harness)."""
import fnmatch
import functools
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

REPO = Path(__file__).resolve().parents[2]
_TITAN = Path(os.environ.get("TITAN_BIN", REPO / "build" / "bin" / "titan"))
HARNESS = Path(os.environ.get("TITAN_OPTIM_HARNESS", _TITAN.parent / "titan_optim_harness"))

SHAPES = {
    "model.embed_tokens.weight": (11, 6),
    "model.layers.0.self_attn.q_proj.weight": (6, 6),
    "model.layers.0.input_layernorm.weight": (6,),
    "model.layers.0.mlp.experts.gate_up_proj": (2, 8, 6),
    "model.layers.0.self_attn.q_proj.bias": (6,),
    "model.norm.weight": (6,),
}
NO_GRAD_AT = {2: "model.layers.0.self_attn.q_proj.bias"}  # torch skips params without grad


def torchtitan_lr_lambda(warmup_steps, training_steps, total_steps, decay_ratio, decay_type,
                         min_lr_factor):
    """torchtitan/components/optimizer/lr_scheduler.py (Config.build), transcribed."""
    total_steps = total_steps if total_steps is not None else training_steps
    warmup_steps = int(warmup_steps)
    if warmup_steps > total_steps:
        warmup_steps = total_steps
    if decay_ratio is not None:
        decay_steps = round(total_steps * decay_ratio)
        if warmup_steps + decay_steps > total_steps:
            decay_steps = total_steps - warmup_steps
    else:
        decay_steps = total_steps - warmup_steps
    stable_steps = total_steps + 1 - warmup_steps - decay_steps

    def linear_warmup_stable_decay(current_step, warmup_steps, stable_steps, decay_steps,
                                   lr_decay_type, min_lr_factor):
        warmup_stable_steps = warmup_steps + stable_steps
        if current_step < warmup_steps:
            current_step += 1
            assert warmup_steps != 0
            curr_adjustment = float(current_step / warmup_steps)
        elif current_step < warmup_stable_steps:
            curr_adjustment = 1.0
        else:
            current_step += 1
            assert decay_steps != 0
            progress = float(current_step - warmup_stable_steps) / decay_steps
            if lr_decay_type == "linear":
                curr_adjustment = 1 - progress
            elif lr_decay_type == "sqrt":
                curr_adjustment = 1 - math.sqrt(progress)
            elif lr_decay_type == "cosine":
                curr_adjustment = 0.5 * (1.0 + math.cos(math.pi * progress))
            else:
                raise ValueError(lr_decay_type)
            curr_adjustment = min_lr_factor + (1 - min_lr_factor) * curr_adjustment
        return curr_adjustment

    return functools.partial(linear_warmup_stable_decay, warmup_steps=warmup_steps,
                             stable_steps=stable_steps, decay_steps=decay_steps,
                             lr_decay_type=decay_type, min_lr_factor=min_lr_factor)


def make_inputs(steps, seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    params = {n: torch.randn(s, generator=g).to(dtype) for n, s in SHAPES.items()}
    grads = []
    for k in range(steps):
        # Alternate large and small gradients so clipping is both active and inactive.
        scale = 2.0 if k % 2 == 0 else 0.02
        grads.append({n: (torch.randn(s, generator=g) * scale).to(dtype)
                      for n, s in SHAPES.items() if NO_GRAD_AT.get(k) != n})
    return params, grads


def peer_groups(named, rules, weight_decay):
    if not rules:
        return [g for g in (
            {"params": [p for n, p in named if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for n, p in named if p.dim() < 2], "weight_decay": 0.0},
        ) if g["params"]]
    groups = [{"params": [], "weight_decay": float(r.rsplit("=", 1)[1])} for r in rules]
    for n, p in named:
        idx = next(i for i, r in enumerate(rules) if fnmatch.fnmatchcase(n, r.rsplit("=", 1)[0]))
        groups[idx]["params"].append(p)
    return groups


def float64_accumulated_norm(grads):
    """torch.nn.utils.get_total_norm with the per-tensor norms and their combination in float64
    (titan's accumulation; torch's float32 one loses precision on large CPU tensors), as a
    float32 scalar for clip_grads_with_norm_."""
    norms = torch.stack([torch.linalg.vector_norm(g, 2, dtype=torch.float64) for g in grads])
    return (norms * norms).sum().sqrt().float()


def test_float32_norm_accumulation_is_why_titan_uses_float64():
    # The case behind the choice: torch's float32 CPU norm is off by percents here.
    g = torch.Generator().manual_seed(0)
    x = torch.randn(151936, 256, generator=g) * 1e-3
    x[:100] *= 100
    exact = x.double().norm().item()
    assert abs(torch._foreach_norm([x], 2)[0].item() - exact) > 1e-3 * exact
    assert abs(float64_accumulated_norm([x]).item() - exact) < 1e-6 * exact


def run_peer(params, grads, cfg):
    named = [(n, torch.nn.Parameter(p.clone())) for n, p in params.items()]
    impl = cfg["impl"]
    opt = torch.optim.AdamW(
        peer_groups(named, cfg["rules"], cfg["weight_decay"]), lr=cfg["lr"],
        betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["eps"], weight_decay=cfg["weight_decay"],
        fused=True if impl == "fused" else None, foreach=(impl == "foreach"))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, torchtitan_lr_lambda(
        cfg["warmup"], len(grads), cfg["total_steps"], cfg["decay_ratio"], cfg["decay_type"],
        cfg["min_lr_factor"]))
    lrs, norms = [], []
    for step_grads in grads:
        for n, p in named:
            p.grad = step_grads[n].clone() if n in step_grads else None
        norm = float64_accumulated_norm([p.grad for _, p in named if p.grad is not None])
        torch.nn.utils.clip_grads_with_norm_([p for _, p in named], cfg["max_norm"], norm)
        norms.append(norm.item())
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
        opt.zero_grad()
    state = {}
    for n, p in named:
        for key in ("exp_avg", "exp_avg_sq", "step"):
            state[f"{n}.{key}"] = opt.state[p][key]
    return {n: p.detach() for n, p in named}, state, lrs, norms


def run_harness(tmp_path, params, grads, cfg, resume_at=-1, extra=()):
    tensors = {f"param/{n}": p for n, p in params.items()}
    for k, step_grads in enumerate(grads):
        tensors.update({f"grad/{k}/{n}": g for n, g in step_grads.items()})
    src, dst = tmp_path / "in.safetensors", tmp_path / "out.safetensors"
    # The parameter order fixes the summation order of the global grad norm.
    save_file(tensors, str(src), metadata={"param_order": ",".join(params)})
    args = [str(HARNESS), "optim", "--input", src, "--output", dst, "--steps", len(grads),
            "--impl", cfg["impl"], "--lr", repr(cfg["lr"]), "--beta1", repr(cfg["beta1"]),
            "--beta2", repr(cfg["beta2"]), "--eps", repr(cfg["eps"]),
            "--weight-decay", repr(cfg["weight_decay"]), "--param-groups", ";".join(cfg["rules"]),
            "--warmup", cfg["warmup"],
            "--total-steps", -1 if cfg["total_steps"] is None else cfg["total_steps"],
            "--decay-ratio", -1 if cfg["decay_ratio"] is None else repr(cfg["decay_ratio"]),
            "--decay-type", cfg["decay_type"], "--min-lr-factor", repr(cfg["min_lr_factor"]),
            "--max-norm", repr(cfg["max_norm"]), "--resume-at", resume_at, *extra]
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    return proc, (load_file(str(dst)) if proc.returncode == 0 else None)


def rel_err(a, b):
    a, b = a.double(), b.double()
    return ((a - b).abs().max() / max(b.abs().max().item(), 1e-12)).item()


BASE = dict(impl="fused", lr=1e-2, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, rules=[],
            warmup=2, total_steps=None, decay_ratio=None, decay_type="linear", min_lr_factor=0.0,
            max_norm=1.0)
CASES = {
    "fused-hf-linear": {},
    "foreach-hf-sqrt-wsd": dict(impl="foreach", decay_type="sqrt", decay_ratio=0.5,
                                min_lr_factor=0.1),
    "forloop-catchall-cosine": dict(impl="for-loop", rules=["*=0.1"], decay_type="cosine",
                                    decay_ratio=0.34, warmup=1),
    "fused-globs-cosine-total": dict(rules=["*norm*=0", "*embed*=0.05", "*=0.2"],
                                     decay_type="cosine", warmup=0, total_steps=10,
                                     min_lr_factor=0.2),
    "foreach-globs-linear-wsd": dict(impl="foreach", rules=["*.bias=0", "*[!s].weight=0.3", "*=0"],
                                     decay_ratio=0.2, warmup=3),
    "fused-no-clip": dict(max_norm=1e9, decay_type="sqrt"),
}


@pytest.fixture(scope="module")
def harness():
    assert HARNESS.exists(), f"{HARNESS} not built; build the titan_optim_harness target"
    return HARNESS


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("resume_at", [-1, 3])
def test_adamw_schedule_clip_match_torch(harness, tmp_path, case, resume_at):
    cfg = {**BASE, **CASES[case]}
    params, grads = make_inputs(6, seed=len(case))
    want_params, want_state, want_lrs, want_norms = run_peer(params, grads, cfg)
    proc, got = run_harness(tmp_path, params, grads, cfg, resume_at)
    assert proc.returncode == 0, proc.stderr

    assert got["lr"].tolist() == want_lrs  # same double arithmetic, so exactly equal
    assert got["grad_norm"].tolist() == want_norms
    for n, want in want_params.items():
        have = got[f"param/{n}"]
        assert rel_err(have, want) <= 1e-6, (n, rel_err(have, want))
        # Same op sequence as torch for each implementation: bitwise equal in practice.
        assert torch.equal(have, want), (n, (have - want).abs().max().item())
    assert sorted(k[len("state/"):] for k in got if k.startswith("state/")) == sorted(want_state)
    for key, want in want_state.items():
        assert torch.equal(got[f"state/{key}"].to(want.dtype), want.cpu()), key


def test_bfloat16_params_fused_match_torch(harness, tmp_path):
    # No clipping here: our norms accumulate in float64 for every gradient dtype, torch's in
    # bf16 for bf16 gradients; the norm is checked on float32 copies of the gradients.
    cfg = {**BASE, "max_norm": 1e9}
    params, grads = make_inputs(4, seed=7, dtype=torch.bfloat16)
    want_params, _, _, _ = run_peer(params, grads, cfg)
    proc, got = run_harness(tmp_path, params, grads, cfg)
    assert proc.returncode == 0, proc.stderr
    for n, want in want_params.items():
        assert got[f"param/{n}"].dtype == torch.bfloat16
        assert torch.equal(got[f"param/{n}"], want), n
    for k, step_grads in enumerate(grads):
        fp32 = [torch.nn.Parameter(torch.zeros(SHAPES[n])) for n in params]
        for p, n in zip(fp32, params):
            p.grad = step_grads[n].float() if n in step_grads else None
        want = float64_accumulated_norm([p.grad for p in fp32 if p.grad is not None]).item()
        assert got["grad_norm"][k].item() == want, k


SCHEDULES = [
    # (steps, warmup, total_steps, decay_ratio, decay_type, min_lr_factor)
    (10, 0, None, None, "linear", 0.0),
    (10, 3, None, 0.0, "linear", 0.0),
    (10, 3, None, 1.0, "cosine", 0.1),
    (10, 10, None, None, "linear", 0.0),
    (10, 14, None, 0.5, "sqrt", 0.0),
    (9, 2, None, 0.25, "sqrt", 0.3),  # round(2.25) = 2
    (8, 1, None, 0.3125, "cosine", 0.0),  # round(2.5) = 2: Python rounds halves to even
    (8, 1, None, 0.4375, "linear", 0.0),  # round(3.5) = 4
    (6, 2, 20, None, "cosine", 0.0),
    (7, 1, 4, 0.5, "linear", 0.5),
]


@pytest.mark.parametrize("schedule", SCHEDULES, ids=str)
def test_lr_schedule_matches_lambdalr(harness, tmp_path, schedule):
    steps, warmup, total, ratio, kind, min_lr = schedule
    cfg = {**BASE, "warmup": warmup, "total_steps": total, "decay_ratio": ratio,
           "decay_type": kind, "min_lr_factor": min_lr}
    horizon = total if total is not None else steps
    params = {"w": torch.ones(2, 2)}
    grads = [{"w": torch.full((2, 2), 0.1)} for _ in range(min(steps, horizon))]
    _, _, want_lrs, _ = run_peer(params, grads, cfg)
    proc, got = run_harness(tmp_path, params, grads, cfg)
    assert proc.returncode == 0, proc.stderr
    assert got["lr"].tolist() == want_lrs


@pytest.mark.parametrize("overrides, message", [
    (dict(rules=["*norm*"]), "'*norm*'"),
    (dict(rules=["*norm*=abc", "*=0.1"]), "'*norm*=abc'"),
    (dict(rules=["*norm*=0"]), "matches no entry"),
    (dict(rules=["*nothing*=0", "*=0.1"]), "'*nothing*=0' matches no parameter"),
    (dict(decay_type="exp"), "lr_scheduler.decay_type"),
    (dict(impl="turbo"), "optimizer.implementation"),
])
def test_bad_config_is_one_clear_error(harness, tmp_path, overrides, message):
    params, grads = make_inputs(1, seed=1)
    proc, _ = run_harness(tmp_path, params, grads, {**BASE, **overrides})
    assert proc.returncode == 1
    assert message in proc.stderr, proc.stderr


def norm_gradients():
    """Gradients of awkward shapes for the layout test: rows of very different scales, a
    vocabulary-like matrix whose rows do not divide by 2, bfloat16, one entry."""
    g = torch.Generator().manual_seed(3)
    scales = torch.logspace(-3, 3, 1001).unsqueeze(1)
    return {
        "embed": torch.randn(1001, 64, generator=g) * scales,
        "proj": torch.randn(64, 65, generator=g),
        "experts": torch.randn(3, 40, 16, generator=g) * 1e-2,
        "norm": torch.randn(65, generator=g).to(torch.bfloat16),
        "bias": torch.randn(1, generator=g),
    }


def run_grad_norm(tmp_path, grads, layout, nproc):
    src, dst = tmp_path / "grads.safetensors", tmp_path / f"norm-{layout}-{nproc}.safetensors"
    save_file({f"grad/{n}": g for n, g in grads.items()}, str(src),
              metadata={"order": ",".join(grads)})
    cmd = [str(HARNESS), "grad-norm", "--input", str(src), "--output", str(dst),
           "--layout", layout, "--max-norm", "1.0"]
    if nproc > 1:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--no-python",
               f"--nproc_per_node={nproc}", "--rdzv_backend", "c10d",
               "--rdzv_endpoint=localhost:0", *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return load_file(str(dst))


def test_grad_norm_is_exact_and_the_same_for_every_layout(harness, tmp_path):
    grads = norm_gradients()
    runs = {(layout, nproc): run_grad_norm(tmp_path, grads, layout, nproc)
            for layout, nproc in (("whole", 1), ("fsdp", 2), ("ddp", 2))}
    want = torch.linalg.vector_norm(torch.cat([g.double().flatten() for g in grads.values()]))
    one = runs[("whole", 1)]
    assert abs(one["squares"].item() ** 0.5 - want.item()) <= 1e-12 * want.item()
    for key, got in runs.items():
        # What is logged and what clips: the same float32 bits in every layout. (The float64
        # sums may differ in their last bits: FSDP adds the ranks' sums.)
        assert torch.equal(got["norm"], one["norm"]), key
        assert torch.equal(got["coefficient"], one["coefficient"]), key
        assert got["norm"].dtype == torch.float32 and got["norm"].item() == want.float().item()
        assert abs(got["squares"].item() - one["squares"].item()) <= 1e-15 * one["squares"].item()
    assert torch.equal(runs[("ddp", 2)]["squares"], one["squares"])
