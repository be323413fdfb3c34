"""The compatibility table's cells on the Transformers backend, one family at a time: each
family's random debug model (built with Transformers) trained by one process, whose first loss
and gradient norm equal Transformers' own forward and backward of the same packed rows (each
document run alone), and then under each layout its row claims (FSDP 2, TP 2 with sequence
parallelism and loss parallel, EP 2, CP 2, PP 2 with 1F1B; Qwen3 also TP 2 x CP 2), every run
on the same global batch of packed documents that cross the CP chunk boundaries (float32, 4
steps): the losses, gradient norms and validation losses equal the one process's (relative
1e-5). The one process run is the baseline of all of a family's layouts, so a family is one test
(every layout run even when an earlier one differs, each difference named). Qwen3's other
layouts have their own tests (tp, pp), as do the refusals."""
import json
import re

import pytest
from tokenizers import Tokenizer

from conftest import TOKENIZER_DIR, read_metrics, run_titan
from hf_families import documents_alone_loss_and_norm, make_family
from hf_models import EOS
from launch import assert_close, curves, torchrun
from test_context_parallel import TEXTS

MODULE = "transformers_modeling_backend"
STEPS = 4
# name: (the mesh the start-up line names, arguments); 2 processes but where PROCESSES says
# otherwise, the global batch 2 rows.
LAYOUTS = {
    "FSDP 2": ("dp_shard=2", ["--training.local_batch_size", 1]),
    # The norms and the residual stream sharded over the sequence; the vocabulary-parallel loss
    # all-gathers the final norm's output.
    "TP 2 + SP": ("tp=2", ["--parallelism.tensor_parallel_degree", 2,
                           "--parallelism.enable_sequence_parallel", "true"]),
    # Each cp rank's tokens split again over tp between the regions.
    "TP 2 x CP 2 + SP": ("cp=2 tp=2", ["--parallelism.tensor_parallel_degree", 2,
                                       "--parallelism.context_parallel_degree", 2,
                                       "--parallelism.enable_sequence_parallel", "true"]),
    # The dense weights sharded by FSDP over the same two ranks; the auxiliary loss is a per-rank
    # mean by design, so balancing stays off.
    "EP 2": ("ep=2", ["--parallelism.expert_parallel_degree", 2,
                      "--training.local_batch_size", 1]),
    "CP 2": ("cp=2", ["--parallelism.context_parallel_degree", 2]),
    "PP 2": ("pp=2", ["--parallelism.pipeline_parallel_degree", 2,
                      "--parallelism.pipeline_parallel_schedule", "1F1B"]),
}
PROCESSES = {"TP 2 x CP 2 + SP": 4}
# The cells run here: each family's distinct tensor- and expert-parallel plans (the others share
# one, docs/transformers_backend.md), every family's FSDP 2 (under EP 2 for the MoE families
# that run it), CP 2 and PP 2 (Qwen3's FSDP 2, TP 2 and PP 2 are in test_transformers_{backend,
# tp,pp}.py). Tensor parallelism runs here with sequence parallelism (the default): the
# regions' entries and exits are then the sequence's all-gather and reduce-scatter around each
# family's own inner gathers and input slices, which are the same without it (Qwen3's TP 2
# without sequence parallelism is in test_transformers_tp.py).
FAMILIES = {
    "qwen3": ["TP 2 + SP", "CP 2", "TP 2 x CP 2 + SP"],
    "llama": ["FSDP 2", "TP 2 + SP", "CP 2", "PP 2"],
    "mistral": ["FSDP 2", "CP 2", "PP 2"],
    "qwen2": ["FSDP 2", "CP 2", "PP 2"],
    "olmo2": ["FSDP 2", "TP 2 + SP", "CP 2", "PP 2"],
    "phi3": ["FSDP 2", "TP 2 + SP", "CP 2", "PP 2"],
    "granite": ["FSDP 2", "TP 2 + SP", "CP 2", "PP 2"],
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


def first_rows(count, seq_len=32):
    """The first `count` rows the loader packs from the corpus: (ids, owner) each, seq_len + 1
    token ids and the document each belongs to."""
    tok = Tokenizer.from_file(str(TOKENIZER_DIR / "tokenizer.json"))
    ids, owner = [], []
    for doc, text in enumerate(TEXTS * 20):
        piece = tok.encode(text).ids + [EOS]
        ids += piece
        owner += [doc] * len(piece)
        if len(ids) >= count * (seq_len + 1):
            break
    n = seq_len + 1
    return [(ids[r * n:(r + 1) * n], owner[r * n:(r + 1) * n]) for r in range(count)]


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
    model = make_family(hf, family, TOKENIZER_DIR)
    want_loss, want_norm = documents_alone_loss_and_norm(model, first_rows(2))
    one = tmp_path / "one"
    run_titan(*args(one, corpus, hf))
    first = read_metrics(one)[0]
    failures = {"1 process": None if (first["loss"] == pytest.approx(want_loss, rel=1e-5) and
                                      first["grad_norm"] == pytest.approx(want_norm, rel=1e-5))
                else f"{first} against Transformers' {want_loss}, {want_norm}"}
    for layout in FAMILIES[family]:
        mesh, extra = LAYOUTS[layout]
        dump = tmp_path / layout.replace(" ", "")
        proc = torchrun(PROCESSES.get(layout, 2), args(dump, corpus, hf, *extra), check=False)
        if proc.returncode != 0:
            failures[layout] = f"exited {proc.returncode}: {proc.stderr[-1500:]}"
        elif not re.search(rf"of the model's[^\n]* {mesh}\b", proc.stdout):
            failures[layout] = f"not run as {mesh}: {proc.stdout[-1500:]}"
        else:
            failures[layout] = difference(dump, one)
    failures = {k: v for k, v in failures.items() if v is not None}
    assert not failures, f"{family}: {failures}"
