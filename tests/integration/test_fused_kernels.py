"""The third training path: the native Qwen3-MoE with the fused kernels attached through the
override registry (config titan_kernels_qwen3_debugmodel). Its losses equal the reference path's
for 10 steps, the log names every replacement, and a bf16 run stays within bf16 tolerance."""
import pytest

from conftest import read_metrics, run_titan

STEPS = 10


def train(tmp_path, name, corpus, tokenizer_dir, config, *extra, steps=STEPS, batch=2, seq_len=64):
    dump = tmp_path / name
    proc = run_titan(
        "train", "--module", "qwen3", "--config", config,
        "--training.local_batch_size", str(batch), "--training.seq_len", str(seq_len),
        "--training.steps", str(steps), "--metrics.log_freq", "1",
        "--job.dump_folder", dump, "--training.dataset_path", corpus,
        "--model.hf_assets_path", tokenizer_dir, *extra)
    return proc, [m["loss"] for m in read_metrics(dump)]


def test_kernels_path_trains_to_the_reference_losses(tmp_path, small_corpus, tokenizer_dir):
    _, reference = train(tmp_path, "reference", small_corpus, tokenizer_dir,
                         "qwen3_debugmodel_moe")
    proc, fused = train(tmp_path, "fused", small_corpus, tokenizer_dir,
                        "titan_kernels_qwen3_debugmodel")
    assert len(reference) == len(fused) == STEPS
    for step, (a, b) in enumerate(zip(reference, fused), 1):
        assert abs(a - b) <= 1e-5 * abs(a), f"step {step}: reference {a}, fused {b}"
    assert reference[-1] < reference[0]  # it trains
    log = [line for line in proc.stdout.splitlines() if line.startswith("[override]")]
    assert "[override] moe_experts: layers.{0..3}.moe -> fused" in log, proc.stdout
    assert any(line.startswith("[override] rms_norm: layers.{0..3}.attention_norm")
               and line.endswith("norm -> fused") for line in log), log
    # rope has a CUDA kernel only: on the CPU it falls back, and says so.
    assert "'rope=fused' (override.fallback)" in proc.stderr + proc.stdout


def test_kernels_path_in_bfloat16_stays_within_bf16_tolerance(tmp_path, small_corpus,
                                                              tokenizer_dir):
    # The tolerance is reference's own bf16 error: how far its bf16 losses are from its fp32
    # ones (at the worst step), with a margin.
    # Few, short rows: CPUs without native bf16 (no AVX512-BF16/AMX) run bf16 matmuls slowly.
    bf16 = ("--training.mixed_precision_param", "bfloat16")
    size = dict(steps=5, batch=1, seq_len=24)
    _, exact = train(tmp_path, "fp32", small_corpus, tokenizer_dir, "qwen3_debugmodel_moe", **size)
    _, reference = train(tmp_path, "reference", small_corpus, tokenizer_dir,
                         "qwen3_debugmodel_moe", *bf16, **size)
    _, fused = train(tmp_path, "fused", small_corpus, tokenizer_dir,
                     "titan_kernels_qwen3_debugmodel", *bf16, **size)
    assert reference != exact  # the bf16 runs really compute in bf16
    tolerance = 3 * max(abs(a - b) for a, b in zip(reference, exact)) + 1e-4
    for step, (a, b) in enumerate(zip(exact, fused), 1):
        assert abs(a - b) <= tolerance, f"step {step}: fp32 reference {a}, bf16 fused {b}"


@pytest.mark.parametrize("imports", ["moe_experts=fused@layers.9.*", "rope=fused"])
def test_kernels_path_errors_name_the_entry(tmp_path, small_corpus, tokenizer_dir, imports):
    # A glob that matches nothing; a CUDA-only kernel on the CPU without fallback.
    proc = run_titan(
        "train", "--module", "qwen3", "--config", "qwen3_debugmodel_moe",
        "--training.steps", "1", "--job.dump_folder", tmp_path / "x",
        "--training.dataset_path", small_corpus, "--model.hf_assets_path", tokenizer_dir,
        "--override.imports", imports, check=False)
    assert proc.returncode != 0
    assert f"'{imports}'" in proc.stderr, proc.stderr


def test_kernels_debugmodel_takes_the_model_from_an_hf_folder(tmp_path, small_corpus,
                                                               tokenizer_dir):
    from hf_models import make_hf_model
    hf = tmp_path / "hf"
    make_hf_model(hf, moe=True, tokenizer_dir=tokenizer_dir)
    runs = {}
    for config, name in [("qwen3_debugmodel_moe", "reference"),
                         ("titan_kernels_qwen3_debugmodel", "fused")]:
        proc, runs[name] = train(tmp_path, name, small_corpus, hf, config,
                                 "--model.flavor", "auto", "--checkpoint.initial_load_in_hf",
                                 "true", "--checkpoint.initial_load_path", hf)
        # Two layers of 4 experts (the HF folder's sizes), not the debug flavor's four.
        assert "[override] moe_experts: layers.0.moe, layers.1.moe -> fused" in proc.stdout \
            or name == "reference", proc.stdout
    for step, (a, b) in enumerate(zip(runs["reference"], runs["fused"]), 1):
        assert abs(a - b) <= 1e-5 * abs(a), f"step {step}: reference {a}, fused {b}"
