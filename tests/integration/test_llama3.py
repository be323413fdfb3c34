"""Llama 3 (model.name llama3, docs/llama3.md) against transformers' LlamaForCausalLM: logits
and gradients of random configs (GQA, tied and untied, Llama 3.1's RoPE scaling with all three
frequency bands present), five training steps against a plain PyTorch AdamW loop, FSDP 2 and
TP 2 against one process, the Hugging Face export, LoRA against PEFT, and titan
eval / generate / convert on a LlamaForCausalLM folder."""
import json
import math

import pytest
import torch
from safetensors.torch import load_file
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from conftest import read_metrics, run_titan
from hf_models import LLAMA3_ROPE, make_llama_model, packed_windows, rel_err
from launch import assert_close, curves, torchrun
from test_parity_native import hf_reference, titan_forward

LOGITS_TOL = 1e-5
GRAD_TOL = 1e-4
STEPS, BATCH, SEQ = 5, 2, 32

BASE = dict(vocab_size=384, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-5,
            max_position_embeddings=256, tie_word_embeddings=False,
            rope_parameters=dict(LLAMA3_ROPE))

# (id, overrides, seq_len, config.json rewritten with v4 keys)
CASES = [
    ("gqa_untied_pad", dict(pad_token_id=7), 40, False),
    ("gqa_tied_bias_hd24", dict(
        tie_word_embeddings=True, hidden_size=96, num_attention_heads=6, head_dim=24,
        attention_bias=True, num_hidden_layers=3,
        rope_parameters=dict(LLAMA3_ROPE, rope_theta=500.0, factor=8.0, high_freq_factor=2.0,
                             original_max_position_embeddings=32)), 33, False),
    ("mha_default_rope", dict(num_key_value_heads=4, rope_parameters=dict(
        rope_type="default", rope_theta=10000.0)), 20, False),
    ("v4_keys", {}, 24, True),
]


def rope_bands(config):
    """How many frequencies Llama 3.1's scaling keeps, smooths and slows (transformers' bands)."""
    p = config.rope_parameters
    d = config.head_dim
    inv_freq = 1.0 / (p["rope_theta"] ** (torch.arange(0, d, 2).float() / d))
    wavelen = 2 * math.pi / inv_freq
    old = p["original_max_position_embeddings"]
    high, low = old / p["high_freq_factor"], old / p["low_freq_factor"]
    return (int((wavelen < high).sum()), int(((wavelen >= high) & (wavelen <= low)).sum()),
            int((wavelen > low).sum()))


def as_v4_config(model_dir):
    """The config.json with Transformers v4's keys: rope_theta and rope_scaling with the legacy
    "type", the original context at the top level (where transformers gives it priority)."""
    path = model_dir / "config.json"
    c = json.loads(path.read_text())
    rope = c.pop("rope_parameters")
    c["rope_theta"] = rope.pop("rope_theta")
    c["original_max_position_embeddings"] = rope.pop("original_max_position_embeddings") // 2
    rope["type"] = rope.pop("rope_type")
    c["rope_scaling"] = rope
    c["torch_dtype"] = c.pop("dtype")
    path.write_text(json.dumps(c))


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_native_matches_transformers(case, tmp_path, titan_bin):
    name, overrides, seq_len, v4 = case
    torch.manual_seed(sum(map(ord, name)))
    model = LlamaForCausalLM(LlamaConfig(**dict(BASE, **overrides))).float()
    with torch.no_grad():  # non-trivial norm weights, so their gradients are tested too
        for pname, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    model_dir = tmp_path / "hf"
    model.save_pretrained(model_dir)
    if v4:
        as_v4_config(model_dir)
    # The reference is the folder as transformers reads it.
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32,
                                                 attn_implementation="eager")
    assert type(model) is LlamaForCausalLM
    if model.config.rope_parameters["rope_type"] == "llama3":
        assert all(band > 0 for band in rope_bands(model.config)), rope_bands(model.config)
    ids = torch.randint(0, model.config.vocab_size, (1, seq_len))
    ref_logits, ref_loss, ref_grads = hf_reference(model, ids)

    logits_file, grads_file = titan_forward(model_dir, ids, tmp_path)
    assert rel_err(logits_file["logits"], ref_logits) < LOGITS_TOL
    assert rel_err(grads_file["loss"], ref_loss) < LOGITS_TOL
    ours = {k[len("grad."):]: v for k, v in grads_file.items() if k.startswith("grad.")}
    assert sorted(ours) == sorted(ref_grads)
    for pname, ref in ref_grads.items():
        assert ours[pname].shape == ref.shape, pname
        assert rel_err(ours[pname], ref) < GRAD_TOL, pname
    if overrides.get("pad_token_id") is not None:  # untied: no gradient reaches its row
        assert (ours["model.embed_tokens.weight"][overrides["pad_token_id"]] == 0).all()


def test_an_unsupported_llama_variant_is_one_error_naming_the_key(tmp_path, titan_bin):
    make_llama_model(tmp_path / "hf", vocab=128, mlp_bias=True)
    proc = run_titan("forward", "--model", tmp_path / "hf", "--tokens", "1,2",
                     "--output", tmp_path / "o.safetensors", check=False)
    assert proc.returncode != 0 and proc.stderr.count("\n") == 1, proc.stderr
    assert "mlp_bias=true is not supported" in proc.stderr and "config.json" in proc.stderr


# ---- training ---------------------------------------------------------------------------------


def train_args(base, job, corpus, *extra, steps=STEPS):
    return ["train", "--module", "llama3", "--config", "llama3_debugmodel",
            "--model.flavor", "auto", "--checkpoint.initial_load_path", base,
            "--checkpoint.initial_load_in_hf", "--checkpoint.last_save_in_hf",
            "--training.steps", steps, "--training.seq_len", SEQ,
            "--training.local_batch_size", BATCH, "--training.dataset_path", corpus,
            "--lr_scheduler.warmup_steps", 2, "--optimizer.lr", 3e-3,
            "--metrics.log_freq", 1, "--job.dump_folder", job, *extra]


@pytest.fixture(scope="module")
def bases(tmp_path_factory, tokenizer_dir):
    root = tmp_path_factory.mktemp("llama_bases")
    for tied in (True, False):
        make_llama_model(root / f"tied{tied}", tied=tied, seed=7 + tied,
                         tokenizer_dir=tokenizer_dir)
    return root


@pytest.fixture(scope="module")
def one_process(bases, small_corpus, tmp_path_factory):
    """Five steps of the untied base in one process: the reference of every training test."""
    job = tmp_path_factory.mktemp("llama_one") / "job"
    run_titan(*train_args(bases / "tiedFalse", job, small_corpus))
    return job


def pytorch_loop(base, windows, lrs):
    """Transformers' LlamaForCausalLM trained as titan trains: the mean token loss of each step's
    rows, the gradient norm accumulated in float64 and clipped to 1, AdamW (betas 0.9, 0.95,
    weight decay 0.1 on matrices only, fused) at titan's logged learning rates."""
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32,
                                                 attn_implementation="eager")
    model.train()
    params = list(model.parameters())
    opt = torch.optim.AdamW(
        [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
         {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}],
        lr=lrs[0], betas=(0.9, 0.95), eps=1e-8, fused=True)  # titan's default implementation
    losses = []
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
    return losses, {n: p.detach() for n, p in model.state_dict().items()}


def load_clean(out):
    model, info = AutoModelForCausalLM.from_pretrained(
        out, dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    for key in ("missing_keys", "unexpected_keys", "mismatched_keys"):
        assert not info[key], (key, info[key])
    assert type(model) is LlamaForCausalLM and model.config.model_type == "llama"
    return model


def test_five_steps_equal_a_pytorch_adamw_loop_and_the_export_loads(
        bases, one_process, small_corpus, tokenizer_dir, tmp_path):
    base, job = bases / "tiedFalse", one_process
    metrics = read_metrics(job)
    windows = packed_windows(small_corpus, tokenizer_dir, SEQ, STEPS * BATCH)
    losses, trained = pytorch_loop(base, windows, [m["lr"] for m in metrics])
    ours = [m["loss"] for m in metrics]
    assert_close(ours, losses, "loss")

    out = job / "hf" / f"step-{STEPS}"
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["model_type"] == "llama"
    assert config["rope_parameters"]["rope_type"] == "llama3"
    exported = load_file(out / "model.safetensors")
    assert "lm_head.weight" in exported
    initial = load_file(base / "model.safetensors")
    assert set(exported) == set(initial)
    # The update over the five steps, normwise (AdamW turns float rounding of near-zero
    # gradients into visible changes of single elements).
    num = sum(float(((exported[k] - trained[k]) ** 2).sum()) for k in initial)
    den = sum(float(((trained[k] - initial[k]) ** 2).sum()) for k in initial)
    assert math.sqrt(num / den) <= 1e-3

    model = load_clean(out)
    tokens = list(range(100, 124))
    with torch.no_grad():
        theirs = model(torch.tensor([tokens])).logits[0]
    logits = tmp_path / "logits.safetensors"
    run_titan("forward", "--model", out, "--tokens", ",".join(map(str, tokens)),
              "--output", logits)
    assert rel_err(load_file(logits)["logits"], theirs) < LOGITS_TOL


def test_checkpointing_and_kernel_overrides_train_the_same(bases, one_process, small_corpus,
                                                          tmp_path):
    job = tmp_path / "ac_fused"
    proc = run_titan(*train_args(bases / "tiedFalse", job, small_corpus,
                                 "--activation_checkpoint.mode", "full",
                                 "--override.imports", "rms_norm=fused,cross_entropy=fused"))
    assert "[override] rms_norm" in proc.stdout and "-> fused" in proc.stdout, proc.stdout
    (losses, norms), (ref_losses, ref_norms) = curves(job), curves(one_process)
    assert_close(losses, ref_losses, "loss")
    assert_close(norms, ref_norms, "grad_norm", rel=1e-4)


@pytest.mark.parametrize("layout,nproc,local_batch,extra", [
    ("fsdp2", 2, BATCH // 2, []),
    ("tp2", 2, BATCH, ["--parallelism.tensor_parallel_degree", 2]),
])
def test_parallel_layouts_equal_one_process(layout, nproc, local_batch, extra, bases, one_process,
                                            small_corpus, tmp_path):
    split = tmp_path / layout
    proc = torchrun(nproc, train_args(bases / "tiedFalse", split, small_corpus,
                                      "--training.local_batch_size", local_batch, *extra))
    if layout == "tp2":
        assert "tp=2" in proc.stdout
    (ref_losses, ref_norms), (losses, norms) = curves(one_process), curves(split)
    assert_close(losses, ref_losses, "loss")
    assert_close(norms, ref_norms, "grad_norm")


# ---- LoRA -------------------------------------------------------------------------------------


def test_lora_equals_peft_and_its_exports_load(bases, small_corpus, tokenizer_dir, tmp_path):
    peft = pytest.importorskip("peft")
    from test_lora import LINEARS, initial_adapter, normwise, peft_loop, train_titan

    base = bases / "tiedFalse"
    adapter = initial_adapter(base, tmp_path / "initial", LINEARS)
    job = tmp_path / "job"
    run_titan(*train_titan(base, job, small_corpus, backend="llama3", module="llama3",
                           adapter=adapter))
    metrics = read_metrics(job)
    windows = packed_windows(small_corpus, tokenizer_dir, 32, 5 * 2)
    losses, trained = peft_loop(base, adapter, windows, [m["lr"] for m in metrics])
    assert_close([m["loss"] for m in metrics], losses, "loss")
    initial = load_file(adapter / "adapter_model.safetensors")
    exported = load_file(job / "hf" / "step-5-adapter" / "adapter_model.safetensors")
    assert set(exported) == set(initial) == set(trained)
    assert normwise({k: exported[k] - initial[k] for k in initial},
                    {k: trained[k] - initial[k] for k in initial}) <= 1e-3
    # The PEFT folder loads on the base with no missing or unexpected adapter keys, and the
    # merged folder as a plain LlamaForCausalLM.
    model = peft.PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base),
                                           job / "hf" / "step-5-adapter")
    assert set(peft.utils.load_peft_weights(str(job / "hf" / "step-5-adapter"))) == set(
        peft.get_peft_model_state_dict(model))
    load_clean(job / "hf" / "step-5")


def test_qlora_runs_on_llama_and_its_merged_export_loads(bases, small_corpus, tmp_path):
    """The NF4 path is the decoder's (test_lora.py compares it with bitsandbytes): here, that
    every Llama projection is quantised and adapted and the dequantised merge loads."""
    from test_lora import train_titan

    job = tmp_path / "qlora"
    proc = run_titan(*train_titan(bases / "tiedFalse", job, small_corpus,
                                  "--lora.base_quantization", "nf4", backend="llama3",
                                  module="llama3", steps=2))
    assert "with its projections in NF4" in proc.stdout, proc.stdout
    assert "14 linear weights adapted" in proc.stdout, proc.stdout  # 7 projections x 2 layers
    load_clean(job / "hf" / "step-2")


# ---- eval / generate / convert on a LlamaForCausalLM folder -----------------------------------


@pytest.fixture(scope="module")
def llama_dir(bases):
    return bases / "tiedTrue"


def test_eval_matches_transformers(llama_dir, small_corpus, tokenizer_dir):
    out = run_titan("eval", "--model", llama_dir, "--data", small_corpus, "--seq-len", 32,
                    "--steps", 2)
    ours = json.loads(out.stdout.strip().splitlines()[-1])
    model = AutoModelForCausalLM.from_pretrained(llama_dir, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    total = 0.0
    with torch.no_grad():
        for w in packed_windows(small_corpus, tokenizer_dir, 32, 2):
            x = torch.tensor([w])
            total += torch.nn.functional.cross_entropy(model(x[:, :-1]).logits[0], x[0, 1:],
                                                       reduction="sum").item()
    assert ours["tokens"] == 64 and ours["loss"] == pytest.approx(total / 64, rel=1e-5)


def test_greedy_generate_matches_transformers(llama_dir, tokenizer_dir):
    prompt = "def fibonacci(n):"
    out = run_titan("generate", "--model", llama_dir, "--prompt", prompt, "--max-new-tokens", 10,
                    "--temperature", 0, "--print-ids")
    ours = json.loads(out.stdout.strip().splitlines()[-1])
    ids = torch.tensor([Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json")).encode(
        prompt).ids])
    model = AutoModelForCausalLM.from_pretrained(llama_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        ref = model.generate(ids, max_new_tokens=10, do_sample=False, eos_token_id=None,
                             pad_token_id=0)[0, ids.shape[1]:].tolist()
    assert ours == ref


def test_convert_to_a_checkpoint_and_back_keeps_every_tensor(llama_dir, tmp_path):
    ckpt = tmp_path / "ckpt" / "step-0"
    run_titan("convert", "--from", llama_dir, "--to", ckpt)
    assert json.loads((ckpt / "manifest.json").read_text()) is not None
    back = tmp_path / "back"
    run_titan("convert", "--from", ckpt, "--to", back)
    a, b = load_file(llama_dir / "model.safetensors"), load_file(back / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    load_clean(back)
