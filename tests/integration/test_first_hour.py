"""What a new user meets in the first hour (issue 21), each through the CLI as they type it:
the README's fine-tune command on a Qwen3 saved with save_pretrained, run from outside the
clone; built-in defaults found beside the installation; a warning for every setting that would
otherwise change a run silently; errors that name their key; torchrun as the README prints it,
with titan's error in torchrun's failure summary; exports readable by others; torchtitan's
names; a config that explains itself."""
import json
import math
import os
import re
import stat
import subprocess
import tomllib

import pytest
import torch

from conftest import CORPUS, REPO, TITAN, TOKENIZER_DIR, read_metrics, run_titan
from hf_models import make_hf_model

TORCHRUN = REPO / "build" / "bin" / "torchrun"
CHATS = REPO / "assets" / "sft" / "chat.jsonl"
# A test-sized run of any config function (the README's commands train for much longer).
SMALL = ["--training.steps", "1", "--training.seq_len", "32", "--training.local_batch_size", "1",
         "--lr_scheduler.warmup_steps", "1", "--metrics.log_freq", "1"]


def one_error_line(proc):
    assert proc.returncode != 0, proc.stdout
    lines = [l for l in proc.stderr.splitlines() if not l.startswith("[titan] warning")]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


def warnings(proc):
    return [l for l in proc.stderr.splitlines() if l.startswith("[titan] warning: ")]


@pytest.fixture(scope="module")
def hf_qwen3(tmp_path_factory):
    """A small dense Qwen3 saved with save_pretrained (max_position_embeddings 512), with the
    Qwen3 tokenizer files beside it, as a hub download has them."""
    path = tmp_path_factory.mktemp("hf") / "Qwen3-tiny"
    make_hf_model(path, moe=False, tokenizer_dir=TOKENIZER_DIR)
    return path


@pytest.fixture
def user_dir(tmp_path):
    """A working directory outside the clone, with a small dataset of the user's."""
    lines = CORPUS.read_text(encoding="utf-8").splitlines()[:40]
    (tmp_path / "data.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tmp_path


def hf_window_loss(model_dir, ids):
    """Transformers' mean token loss of one packed window (inputs ids[:-1], labels ids[1:])."""
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    with torch.no_grad():
        logits = model(torch.tensor([ids[:-1]])).logits[0]
    return torch.nn.functional.cross_entropy(logits, torch.tensor(ids[1:])).item()


# 1. The README's fine-tune command works as written.

def test_readme_finetune_command_end_to_end(hf_qwen3, user_dir):
    import shutil
    from hf_models import packed_windows
    from transformers import AutoModelForCausalLM
    shutil.copytree(hf_qwen3, user_dir / "models" / "Qwen3-tiny")
    proc = run_titan("train", "--module", "qwen3", "--config", "qwen3_0_6b_finetune",
                     "--checkpoint.initial_load_path", "models/Qwen3-tiny",
                     "--training.dataset_path", "data.jsonl", *SMALL, cwd=user_dir)
    assert ("[titan] tokenizer from models/Qwen3-tiny (checkpoint.initial_load_path), model "
            "dimensions from models/Qwen3-tiny/config.json (model.flavor auto)") in proc.stdout
    assert "initial load of Hugging Face weights from models/Qwen3-tiny" in proc.stdout
    job = user_dir / "outputs" / "qwen3_0_6b_finetune"
    # The first step's loss is Transformers' loss of the folder's model on the first window.
    window = packed_windows(user_dir / "data.jsonl", TOKENIZER_DIR, 32, 1)[0]
    first = read_metrics(job)[0]["loss"]
    assert math.isclose(first, hf_window_loss(hf_qwen3, window), rel_tol=1e-4), first
    export = job / "hf" / "step-1"
    model = AutoModelForCausalLM.from_pretrained(export)
    assert model.config.hidden_size == 64 and model.config.num_hidden_layers == 2
    assert (export / "tokenizer.json").exists()


def test_a_named_flavor_that_does_not_match_the_folder_is_an_error(hf_qwen3, user_dir):
    proc = run_titan("train", "--module", "qwen3", "--config", "qwen3_0_6b_finetune",
                     "--checkpoint.initial_load_path", hf_qwen3, "--model.flavor", "0.6B",
                     "--training.dataset_path", "data.jsonl", *SMALL, cwd=user_dir, check=False)
    line = one_error_line(proc)
    assert f"model.flavor '0.6B' does not match {hf_qwen3}/config.json" in line, line


# 2. Built-in defaults do not depend on the current directory.

def test_builtin_defaults_are_found_beside_the_installation(tmp_path):
    proc = run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel", *SMALL,
                     cwd=tmp_path)
    assert f"tokenizer from {REPO}/assets/qwen3-tokenizer (model.hf_assets_path)" in proc.stdout
    job = tmp_path / "outputs" / "qwen3_debugmodel"  # outputs land where the user is
    saved = tomllib.loads((job / "config.toml").read_text())
    assert saved["training"]["dataset_path"] == str(REPO / "assets/corpus/python_stdlib.jsonl")
    assert len(read_metrics(job)) == 1


def test_user_paths_stay_relative_to_the_current_directory(tmp_path, user_dir):
    proc = run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel", *SMALL,
                     "--training.dataset_path", "data.jsonl", "--job.dump_folder", "mine",
                     cwd=user_dir)
    saved = tomllib.loads((user_dir / "mine" / "config.toml").read_text())
    assert saved["training"]["dataset_path"] == "data.jsonl", proc.stdout
    # The clone's relative path, given by the user elsewhere, is looked up there: not found.
    proc = run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel", *SMALL,
                     "--model.hf_assets_path", "assets/qwen3-tokenizer", cwd=tmp_path,
                     check=False)
    assert 'model.hf_assets_path = "assets/qwen3-tokenizer": no such directory' in \
        one_error_line(proc)


def test_run_train_sh_keeps_the_callers_directory(tmp_path):
    env = dict(os.environ, NGPU="1", OMP_NUM_THREADS="1")
    proc = subprocess.run([str(REPO / "scripts" / "run_train.sh"), *SMALL,
                           "--training.local_batch_size", "1", "--job.dump_folder", "run",
                           "--checkpoint.last_save_in_hf", "false"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert len(read_metrics(tmp_path / "run")) == 1


# 3. Nothing changes silently.

@pytest.fixture(scope="module")
def warned_run(hf_qwen3, tmp_path_factory):
    """SFT without document masking, a warmup longer than the run, seq_len 520 on a model of 512
    positions: one short run that should warn about each."""
    return run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel",
                     "--checkpoint.initial_load_path", hf_qwen3, "--model.flavor", "auto",
                     "--training.sft", "--training.dataset_path", CHATS,
                     "--training.seq_len", "520", "--training.local_batch_size", "1",
                     "--training.steps", "2", "--lr_scheduler.warmup_steps", "5",
                     "--job.dump_folder", tmp_path_factory.mktemp("warned"))


def test_warmup_clipped_to_the_steps_warns(warned_run):
    assert ("[titan] warning: lr_scheduler.warmup_steps = 5 is more than the 2 steps of the "
            "schedule (training.steps): the warmup is clipped to 2 steps") in warned_run.stderr


def test_sft_without_document_masking_warns(warned_run):
    assert ("[titan] warning: training.sft is on but training.document_masking is off: the "
            "conversations packed into a row attend to each other") in warned_run.stderr


def test_train_seq_len_beyond_max_position_embeddings_warns(warned_run):
    assert ("[titan] warning: training.seq_len = 520 is beyond the model's "
            "max_position_embeddings (512)") in warned_run.stderr
    assert len(warnings(warned_run)) == 3, warned_run.stderr


def cpu_flags():
    for line in open("/proc/cpuinfo"):
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def test_bf16_compute_on_a_cpu_without_bf16_warns(tmp_path):
    def run(*extra):
        return run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel", *SMALL,
                         "--training.seq_len", "8", "--training.mixed_precision_param",
                         "bfloat16", "--training.device", "cpu",
                         "--job.dump_folder", tmp_path / str(len(extra)), *extra)
    text = "bfloat16 compute (training.mixed_precision_param = \"bfloat16\") on a CPU without bf16"
    # This machine, as the kernel describes it.
    native = bool(cpu_flags() & {"avx512_bf16", "amx_bf16"})
    assert (text in run().stderr) != native
    # And a CPU without them (the test hook).
    assert text in run("--debug.assume_cpu_without_bf16").stderr


def test_resume_with_other_settings_prints_the_differences(tmp_path):
    def run(*extra):
        return run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel", *SMALL,
                         "--checkpoint.enable", "--checkpoint.interval", "1",
                         "--job.dump_folder", tmp_path, *extra)
    assert not warnings(run("--training.steps", "2"))
    proc = run("--training.steps", "3", "--training.seq_len", "48",
               "--training.local_batch_size", "2", "--lr_scheduler.decay_type", "cosine")
    assert "resumed from training checkpoint" in proc.stdout
    found = warnings(proc)
    assert len(found) == 1, proc.stderr
    for difference in ["global batch (rows per step) 1 -> 2", "training.seq_len 32 -> 48",
                       "training.steps 2 -> 3", "lr schedule length (lr_scheduler.total_steps) "
                       "2 -> 3", 'lr_scheduler.decay_type "linear" -> "cosine"']:
        assert difference in found[0], found[0]
    # The same settings again: nothing to say.
    assert not warnings(run("--training.steps", "3", "--training.seq_len", "48",
                            "--training.local_batch_size", "2",
                            "--lr_scheduler.decay_type", "cosine"))


def test_an_unknown_dataset_name_is_refused_a_known_one_is_read(tmp_path):
    proc = run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel",
                     "--training.dataset", "no_such_set", check=False)
    assert ('training.dataset = "no_such_set": not a built-in dataset; accepted values are '
            'python_stdlib, chat') in one_error_line(proc)
    # torchtitan's hub datasets are named as such, with the way to give local data.
    proc = run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel",
                     "--training.dataset", "c4_test", check=False)
    line = one_error_line(proc)
    assert 'training.dataset = "c4_test" is torchtitan\'s name for allenai/c4' in line, line
    assert "give training.dataset_path" in line, line
    printed = run_titan("configs", "--module", "qwen3", "--config", "qwen3_debugmodel",
                        "--training.dataset", "chat", "--print", cwd=tmp_path).stdout
    assert tomllib.loads(printed)["training"]["dataset_path"] == str(CHATS)


def test_eval_stops_at_the_end_of_the_data_and_reports_the_count(hf_qwen3, tmp_path):
    from tokenizers import Tokenizer
    texts = [json.loads(l)["text"][:300] for l in CORPUS.read_text().splitlines()[:3]]
    data = tmp_path / "short.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    tok = Tokenizer.from_file(str(TOKENIZER_DIR / "tokenizer.json"))
    ids = [i for t in texts for i in tok.encode(t).ids + [151643]]
    window = 65
    assert len(ids) < 8 * window
    proc = run_titan("eval", "--model", hf_qwen3, "--data", data, "--seq-len", "64",
                     "--steps", "8")
    assert (f"[titan] warning: --data {data} holds {len(ids)} tokens, fewer than --steps 8 x "
            f"--batch-size 1 x (--seq-len 64 + 1) = {8 * window}") in proc.stderr
    got = json.loads(proc.stdout)
    # Every token once: the windows of the data, each window's first token only an input.
    windows = [ids[i:i + window] for i in range(0, len(ids), window)]
    windows = [w for w in windows if len(w) > 1]  # a lone last token is only an input
    assert got["tokens"] == sum(len(w) - 1 for w in windows)
    want = sum(hf_window_loss(hf_qwen3, w) * (len(w) - 1) for w in windows) / got["tokens"]
    assert math.isclose(got["loss"], want, rel_tol=1e-4), (got, want)


def test_eval_seq_len_beyond_max_position_embeddings_warns(hf_qwen3):
    proc = run_titan("eval", "--model", hf_qwen3, "--data", CORPUS, "--seq-len", "600",
                     "--steps", "1")
    assert ("[titan] warning: --seq-len = 600 is beyond the model's max_position_embeddings "
            "(512)") in proc.stderr


# 4. Every error names its key.

def test_a_bad_boolean_names_its_key():
    proc = run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel",
                     "--checkpoint.enable", "maybe", check=False)
    assert '--checkpoint.enable: expected true or false, got "maybe"' in one_error_line(proc)


def test_a_missing_initial_load_path_names_its_key(tmp_path):
    proc = run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel",
                     "--checkpoint.initial_load_path", "nope", cwd=tmp_path, check=False)
    assert 'checkpoint.initial_load_path = "nope": no such directory' in one_error_line(proc)


def test_an_unknown_module_gets_a_did_you_mean():
    proc = run_titan("train", "--module", "qwen", "--config", "qwen3_debugmodel", check=False)
    assert 'unknown module "qwen" (did you mean "qwen3"?)' in one_error_line(proc)


def test_a_chat_record_without_sft_points_at_training_sft(tmp_path):
    proc = run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel", *SMALL,
                     "--training.dataset_path", CHATS, "--job.dump_folder", tmp_path,
                     check=False)
    line = one_error_line(proc)
    assert 'expected an object with a string field "text"' in line
    assert "training.sft = true reads chat records" in line, line


@pytest.mark.parametrize("content", ["", "not json at all\n", '{"no_step": 1}\n'])
def test_plot_of_a_file_without_records_is_one_true_error(tmp_path, content):
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text(content)
    proc = run_titan("plot", metrics, "--output", tmp_path / "x.png", check=False)
    line = one_error_line(proc)
    assert f"{metrics} holds no complete metrics record" in line
    assert "matplotlib" not in proc.stderr
    assert not (tmp_path / "x.png").exists()


# 5. Distributed runs read like single ones.

def test_torchrun_as_the_readme_prints_it(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = ["build/bin/torchrun", "--no-python", "--nproc_per_node=2", "--rdzv_backend", "c10d",
           "--rdzv_endpoint=localhost:0", "--local-ranks-filter", "0", "--role", "rank",
           "--tee", "3", "build/bin/titan", "train", "--module", "qwen3", "--config",
           "qwen3_debugmodel", *SMALL, "--training.local_batch_size", "1",
           "--job.dump_folder", tmp_path / "run"]
    proc = subprocess.run(list(map(str, cmd)), cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "rank 0 of 2" in proc.stdout
    assert len(read_metrics(tmp_path / "run")) == 1


def test_torchrun_failure_summary_shows_titans_error(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [TORCHRUN, "--no-python", "--nproc_per_node=1", "--rdzv_backend", "c10d",
           "--rdzv_endpoint=localhost:0", "--role", "rank", "--tee", "3", TITAN, "train",
           "--module", "qwen3", "--config", "qwen3_debugmodel", *SMALL,
           "--training.dataset_path", tmp_path / "missing.jsonl",
           "--job.dump_folder", tmp_path / "run"]
    proc = subprocess.run(list(map(str, cmd)), env=env, capture_output=True, text=True,
                          timeout=600)
    # titan's own error line, then one line per failed rank in place of torchrun's traceback
    # and summary (scripts/torchrun.py), and titan's exit code.
    assert proc.returncode == 2, proc.stderr[-3000:]
    missing = tmp_path / "missing.jsonl"
    assert f'error: training.dataset_path = "{missing}": no such file' in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and "Root Cause" not in proc.stderr, proc.stderr
    assert "failed on rank 0 (local rank 0) with exit code 2" in proc.stderr, proc.stderr


# 6. Exports are readable by others.

def mode(path):
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("umask, folder, file", [(0o022, 0o755, 0o644), (0o027, 0o750, 0o640)])
def test_exports_get_the_umasks_permissions(tmp_path, umask, folder, file):
    job = tmp_path / "run"
    run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel", *SMALL,
              "--checkpoint.last_save_in_hf", "--checkpoint.enable", "--job.dump_folder", job,
              umask=umask)
    export = job / "hf" / "step-1"
    assert mode(export) == folder
    assert mode(export / "model.safetensors") == file
    assert mode(job / "checkpoint" / "step-1") == folder
    converted = tmp_path / "converted"
    run_titan("convert", "--from", job / "checkpoint" / "step-1", "--to", converted,
              umask=umask)
    assert mode(converted) == folder and mode(converted / "config.json") == file
    back = tmp_path / "back" / "step-1"
    run_titan("convert", "--from", converted, "--to", back, umask=umask)
    assert mode(back) == folder


# 7. Names a torchtitan user knows (TensorBoard tags: test_observability.py).

def test_job_config_file_is_an_alias_of_config_file(tmp_path):
    job = tmp_path / "job.toml"
    job.write_text("[training]\nsteps = 33\n")
    base = ["configs", "--module", "qwen3", "--config", "qwen3_debugmodel", "--print"]
    alias = run_titan(*base, "--job.config_file", job).stdout
    assert tomllib.loads(alias)["training"]["steps"] == 33
    assert alias == run_titan(*base, "--config-file", job).stdout


def test_transformers_sft_full_sets_training_sft():
    printed = tomllib.loads(run_titan("configs", "--module", "transformers_modeling_backend",
                                      "--config", "transformers_modeling_backend_sft_full",
                                      "--print").stdout)
    assert printed["training"]["sft"] is True
    assert printed["training"]["dataset_path"] == str(CHATS)


# 8. The config explains itself.

def test_configs_print_describes_every_field():
    out = run_titan("configs", "--module", "qwen3", "--config", "qwen3_debugmodel",
                    "--print").stdout
    lines = out.splitlines()
    keys = 0
    for i, line in enumerate(lines):
        if re.match(r"^\w+ = ", line):
            keys += 1
            assert lines[i - 1].startswith("# ") and len(lines[i - 1]) > 4, (line, lines[i - 1])
    assert keys == sum(len(v) for v in tomllib.loads(out).values())
    assert "# optimizer steps to train\nsteps = 20\n" in out


def test_train_help_says_how_to_see_the_descriptions():
    out = run_titan("train", "--help").stdout
    assert "titan configs --module M --config F --print" in out
    assert "description" in out


def test_version_names_the_version_commit_and_torch():
    out = run_titan("--version").stdout.strip()
    m = re.fullmatch(r"titan (\d+\.\d+\.\d+) \(commit (\S+), torch (\S+)\)", out)
    assert m, out
    assert m.group(3) == torch.__version__.split("+")[0]
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                          text=True)
    if head.returncode == 0:
        # (A binary built before the last commit names the commit it was built from: rebuild.)
        assert head.stdout.startswith(m.group(2).removesuffix("-dirty")), (head.stdout, out)
    else:
        assert m.group(2) == "unknown"
