"""LoRA and QLoRA (docs/lora.md) against PEFT itself: the same initial adapter (read through
lora.initial_adapter_path), the same batches, torch's AdamW in a plain PyTorch loop over
PeftModel; then the exports, the frozen base, FSDP, resume and bad input."""
import json
import math
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from conftest import read_metrics, run_titan
from hf_models import make_hf_model, packed_windows
from launch import torchrun

peft = pytest.importorskip("peft")
from transformers import AutoModelForCausalLM  # noqa: E402

STEPS, BATCH, SEQ = 5, 2, 32
RANK, ALPHA = 4, 8
LINEARS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
ATTENTION = LINEARS[:4]
EXPERT_STACKS = ["mlp.experts.gate_up_proj", "mlp.experts.down_proj"]


@pytest.fixture(scope="module")
def bases(tmp_path_factory, tokenizer_dir):
    """Small random Qwen3 and Qwen3-MoE folders, saved with save_pretrained."""
    root = tmp_path_factory.mktemp("lora_bases")
    make_hf_model(root / "dense", moe=False, tokenizer_dir=tokenizer_dir, seed=3)
    make_hf_model(root / "moe", moe=True, tokenizer_dir=tokenizer_dir, seed=4)
    return root


def initial_adapter(base, out, targets, parameters=None, seed=1):
    """A PEFT adapter folder with random A and B (B is zero when PEFT initialises it, which
    would hide half of the gradients)."""
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    config = peft.LoraConfig(r=RANK, lora_alpha=ALPHA, target_modules=targets,
                             target_parameters=parameters, lora_dropout=0.0)
    model = peft.get_peft_model(model, config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.02)
    model.save_pretrained(out)
    return out


def train_titan(base, job, corpus, *extra, backend="qwen3", steps=STEPS, adapter=None,
                targets=None, module="qwen3"):
    args = ["train", "--module", module, "--config", f"{module}_debugmodel",
            "--model.name", backend,
            "--model.flavor", "auto", "--model.hf_assets_path", base,
            "--checkpoint.initial_load_path", base, "--checkpoint.initial_load_in_hf",
            "--model.converters", "lora", "--lora.rank", RANK, "--lora.alpha", ALPHA,
            "--training.steps", steps, "--training.seq_len", SEQ,
            "--training.local_batch_size", BATCH, "--training.dataset_path", corpus,
            "--job.dump_folder", job, "--lr_scheduler.warmup_steps", 0, "--optimizer.lr", 1e-3,
            "--checkpoint.last_save_in_hf"]
    if backend == "transformers":
        args += ["--model.attn_implementation", "eager"]
    if adapter is not None:
        args += ["--lora.initial_adapter_path", adapter]
    if targets is not None:
        args += ["--lora.target_modules", ",".join(targets)]
    return args + [str(a) for a in extra]


def peft_loop(base, adapter, windows, lrs, weight_decay=0.1, optimizer=torch.optim.AdamW):
    """PEFT's model trained by hand as titan trains: the mean token loss of each step's rows,
    the gradients clipped to norm 1, AdamW (betas 0.9, 0.95; or another `optimizer` class that
    takes torch's AdamW arguments) at titan's logged learning rates. Returns the losses and the
    adapter after the last step (PEFT's names)."""
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32,
                                                 attn_implementation="eager")
    model = peft.PeftModel.from_pretrained(model, adapter, is_trainable=True)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = optimizer(params, lr=lrs[0], betas=(0.9, 0.95), eps=1e-8, weight_decay=weight_decay)
    losses = []
    for step, lr in enumerate(lrs):
        for group in opt.param_groups:
            group["lr"] = lr
        batch = torch.tensor(windows[step * BATCH:(step + 1) * BATCH])
        logits = model(batch[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)),
                                                 batch[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses, peft.get_peft_model_state_dict(model)


def normwise(delta, reference):
    num = sum(float(((delta[k] - reference[k]) ** 2).sum()) for k in reference)
    den = sum(float((reference[k] ** 2).sum()) for k in reference)
    return math.sqrt(num / den)


CASES = {
    # name: (base, target_modules of PEFT, target_parameters, titan's lora.target_modules)
    "dense": ("dense", LINEARS, None, None),
    "moe_attention": ("moe", ATTENTION, None, ATTENTION),
    "moe_expert_stacks": ("moe", ATTENTION, EXPERT_STACKS,
                          ATTENTION + ["*.experts.gate_up_proj", "*.experts.down_proj"]),
    "transformers_backend": ("dense", LINEARS, None, None),
}


@pytest.mark.parametrize("case", list(CASES))
def test_training_matches_peft(case, bases, small_corpus, tokenizer_dir, tmp_path):
    base_name, targets, parameters, titan_targets = CASES[case]
    base = bases / base_name
    adapter = initial_adapter(base, tmp_path / "initial", targets, parameters)
    job = tmp_path / "job"
    backend = "transformers" if case == "transformers_backend" else "qwen3"
    run_titan(*train_titan(base, job, small_corpus, "--checkpoint.enable", backend=backend,
                           adapter=adapter, targets=titan_targets))
    metrics = read_metrics(job)
    windows = packed_windows(small_corpus, tokenizer_dir, SEQ, STEPS * BATCH)
    losses, trained = peft_loop(base, adapter, windows, [m["lr"] for m in metrics])
    for ours, theirs in zip([m["loss"] for m in metrics], losses):
        assert abs(ours - theirs) <= 1e-5, ([m["loss"] for m in metrics], losses)
    # The adapter's update over the 5 steps, normwise.
    initial = load_file(adapter / "adapter_model.safetensors")
    exported = load_file(job / "hf" / f"step-{STEPS}-adapter" / "adapter_model.safetensors")
    assert set(exported) == set(initial) == set(trained)
    ours = {k: exported[k] - initial[k] for k in initial}
    theirs = {k: trained[k] - initial[k] for k in initial}
    assert normwise(ours, theirs) <= 1e-3
    # Only adapter tensors were trained and checkpointed.
    ckpt = job / "checkpoint" / f"step-{STEPS}"
    model_part = load_file(ckpt / "model.safetensors")
    assert model_part and all(".lora_A." in k or ".lora_B." in k for k in model_part)
    assert len(model_part) == len(initial)
    optimizer_part = load_file(ckpt / "optimizer.safetensors")
    assert all(".lora_A." in k or ".lora_B." in k for k in optimizer_part)


def test_exports_load_and_give_titans_logits(bases, small_corpus, tmp_path):
    """The PEFT folder (PeftModel, no missing or unexpected keys) and the merged folder
    (AutoModelForCausalLM) give the logits of titan's own forward of the trained checkpoint; the
    base weights are the base's, bit for bit, where no adapter is merged in."""
    base = bases / "dense"
    job = tmp_path / "job"
    run_titan(*train_titan(base, job, small_corpus, "--checkpoint.enable",
                           "--optimizer.lr", 5e-3))
    tokens = list(range(100, 120))
    out = tmp_path / "titan.safetensors"
    run_titan("forward", "--model", job / "checkpoint" / f"step-{STEPS}", "--tokens",
              ",".join(map(str, tokens)), "--output", out)
    titan_logits = load_file(out)["logits"]
    ids = torch.tensor([tokens])

    adapter_dir = job / "hf" / f"step-{STEPS}-adapter"
    config = json.loads((adapter_dir / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and config["r"] == RANK and config["lora_alpha"] == ALPHA
    assert sorted(config["target_modules"]) == sorted(LINEARS)
    assert config["base_model_name_or_path"] == str(base.resolve())
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32,
                                                 attn_implementation="eager")
    model = peft.PeftModel.from_pretrained(model, adapter_dir).eval()
    loaded = peft.utils.load_peft_weights(str(adapter_dir))
    expected = peft.get_peft_model_state_dict(model)
    assert set(loaded) == set(expected)  # no missing or unexpected keys
    with torch.no_grad():
        peft_logits = model(ids).logits[0]
    assert (peft_logits - titan_logits).abs().max() <= 1e-5 * titan_logits.abs().max()

    merged_dir = job / "hf" / f"step-{STEPS}"
    merged = AutoModelForCausalLM.from_pretrained(merged_dir, dtype=torch.float32,
                                                  attn_implementation="eager").eval()
    with torch.no_grad():
        merged_logits = merged(ids).logits[0]
    assert (merged_logits - titan_logits).abs().max() <= 1e-5 * titan_logits.abs().max()
    base_weights = load_file(base / "model.safetensors")
    merged_weights = load_file(merged_dir / "model.safetensors")
    assert set(merged_weights) == set(base_weights)
    adapter = load_file(adapter_dir / "adapter_model.safetensors")
    for name, w in base_weights.items():
        module = name[: -len(".weight")]
        a = adapter.get(f"base_model.model.{module}.lora_A.weight")
        if a is None:
            assert torch.equal(merged_weights[name], w), name
        else:
            b = adapter[f"base_model.model.{module}.lora_B.weight"]
            torch.testing.assert_close(merged_weights[name] - w, b @ a * (ALPHA / RANK),
                                       rtol=0, atol=1e-6)


def test_titan_convert_writes_both_exports_of_a_checkpoint(bases, small_corpus, tmp_path):
    base = bases / "dense"
    job = tmp_path / "job"
    run_titan(*train_titan(base, job, small_corpus, "--checkpoint.enable", steps=2))
    out = tmp_path / "converted"
    run_titan("convert", "--from", job / "checkpoint" / "step-2", "--to", out)
    for name in ("adapter_model.safetensors", "adapter_config.json"):
        assert (tmp_path / "converted-adapter" / name).read_bytes() == (
            job / "hf" / "step-2-adapter" / name).read_bytes()
    assert (out / "model.safetensors").read_bytes() == (
        job / "hf" / "step-2" / "model.safetensors").read_bytes()


@pytest.mark.parametrize("layout", ["fsdp2", "ddp2"])
def test_data_parallel_matches_one_process_and_its_checkpoint_resumes_on_one(
        layout, bases, small_corpus, tmp_path):
    """FSDP 2 (frozen base shards gathered, never reduced) and DDP 2 (only the adapters'
    gradients all-reduced) give the one process's losses; their checkpoint resumes on one."""
    base = bases / "dense"
    single = tmp_path / "single"
    run_titan(*train_titan(base, single, small_corpus, "--training.global_batch_size", BATCH))
    one = [m["loss"] for m in read_metrics(single)]
    split = tmp_path / layout
    degrees = (["--parallelism.data_parallel_shard_degree", 2] if layout == "fsdp2" else
               ["--parallelism.data_parallel_replicate_degree", 2,
                "--parallelism.data_parallel_shard_degree", 1])
    torchrun(2, train_titan(base, split, small_corpus, "--training.local_batch_size", 1,
                            "--checkpoint.enable", "--checkpoint.interval", 3, *degrees))
    two = [m["loss"] for m in read_metrics(split)]
    assert len(two) == STEPS
    for a, b in zip(two, one):
        assert abs(a - b) <= 1e-5 * abs(b), (two, one)
    # The 2-rank checkpoint of step 3 resumes in one process to the uninterrupted losses.
    resumed = tmp_path / "resumed"
    shutil.copytree(split / "checkpoint" / "step-3", resumed / "checkpoint" / "step-3")
    run_titan(*train_titan(base, resumed, small_corpus, "--checkpoint.enable"))
    after = [m["loss"] for m in read_metrics(resumed)]
    assert len(after) == 2
    for a, b in zip(after, one[3:]):
        assert abs(a - b) <= 1e-5 * abs(b), (after, one)


def test_activation_checkpointing_keeps_dropout_masks(bases, small_corpus, tmp_path):
    base = bases / "dense"
    runs = {}
    for mode in ("none", "full"):
        job = tmp_path / mode
        run_titan(*train_titan(base, job, small_corpus, "--lora.dropout", 0.1,
                               "--activation_checkpoint.mode", mode, steps=3))
        runs[mode] = [(m["loss"], m["grad_norm"]) for m in read_metrics(job)]
    assert runs["full"] == runs["none"]
    # and the dropout is on: without it the curve differs
    job = tmp_path / "nodrop"
    run_titan(*train_titan(base, job, small_corpus, steps=3))
    assert [(m["loss"], m["grad_norm"]) for m in read_metrics(job)] != runs["none"]


def dequantised_base(base, out):
    """`base` with every projection weight replaced by its NF4 round trip (bitsandbytes'
    quantize_4bit and its reference dequantisation), as QLoRA computes with it."""
    functional = pytest.importorskip("bitsandbytes.functional")
    from bitsandbytes.backends.default.ops import _dequantize_4bit_compute
    from bitsandbytes.backends.utils import _get_4bit_code

    shutil.copytree(base, out)
    weights = load_file(base / "model.safetensors")
    code = _get_4bit_code("nf4", torch.device("cpu"))
    for name, w in weights.items():
        if name.endswith(".weight") and any(f".{p}." in name for p in LINEARS):
            packed, state = functional.quantize_4bit(w, blocksize=64, quant_type="nf4")
            weights[name] = _dequantize_4bit_compute(packed.reshape(-1), state.absmax, code, 64,
                                                     w.shape, torch.float32)
    save_file(weights, out / "model.safetensors", metadata={"format": "pt"})
    return out


def test_qlora_trains_as_lora_on_the_dequantised_base(bases, small_corpus, tmp_path):
    base = bases / "dense"
    adapter = initial_adapter(base, tmp_path / "initial", LINEARS)
    qlora = tmp_path / "qlora"
    proc = run_titan(*train_titan(base, qlora, small_corpus, "--lora.base_quantization", "nf4",
                                  "--lora.double_quantization", "false", adapter=adapter))
    assert "with its projections in NF4" in proc.stdout
    reference = tmp_path / "lora_on_dequantised"
    run_titan(*train_titan(dequantised_base(base, tmp_path / "deq"), reference, small_corpus,
                           adapter=adapter))
    plain = tmp_path / "lora"
    run_titan(*train_titan(base, plain, small_corpus, adapter=adapter))
    q = [m["loss"] for m in read_metrics(qlora)]
    d = [m["loss"] for m in read_metrics(reference)]
    p = [m["loss"] for m in read_metrics(plain)]
    # QLoRA computes with exactly the dequantised weights ...
    for a, b in zip(q, d):
        assert abs(a - b) <= 1e-5, (q, d)
    # ... which are not the base's: the quantisation error moves the losses, visibly but little.
    gap = max(abs(a - b) for a, b in zip(q, p))
    assert 1e-5 < gap < 0.05, (q, p)
    # The merged export dequantises: it loads and matches the LoRA-on-dequantised export.
    merged = load_file(qlora / "hf" / f"step-{STEPS}" / "model.safetensors")
    other = load_file(reference / "hf" / f"step-{STEPS}" / "model.safetensors")
    assert set(merged) == set(other)
    for name in merged:
        torch.testing.assert_close(merged[name], other[name], rtol=0, atol=1e-5)


def test_qlora_merged_export_is_the_dequantised_base_plus_the_adapters_bit_for_bit(
        bases, small_corpus, tmp_path):
    """The merged export dequantises each NF4 weight as it writes it: every projection is
    bitsandbytes' dequantisation of the base weight's NF4 plus B A alpha/r from the PEFT export,
    bit for bit (float32); every other tensor is the base's."""
    torch.set_num_threads(1)  # titan's runs use one thread: the same float32 sums
    base = bases / "dense"
    job = tmp_path / "qlora"
    run_titan(*train_titan(base, job, small_corpus, "--lora.base_quantization", "nf4",
                           "--lora.double_quantization", "false", "--lora.export_format",
                           "both"))
    merged = load_file(job / "hf" / f"step-{STEPS}" / "model.safetensors")
    adapter = load_file(job / "hf" / f"step-{STEPS}-adapter" / "adapter_model.safetensors")
    functional = pytest.importorskip("bitsandbytes.functional")
    from bitsandbytes.backends.default.ops import _dequantize_4bit_compute
    from bitsandbytes.backends.utils import _get_4bit_code

    code = _get_4bit_code("nf4", torch.device("cpu"))
    weights = load_file(base / "model.safetensors")
    assert set(merged) == set(weights)
    projections = 0
    for name, w in weights.items():
        module = name[:-len(".weight")]
        a_key = f"base_model.model.{module}.lora_A.weight"
        if a_key not in adapter:
            assert torch.equal(merged[name], w), name
            continue
        packed, state = functional.quantize_4bit(w, blocksize=64, quant_type="nf4",
                                                 compress_statistics=False)
        dequantised = _dequantize_4bit_compute(packed.reshape(-1), state.absmax, code, 64,
                                               w.shape, torch.float32)
        a = adapter[a_key]
        b = adapter[f"base_model.model.{module}.lora_B.weight"]
        expected = dequantised + torch.mm(b, a) * (ALPHA / RANK)
        assert torch.equal(merged[name], expected), (name, (merged[name] - expected).abs().max())
        projections += 1
    assert projections == 2 * len(LINEARS)


def error_of(proc):
    assert proc.returncode != 0, proc.stdout[-2000:]
    return proc.stderr


@pytest.mark.parametrize("extra,message", [
    (["--lora.target_modules", "q_proj,*.nothing_here"],
     'lora.target_modules entry "*.nothing_here" matches no module'),
    (["--lora.rank", "0"], "lora.rank = 0: must be >= 1"),
    (["--lora.rank", "-2"], "lora.rank = -2: must be >= 1"),
    (["--lora.base_quantization", "nf4", "--lora.target_modules", "q_proj,*.experts.down_proj"],
     "quantises linear weights only, but target model.layers.0.mlp.experts.down_proj is an "
     "expert stack"),
    (["--model.converters", "lora,float8"],
     'model.converters = "float8": titan has no float8, MX or NVFP4 training'),
])
def test_bad_settings_are_one_clear_error(extra, message, bases, small_corpus, tmp_path):
    proc = run_titan(*train_titan(bases / "moe", tmp_path / "job", small_corpus, *extra,
                                  steps=1), check=False)
    assert message in error_of(proc)


def test_an_adapter_for_another_base_is_refused_naming_the_tensor(bases, small_corpus,
                                                                  tokenizer_dir, tmp_path):
    from transformers import Qwen3ForCausalLM
    other = tmp_path / "wider"
    config = AutoModelForCausalLM.from_pretrained(bases / "dense").config
    config.intermediate_size = 128
    Qwen3ForCausalLM(config).save_pretrained(other)
    adapter = initial_adapter(other, tmp_path / "initial", ["gate_proj"])
    proc = run_titan(*train_titan(bases / "dense", tmp_path / "job", small_corpus, steps=1,
                                  adapter=adapter, targets=["gate_proj"]), check=False)
    err = error_of(proc)
    assert "base_model.model.model.layers.0.mlp.gate_proj.lora_B.weight has shape [128, 4]" in err
    assert "needs [96, 4]" in err


def test_resume_on_another_base_is_refused_naming_it(bases, small_corpus, tmp_path):
    job = tmp_path / "job"
    run_titan(*train_titan(bases / "dense", job, small_corpus, "--checkpoint.enable", steps=2))
    other = tmp_path / "other"
    shutil.copytree(bases / "dense", other)
    weights = load_file(other / "model.safetensors")
    weights["model.norm.weight"] = weights["model.norm.weight"] * 2
    save_file(weights, other / "model.safetensors", metadata={"format": "pt"})
    proc = run_titan(*train_titan(other, job, small_corpus, "--checkpoint.enable", steps=3),
                     check=False)
    err = error_of(proc)
    assert ("this LoRA checkpoint trained adapters on the base " + str((bases / "dense").resolve())
            in err)
    assert f"but this run's base is {other.resolve()}" in err


@pytest.mark.parametrize("layout", ["tp2_sequence_parallel", "ep2_fsdp2_expert_stacks"])
def test_adapters_follow_tensor_and_expert_parallelism(layout, bases, small_corpus, tmp_path):
    """Under TP the adapter of a column-parallel weight splits B on its rows (A whole), of a
    row-parallel one A on its columns (B whole); under EP an expert stack's adapter splits with
    its experts. The curve is the one process's."""
    if layout.startswith("tp2"):
        base, targets, extra = bases / "dense", None, [
            "--parallelism.tensor_parallel_degree", 2,
            "--parallelism.data_parallel_shard_degree", 1]
    else:
        base = bases / "moe"
        targets = ATTENTION + ["*.experts.gate_up_proj", "*.experts.down_proj"]
        extra = ["--parallelism.expert_parallel_degree", 2,
                 "--parallelism.data_parallel_shard_degree", 2,
                 "--training.local_batch_size", 1]
    single = tmp_path / "single"
    run_titan(*train_titan(base, single, small_corpus, targets=targets, steps=3))
    split = tmp_path / "split"
    torchrun(2, train_titan(base, split, small_corpus, *extra, targets=targets, steps=3))
    one = [(m["loss"], m["grad_norm"]) for m in read_metrics(single)]
    two = [(m["loss"], m["grad_norm"]) for m in read_metrics(split)]
    assert len(two) == 3
    for (a, ga), (b, gb) in zip(two, one):
        assert abs(a - b) <= 1e-5 * abs(b) and abs(ga - gb) <= 1e-5 * abs(gb), (two, one)
    # The exported adapters are the one process's (normwise: AdamW turns the rounding of a
    # gradient summed over ranks into visible changes of the few elements whose gradient is
    # next to nothing).
    x = load_file(single / "hf" / "step-3-adapter" / "adapter_model.safetensors")
    y = load_file(split / "hf" / "step-3-adapter" / "adapter_model.safetensors")
    assert set(x) == set(y)
    assert normwise(y, x) <= 1e-4


def test_qlora_on_the_transformers_backend_trains_as_on_the_native_model(bases, small_corpus,
                                                                        tmp_path):
    """The backend's frozen nn.Linear weights in NF4, read through titan's nf4_linear from the
    modules' forward, under PEFT's LoRA layers: the native model's QLoRA curve and export."""
    base = bases / "dense"
    adapter = initial_adapter(base, tmp_path / "initial", LINEARS)
    runs = {}
    for backend in ("qwen3", "transformers"):
        job = tmp_path / backend
        proc = run_titan(*train_titan(base, job, small_corpus, "--lora.base_quantization", "nf4",
                                      backend=backend, adapter=adapter, steps=3))
        assert "with its projections in NF4" in proc.stdout
        runs[backend] = ([m["loss"] for m in read_metrics(job)],
                         load_file(job / "hf" / "step-3" / "model.safetensors"))
    (native, native_export), (hf, hf_export) = runs["qwen3"], runs["transformers"]
    for a, b in zip(hf, native):
        assert abs(a - b) <= 1e-5, (hf, native)
    assert set(hf_export) == set(native_export)
    for name in native_export:
        torch.testing.assert_close(hf_export[name], native_export[name], rtol=0, atol=1e-6)


def test_custom_kernels_path_trains_the_same_adapters(bases, small_corpus, tmp_path):
    """The third path: the fused CPU kernels (moe_experts on the adapted expert stacks, rms_norm,
    cross_entropy) through the override registry, against reference everywhere."""
    base = bases / "moe"
    targets = ATTENTION + ["*.experts.gate_up_proj", "*.experts.down_proj"]
    runs = {}
    for path, imports in (("reference", "rms_norm=reference,moe_experts=reference,"
                                        "cross_entropy=reference"),
                          ("fused", "rms_norm=fused,moe_experts=fused,cross_entropy=fused")):
        job = tmp_path / path
        proc = run_titan(*train_titan(base, job, small_corpus, "--override.imports", imports,
                                      targets=targets, steps=3))
        if path == "fused":
            assert "[override] moe_experts: layers.0.moe, layers.1.moe -> fused" in proc.stdout
        runs[path] = [(m["loss"], m["grad_norm"]) for m in read_metrics(job)]
    for (a, ga), (b, gb) in zip(runs["fused"], runs["reference"]):
        assert abs(a - b) <= 1e-5 * abs(b) and abs(ga - gb) <= 1e-4 * abs(gb), runs


def test_sft_lora_config_function_trains_assistant_turns(tmp_path):
    """qwen3_debugmodel_sft_lora: chat records, document masking, adapters only."""
    job = tmp_path / "sft"
    proc = run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel_sft_lora",
                     "--training.steps", 2, "--training.seq_len", 64,
                     "--training.local_batch_size", 2, "--job.dump_folder", job,
                     "--checkpoint.enable")
    assert "LoRA rank 8, alpha 16.00: 28 linear weights adapted" in proc.stdout
    assert len(read_metrics(job)) == 2
    model_part = load_file(job / "checkpoint" / "step-2" / "model.safetensors")
    assert model_part and all(".lora_A." in k or ".lora_B." in k for k in model_part)


def test_frozen_base_is_held_in_the_compute_dtype(bases, small_corpus, tmp_path):
    """No float32 master copy of what does not train: under bf16 compute the base takes half."""
    import re
    sizes = {}
    for dtype in ("float32", "bfloat16"):
        proc = run_titan(*train_titan(bases / "dense", tmp_path / dtype, small_corpus,
                                      "--training.mixed_precision_param", dtype,
                                      "--training.seq_len", 16, steps=1))
        sizes[dtype] = float(re.search(r"the frozen base takes ([0-9.]+) MiB", proc.stdout)[1])
        assert math.isfinite(read_metrics(tmp_path / dtype)[0]["loss"])
    assert abs(sizes["bfloat16"] - sizes["float32"] / 2) <= 0.01 * sizes["float32"], sizes
