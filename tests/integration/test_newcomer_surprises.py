"""What surprised an engineer new to titan (issue 31), each through the CLI as they met it: an
error names the user's own folder and setting, a setting that would change a run silently gets a
warning, SFT says which records train nothing, and the logs say what happened."""
import json
import math
import shutil
import tomllib

import pytest
import torch
import torch.nn.functional as F

from conftest import CORPUS, read_metrics, run_titan
from hf_models import make_hf_model

SMALL = ["--training.steps", "1", "--training.seq_len", "32", "--training.local_batch_size", "1",
         "--lr_scheduler.warmup_steps", "1", "--metrics.log_freq", "1"]


def one_error_line(proc):
    assert proc.returncode != 0, proc.stdout
    lines = [l for l in proc.stderr.splitlines() if not l.startswith("[titan] warning")]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


def warnings(proc):
    return [l for l in proc.stderr.splitlines() if l.startswith("[titan] warning: ")]


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                    encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def hf_qwen3(tmp_path_factory, tokenizer_dir):
    path = tmp_path_factory.mktemp("hf") / "Qwen3-tiny"
    make_hf_model(path, tokenizer_dir=tokenizer_dir, seed=11)
    return path


@pytest.fixture(scope="module")
def debug_checkpoint(tmp_path_factory):
    """A training checkpoint (step-1) of the dense debug model."""
    job = tmp_path_factory.mktemp("ckpt") / "job"
    run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel", *SMALL,
              "--checkpoint.enable", "--job.dump_folder", job)
    return job / "checkpoint" / "step-1"


def corpus_lines(path, count, start=0):
    lines = CORPUS.read_text(encoding="utf-8").splitlines()[start:start + count]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# 4. A model folder without config.json, and a training checkpoint, as initial_load_path.

def test_an_initial_load_folder_without_config_json_is_named(tmp_path, hf_qwen3):
    folder = tmp_path / "my-model"
    shutil.copytree(hf_qwen3, folder)
    (folder / "config.json").unlink()
    line = one_error_line(run_titan(
        "train", "--module", "qwen3", "--config", "qwen3_0_6b_finetune",
        "--checkpoint.initial_load_path", folder, *SMALL, cwd=tmp_path, check=False))
    assert f'checkpoint.initial_load_path = "{folder}": no config.json there' in line, line
    assert "assets/hf/Qwen3-0.6B" not in line


def test_a_training_checkpoint_without_hf_assets_path_is_named(tmp_path, debug_checkpoint):
    line = one_error_line(run_titan(
        "train", "--module", "qwen3", "--config", "qwen3_0_6b_finetune",
        "--checkpoint.initial_load_path", debug_checkpoint, *SMALL, cwd=tmp_path, check=False))
    assert (f'checkpoint.initial_load_path = "{debug_checkpoint}" is a training checkpoint, which '
            "holds no config.json or tokenizer files") in line, line
    assert "--model.hf_assets_path DIR" in line


def test_a_training_checkpoint_is_not_loaded_as_hugging_face_weights(tmp_path, debug_checkpoint):
    proc = run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel", *SMALL,
                     "--checkpoint.initial_load_path", debug_checkpoint,
                     "--checkpoint.initial_load_in_hf", "--job.dump_folder", tmp_path / "job")
    assert f"initial load from training checkpoint {debug_checkpoint}" in proc.stdout
    assert "Hugging Face weights" not in proc.stdout


# 5. A resume with another training.dataset_path.

def test_a_resume_on_another_dataset_warns_and_its_error_names_the_way_out(tmp_path):
    first = corpus_lines(tmp_path / "first.jsonl", 30)
    job = tmp_path / "job"
    args = ["train", "--module", "qwen3", "--config", "qwen3_debugmodel", *SMALL,
            "--checkpoint.enable", "--job.dump_folder", job]
    run_titan(*args, "--training.dataset_path", first)
    second = corpus_lines(tmp_path / "second.jsonl", 30, start=100)
    proc = run_titan(*args[:-2], "--training.steps", "2", "--job.dump_folder", job,
                     "--training.dataset_path", second)
    assert any(f'training.dataset_path "{first}" -> "{second}"' in w for w in warnings(proc)), \
        proc.stderr
    # A file the saved position does not fit.
    tiny = write_jsonl(tmp_path / "tiny.jsonl", [{"text": "tiny"}])
    job2 = tmp_path / "job2"
    shutil.copytree(job, job2)
    resume = ["train", "--module", "qwen3", "--config", "qwen3_debugmodel", *SMALL,
              "--training.steps", "3", "--checkpoint.enable", "--job.dump_folder", job2,
              "--training.dataset_path", tiny]
    line = one_error_line(run_titan(*resume, check=False))
    assert f"the checkpoint's data position was saved reading {second}, not {tiny}" in line, line
    assert "resume with --checkpoint.exclude_from_loading dataloader" in line
    run_titan(*resume, "--checkpoint.exclude_from_loading", "dataloader")


# 6. A new initial_load_path, or another model, in a dump folder that holds a checkpoint.

def test_an_initial_load_path_a_resume_ignores_is_a_warning(tmp_path, hf_qwen3, tokenizer_dir):
    other = tmp_path / "other-Qwen3-tiny"
    make_hf_model(other, tokenizer_dir=tokenizer_dir, seed=12)
    job = tmp_path / "job"
    args = ["train", "--module", "qwen3", "--config", "qwen3_debugmodel", *SMALL,
            "--model.flavor", "auto", "--checkpoint.enable", "--job.dump_folder", job]
    first = run_titan(*args, "--checkpoint.initial_load_path", hf_qwen3)
    assert not warnings(first)
    # The same command again resumes without a word about it; another folder is ignored, said.
    again = run_titan(*args, "--training.steps", "2", "--checkpoint.initial_load_path", hf_qwen3)
    assert not any("is not loaded" in w for w in warnings(again)), again.stderr
    proc = run_titan(*args, "--training.steps", "3", "--checkpoint.initial_load_path", other)
    assert any(f"checkpoint.initial_load_path {other} is not loaded: job.dump_folder {job} "
               "already holds a training checkpoint, so the run resumes from" in w
               for w in warnings(proc)), proc.stderr


def test_a_checkpoint_of_another_architecture_is_one_error(tmp_path):
    job = tmp_path / "job"
    run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel_moe", *SMALL,
              "--checkpoint.enable", "--job.dump_folder", job)
    line = one_error_line(run_titan(
        "train", "--module", "qwen3", "--config", "qwen3_debugmodel", *SMALL,
        "--training.steps", "2", "--checkpoint.enable", "--job.dump_folder", job, check=False))
    assert 'of another architecture: its model_type is "qwen3_moe", this run\'s "qwen3"' in line
    assert "missing" not in line


# 7. lora.* without the lora converter.

def test_lora_settings_without_the_converter_warn(tmp_path):
    proc = run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel", *SMALL,
                     "--lora.rank", "4", "--job.dump_folder", tmp_path / "job")
    assert any("lora.rank is set but model.converters does not name lora: this run trains every "
               "weight (a full fine-tune); add --model.converters lora" in w
               for w in warnings(proc)), proc.stderr


def test_lora_enable_suggests_the_converter():
    line = one_error_line(run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel",
                                    "--lora.enable", *SMALL, check=False))
    assert "--lora.enable true: titan turns LoRA on as torchtitan does" in line, line
    assert "--model.converters lora" in line


# 8. SFT.

CHATS = [
    {"messages": [{"role": "user", "content": "Hi!"},
                  {"role": "assistant", "content": "Hello, how can I help?"}]},
    # Roles the template does not render (ShareGPT's names in "messages").
    {"messages": [{"role": "human", "content": "Capital of France?"},
                  {"role": "gpt", "content": "Paris."}]},
    # No assistant turn.
    {"messages": [{"role": "system", "content": "Be brief."},
                  {"role": "user", "content": "Anyone there?"}]},
    # ShareGPT, as Axolotl and LLaMA-Factory read it.
    {"conversations": [{"from": "system", "value": "You answer in one word."},
                       {"from": "human", "value": "Colour of the sky?"},
                       {"from": "gpt", "value": "Blue."}]},
]


def test_sharegpt_records_render_as_transformers_renders_their_messages(tmp_path, tokenizer_dir):
    from transformers import AutoTokenizer
    data = write_jsonl(tmp_path / "chats.jsonl", [CHATS[3]])
    got = json.loads(run_titan("render-chat", "--tokenizer", tokenizer_dir, "--input",
                               data).stdout.splitlines()[0])
    messages = [{"role": {"human": "user", "gpt": "assistant"}.get(t["from"], t["from"]),
                 "content": t["value"]} for t in CHATS[3]["conversations"]]
    auto = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    assert got["text"] == auto.apply_chat_template(messages, tokenize=False)
    assert any(got["trainable"])


def test_sft_records_that_train_nothing_are_counted(tmp_path):
    data = write_jsonl(tmp_path / "chats.jsonl", CHATS * 2)
    proc = run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel_sft", *SMALL,
                     "--training.dataset_path", data, "--training.seq_len", "256",
                     "--training.local_batch_size", "2", "--job.dump_folder", tmp_path / "job")
    said = "\n".join(warnings(proc))
    assert "2 of 8 records read have messages of role 'gpt', which the chat template does not " \
           "render: they are left out (the first: " in said, said
    assert "2 of 8 records read have messages of role 'human'" in said
    assert "4 of 8 records read have no assistant turn: nothing of them is trained" in said
    assert "2 of 8 records read render as no text" in said  # roles the template skips, only
    # titan check-data says the same before a run.
    check = run_titan("check-data", "--module", "qwen3", "--config", "qwen3_debugmodel_sft",
                      "--training.dataset_path", data)
    assert "2 of 8 records read have messages of role 'human'" in check.stderr, check.stderr


def test_a_file_of_only_unusable_records_says_why(tmp_path):
    data = write_jsonl(tmp_path / "chats.jsonl", [CHATS[1], CHATS[2]])
    line = one_error_line(run_titan(
        "train", "--module", "qwen3", "--config", "qwen3_debugmodel_sft", *SMALL,
        "--training.dataset_path", data, "--job.dump_folder", tmp_path / "job", check=False))
    assert f"dataset file {data} has nothing to train: none of its 2 records has an assistant " \
           "turn to train" in line, line
    assert "role 'human'" in line and "empty" not in line


def test_the_step_line_shows_the_trained_tokens(tmp_path):
    data = write_jsonl(tmp_path / "chats.jsonl", [CHATS[0], CHATS[3]] * 4)
    flags = ["--module", "qwen3", "--config", "qwen3_debugmodel_sft", "--training.dataset_path",
             data, "--training.seq_len", "64", "--training.local_batch_size", "2"]
    proc = run_titan("train", *flags, "--training.steps", "1", "--training.shuffle", "false",
                     "--job.dump_folder", tmp_path / "job")
    rows = [json.loads(l) for l in run_titan("check-data", *flags, "--training.shuffle", "false",
                                             "--rows", "2").stdout.splitlines()]
    trained = sum(sum(1 for label in row["labels"] if label != -100) for row in rows)
    assert f"trained_tokens: {trained}" in proc.stdout, proc.stdout
    assert read_metrics(tmp_path / "job")[0]["trained_tokens"] == trained


def test_eval_takes_chat_data_and_advises_its_own_flags(tmp_path, hf_qwen3):
    from transformers import AutoModelForCausalLM
    data = write_jsonl(tmp_path / "chats.jsonl", [CHATS[0], CHATS[3]] * 4)
    line = one_error_line(run_titan("eval", "--model", hf_qwen3, "--data", data, "--seq-len",
                                    "64", "--steps", "1", check=False))
    assert "(--text-field)" in line and "--sft reads chat records" in line, line
    assert "training." not in line
    # --sft packs as SFT trains (hf_flattening, test_sft.py); megatron's causal rows here.
    out = json.loads(run_titan("eval", "--model", hf_qwen3, "--data", data, "--seq-len", "64",
                               "--steps", "1", "--sft", "--packing", "megatron"
                               ).stdout.splitlines()[-1])
    # The peer: Transformers' mean loss over the trained labels of the same packed row.
    row = json.loads(run_titan(
        "check-data", "--module", "qwen3", "--config", "qwen3_debugmodel_sft",
        "--model.hf_assets_path", hf_qwen3, "--training.dataset_path", data,
        "--training.packing", "megatron", "--training.shuffle", "false",
        "--training.seq_len", "64", "--rows", "1").stdout.splitlines()[0])
    model = AutoModelForCausalLM.from_pretrained(hf_qwen3, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    with torch.no_grad():
        logits = model(torch.tensor([row["input"]])).logits[0]
    labels = torch.tensor(row["labels"])
    assert out["tokens"] == int((labels != -100).sum())
    expected = F.cross_entropy(logits, labels, ignore_index=-100).item()
    assert math.isclose(out["loss"], expected, rel_tol=1e-5), (out, expected)


# 9. SFT + LoRA on the Transformers backend, with document masking.

def packed_documents_loss(model, rows):
    """Transformers' mean loss over the trained labels of packed rows, each document piece of a
    row (positions restarting at 0) run alone: what block-causal attention must give."""
    total, count = 0.0, 0
    with torch.no_grad():
        for row in rows:
            starts = [i for i, p in enumerate(row["positions"]) if p == 0]
            for begin, end in zip(starts, starts[1:] + [len(row["input"])]):
                logits = model(torch.tensor([row["input"][begin:end]])).logits[0]
                labels = torch.tensor(row["labels"][begin:end])
                total += F.cross_entropy(logits, labels, ignore_index=-100,
                                         reduction="sum").item()
                count += int((labels != -100).sum())
    return total / count


def test_sft_lora_on_the_transformers_backend_masks_the_documents(tmp_path, hf_qwen3):
    from transformers import AutoModelForCausalLM
    data = write_jsonl(tmp_path / "chats.jsonl", [CHATS[0], CHATS[3]] * 4)
    flags = ["--module", "transformers_modeling_backend", "--config",
             "transformers_modeling_backend_debugmodel", "--model.flavor", "auto",
             "--model.hf_assets_path", hf_qwen3, "--training.sft", "--training.document_masking",
             "--training.dataset_path", data, "--training.seq_len", "64",
             "--training.local_batch_size", "2"]
    proc = run_titan("train", *flags, "--checkpoint.initial_load_in_hf", "--model.converters",
                     "lora", "--training.steps", "1", "--job.dump_folder", tmp_path / "job")
    assert "attend to each other" not in proc.stderr
    rows = [json.loads(l) for l in run_titan("check-data", *flags, "--rows", "2").stdout.splitlines()]
    assert any(row["positions"].count(0) > 1 for row in rows)  # several documents in a row
    model = AutoModelForCausalLM.from_pretrained(hf_qwen3, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    expected = packed_documents_loss(model, rows)  # LoRA's B starts at 0: the base's loss
    loss = read_metrics(tmp_path / "job")[0]["loss"]
    assert math.isclose(loss, expected, rel_tol=1e-5), (loss, expected)


# 13. QLoRA's two exports are two models; 14. the adapter names the hub id of its base.

def test_qlora_exports_say_they_are_two_models(tmp_path, hf_qwen3):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM
    job = tmp_path / "job"
    proc = run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel_qlora", *SMALL,
                     "--checkpoint.initial_load_path", hf_qwen3, "--model.flavor", "auto",
                     "--job.dump_folder", job)
    assert ("QLoRA's two exports are two models: " in proc.stdout and
            "is the adapters merged into the NF4 base (dequantised)" in proc.stdout), proc.stdout
    ids = torch.tensor([[9707, 11, 1879, 0, 576, 374, 264, 1273]])
    with torch.no_grad():
        merged = AutoModelForCausalLM.from_pretrained(job / "hf" / "step-1").float()(ids).logits
        base = AutoModelForCausalLM.from_pretrained(hf_qwen3, dtype=torch.float32)
        adapted = PeftModel.from_pretrained(base, job / "hf" / "step-1-adapter")(ids).logits
    assert (merged - adapted).abs().max().item() > 1e-3  # as said: not the same model


def test_the_adapter_names_the_hub_id_of_its_base(tmp_path, hf_qwen3):
    job = tmp_path / "job"
    run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel_lora", *SMALL,
              "--checkpoint.initial_load_path", hf_qwen3, "--model.flavor", "auto",
              "--model.hf_model", "Qwen/Qwen3-0.6B", "--job.dump_folder", job)
    config = json.loads((job / "hf" / "step-1-adapter" / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == "Qwen/Qwen3-0.6B"


def greedy(model, ids, count):
    """`count` tokens of greedy decoding, the whole sequence run each time (no cache)."""
    out = []
    with torch.no_grad():
        for _ in range(count):
            out.append(int(model(torch.tensor([ids + out])).logits[0, -1].argmax()))
    return out


def test_generate_runs_a_peft_adapter_and_a_chat(tmp_path, hf_qwen3, tokenizer_dir):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer
    job = tmp_path / "job"
    run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel_lora", *SMALL,
              "--training.steps", "3", "--checkpoint.initial_load_path", hf_qwen3,
              "--model.flavor", "auto", "--job.dump_folder", job)
    adapter = job / "hf" / "step-3-adapter"
    model = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(hf_qwen3, dtype=torch.float32), adapter).eval()
    auto = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    common = ["--temperature", "0", "--max-new-tokens", "6", "--ignore-eos", "--print-ids"]
    # The adapter's own base (adapter_config.json names the folder it trained on).
    out = run_titan("generate", "--model", adapter, "--prompt", "def add(a, b):", *common)
    ids = json.loads(out.stdout.splitlines()[-1])
    assert ids == greedy(model, auto.encode("def add(a, b):"), 6), out.stdout
    # --chat: the user's message in the chat template, as apply_chat_template renders it.
    out = run_titan("generate", "--model", adapter, "--base", hf_qwen3, "--prompt",
                    "What is 2 + 2?", "--chat", *common)
    prompt = auto.apply_chat_template([{"role": "user", "content": "What is 2 + 2?"}],
                                      add_generation_prompt=True, tokenize=False)
    assert json.loads(out.stdout.splitlines()[-1]) == greedy(model, auto.encode(prompt), 6)
    assert "<|im_start|>" not in out.stdout  # the reply only
    # An adapter whose base is a hub id not downloaded here says how to get it.
    hub = tmp_path / "hub-adapter"
    shutil.copytree(adapter, hub)
    config = json.loads((hub / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = "Qwen/Qwen3-0.6B"
    (hub / "adapter_config.json").write_text(json.dumps(config))
    line = one_error_line(run_titan("generate", "--model", hub, "--prompt", "x", check=False))
    assert "build/bin/hf download Qwen/Qwen3-0.6B --local-dir DIR) and give --base DIR" in line


# 14. Smaller items.

def test_a_missing_dataset_file_names_its_key(tmp_path):
    line = one_error_line(run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel",
                                    "--training.dataset_path", "nope.jsonl", *SMALL,
                                    cwd=tmp_path, check=False))
    assert f'training.dataset_path = "nope.jsonl": no such file or folder (relative to the ' \
           f"current directory, {tmp_path})" in line, line


def test_the_validation_line_follows_its_step_line_and_metrics_have_elapsed_seconds(tmp_path):
    held = corpus_lines(tmp_path / "held.jsonl", 5, start=300)
    proc = run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel", *SMALL,
                     "--training.steps", "2", "--validator.enable", "--validator.freq", "1",
                     "--validator.steps", "1", "--validator.dataset_path", held,
                     "--job.dump_folder", tmp_path / "job")
    lines = proc.stdout.splitlines()
    for step in (1, 2):
        at = next(i for i, l in enumerate(lines) if l.startswith(f"step: {step} "))
        assert lines[at + 1].startswith(f"validate step: {step} "), lines[at:at + 2]
    metrics = read_metrics(tmp_path / "job")
    assert 0 < metrics[0]["elapsed_s"] <= metrics[1]["elapsed_s"]


def test_configs_print_refuses_a_mesh_it_cannot_lay_out():
    proc = run_titan("configs", "--module", "qwen3", "--config", "qwen3_debugmodel",
                     "--parallelism.tensor_parallel_degree", "3", "--print", check=False,
                     env={"WORLD_SIZE": "4"})
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout[-500:]
    line = one_error_line(proc)
    assert "does not lay out a world of 4 ranks (WORLD_SIZE)" in line, line


def test_help_groups_every_config_function():
    text = run_titan("--help").stdout
    groups = text.split("config functions (titan train")[1]
    assert "    debug models (2 CPU cores): qwen3_debugmodel, qwen3_debugmodel_moe\n" in groups
    listed = run_titan("configs").stdout
    names = [l.split()[0] for l in listed.splitlines() if l.startswith("  ")]
    shown = groups.replace(",", " ").split()
    for name in names:
        assert shown.count(name) == 1, name


def test_debug_hooks_leave_the_default_print():
    printed = run_titan("configs", "--module", "qwen3", "--config", "qwen3_debugmodel",
                        "--print").stdout
    debug = tomllib.loads(printed)["debug"]
    assert debug == {"print_config": False}, debug
    changed = run_titan("configs", "--module", "qwen3", "--config", "qwen3_debugmodel",
                        "--debug.step_delay_ms", "5", "--print").stdout
    assert tomllib.loads(changed)["debug"]["step_delay_ms"] == 5


def test_the_override_imports_comment_names_the_ops_that_default_to_fused():
    printed = run_titan("configs", "--module", "qwen3", "--config", "qwen3_debugmodel_qlora",
                        "--print").stdout
    lines = printed.splitlines()
    comment = lines[lines.index("imports = []") - 1]
    table = printed.split("# kernel overrides, resolved for this model")[1]
    fused = [l.split(":")[0].strip("# ") for l in table.splitlines() if l.endswith("-> fused")]
    assert sorted(fused) == ["cross_entropy", "nf4_linear"], table
    for op in fused:
        assert op in comment and "fused" in comment, comment


def test_check_data_finds_bad_lines_before_a_run(tmp_path):
    data = corpus_lines(tmp_path / "data.jsonl", 30)
    lines = data.read_text(encoding="utf-8").splitlines()
    lines[11] = '{"text": "cut off'
    lines[20] = '{"body": "no text field"}'
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = run_titan("check-data", "--module", "qwen3", "--config", "qwen3_debugmodel",
                     "--training.dataset_path", data, check=False)
    line = one_error_line(proc)
    assert f"2 documents cannot be read (training would stop there); the first: dataset file " \
           f"{data}:12: invalid JSON" in line, line
    assert f"{data}:21: expected an object with a string field \"text\" " \
           "(training.dataset_text_field)" in proc.stdout
    assert "30 documents" in proc.stdout
