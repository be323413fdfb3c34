"""`titan train --training.objective dpo` (docs/preference.md) against TRL 1.16's DPOTrainer
(trl_dpo_peer.py) on the same small Qwen3 checkpoint, records, batches and optimizer, in float32
on the CPU: every step's loss, gradient norm and TRL's reward and log-probability metrics, for
full fine-tuning with the sigmoid and ipo losses and for LoRA with the starting adapter as the
reference; and the layouts DPO refuses are one error."""
import json
import shutil

import pytest
import torch

from conftest import read_metrics, run_titan
from hf_models import make_hf_model
from launch import torchrun
from trl_dpo_peer import METRICS, records, trl_dpo, trl_dpo_eval

peft = pytest.importorskip("peft")
from transformers import AutoModelForCausalLM  # noqa: E402

STEPS, BATCH, LR, BETA = 4, 2, 1e-3, 0.1
RANK, ALPHA = 4, 8


@pytest.fixture(scope="module")
def base(tmp_path_factory, tokenizer_dir):
    path = tmp_path_factory.mktemp("dpo") / "model"
    make_hf_model(path, moe=False, tied=True, seed=11, tokenizer_dir=tokenizer_dir)
    return path


def write_records(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def titan_dpo(base, data, dump, *extra, check=True, module="qwen3"):
    """titan's DPO run set as trl_dpo_peer.trl_dpo sets TRL's: AdamW (0.9, 0.999), no weight
    decay, a constant lr, clipping at 1.0, records in file order."""
    result = run_titan(
        "train", "--module", module, "--config", f"{module}_debugmodel", "--model.flavor", "auto",
        "--model.hf_assets_path", base, "--checkpoint.initial_load_path", base,
        "--checkpoint.initial_load_in_hf", "--training.objective", "dpo",
        "--training.steps", STEPS, "--training.local_batch_size", BATCH,
        "--training.shuffle", "false", "--training.dataset_path", data,
        "--optimizer.lr", LR, "--optimizer.betas", "0.9,0.999", "--optimizer.weight_decay", 0,
        "--lr_scheduler.warmup_steps", 0, "--lr_scheduler.decay_ratio", 0,
        "--training.max_norm", 1.0, "--dpo.beta", BETA, "--job.dump_folder", dump,
        *[str(a) for a in extra], check=check)
    return result if not check else read_metrics(dump)


def assert_steps_match(titan, trl, rel=1e-4, abs=1e-6):
    assert len(titan) == len(trl) == STEPS
    for step, (ours, theirs) in enumerate(zip(titan, trl), 1):
        for name in METRICS:
            # (An accuracy is a count over pairs: exact, or off by a whole pair.)
            assert ours[name] == pytest.approx(theirs[name], rel=rel, abs=abs), (step, name)


@pytest.mark.parametrize("loss_type", ["sigmoid", "ipo"])
def test_full_finetuning_matches_trl(tmp_path, base, loss_type):
    rows = records("standard")
    data = write_records(tmp_path / "pairs.jsonl", rows)
    ours = titan_dpo(base, data, tmp_path / "run", "--dpo.loss_type", loss_type)
    theirs = trl_dpo(base, rows, steps=STEPS, batch=BATCH, lr=LR, loss_type=(loss_type,),
                     beta=BETA)
    assert_steps_match(ours, theirs)
    # The policy moved away from the reference: the later steps' rewards are not zero.
    assert abs(ours[-1]["rewards/margins"]) > 1e-4


def starting_adapter(base, out, seed=1):
    """A PEFT adapter on every projection with random A and B (B nonzero: the starting adapter
    is then not the base, so the reference's values matter)."""
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    config = peft.LoraConfig(r=RANK, lora_alpha=ALPHA, lora_dropout=0.0,
                             target_modules=["q_proj", "k_proj", "v_proj", "o_proj",
                                             "gate_proj", "up_proj", "down_proj"])
    model = peft.get_peft_model(model, config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.02)
    model.save_pretrained(out)
    return out


def test_lora_with_the_starting_adapter_as_reference_matches_trl(tmp_path, base):
    rows = records("conversational")
    data = write_records(tmp_path / "pairs.jsonl", rows)
    adapter = starting_adapter(base, tmp_path / "adapter")
    ours = titan_dpo(base, data, tmp_path / "run", "--model.converters", "lora",
                     "--lora.rank", RANK, "--lora.alpha", ALPHA,
                     "--lora.initial_adapter_path", adapter)
    # TRL's reference for a PeftModel that comes with an adapter: a frozen copy of it.
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    model = peft.PeftModel.from_pretrained(model, adapter, is_trainable=True)
    theirs = trl_dpo(base, rows, steps=STEPS, batch=BATCH, lr=LR, beta=BETA, model=model)
    assert_steps_match(ours, theirs)

    # With the adapters off as the reference, the first step measures the starting adapter
    # against the base: its rewards are not zero, and its policy log-probabilities are the same.
    off = titan_dpo(base, data, tmp_path / "off", "--model.converters", "lora",
                    "--lora.rank", RANK, "--lora.alpha", ALPHA,
                    "--lora.initial_adapter_path", adapter, "--dpo.reference", "adapters_off",
                    "--training.steps", 1)
    assert off[0]["logps/chosen"] == pytest.approx(ours[0]["logps/chosen"], rel=1e-5)
    assert abs(off[0]["rewards/chosen"]) > 1e-4 and ours[0]["rewards/chosen"] == 0


def titan_dpo_two_ranks(base, data, dump, *extra, steps=3):
    """titan_dpo's run on two ranks (torchrun)."""
    args = ["train", "--module", "qwen3", "--config", "qwen3_debugmodel",
            "--model.flavor", "auto", "--model.hf_assets_path", base,
            "--checkpoint.initial_load_path", base, "--checkpoint.initial_load_in_hf",
            "--training.objective", "dpo", "--training.steps", steps,
            "--training.local_batch_size", BATCH, "--training.shuffle", "false",
            "--training.dataset_path", data, "--optimizer.lr", LR,
            "--optimizer.betas", "0.9,0.999", "--optimizer.weight_decay", 0,
            "--lr_scheduler.warmup_steps", 0, "--lr_scheduler.decay_ratio", 0,
            "--job.dump_folder", dump, *extra]
    torchrun(2, args)
    return read_metrics(dump)


def assert_same_steps(ours, one, what, abs=1e-6):
    assert len(ours) == len(one)
    for step, (a, b) in enumerate(zip(ours, one), 1):
        for name in METRICS:
            assert a[name] == pytest.approx(b[name], rel=1e-5, abs=abs), (what, step, name)
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5), (what, step)
        assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-5), (what, step)


@pytest.mark.parametrize("layout", ["fsdp2", "tp2", "cp2"])
def test_two_ranks_train_as_one_process(tmp_path, base, layout):
    """FSDP: each rank takes one pair of a step's two, the loss and metrics are sums over the
    pairs of every rank; TP: both ranks take both pairs, the head vocabulary-parallel; CP: both
    ranks take both pairs, each holding half the tokens of every row (chosen and rejected), the
    rows' log-probabilities summed over the two."""
    data = write_records(tmp_path / "pairs.jsonl", records("standard"))
    one = titan_dpo(base, data, tmp_path / "one", "--training.steps", 3)
    degrees = {"fsdp2": ["--parallelism.data_parallel_shard_degree", 2,
                         "--training.local_batch_size", 1],
               "tp2": ["--parallelism.tensor_parallel_degree", 2],
               "cp2": ["--parallelism.context_parallel_degree", 2]}[layout]
    two = titan_dpo_two_ranks(base, data, tmp_path / "two", *degrees)
    assert_same_steps(two, one, layout)


def test_context_parallel_precomputed_reference_and_transformers_backend(tmp_path, base):
    """CP 2 with the reference's table computed before training (each cp rank forwarding its
    part of the rows, the parts summed), and CP 2 on the Transformers backend (its attention
    routed through titan's context attention, the load balancer none): each trains as its model
    on one process."""
    data = write_records(tmp_path / "pairs.jsonl", records("conversational"))
    one = titan_dpo(base, data, tmp_path / "one", "--training.steps", 3)
    cp = ["--parallelism.context_parallel_degree", 2]
    table = titan_dpo_two_ranks(base, data, tmp_path / "table", *cp,
                                "--dpo.precompute_reference", "true")
    assert_same_steps(table, one, "precomputed")
    path1 = ["--model.name", "transformers", "--model.attn_implementation", "eager"]
    hf_one = titan_dpo(base, data, tmp_path / "hf_one", "--training.steps", 3, *path1)
    hf = titan_dpo_two_ranks(base, data, tmp_path / "hf", *cp, *path1,
                             "--parallelism.context_parallel_load_balancer", "none")
    # A sequence's log-probability (~-130 here) is summed in two parts here and in one there,
    # which may round it a float32 ulp (1.5e-5 at 130) apart; a reward is beta (0.1) x the
    # difference of two such sums and carries that: 1e-6 apart is chance, 5e-6 is not.
    assert_same_steps(hf, hf_one, "transformers", abs=5e-6)


def test_precomputed_reference_is_the_live_one_and_resumes(tmp_path, base):
    """dpo.precompute_reference: the table computed before the first step gives the live
    reference's numbers; it is saved in the checkpoint, so a resumed run goes on with them, where
    a resume with the live starting weights is one error."""
    data = write_records(tmp_path / "pairs.jsonl", records("standard"))
    live = titan_dpo(base, data, tmp_path / "live")
    ckpt = ["--checkpoint.enable", "--checkpoint.interval", 2]
    table = titan_dpo(base, data, tmp_path / "table", "--dpo.precompute_reference", "true", *ckpt)
    for a, b in zip(table, live):
        for name in METRICS:
            assert a[name] == pytest.approx(b[name], rel=1e-6, abs=1e-7), name
    resumed = tmp_path / "resumed"
    shutil.copytree(tmp_path / "table" / "checkpoint" / "step-2",
                    resumed / "checkpoint" / "step-2")
    after = titan_dpo(base, data, resumed, "--dpo.precompute_reference", "true", *ckpt)
    assert [m["step"] for m in after] == [3, 4]
    for a, b in zip(after, table[2:]):
        for name in METRICS:
            assert a[name] == pytest.approx(b[name], rel=1e-6, abs=1e-7), name
    # Without the table, the starting weights are not in the checkpoint: one error.
    shutil.rmtree(resumed)
    shutil.copytree(tmp_path / "table" / "checkpoint" / "step-2",
                    resumed / "checkpoint" / "step-2")
    result = titan_dpo(base, data, resumed, *ckpt, check=False)
    assert result.returncode != 0
    assert "resuming a DPO run with dpo.reference = \"initial\"" in result.stderr + result.stdout


def test_eval_of_a_trained_model_matches_trl(tmp_path, base):
    """`titan eval --objective dpo` of the exported model against its start: TRL's evaluate()."""
    rows = records("conversational")
    data = write_records(tmp_path / "pairs.jsonl", rows)
    titan_dpo(base, data, tmp_path / "run", "--training.steps", 2,
              "--checkpoint.last_save_in_hf", "--dpo.loss_type", "sigmoid,sft")
    trained = tmp_path / "run" / "hf" / "step-2"
    proc = run_titan("eval", "--objective", "dpo", "--model", trained, "--reference", base,
                     "--data", data, "--batch-size", 4, "--loss-type", "sigmoid,sft",
                     "--beta", BETA, "--device", "cpu")
    ours = json.loads(proc.stdout.strip().splitlines()[-1])
    theirs = trl_dpo_eval(trained, base, rows, loss_type=("sigmoid", "sft"), beta=BETA)
    assert ours["pairs"] == len(rows)
    for name in ["loss"] + METRICS[2:]:
        assert ours[name] == pytest.approx(theirs[name], rel=1e-4, abs=1e-6), name
    assert ours["rewards/margins"] > 0  # trained on these pairs


def test_transformers_backend_trains_as_the_native_model(tmp_path, base):
    data = write_records(tmp_path / "pairs.jsonl", records("implicit"))
    native = titan_dpo(base, data, tmp_path / "native", "--training.steps", 2)
    hf = titan_dpo(base, data, tmp_path / "hf", "--training.steps", 2, "--model.name",
                   "transformers", "--model.attn_implementation", "eager")
    for a, b in zip(hf, native):
        for name in METRICS:
            assert a[name] == pytest.approx(b[name], rel=1e-5, abs=1e-6), name


def test_pipeline_parallel_dpo_is_one_error(tmp_path, base):
    data = write_records(tmp_path / "pairs.jsonl", records("standard"))
    result = titan_dpo(base, data, tmp_path / "run", "--parallelism.pipeline_parallel_degree", 2,
                       check=False)
    assert result.returncode != 0
    assert "does not run pipeline-parallel" in result.stderr + result.stdout


@pytest.mark.parametrize("args, flag", [
    (["--objective", "dpo", "--reference", "R", "--seq-len", 64], "--seq-len"),
    (["--objective", "dpo", "--reference", "R", "--sft"], "--sft"),
    (["--beta", 0.5], "--beta"),
    (["--objective", "lm", "--reference", "R"], "--reference"),
])
def test_eval_refuses_a_flag_of_the_other_objective(tmp_path, args, flag):
    """A flag that the chosen objective reads nowhere is one error naming it, not a result that
    silently ignored it (before any model or data is read: the paths need not exist)."""
    proc = run_titan("eval", "--model", tmp_path / "m", "--data", tmp_path / "d.jsonl", *args,
                     check=False)
    assert proc.returncode != 0
    assert f"titan eval: {flag} does not apply to --objective" in proc.stderr
