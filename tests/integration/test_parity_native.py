"""Native Qwen3 / Qwen3-MoE against Hugging Face transformers itself (docs/architecture.md section 4).

For several small random configs, transformers builds the model (eager attention, float32,
seeded), saves it with save_pretrained, and `titan forward --grads-output` runs the native
model on the same directory. Logits and loss must agree within 1e-5 relative, the gradient of
every parameter after one backward within 1e-4 relative (max|a-b| / max|b| over the tensor),
and every all-zero reference gradient (also per expert) must be all zero here too.
"""
import json

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import (
    GPT2Config,
    Qwen3Config,
    Qwen3ForCausalLM,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
)

from conftest import run_titan

LOGITS_TOL = 1e-5
GRAD_TOL = 1e-4
MIN_ROUTER_MARGIN = 2e-4  # probability gap between the k-th and (k+1)-th expert

BASE = dict(vocab_size=384, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6,
            max_position_embeddings=256, tie_word_embeddings=False)
MOE = dict(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32)

# (id, moe, overrides, seq_len)
CASES = [
    ("dense_tied", False, dict(tie_word_embeddings=True), 24),
    ("dense_3q1kv_hd24_bias_pad", False,
     dict(num_attention_heads=3, num_key_value_heads=1, head_dim=24, attention_bias=True,
          pad_token_id=7, num_hidden_layers=3), 31),
    ("dense_6q2kv_hd40_theta1e6", False,
     dict(num_attention_heads=6, num_key_value_heads=2, head_dim=40, rope_theta=1e6,
          vocab_size=701), 40),
    ("dense_yarn", False,
     dict(rope_parameters=dict(rope_type="yarn", rope_theta=10000.0, factor=4.0,
                               original_max_position_embeddings=64)), 20),
    ("moe_tied_norm_topk", True, dict(tie_word_embeddings=True, norm_topk_prob=True), 24),
    ("moe_3q1kv_hd24_mlp_only", True,
     dict(num_attention_heads=3, num_key_value_heads=1, head_dim=24, norm_topk_prob=False,
          num_hidden_layers=3, mlp_only_layers=[1]), 33),
    ("moe_6q2kv_hd40_sparse_step2", True,
     dict(num_attention_heads=6, num_key_value_heads=2, head_dim=40, norm_topk_prob=True,
          num_hidden_layers=4, decoder_sparse_step=2, num_experts_per_tok=3), 17),
    ("moe_aux_loss", True,
     dict(norm_topk_prob=True, output_router_logits=True, router_aux_loss_coef=0.02), 28),
]


def rel_err(a, b):
    a, b = a.double(), b.double()
    return ((a - b).abs().max() / max(b.abs().max().item(), 1e-12)).item()


def router_margin(model, ids, top_k):
    """Smallest gap between the k-th and (k+1)-th routing probability over tokens and layers."""
    with torch.no_grad():
        out = model(ids, output_router_logits=True)
    margin = float("inf")
    for logits in out.router_logits:
        probs = torch.softmax(logits.float(), dim=-1).sort(dim=-1, descending=True).values
        margin = min(margin, (probs[:, top_k - 1] - probs[:, top_k]).min().item())
    return margin


def make_model(moe, overrides, seq_len, seed):
    """A transformers model and token ids; MoE routers are scaled up and resampled until no
    token's top-k choice is near a tie, so rounding cannot flip a routing decision."""
    cfg_args = dict(BASE, **(MOE if moe else {}))
    cfg_args.update(overrides)
    for attempt in range(20):
        torch.manual_seed(seed + 1000 * attempt)
        if moe:
            model = Qwen3MoeForCausalLM._from_config(
                Qwen3MoeConfig(**cfg_args), attn_implementation="eager",
                experts_implementation="eager")
        else:
            model = Qwen3ForCausalLM._from_config(Qwen3Config(**cfg_args),
                                                  attn_implementation="eager")
        model = model.float()
        with torch.no_grad():  # non-trivial norm weights, so their gradients are tested too
            for name, p in model.named_parameters():
                if p.dim() == 1 and "norm" in name:
                    p.add_(0.1 * torch.randn_like(p))
        ids = torch.randint(0, cfg_args["vocab_size"], (1, seq_len))
        if not moe:
            return model, ids
        with torch.no_grad():
            for name, p in model.named_parameters():
                if name.endswith("mlp.gate.weight"):
                    p.mul_(25.0)
        if router_margin(model, ids, cfg_args["num_experts_per_tok"]) > MIN_ROUTER_MARGIN:
            return model, ids
    raise AssertionError("could not find a router init without near-ties")


def hf_reference(model, ids):
    model.zero_grad()
    out = model(ids, labels=ids)
    out.loss.backward()
    grads = {n: p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)
             for n, p in model.named_parameters()}
    return out.logits[0].detach(), out.loss.detach(), grads


def titan_forward(model_dir, ids, tmp_path, extra=()):
    logits_path = tmp_path / "logits.safetensors"
    grads_path = tmp_path / "grads.safetensors"
    run_titan("forward", "--model", model_dir, "--tokens", ",".join(map(str, ids[0].tolist())),
              "--output", logits_path, "--grads-output", grads_path, *extra)
    return load_file(str(logits_path)), load_file(str(grads_path))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_native_matches_transformers(case, tmp_path, titan_bin):
    name, moe, overrides, seq_len = case
    model, ids = make_model(moe, overrides, seq_len, seed=sum(map(ord, name)))
    model_dir = tmp_path / "hf"
    model.save_pretrained(model_dir)
    ref_logits, ref_loss, ref_grads = hf_reference(model, ids)

    logits_file, grads_file = titan_forward(model_dir, ids, tmp_path)
    assert logits_file["logits"].shape == ref_logits.shape
    assert rel_err(logits_file["logits"], ref_logits) < LOGITS_TOL
    assert rel_err(grads_file["loss"], ref_loss) < LOGITS_TOL, (grads_file["loss"], ref_loss)

    ours = {k[len("grad."):]: v for k, v in grads_file.items() if k.startswith("grad.")}
    assert sorted(ours) == sorted(ref_grads)
    for pname, ref in ref_grads.items():
        got = ours[pname]
        assert got.shape == ref.shape, pname
        if ref.abs().max() == 0:
            assert got.abs().max() == 0, f"{pname}: reference gradient is zero, ours is not"
            continue
        err = rel_err(got, ref)
        assert err < GRAD_TOL, f"{pname}: relative gradient error {err:.3g}"
        if pname.endswith("mlp.experts.gate_up_proj") or pname.endswith("mlp.experts.down_proj"):
            unused = ref.flatten(1).abs().amax(1) == 0
            assert (got.flatten(1)[unused] == 0).all(), f"{pname}: unselected experts moved"
    if overrides.get("pad_token_id") is not None:
        assert (ours["model.embed_tokens.weight"][overrides["pad_token_id"]] == 0).all()


def test_bfloat16_compute_is_close_to_transformers_bf16(tmp_path, titan_bin):
    model, ids = make_model(True, dict(norm_topk_prob=True), 24, seed=5)
    model.save_pretrained(tmp_path / "hf")
    with torch.no_grad():
        ref32 = model(ids).logits[0]
        ref16 = model.to(torch.bfloat16)(ids).logits[0].float()
    out = tmp_path / "logits.safetensors"
    run_titan("forward", "--model", tmp_path / "hf", "--tokens",
              ",".join(map(str, ids[0].tolist())), "--dtype", "bfloat16", "--output", out)
    ours = load_file(str(out))["logits"]
    # bf16 agreement: no worse than transformers' own bf16 run against its float32 one.
    assert rel_err(ours, ref32) < 3 * max(rel_err(ref16, ref32), 1e-3)


# ---- checkpoint layouts ---------------------------------------------------------------------


def logits_of(model_dir, ids, tmp_path):
    out = tmp_path / "l.safetensors"
    run_titan("forward", "--model", model_dir, "--tokens", ",".join(map(str, ids[0].tolist())),
              "--output", out)
    return load_file(str(out))["logits"]


def test_fused_expert_checkpoint_loads_to_the_same_logits(tmp_path, titan_bin):
    model, ids = make_model(True, dict(norm_topk_prob=True), 20, seed=11)
    model.save_pretrained(tmp_path / "per_expert")
    model.save_pretrained(tmp_path / "fused", save_original_format=False)
    fused_keys = load_file(str(tmp_path / "fused" / "model.safetensors")).keys()
    assert "model.layers.0.mlp.experts.gate_up_proj" in fused_keys
    a = logits_of(tmp_path / "per_expert", ids, tmp_path)
    b = logits_of(tmp_path / "fused", ids, tmp_path)
    assert torch.equal(a, b)
    with torch.no_grad():
        assert rel_err(b, model(ids).logits[0]) < LOGITS_TOL


def test_tied_checkpoint_with_identical_lm_head_loads(tmp_path, titan_bin):
    model, ids = make_model(False, dict(tie_word_embeddings=True), 16, seed=3)
    model.save_pretrained(tmp_path / "hf")
    path = tmp_path / "hf" / "model.safetensors"
    tensors = load_file(str(path))
    assert "lm_head.weight" not in tensors  # transformers drops the tied head
    tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"].clone()
    save_file(tensors, str(path), metadata={"format": "pt"})
    with torch.no_grad():
        assert rel_err(logits_of(tmp_path / "hf", ids, tmp_path), model(ids).logits[0]) < LOGITS_TOL


# ---- errors name what is wrong ----------------------------------------------------------------


@pytest.fixture
def small_dir(tmp_path):
    model, _ = make_model(True, dict(norm_topk_prob=True), 8, seed=1)
    model.save_pretrained(tmp_path / "hf")
    return tmp_path / "hf"


def forward_error(model_dir, tmp_path):
    proc = run_titan("forward", "--model", model_dir, "--tokens", "1,2,3", "--output",
                     tmp_path / "out.safetensors", check=False)
    assert proc.returncode != 0
    assert not (tmp_path / "out.safetensors").exists()
    return proc.stderr


def rewrite(model_dir, change):
    path = model_dir / "model.safetensors"
    tensors = load_file(str(path))
    change(tensors)
    save_file(tensors, str(path), metadata={"format": "pt"})


def test_missing_tensor_is_named(small_dir, tmp_path):
    rewrite(small_dir, lambda t: t.pop("model.layers.1.mlp.experts.3.up_proj.weight"))
    err = forward_error(small_dir, tmp_path)
    assert "missing" in err and "model.layers.1.mlp.experts.3.up_proj.weight" in err, err


def test_unexpected_tensor_is_named(small_dir, tmp_path):
    rewrite(small_dir, lambda t: t.update({"model.layers.0.mlp.shared_expert.weight": torch.zeros(3)}))
    err = forward_error(small_dir, tmp_path)
    assert "unexpected" in err and "model.layers.0.mlp.shared_expert.weight" in err, err


def test_wrong_shape_is_named(small_dir, tmp_path):
    rewrite(small_dir, lambda t: t.update({"model.norm.weight": torch.ones(63)}))
    err = forward_error(small_dir, tmp_path)
    assert "model.norm.weight" in err and "[63]" in err and "[64]" in err, err


def test_other_architecture_is_named(tmp_path, titan_bin):
    d = tmp_path / "gpt2"
    d.mkdir()
    GPT2Config(vocab_size=100, n_embd=32, n_layer=1, n_head=2).save_pretrained(d)
    err = forward_error(d, tmp_path)
    assert "gpt2" in err and "config.json" in err, err


def test_missing_config_is_named(small_dir, tmp_path):
    (small_dir / "config.json").unlink()
    err = forward_error(small_dir, tmp_path)
    assert "config.json" in err and str(small_dir) in err, err


def test_token_out_of_vocabulary_is_named(small_dir, tmp_path):
    proc = run_titan("forward", "--model", small_dir, "--tokens", "1,384", "--output",
                     tmp_path / "o.safetensors", check=False)
    assert proc.returncode != 0 and "384" in proc.stderr, proc.stderr


def test_transformers_backend_gives_the_native_logits(small_dir, tmp_path):
    logits = {}
    for backend in ("native", "transformers"):
        out = tmp_path / f"{backend}.safetensors"
        run_titan("forward", "--model", small_dir, "--tokens", "5,9,2,200,7", "--backend",
                  backend, "--output", out)
        logits[backend] = load_file(str(out))["logits"]
    err = (logits["transformers"] - logits["native"]).abs().max() / logits["native"].abs().max()
    assert err.item() < 1e-5


def test_tokens_file_gives_the_same_logits(small_dir, tmp_path):
    ids_file = tmp_path / "ids.json"
    ids_file.write_text(json.dumps([5, 9, 2, 200]))
    out1, out2 = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    run_titan("forward", "--model", small_dir, "--tokens-file", ids_file, "--output", out1)
    run_titan("forward", "--model", small_dir, "--tokens", "5,9,2,200", "--output", out2)
    assert torch.equal(load_file(str(out1))["logits"], load_file(str(out2))["logits"])
