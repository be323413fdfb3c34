"""Coming from torchtitan (docs/from_torchtitan.md): configs in torchtitan's TOML format (the
train_configs layout of torchtitan 0.1/0.2, written for these tests under fixtures/torchtitan/),
run with `--job.config_file` alone; each of torchtitan's keys that titan lacks is
renamed into its titan field or noted in one line when it asks for nothing titan lacks, and is
one error naming it when it does; every flag of the page's table of differing defaults is a
setting titan takes."""
import re
import tomllib

import pytest

from conftest import CORPUS, REPO, read_metrics, run_titan

FIXTURES = REPO / "tests" / "integration" / "fixtures" / "torchtitan"
SMALL = ["--training.steps", "1", "--training.seq_len", "32", "--training.local_batch_size", "1",
         "--lr_scheduler.warmup_steps", "1"]


def notes(text):
    return [l for l in text.splitlines() if l.startswith(("[titan] note: ", "# note: "))]


def one_error_line(proc):
    assert proc.returncode != 0, proc.stdout
    lines = [l for l in proc.stderr.splitlines() if not l.startswith("[titan] warning")]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


@pytest.fixture
def data(tmp_path):
    lines = CORPUS.read_text(encoding="utf-8").splitlines()[:20]
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def as_qwen3(tmp_path, name, tokenizer_dir):
    """A config in torchtitan's format for another model family, its [model] pointed at titan's
    Qwen3 debug model (and its tokenizer path, torchtitan's test-assets one, at titan's folder)."""
    text = (FIXTURES / name).read_text()
    text = text.replace('name = "llama3"', 'name = "qwen3"')
    text = re.sub(r'tokenizer_path = ".*"', f'hf_assets_path = "{tokenizer_dir}"', text)
    text = text.replace('"./tests/assets/tokenizer"', f'"{tokenizer_dir}"')
    path = tmp_path / name
    path.write_text(text)
    return path


def test_torchtitan_format_qwen3_moe_toml_trains_alone(tmp_path, data, tokenizer_dir):
    toml = FIXTURES / "qwen3_moe_debug.toml"
    proc = run_titan("train", "--job.config_file", toml, "--training.dataset_path", data,
                     "--model.hf_assets_path", tokenizer_dir, "--job.dump_folder",
                     tmp_path / "job", *SMALL)
    assert f"[titan] {toml}: Qwen3 MoE debug flavor, smoke run" in proc.stdout
    noted = "\n".join(notes(proc.stdout))
    for key in ["compile.enable = false", "compile.components = model,loss",
                "parallelism.enable_async_tensor_parallel = false",
                "parallelism.expert_tensor_parallel_degree = 1",
                "quantize.linear.float8.enable_fsdp_float8_all_gather = false",
                "quantize.linear.float8.precompute_float8_dynamic_scale_for_fsdp = false",
                "quantize.linear.float8.filter_fqns = output",
                'training.dataset = "c4_test": torchtitan\'s name']:
        assert key in noted, noted
    assert "line 54: compile.enable = false: nothing is compiled" in noted
    saved = tomllib.loads((tmp_path / "job" / "config.toml").read_text())
    assert saved["model"]["flavor"] == "debugmodel_moe"
    assert saved["activation_checkpoint"]["selective_ac_option"] == "op"
    assert saved["checkpoint"]["export_dtype"] == "float16"
    assert len(read_metrics(tmp_path / "job")) == 1


def test_torchtitan_format_llama3_debug_toml_keys_go_to_titans_fields(tmp_path, tokenizer_dir):
    toml = as_qwen3(tmp_path, "llama3_debug_model.toml", tokenizer_dir)
    proc = run_titan("configs", "--job.config_file", toml, "--training.dataset_path", CORPUS,
                     "--print")
    printed = tomllib.loads(proc.stdout)
    # [validation] is titan's [validator]; job.print_config is titan's debug.print_config.
    assert printed["validator"]["freq"] == 5 and printed["validator"]["steps"] == 10
    noted = "\n".join(notes(proc.stdout))
    assert "validation.freq = 5: torchtitan's name for validator.freq" in noted
    assert "job.print_config = false: torchtitan's name for debug.print_config" in noted
    assert "metrics.enable_wandb = false: Weights & Biases logging stays off" in noted
    assert "validation.dataset = \"c4_validation\"" in noted
    assert "profiling.enable_memory_snapshot = false" in noted
    # pipeline_parallel_schedule is titan's own field since titan has pipeline parallelism.
    assert printed["parallelism"]["pipeline_parallel_schedule"] == "Interleaved1F1B"


def test_torchtitan_0_1_key_names_are_titans_fields(tmp_path, tokenizer_dir):
    toml = as_qwen3(tmp_path, "llama3_debug_model_v0.1.0.toml", tokenizer_dir)
    proc = run_titan("configs", "--job.config_file", toml, "--training.dataset_path", CORPUS,
                     "--print", "--checkpoint.enable_checkpoint", "true")
    printed = tomllib.loads(proc.stdout)
    assert printed["checkpoint"]["enable"] is True  # the override, by torchtitan's old name
    assert printed["checkpoint"]["last_save_model_only"] is False
    assert printed["lr_scheduler"]["min_lr_factor"] == 0.0
    noted = "\n".join(notes(proc.stdout))
    for key in ["checkpoint.enable_checkpoint = false: torchtitan's name for checkpoint.enable",
                "--checkpoint.enable_checkpoint true: torchtitan's name for checkpoint.enable",
                "lr_scheduler.lr_min = 0.0: torchtitan's name for lr_scheduler.min_lr_factor",
                "training.compile = false", "float8.filter_fqns = output",
                "job.use_for_integration_test = true", "metrics.disable_color_printing = false"]:
        assert key in noted, noted


@pytest.mark.parametrize("setting, lacks", [
    ("[compile]\nenable = true", "compile.enable = true: titan has no torch.compile"),
    ("[metrics]\nenable_wandb = true",
     "metrics.enable_wandb = true: titan has no Weights & Biases logging"),
    ("[model]\nconverters = [\"float8\"]", 'model.converters = "float8": titan has no float8'),
    ("[checkpoint]\ncreate_seed_checkpoint = true",
     "checkpoint.create_seed_checkpoint = true: titan has no seed checkpoint"),
    ("[parallelism]\nexpert_tensor_parallel_degree = 2",
     "parallelism.expert_tensor_parallel_degree = 2: titan has no expert tensor parallelism"),
    ("[fault_tolerance]\nenable = true", "fault_tolerance.enable = true: titan has no torchft"),
])
def test_a_torchtitan_key_asking_for_what_titan_lacks_is_one_error(tmp_path, setting, lacks):
    toml = tmp_path / "job.toml"
    toml.write_text('[model]\nname = "qwen3"\nflavor = "debugmodel"\n' + setting + "\n"
                    if not setting.startswith("[model]") else
                    setting + '\nname = "qwen3"\nflavor = "debugmodel"\n')
    line = one_error_line(run_titan("train", "--job.config_file", toml, *SMALL, check=False))
    assert lacks in line, line


def test_a_torchtitan_cli_habit_is_noted_or_refused(tmp_path):
    proc = run_titan("configs", "--module", "qwen3", "--config", "qwen3_debugmodel",
                     "--compile.enable", "false", "--optimizer.beta2", "0.99", "--print")
    assert "# note: --compile.enable false: nothing is compiled" in proc.stdout
    assert tomllib.loads(proc.stdout)["optimizer"]["betas"] == [0.9, 0.99]
    line = one_error_line(run_titan("configs", "--module", "qwen3", "--config",
                                    "qwen3_debugmodel", "--compile.enable", "--print",
                                    check=False))
    assert "--compile.enable true: titan has no torch.compile" in line, line


def test_a_config_file_alone_must_name_the_model(tmp_path):
    toml = tmp_path / "job.toml"
    toml.write_text("[training]\nsteps = 3\n")
    line = one_error_line(run_titan("train", "--job.config_file", toml, check=False))
    assert (f"--job.config_file {toml} without --module and --config: the file must name the "
            "model ([model] name and flavor") in line, line


def test_torchtitan_datasets_need_a_dataset_path():
    line = one_error_line(run_titan("train", "--job.config_file",
                                    FIXTURES / "qwen3_0.6b.toml", check=False))
    assert ('training.dataset = "c4" is torchtitan\'s name for allenai/c4 on the Hugging Face '
            "hub, which titan does not download: give training.dataset_path") in line, line


def test_every_flag_of_the_defaults_table_is_a_titan_setting():
    """docs/from_torchtitan.md's table of defaults that differ from torchtitan 0.3.0: each row's
    flag, all given at once, is taken by titan (and the table is there)."""
    page = (REPO / "docs" / "from_torchtitan.md").read_text()
    table = page.split("## Defaults that differ")[1].split("\n## ")[0]
    flags = []
    for row in table.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[-1].startswith("`--"):
            flags += cells[-1].strip("`").split()
    assert len(flags) >= 16, table
    run_titan("configs", "--module", "qwen3", "--config", "qwen3_debugmodel_moe", *flags,
              "--print")


OLDER_KEYS = """[model]
name = "qwen3"
flavor = "debugmodel"
norm_type = "rmsnorm"

[training]
batch_size = 3
warmup_steps = 5
data_parallel_shard_degree = -1
tensor_parallel_degree = 1
enable_loss_parallel = true

[optimizer]
fused = true

[experimental]
pipeline_parallel_degree = 1
pipeline_parallel_schedule = "interleaved_1f1b"
enable_async_tensor_parallel = false

[validation]
enabled = false

[memory_estimation]
enabled = false

[metrics]
enable_color_printing = true

[checkpoint]
interval_type = "steps"

[float8]
enable_float8_linear = false
"""


def test_torchtitan_0_1_and_0_2_spellings_are_taken(tmp_path):
    """The keys of torchtitan's older JobConfig (2024: the batch, warmup and degrees under
    [training], the pipeline under [experimental], `enabled` for [validation] and
    [memory_estimation]) reach titan's fields or are noted."""
    toml = tmp_path / "old.toml"
    toml.write_text(OLDER_KEYS)
    printed_proc = run_titan("configs", "--job.config_file", toml, "--print")
    printed = tomllib.loads(printed_proc.stdout)
    assert printed["training"]["local_batch_size"] == 3
    assert printed["lr_scheduler"]["warmup_steps"] == 5
    assert printed["parallelism"]["pipeline_parallel_schedule"] == "Interleaved1F1B"
    assert printed["validator"]["enable"] is False
    noted = "\n".join(notes(printed_proc.stdout))
    for key in ["validation.enabled = false: torchtitan's name for validator.enable",
                "memory_estimation.enabled = false: no memory estimation run",
                "training.batch_size = 3: torchtitan's name for training.local_batch_size",
                "experimental.pipeline_parallel_schedule = \"interleaved_1f1b\"",
                "metrics.enable_color_printing = true", "model.norm_type = \"rmsnorm\"",
                "checkpoint.interval_type = \"steps\"", "float8.enable_float8_linear = false"]:
        assert key in noted, noted


@pytest.mark.parametrize("setting, lacks", [
    ("[memory_estimation]\nenabled = true", "memory_estimation.enabled = true: titan has no "
                                            "memory estimation run"),
    ("[float8]\nenable_float8_linear = true", "float8.enable_float8_linear = true: titan has no "
                                              "float8 training"),
    ("[checkpoint]\ninterval_type = \"seconds\"", "titan's checkpoint.interval counts steps"),
])
def test_an_older_key_asking_for_what_titan_lacks_is_one_error(tmp_path, setting, lacks):
    toml = tmp_path / "job.toml"
    toml.write_text('[model]\nname = "qwen3"\nflavor = "debugmodel"\n' + setting + "\n")
    line = one_error_line(run_titan("configs", "--job.config_file", toml, "--print", check=False))
    assert lacks in line, line


def test_an_unknown_key_in_a_torchtitan_section_names_the_key_file_and_line(tmp_path):
    toml = tmp_path / "job.toml"
    toml.write_text('[model]\nname = "qwen3"\nflavor = "debugmodel"\n\n[validation]\n'
                    'freq = 5\nenabeld = false\n')
    line = one_error_line(run_titan("configs", "--job.config_file", toml, "--print", check=False))
    assert f"config file {toml}, line 7: unknown config key \"enabeld\" in torchtitan's section " \
           "[validation] (did you mean \"enabled\"?" in line, line
    toml.write_text('[model]\nname = "qwen3"\nflavor = "debugmodel"\n')
    line = one_error_line(run_titan("configs", "--job.config_file", toml, "--validation.enabeld",
                                    "false", "--print", check=False))
    assert "--validation.enabeld: unknown config key \"enabeld\" in torchtitan's section" in line


def test_module_and_a_config_file_naming_its_model(tmp_path):
    """`--module llama3 --job.config_file f.toml`, the file naming its model: the file's job,
    from the tree's defaults; a module of another model is one error."""
    toml = tmp_path / "job.toml"
    toml.write_text('[model]\nname = "llama3"\nflavor = "debugmodel"\n[training]\nsteps = 7\n')
    printed = tomllib.loads(run_titan("configs", "--module", "llama3", "--job.config_file", toml,
                                      "--print").stdout)
    assert printed["model"]["name"] == "llama3" and printed["training"]["steps"] == 7
    line = one_error_line(run_titan("configs", "--module", "qwen3", "--job.config_file", toml,
                                    "--print", check=False))
    assert "--module qwen3 but --job.config_file" in line and "names model llama3" in line, line


def test_the_notes_can_be_one_line_or_none(tmp_path, data, tokenizer_dir):
    toml = tmp_path / "old.toml"
    toml.write_text(OLDER_KEYS)
    common = ["train", "--job.config_file", toml, "--training.dataset_path", data,
              "--model.hf_assets_path", tokenizer_dir, "--job.dump_folder", tmp_path / "job",
              *SMALL]
    each = notes(run_titan(*common).stdout)
    assert len(each) >= 10, each
    summary = notes(run_titan(*common, "--job.config_notes", "summary").stdout)
    assert summary == [f"[titan] note: {len(each)} settings were renamed or asked nothing of titan "
                       "(torchtitan's keys; `titan configs ... --print` lists them, "
                       "job.config_notes each prints them here)"], summary
    assert notes(run_titan(*common, "--job.config_notes", "off").stdout) == []
