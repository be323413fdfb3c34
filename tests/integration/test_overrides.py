"""Kernel overrides through `titan train`: naming each op's default changes nothing, a
kernel library built by the test suite is used exactly where its glob says and trains to the
same losses, and bad entries or libraries fail with one clear error."""
import re

import pytest

from conftest import REPO, read_metrics, run_titan

PLUGINS = REPO / "build" / "plugins"
COUNTING = PLUGINS / "libtitan_test_counting_kernels.so"
STALE = PLUGINS / "libtitan_test_stale_abi_kernels.so"
OPS = ["rms_norm", "rope", "attention", "swiglu", "moe_router", "moe_experts", "cross_entropy"]
STEPS = 3


def train(tmp_path, name, corpus, tokenizer_dir, *extra, config="qwen3_debugmodel", check=True):
    dump = tmp_path / name
    proc = run_titan(
        "train", "--module", "qwen3", "--config", config,
        "--training.local_batch_size", "1", "--training.seq_len", "32",
        "--training.steps", str(STEPS), "--metrics.log_freq", "1",
        "--job.dump_folder", dump, "--training.dataset_path", corpus,
        "--model.hf_assets_path", tokenizer_dir, *extra, check=check)
    return proc, dump


def losses(dump):
    return [m["loss"] for m in read_metrics(dump)]


@pytest.mark.parametrize("config", ["qwen3_debugmodel", "qwen3_debugmodel_moe"])
def test_naming_the_defaults_is_bit_identical_to_no_overrides(tmp_path, small_corpus,
                                                              tokenizer_dir, config):
    # The defaults on the CPU: reference for every op but cross_entropy, whose fused kernel is
    # the default there (docs/kernels.md).
    _, plain = train(tmp_path, "plain", small_corpus, tokenizer_dir, config=config)
    # swiglu has no call site in an all-MoE model, moe_* none in a dense one: name only those
    # the model has (an entry that matches nothing is an error, tested below).
    ops = [op for op in OPS if not (config.endswith("moe") and op == "swiglu")
           and not (not config.endswith("moe") and op.startswith("moe_"))]
    # List values on the command line are comma-separated.
    imports = ",".join(f"{op}={'fused' if op == 'cross_entropy' else 'reference'}" for op in ops)
    proc, explicit = train(tmp_path, "explicit", small_corpus, tokenizer_dir,
                           "--override.imports", imports, config=config)
    assert losses(explicit) == losses(plain)
    assert len(losses(plain)) == STEPS
    # Only what an entry claims for another implementation than reference is logged.
    log = [line for line in proc.stdout.splitlines() if line.startswith("[override]")]
    assert log == ["[override] cross_entropy: output -> fused"], proc.stdout


def test_reference_cross_entropy_is_still_there_by_name(tmp_path, small_corpus, tokenizer_dir):
    fused = losses(train(tmp_path, "fused", small_corpus, tokenizer_dir)[1])
    proc, dump = train(tmp_path, "reference", small_corpus, tokenizer_dir,
                       "--override.imports", "cross_entropy=reference")
    reference = losses(dump)
    assert "[override]" not in proc.stdout  # reference is never logged
    assert len(fused) == len(reference) == STEPS
    for x, y in zip(fused, reference):
        assert abs(x - y) <= 1e-5 * abs(y), (fused, reference)


def test_plugin_is_used_on_the_layers_its_glob_names(tmp_path, small_corpus, tokenizer_dir):
    assert COUNTING.exists(), f"{COUNTING} not built"
    _, plain = train(tmp_path, "plain", small_corpus, tokenizer_dir)
    proc, plugged = train(tmp_path, "plugged", small_corpus, tokenizer_dir,
                          "--override.libraries", COUNTING,
                          "--override.imports", "rms_norm=counting@layers.1.*")
    log = [line for line in proc.stdout.splitlines() if line.startswith("[override]")]
    assert log == ["[override] rms_norm: layers.1.attention_norm, layers.1.attention.q_norm, "
                   "layers.1.attention.k_norm, layers.1.ffn_norm -> counting"], proc.stdout
    # Four rms_norm call sites in layer 1, one forward per step; all 17 sites would give 17.
    calls = re.search(r"\[counting_rms_norm\] calls=(\d+)", proc.stderr)
    assert calls, proc.stderr
    assert int(calls.group(1)) == 4 * STEPS
    a, b = losses(plain), losses(plugged)
    assert len(a) == len(b) == STEPS
    for x, y in zip(a, b):
        assert abs(x - y) <= 1e-6 * abs(x), (a, b)


def test_configs_print_shows_the_resolved_table(tmp_path):
    assert COUNTING.exists()
    proc = run_titan("configs", "--module", "qwen3", "--config", "qwen3_debugmodel_moe",
                     "--print", "--override.libraries", COUNTING,
                     "--override.imports",
                     "rms_norm=counting@layers.[13].*,moe_experts=reference@layers.2.moe")
    table = [line for line in proc.stdout.splitlines() if line.startswith("#   ")]
    assert "#   rms_norm: layers.1.attention_norm, layers.1.attention.q_norm, " \
           "layers.1.attention.k_norm, layers.1.ffn_norm, layers.3.attention_norm, " \
           "layers.3.attention.q_norm, layers.3.attention.k_norm, layers.3.ffn_norm -> counting" \
           in table, table
    assert any(line.startswith("#   moe_experts: layers.{0..3}.moe -> reference")
               for line in table), table
    assert "#   cross_entropy: output -> fused" in table  # the default on the CPU


def test_stale_plugin_is_refused(tmp_path, small_corpus, tokenizer_dir):
    assert STALE.exists()
    proc, dump = train(tmp_path, "stale", small_corpus, tokenizer_dir,
                       "--override.libraries", STALE, check=False)
    assert proc.returncode != 0
    assert "ABI version 0" in proc.stderr and str(STALE) in proc.stderr, proc.stderr
    assert "register function called" not in proc.stderr
    assert not (dump / "metrics.jsonl").exists()


def test_unsupported_device_is_an_error_or_falls_back(tmp_path, small_corpus, tokenizer_dir):
    proc, _ = train(tmp_path, "strict", small_corpus, tokenizer_dir,
                    "--override.libraries", COUNTING,
                    "--override.imports", "rms_norm=cuda_only", check=False)
    assert proc.returncode != 0
    err = proc.stderr
    assert "cuda_only" in err and "cpu" in err and "float32" in err and "fallback" in err, err
    _, plain = train(tmp_path, "plain", small_corpus, tokenizer_dir)
    proc, lenient = train(tmp_path, "lenient", small_corpus, tokenizer_dir,
                          "--override.libraries", COUNTING,
                          "--override.imports", "rms_norm=cuda_only", "--override.fallback")
    assert "warning" in proc.stderr and "cuda_only" in proc.stderr
    assert losses(lenient) == losses(plain)


@pytest.mark.parametrize("entry, expected", [
    ("layernorm=reference", "unknown op 'layernorm'"),
    ("rms_norm=fast", "unknown rms_norm implementation 'fast'"),
    ("rms_norm", "expected OP=IMPL"),
    ("moe_experts=reference", "matches no call site of moe_experts"),
    ("rms_norm=reference@layers.9.*", "matches no call site of rms_norm"),
])
def test_bad_entries_fail_cleanly(tmp_path, small_corpus, tokenizer_dir, entry, expected):
    proc, dump = train(tmp_path, "bad", small_corpus, tokenizer_dir,
                       "--override.imports", entry, check=False)
    assert proc.returncode != 0
    assert expected in proc.stderr, proc.stderr
    assert entry in proc.stderr
    assert proc.stderr.count("\n") <= 2, proc.stderr


def test_conflicting_entries_name_both(tmp_path, small_corpus, tokenizer_dir):
    proc, _ = train(tmp_path, "conflict", small_corpus, tokenizer_dir,
                    "--override.libraries", COUNTING,
                    "--override.imports", "rms_norm=counting,rms_norm=reference@layers.0.*",
                    check=False)
    assert proc.returncode != 0
    assert "'rms_norm=counting'" in proc.stderr and "'rms_norm=reference@layers.0.*'" in \
        proc.stderr, proc.stderr


def test_help_describes_the_override_section(titan_bin):
    train_help = run_titan("train", "--help").stdout
    for text in ("--override.imports", "--override.libraries", "--override.fallback",
                 "moe_experts", "reference"):
        assert text in train_help, text
    assert "override table" in run_titan("configs", "--help").stdout
