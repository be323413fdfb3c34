"""The compatibility table's layout cells on the Transformers backend, one family at a time: each
family's random debug model (built with Transformers) trained by one process, and then under
each layout its row claims (FSDP 2, TP 2, EP 2, CP 2, PP 2 with 1F1B), every run on the same
global batch of packed documents that cross the CP chunk boundaries (float32, 3 steps): the
losses, gradient norms and validation losses equal the one process's (relative 1e-5). One
process run is the baseline of all of a family's layouts, so a family is one test (every layout
run even when an earlier one differs, each difference named). Qwen3 has its own tests
(tp, cp, pp), as do the refusals."""
import json

import pytest

from conftest import TOKENIZER_DIR, read_metrics, run_titan
from hf_families import make_family
from launch import assert_close, curves, torchrun
from test_context_parallel import TEXTS

MODULE = "transformers_modeling_backend"
STEPS = 3
# name: (processes, arguments); the global batch is 2 rows in every layout.
LAYOUTS = {
    "FSDP 2": (2, ["--training.local_batch_size", 1]),
    "TP 2": (2, ["--parallelism.tensor_parallel_degree", 2,
                 "--parallelism.enable_sequence_parallel", "false"]),
    # The dense weights sharded by FSDP over the same two ranks; the auxiliary loss is a per-rank
    # mean by design, so balancing stays off.
    "EP 2": (2, ["--parallelism.expert_parallel_degree", 2, "--training.local_batch_size", 1]),
    "CP 2": (2, ["--parallelism.context_parallel_degree", 2]),
    "PP 2": (2, ["--parallelism.pipeline_parallel_degree", 2,
                 "--parallelism.pipeline_parallel_schedule", "1F1B"]),
}
# The cells run here: each family's distinct tensor- and expert-parallel plans (the others share
# one, docs/transformers_backend.md), every family's FSDP 2 (under EP 2 for the MoE families
# that run it), CP 2 and PP 2.
FAMILIES = {
    "llama": ["FSDP 2", "CP 2", "PP 2"],
    "mistral": ["FSDP 2", "CP 2", "PP 2"],
    "qwen2": ["FSDP 2", "CP 2", "PP 2"],
    "olmo2": ["FSDP 2", "TP 2", "CP 2", "PP 2"],
    "phi3": ["FSDP 2", "TP 2", "CP 2", "PP 2"],
    "granite": ["FSDP 2", "TP 2", "CP 2", "PP 2"],
    "qwen3_moe": ["EP 2", "CP 2", "PP 2"],
    "mixtral": ["FSDP 2", "CP 2", "PP 2"],
    "olmoe": ["FSDP 2", "CP 2", "PP 2"],
    "deepseek_v2": ["EP 2", "CP 2", "PP 2"],
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Documents of a few tokens each: every 32-token row packs several."""
    path = tmp_path_factory.mktemp("docs") / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS * 20), encoding="utf-8")
    return path


def args(dump, corpus, hf_dir, *extra):
    return ["train", "--module", MODULE, "--config", f"{MODULE}_debugmodel",
            "--model.flavor", "auto", "--model.hf_assets_path", hf_dir,
            "--checkpoint.initial_load_in_hf", "--model.moe_load_balancing", "none",
            "--training.steps", STEPS, "--training.local_batch_size", 2,
            "--training.seq_len", 32, "--training.document_masking", "true",
            "--lr_scheduler.warmup_steps", 2, "--metrics.log_freq", 1,
            "--training.dataset_path", corpus,
            "--validator.enable", "true", "--validator.freq", 2, "--validator.steps", 1,
            "--validator.dataset_path", corpus, "--job.dump_folder", dump, *extra]


def validation_losses(dump):
    return [m["validation_metrics/loss"] for m in read_metrics(dump)
            if "validation_metrics/loss" in m]


def difference(dump, ref):
    """None when the run at `dump` is the one at `ref`, else what differs."""
    try:
        (losses, norms), (ref_losses, ref_norms) = curves(dump), curves(ref)
        assert len(ref_losses) == STEPS and len(validation_losses(ref)) >= 1
        assert_close(losses, ref_losses, "loss")
        assert_close(norms, ref_norms, "grad_norm")
        assert_close(validation_losses(dump), validation_losses(ref), "validation loss")
    except AssertionError as e:
        return str(e)
    return None


@pytest.mark.parametrize("family", list(FAMILIES))
def test_layouts_match_one_process(tmp_path, corpus, family):
    hf = tmp_path / "hf"
    make_family(hf, family, TOKENIZER_DIR)
    one = tmp_path / "one"
    run_titan(*args(one, corpus, hf))
    failures = {}
    for layout in FAMILIES[family]:
        nproc, extra = LAYOUTS[layout]
        dump = tmp_path / layout.replace(" ", "")
        proc = torchrun(nproc, args(dump, corpus, hf, *extra), check=False)
        if proc.returncode != 0:
            failures[layout] = f"exited {proc.returncode}: {proc.stderr[-1500:]}"
        else:
            failures[layout] = difference(dump, one)
    failures = {k: v for k, v in failures.items() if v is not None}
    assert not failures, f"{family}: {failures}"
