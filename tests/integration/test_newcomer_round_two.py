"""What a torchtitan user still tripped on (round two), each through the CLI as they met it: the
layout dry run of `titan configs --print`, a flavor that is not the initial load's model, eval
under torchrun, forward's --base, generate's chat-template options, the LoRA adapter's base,
model.name's description, the flavors' dimensions in the docs, the table of what titan lacks,
and a clone under a folder named cuda."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import torch

from conftest import REPO, run_titan
from hf_models import make_hf_model

SMALL = ["--training.steps", "1", "--training.seq_len", "32", "--training.local_batch_size", "1",
         "--lr_scheduler.warmup_steps", "1", "--metrics.log_freq", "1"]
DEBUG = ["--module", "qwen3", "--config", "qwen3_debugmodel"]


def one_error_line(proc):
    assert proc.returncode != 0, proc.stdout
    lines = [l for l in proc.stderr.splitlines() if not l.startswith("[titan] warning")]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


@pytest.fixture(scope="module")
def hf_qwen3(tmp_path_factory, tokenizer_dir):
    path = tmp_path_factory.mktemp("hf") / "Qwen3-tiny"
    make_hf_model(path, tokenizer_dir=tokenizer_dir, seed=5)
    return path


@pytest.fixture(scope="module")
def adapter(tmp_path_factory, hf_qwen3):
    """A PEFT adapter folder titan trained on hf_qwen3 (3 steps)."""
    job = tmp_path_factory.mktemp("lora") / "job"
    run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel_lora", *SMALL,
              "--training.steps", "3", "--checkpoint.initial_load_path", hf_qwen3,
              "--model.flavor", "auto", "--job.dump_folder", job)
    return job / "hf" / "step-3-adapter"


# The layout dry run: every degree rule training checks, before any launch.

@pytest.mark.parametrize("world, flags, needle", [
    (["--nproc-per-node", "3"], ["--parallelism.tensor_parallel_degree", "3"],
     "parallelism.tensor_parallel_degree = 3 must divide the attention heads (8)"),
    (["--nproc-per-node", "2"], ["--parallelism.context_parallel_degree", "2",
                                 "--training.seq_len", "30"],
     "training.seq_len = 30 does not split into 4 equal chunks"),
    (["--nproc_per_node=2"], ["--parallelism.pipeline_parallel_degree", "2",
                              "--parallelism.pipeline_parallel_schedule", "Interleaved1F1B",
                              "--training.local_batch_size", "5"], "5 microbatches"),
    (["--nproc-per-node", "2"], ["--parallelism.pipeline_parallel_degree", "2",
                                 "--model.converters", "lora"],
     "model.converters (LoRA) does not run under pipeline parallelism yet"),
    (["--nproc-per-node", "2", "--nnodes", "2"], ["--parallelism.expert_parallel_degree", "4"],
     "parallelism.expert_parallel_degree = 4: the model has no routed experts"),
])
def test_configs_print_checks_every_degree_rule_training_checks(world, flags, needle):
    proc = run_titan("configs", *DEBUG, *world, *flags, "--print", check=False)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout[-500:]
    assert needle in one_error_line(proc)


def test_configs_print_says_what_the_layout_check_found(tmp_path):
    proc = run_titan("configs", *DEBUG, "--parallelism.tensor_parallel_degree", "2",
                     "--parallelism.pipeline_parallel_degree", "2", "--print",
                     env={"WORLD_SIZE": "8"})
    assert "#   checked: tp 2 and ep 1 divide the model's heads, MLP and experts" in proc.stdout
    assert "#   checked: pp 2: 2 stages" in proc.stdout


# A named flavor against a Hugging Face initial_load_path of another model.

def test_a_flavor_that_is_not_the_initial_loads_model_says_use_flavor_auto(tmp_path, hf_qwen3,
                                                                           tokenizer_dir):
    toml = tmp_path / "job.toml"
    toml.write_text(f'[model]\nname = "qwen3"\nflavor = "debugmodel"\n'
                    f'hf_assets_path = "{tokenizer_dir}"\n'
                    f'[checkpoint]\ninitial_load_path = "{hf_qwen3}"\n')
    line = one_error_line(run_titan("train", "--job.config_file", toml, *SMALL,
                                    "--job.dump_folder", tmp_path / "job", check=False))
    assert f"{hf_qwen3}/config.json has vocab_size" in line or \
           f"{hf_qwen3}/config.json has hidden_size = 64" in line, line
    assert "give --model.flavor auto" in line and len(line) < 400, line


# eval under torchrun: one process only.

def test_eval_under_torchrun_refuses_rather_than_repeat_itself(hf_qwen3, tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "hello world"}\n')
    env = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29999"}
    line = one_error_line(run_titan("eval", "--model", hf_qwen3, "--data", data, check=False,
                                    env=env))
    assert "titan eval runs in one process, and this is rank 1 of 2 (WORLD_SIZE)" in line, line


# forward --base: an adapter on a base its adapter_config.json does not name here.

def test_forward_runs_an_adapter_on_the_base_given(tmp_path, hf_qwen3, adapter):
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM
    moved = tmp_path / "adapter"
    shutil.copytree(adapter, moved)
    config = json.loads((moved / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = str(tmp_path / "gone")
    (moved / "adapter_config.json").write_text(json.dumps(config))
    ids = [9707, 11, 1879, 0, 576, 374]
    out = tmp_path / "logits.safetensors"
    run_titan("forward", "--model", moved, "--base", hf_qwen3, "--tokens",
              ",".join(map(str, ids)), "--output", out)
    base = AutoModelForCausalLM.from_pretrained(hf_qwen3, dtype=torch.float32)
    with torch.no_grad():
        expected = PeftModel.from_pretrained(base, moved)(torch.tensor([ids])).logits[0]
    got = load_file(out)["logits"]
    assert (got - expected).abs().max().item() < 1e-4


# generate --chat passes template options (Qwen3's enable_thinking).

def test_generate_chat_passes_template_options(hf_qwen3, tokenizer_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    auto = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    message = [{"role": "user", "content": "What is 2 + 2?"}]
    plain = auto.apply_chat_template(message, add_generation_prompt=True, tokenize=False)
    prompt = auto.apply_chat_template(message, add_generation_prompt=True, tokenize=False,
                                      enable_thinking=False)
    assert prompt != plain  # the option changes the rendering (an empty thinking block)
    model = AutoModelForCausalLM.from_pretrained(hf_qwen3, dtype=torch.float32).eval()
    ids = auto.encode(prompt)
    expected = []
    with torch.no_grad():
        for _ in range(5):
            expected.append(int(model(torch.tensor([ids + expected])).logits[0, -1].argmax()))
    out = run_titan("generate", "--model", hf_qwen3, "--prompt", "What is 2 + 2?", "--chat",
                    "--chat-template-kwargs", '{"enable_thinking": false}', "--temperature", "0",
                    "--max-new-tokens", "5", "--ignore-eos", "--print-ids")
    assert json.loads(out.stdout.splitlines()[-1]) == expected


# The LoRA config functions name the base the adapters trained on.

def test_a_lora_config_function_names_the_base_it_trained_on(tmp_path, hf_qwen3):
    job = tmp_path / "job"
    run_titan("train", "--module", "qwen3", "--config", "qwen3_0_6b_lora", *SMALL,
              "--checkpoint.initial_load_path", hf_qwen3, "--job.dump_folder", job,
              "--activation_checkpoint.mode", "none")
    config = json.loads((job / "hf" / "step-1-adapter" / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == str(hf_qwen3.resolve()), config


# configs --print: model.name's description names every model.

def test_configs_print_describes_model_name_with_every_model():
    modules = [l[len("module "):-1] for l in run_titan("configs").stdout.splitlines()
               if l.startswith("module ")]
    for module, config in (("qwen3", "qwen3_debugmodel"), ("llama3", "llama3_debugmodel")):
        printed = run_titan("configs", "--module", module, "--config", config,
                            "--print").stdout.splitlines()
        at = printed.index(f'name = "{module}"')
        comment = printed[at - 1]
        for name in ("qwen3", "llama3", "transformers"):
            assert name in comment, comment
    assert "llama3" in modules


# The flavors' dimensions, as documented, are what titan builds.

def doc_table(page, heading):
    """The first table after `heading` in docs/<page>, as one dict per row."""
    section = (REPO / "docs" / page).read_text().split(heading, 1)[1]
    rows = []
    for line in section.splitlines():
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif rows:
            break
    return [dict(zip(rows[0], cells)) for cells in rows[2:]]


def built_dimensions(module, config, flavor):
    printed = run_titan("configs", "--module", module, "--config", config, "--model.flavor",
                        flavor, "--print").stdout
    line = next(l for l in printed.splitlines() if l.startswith("# model dimensions: "))
    return line[len("# model dimensions: "):]


@pytest.mark.parametrize("page, heading, module, config", [
    ("qwen3.md", "## 0. titan's flavors", "qwen3", "qwen3_debugmodel"),
    ("llama3.md", "## Flavors", "llama3", "llama3_debugmodel"),
])
def test_the_documented_flavor_dimensions_are_what_titan_builds(page, heading, module, config):
    rows = doc_table(page, heading)
    assert len(rows) >= 5, rows
    for row in rows:
        flavor = row["flavor"].strip("`")
        built = built_dimensions(module, config, flavor)
        heads, kv = row["heads / kv"].split(" / ")
        expected = (f"hidden {row['hidden']}, layers {row['layers']}, heads {heads} / kv {kv}, "
                    f"head_dim {row['head_dim']}, intermediate {row['intermediate']}, "
                    f"vocabulary {row['vocab']}")
        assert built.startswith(expected), (flavor, built, expected)
        experts = row.get("experts (top-k, width)", "-")
        if experts != "-":
            count, rest = experts.split(" (")
            top, width = rest.rstrip(")").split(", ")
            assert f"experts {count} (top {top}, {width} wide)" in built, (flavor, built)
        assert built.endswith("tied embeddings" if row["tied"] == "yes" else "untied"), built


# docs/from_torchtitan.md's table of what titan lacks: each setting is refused, not ignored.

def test_every_missing_feature_of_the_table_is_refused(tmp_path):
    rows = doc_table("from_torchtitan.md", "## What torchtitan has that titan lacks")
    assert len(rows) >= 12, rows
    for row in rows:
        setting = row["its setting"].strip("`")
        key, value = [part.strip() for part in setting.split(" = ", 1)]
        section, field = key.split(".", 1)
        toml = tmp_path / "job.toml"
        model = '[model]\nname = "qwen3"\nflavor = "debugmodel"\n'
        if section == "model":
            toml.write_text(model.replace("[model]\n", f"[model]\n{field} = {value}\n")
                            if field != "name" else
                            f'[model]\nname = {value}\nflavor = "debugmodel"\n')
        else:
            toml.write_text(model + f"[{section}]\n{field} = {value}\n")
        proc = run_titan("configs", "--job.config_file", toml, "--print", check=False)
        line = one_error_line(proc)
        assert field.split(".")[-1] in line or value.strip('"[]') in line, (setting, line)


# A clone under a folder named cuda (or tensorboard) builds every room.

def test_a_clone_under_a_folder_named_cuda_configures_every_rooms_sources(tmp_path):
    clone = tmp_path / "cuda" / "tensorboard" / "titan-cpp"
    clone.mkdir(parents=True)
    for item in ("CMakeLists.txt", "cmake", "src", "tests", "bench"):
        source = REPO / item
        (shutil.copytree if source.is_dir() else shutil.copy)(source, clone / item)
    build = tmp_path / "build"
    python = sys.executable
    proc = subprocess.run(["cmake", "-S", str(clone), "-B", str(build), "-G", "Ninja",
                           f"-DTITAN_PYTHON_EXE={python}", "-DTITAN_ARROW=OFF"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    ninja = (build / "build.ninja").read_text()
    rooms = sorted(p.name for p in (REPO / "src" / "titan").iterdir()
                   if p.is_dir() and p.name not in ("cli", "transformers_backend"))
    for room in rooms:
        sources = re.findall(rf"CMakeFiles/titan_{room}\.dir/src/titan/{room}/\S+\.cpp\.o", ninja)
        assert sources, f"titan_{room} has no sources"
    # The cuda/ and tensorboard/ folders below src/titan/ are still left out.
    assert "src/titan/kernels/cuda/" not in ninja
    assert "CMakeFiles/titan_train.dir/src/titan/train/tensorboard/" not in ninja


# A start that is refused writes nothing.

def test_a_refused_start_writes_nothing(tmp_path, hf_qwen3, tokenizer_dir):
    """Refused at set-up (a flavor that is not the initial load's model): no dump folder, an
    existing run's config.toml left as it was, no metrics.jsonl."""
    toml = tmp_path / "job.toml"
    toml.write_text(f'[model]\nname = "qwen3"\nflavor = "debugmodel"\n'
                    f'hf_assets_path = "{tokenizer_dir}"\n'
                    f'[checkpoint]\ninitial_load_path = "{hf_qwen3}"\n')
    fresh = tmp_path / "fresh"
    one_error_line(run_titan("train", "--job.config_file", toml, *SMALL,
                             "--job.dump_folder", fresh, check=False))
    assert not fresh.exists()
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "config.toml").write_text("# the earlier run's config\n")
    one_error_line(run_titan("train", "--job.config_file", toml, *SMALL,
                             "--job.dump_folder", earlier, check=False))
    assert (earlier / "config.toml").read_text() == "# the earlier run's config\n"
    assert sorted(p.name for p in earlier.iterdir()) == ["config.toml"]
