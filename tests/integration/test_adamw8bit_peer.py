"""AdamW8bit against its real peer, bitsandbytes.optim.AdamW8bit (CPU backend) from the venv:
the quantiser and the dynamic maps against bitsandbytes.functional, then six steps of the lr
schedule, clipping and AdamW8bit over tensors of awkward sizes (ragged last blocks, blocks of
zeros, a tensor just below and one just at min_8bit_size, weight decay on matrices only), both
implementations, with and without a resume in the middle: the same codes, absmax, float32
states and parameters, bit for bit.

The C++ side is tests/tools/optim_harness.cpp (target titan_optim_harness)."""
import subprocess

import pytest
import torch
from safetensors.torch import load_file, save_file

from test_optimizer_peer import (BASE, HARNESS, float64_accumulated_norm, peer_groups,
                                 run_harness, torchtitan_lr_lambda)

bnb = pytest.importorskip("bitsandbytes")

SHAPES = {
    "model.embed_tokens.weight": (300, 70),  # 21000: a ragged last block of 8
    "model.layers.0.self_attn.q_proj.weight": (64, 64),  # 4096: exactly min_8bit_size
    "model.layers.0.mlp.down_proj.weight": (63, 65),  # 4095: float32 states
    "model.layers.0.mlp.experts.gate_up_proj": (2, 40, 64),  # 5120, 3-D
    "model.layers.0.input_layernorm.weight": (70,),
    "model.norm.weight": (5000,),  # a vector with 8-bit states and no weight decay
}
NO_GRAD_AT = {2: "model.norm.weight"}
ZERO_ROWS = ("model.embed_tokens.weight", slice(10, 50))  # rows that never get a gradient


def make_inputs(steps, seed):
    g = torch.Generator().manual_seed(seed)
    params = {n: torch.randn(s, generator=g) for n, s in SHAPES.items()}
    grads = []
    for k in range(steps):
        scale = 2.0 if k % 2 == 0 else 0.02  # clipping both active and inactive
        step = {n: torch.randn(s, generator=g) * scale for n, s in SHAPES.items()
                if NO_GRAD_AT.get(k) != n}
        step[ZERO_ROWS[0]][ZERO_ROWS[1]] = 0
        grads.append(step)
    return params, grads


def run_bitsandbytes(params, grads, cfg):
    """bitsandbytes.optim.AdamW8bit in a plain loop: the same groups, schedule and clipping."""
    named = [(n, torch.nn.Parameter(p.clone())) for n, p in params.items()]
    opt = bnb.optim.AdamW8bit(peer_groups(named, cfg["rules"], cfg["weight_decay"]),
                              lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["eps"],
                              weight_decay=cfg["weight_decay"])
    sched = torch.optim.lr_scheduler.LambdaLR(opt, torchtitan_lr_lambda(
        cfg["warmup"], len(grads), cfg["total_steps"], cfg["decay_ratio"], cfg["decay_type"],
        cfg["min_lr_factor"]))
    for step_grads in grads:
        for n, p in named:
            p.grad = step_grads[n].clone() if n in step_grads else None
        norm = float64_accumulated_norm([p.grad for _, p in named if p.grad is not None])
        torch.nn.utils.clip_grads_with_norm_([p for _, p in named], cfg["max_norm"], norm)
        opt.step()
        sched.step()
        opt.zero_grad()
    return {n: p.detach() for n, p in named}, {n: opt.state[p] for n, p in named}


def titan_states(got, name):
    def get(field):
        return got[f"state/{name}.{field}"]

    if f"state/{name}.exp_avg_codes" in got:
        return {"state1": get("exp_avg_codes"), "absmax1": get("exp_avg_absmax").flatten(),
                "state2": get("exp_avg_sq_codes"), "absmax2": get("exp_avg_sq_absmax").flatten(),
                "step": get("step")}
    return {"state1": get("exp_avg"), "state2": get("exp_avg_sq"), "step": get("step")}


CASES = {
    "fused": dict(BASE, name="AdamW8bit", impl="fused", beta2=0.999),
    "for-loop": dict(BASE, name="AdamW8bit", impl="for-loop", decay_type="cosine",
                     decay_ratio=0.5, min_lr_factor=0.1),
    "fused-globs-no-decay": dict(BASE, name="AdamW8bit", impl="fused",
                                 rules=["*norm*=0", "*embed*=0", "*=0.05"], max_norm=1e9),
}


@pytest.fixture(scope="module")
def harness():
    assert HARNESS.exists(), f"{HARNESS} not built; build the titan_optim_harness target"
    return HARNESS


def run_titan_harness(tmp_path, params, grads, cfg, resume_at=-1):
    proc, got = run_harness(tmp_path, params, grads, cfg, resume_at,
                            extra=["--name", cfg["name"]])
    assert proc.returncode == 0, proc.stderr
    return got


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("resume_at", [-1, 3])
def test_six_steps_equal_bitsandbytes_bit_for_bit(harness, tmp_path, case, resume_at):
    cfg = CASES[case]
    params, grads = make_inputs(6, seed=len(case))
    want_params, want_states = run_bitsandbytes(params, grads, cfg)
    got = run_titan_harness(tmp_path, params, grads, cfg, resume_at)
    for n, want in want_params.items():
        have = got[f"param/{n}"]
        assert torch.equal(have, want), (n, (have - want).abs().max().item())
    for n, want in want_states.items():
        have = titan_states(got, n)
        assert ("absmax1" in want) == ("absmax1" in have) == (SHAPES[n] != (63, 65) and
                                                              SHAPES[n] != (70,)), n
        assert have["step"].item() == want["step"], n
        for key in ("state1", "state2", "absmax1", "absmax2"):
            if key in want:
                assert torch.equal(have[key], want[key]), (n, key)
    # The rows without gradients are whole blocks of zeros in both states.
    embed = titan_states(got, ZERO_ROWS[0])
    assert (embed["absmax1"] == 0).sum() >= 8 and (embed["absmax2"] == 0).sum() >= 8


def test_the_quantiser_and_maps_equal_bitsandbytes(harness, tmp_path):
    import bitsandbytes.functional as F

    g = torch.Generator().manual_seed(0)
    lognormal = torch.randn(10247, generator=g) * torch.exp(4 * torch.randn(10247, generator=g))
    xs = {
        "lognormal": lognormal,
        "lognormal_abs": lognormal.abs(),  # the second moment's kind of values
        "zero_block": torch.cat([torch.zeros(512), torch.randn(300, generator=g)]),
        "grid": torch.arange(-2 ** 20, 2 ** 20 + 1, dtype=torch.float64).div(2 ** 20).float(),
        "matrix": torch.randn(33, 100, generator=g) * 1e-3,
    }
    src, dst = tmp_path / "x.safetensors", tmp_path / "q.safetensors"
    save_file({f"x/{k}": v for k, v in xs.items()}, str(src))
    proc = subprocess.run([str(HARNESS), "blockwise", "--input", str(src), "--output", str(dst)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = load_file(str(dst))
    for kind, is_signed in (("signed", True), ("unsigned", False)):
        code = F.create_dynamic_map(signed=is_signed)
        assert torch.equal(got[f"map/{kind}"], code), kind
        for name, x in xs.items():  # (negative values clamp to the unsigned map's 0)
            codes, state = F.quantize_blockwise(x, code=code, blocksize=256)
            assert torch.equal(got[f"codes/{kind}/{name}"], codes), (kind, name)
            assert torch.equal(got[f"absmax/{kind}/{name}"], state.absmax), (kind, name)
            back = F.dequantize_blockwise(codes, state)
            assert torch.equal(got[f"back/{kind}/{name}"], back), (kind, name)


@pytest.mark.parametrize("overrides, message", [
    (dict(name="adamw_8bit"), "is AdamW8bit"),
    (dict(name="PagedAdamW8bit"), "paged optimizers are not offered"),
    (dict(name="AdamW8bit", impl="foreach"), "AdamW8bit has fused"),
])
def test_bad_names_are_one_clear_error(harness, tmp_path, overrides, message):
    params, grads = make_inputs(1, seed=1)
    proc, _ = run_harness(tmp_path, params, grads, {**BASE, **overrides},
                          extra=["--name", overrides["name"]])
    assert proc.returncode == 1
    assert message in proc.stderr, proc.stderr
