"""`titan configs`: listing the config functions, printing resolved configs as TOML that
Python's own TOML reader (tomllib) accepts and that reads back as a --config-file, and clean
errors naming the key."""
import re
import tomllib

import pytest

from conftest import run_titan


def print_config(*args, check=True):
    return run_titan("configs", *args, "--print", check=check)


def listed_configs():
    out = run_titan("configs", "--module", "qwen3").stdout
    return re.findall(r"^  (qwen3\w+)\s", out, flags=re.MULTILINE)


def test_lists_modules_and_functions_with_descriptions(titan_bin):
    out = run_titan("configs").stdout
    assert "module qwen3:" in out
    for name in ["qwen3_debugmodel", "qwen3_debugmodel_moe", "qwen3_0_6b", "qwen3_235b_a22b",
                 "qwen3_0_6b_finetune", "qwen3_debugmodel_default_job"]:
        line = next(l for l in out.splitlines() if l.split()[:1] == [name])
        assert len(line.split()) > 1, f"{name} has no description: {line!r}"
    assert set(listed_configs()) <= set(re.findall(r"^  (\w+)\s", out, flags=re.MULTILINE))


def test_prints_toml_that_tomllib_reads_with_the_overrides(titan_bin, tmp_path):
    out = print_config("--module", "qwen3", "--config", "qwen3_debugmodel",
                       "--training.steps", "7", "--checkpoint.enable",
                       "--optimizer.betas", "0.8,0.99", "--optimizer.lr=3e-5",
                       "--job.description", 'say "hi"\\ #1').stdout
    parsed = tomllib.loads(out)
    assert parsed["training"]["steps"] == 7
    assert parsed["checkpoint"]["enable"] is True
    assert parsed["optimizer"]["betas"] == [0.8, 0.99]
    assert parsed["optimizer"]["lr"] == 3e-5
    assert parsed["job"]["description"] == 'say "hi"\\ #1'
    assert parsed["model"]["flavor"] == "debugmodel"
    assert list(parsed)[:4] == ["job", "model", "lora", "training"]


def test_printed_config_reads_back_as_a_config_file(titan_bin, tmp_path):
    first = print_config("--module", "qwen3", "--config", "qwen3_debugmodel_moe",
                         "--training.seq_len", "96", "--lr_scheduler.decay_type", "cosine",
                         "--optimizer.param_groups", "*.bias=0,*=0.1").stdout
    job = tmp_path / "job.toml"
    job.write_text(first)
    # A different config function underneath: the file sets every key, so it wins entirely.
    second = print_config("--module", "qwen3", "--config", "qwen3_8b",
                          "--config-file", job).stdout
    body = lambda text: [l for l in text.splitlines() if not l.startswith("#")]
    assert body(second) == body(first)
    assert tomllib.loads(second) == tomllib.loads(first)


def test_file_then_cli_overrides_in_order(titan_bin, tmp_path):
    job = tmp_path / "job.toml"
    job.write_text("[training]\nsteps = 77\nseq_len = 64\n")
    parsed = tomllib.loads(print_config("--module", "qwen3", "--config", "qwen3_debugmodel",
                                        "--config-file", job, "--training.steps", "5").stdout)
    assert parsed["training"]["steps"] == 5
    assert parsed["training"]["seq_len"] == 64


def test_every_config_function_prints(titan_bin):
    names = listed_configs()
    assert len(names) >= 19
    for name in names:
        # A world of 8 lays out every config function's mesh (the largest, EP 8); a mesh the
        # world cannot hold is an error (test_newcomer_surprises.py).
        parsed = tomllib.loads(run_titan("configs", "--module", "qwen3", "--config", name,
                                         "--print", env={"WORLD_SIZE": "8"}).stdout)
        assert parsed["model"]["name"] == "qwen3"
        if name.endswith("_finetune"):
            assert parsed["checkpoint"]["initial_load_in_hf"] is True
            assert parsed["checkpoint"]["last_save_in_hf"] is True


@pytest.mark.parametrize("args, expected", [
    (["--training.stepz", "3"], ["--training.stepz", "stepz", "accepted keys: steps"]),
    (["--trainig.steps", "3"], ["unknown config section \"trainig\"", "training"]),
    (["--training.steps", "1.5"], ["--training.steps: expected an integer, got \"1.5\""]),
    (["--training.steps", "0"], ["training.steps = 0: must be >= 1"]),
    (["--training.dtype", "float16"], ["training.dtype", "float32, bfloat16"]),
])
def test_bad_overrides_fail_naming_the_key(titan_bin, args, expected):
    proc = print_config("--module", "qwen3", "--config", "qwen3_debugmodel", *args, check=False)
    assert proc.returncode != 0
    assert proc.stdout == "", "nothing half-printed on error"
    err = proc.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    for part in expected:
        assert part in err, err


def test_bad_config_file_names_file_line_and_key(titan_bin, tmp_path):
    job = tmp_path / "bad.toml"
    job.write_text("[training]\n\nsteps = \"ten\"\n")
    proc = print_config("--module", "qwen3", "--config", "qwen3_debugmodel", "--config-file", job,
                        check=False)
    assert proc.returncode != 0
    assert f"config file {job}, line 3: training.steps: expected an integer, got string \"ten\"" \
        in proc.stderr
    proc = print_config("--module", "qwen3", "--config", "qwen3_debugmodel", "--config-file",
                        tmp_path / "missing.toml", check=False)
    assert proc.returncode != 0 and "missing.toml: no such file" in proc.stderr


def test_unknown_module_and_config_list_the_accepted(titan_bin):
    proc = run_titan("configs", "--module", "qwen4", check=False)
    assert proc.returncode != 0 and "unknown module \"qwen4\"" in proc.stderr
    assert "qwen3" in proc.stderr
    proc = print_config("--module", "qwen3", "--config", "qwen3_7b", check=False)
    assert proc.returncode != 0 and "unknown config \"qwen3_7b\"" in proc.stderr
    assert "qwen3_0_6b" in proc.stderr
    proc = print_config("--module", "qwen3", check=False)
    assert proc.returncode != 0 and "--config is required" in proc.stderr


def test_help(titan_bin):
    proc = run_titan("configs", "--help")
    assert "usage: titan configs" in proc.stdout and "--print" in proc.stdout
