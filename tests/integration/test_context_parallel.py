"""Context parallelism under torchrun with Gloo on the CPU: every cp rank of a data-parallel rank
keeps its part of each row (head-tail chunks or contiguous pieces), the keys and values are
all-gathered in attention, and each layout gives the single-process losses, gradient norms and
validation losses (float32, 4 steps, 1e-5) for the same global batch, with causal rows and with
packed documents that cross the chunk boundaries; composed with FSDP, TP (sequence parallel)
and EP; checkpoints reshard between CP and other layouts and the Hugging Face export does not
depend on the layout; a length that does not split fails with one clear error (the
Transformers backend's context parallelism: test_transformers_cp.py)."""
import json
import os
import shutil
import subprocess

import pytest
import torch
from safetensors.torch import load_file
from tokenizers import Tokenizer

from conftest import REPO, TITAN, TOKENIZER_DIR, read_metrics
from launch import assert_close, curves, torchrun

STEPS = 4
SEQ_LEN = 32
GLOBAL_BATCH = 4
# Documents of very different lengths (a few to ~40 tokens): a 32-token row holds several and
# cuts others, so documents start inside chunks and run across chunk (and rank) boundaries.
TEXTS = ["x = 1", "def f(a, b):\n    return a + b\n", "Hello, world!", "ok",
         "import os\nprint(os.getcwd())\n", "The quick brown fox jumps over the lazy dog. " * 3,
         "αβγ δεζ", "#", "for i in range(3):\n    pass\n", "end of the corpus",
         "while True:\n    break\n", "a b c d e f g h i j k l m n o p"]
MODELS = {
    "dense": ["--config", "qwen3_debugmodel"],
    "moe": ["--config", "qwen3_debugmodel_moe", "--model.moe_load_balancing", "expert_bias"],
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("cp") / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS * 20), encoding="utf-8")
    return path


def args(dump, corpus, kind, local_batch, *extra, steps=STEPS, documents=False):
    return ["train", "--module", "qwen3", *MODELS[kind], "--training.seq_len", SEQ_LEN,
            "--training.steps", steps, "--lr_scheduler.warmup_steps", "2",
            "--lr_scheduler.total_steps", STEPS, "--metrics.log_freq", "1",
            "--training.local_batch_size", local_batch, "--training.dataset_path", corpus,
            "--training.document_masking", str(documents).lower(),
            "--validator.enable", "true", "--validator.freq", "2", "--validator.steps", "2",
            "--validator.dataset_path", corpus,
            "--model.hf_assets_path", TOKENIZER_DIR, "--job.dump_folder", dump, *extra]


def validation_losses(dump):
    return [m["validation_metrics/loss"] for m in read_metrics(dump)
            if "validation_metrics/loss" in m]


def test_documents_cross_the_chunk_boundaries():
    """The corpus does what the document-masked layouts need: in the rows of the first steps,
    documents start inside chunks and run on across chunk boundaries (cp 2: chunks of 8)."""
    tok = Tokenizer.from_file(str(TOKENIZER_DIR / "tokenizer.json"))
    owner, doc = [], 0
    while len(owner) < STEPS * GLOBAL_BATCH * (SEQ_LEN + 1):
        for text in TEXTS:
            owner += [doc] * (len(tok.encode(text).ids) + 1)
            doc += 1
    n = SEQ_LEN + 1
    rows = [owner[r * n:r * n + SEQ_LEN] for r in range(STEPS * GLOBAL_BATCH)]
    crossing = sum(row[b - 1] == row[b] for row in rows for b in (8, 16, 24))
    inside = sum(row[t - 1] != row[t] for row in rows for t in range(1, SEQ_LEN) if t % 8)
    assert crossing >= 5 and inside >= 10, (crossing, inside)


@pytest.fixture(scope="module")
def single(tmp_path_factory, corpus):
    """One process, the whole global batch: the reference of every layout (checkpoints at
    steps 2 and 4)."""
    out = {}
    for kind, documents in (("dense", False), ("dense", True), ("moe", False)):
        dump = tmp_path_factory.mktemp("single") / f"{kind}{'_docs' if documents else ''}"
        torchrun(1, args(dump, corpus, kind, GLOBAL_BATCH, "--checkpoint.enable",
                         "--checkpoint.interval", "2", documents=documents))
        out[(kind, documents)] = dump
    return out


# name: (processes, model, documents, local batch, overrides)
LAYOUTS = {
    "cp2": (2, "dense", False, 4, ["--parallelism.context_parallel_degree", "2"]),
    "cp2_none": (2, "dense", False, 4, ["--parallelism.context_parallel_degree", "2",
                                        "--parallelism.context_parallel_load_balancer", "none"]),
    "cp2_documents": (2, "dense", True, 4, ["--parallelism.context_parallel_degree", "2"]),
    "cp2_documents_none": (2, "dense", True, 4,
                           ["--parallelism.context_parallel_degree", "2",
                            "--parallelism.context_parallel_load_balancer", "none"]),
    "cp2_fsdp2_documents": (4, "dense", True, 2, ["--parallelism.context_parallel_degree", "2"]),
    "cp2_tp2": (4, "dense", False, 4, ["--parallelism.context_parallel_degree", "2",
                                       "--parallelism.tensor_parallel_degree", "2"]),
    # The pipeline splits the layers, the cp ranks of each stage the rows' tokens.
    "cp2_pp2_documents": (4, "dense", True, 4, ["--parallelism.context_parallel_degree", "2",
                                                "--parallelism.pipeline_parallel_degree", "2"]),
    "cp2_ep2_moe": (2, "moe", False, 4, ["--parallelism.context_parallel_degree", "2",
                                         "--parallelism.expert_parallel_degree", "2"]),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_layout_matches_one_process(tmp_path, corpus, single, layout):
    nproc, kind, documents, local_batch, extra = LAYOUTS[layout]
    dump = tmp_path / "run"
    proc = torchrun(nproc, args(dump, corpus, kind, local_batch, *extra, "--checkpoint.enable",
                                "--checkpoint.interval", "4", documents=documents))
    ref = single[(kind, documents)]
    (losses, norms), (ref_losses, ref_norms) = curves(dump), curves(ref)
    assert_close(losses, ref_losses, "loss")
    assert_close(norms, ref_norms, "grad_norm")
    assert len(validation_losses(ref)) == 2
    assert_close(validation_losses(dump), validation_losses(ref), "validation loss")
    # FSDP folds the cp ranks in: each rank holds its share of the dense weights.
    assert "cp=2" in proc.stdout
    shares = [float(line.split("optimizer state: ")[1].split(" MiB, ")[1].split("%")[0])
              for line in proc.stdout.splitlines() if "% of the model's" in line]
    assert len(shares) == nproc and all(share < 100 for share in shares), proc.stdout[-3000:]
    if kind == "moe":
        # The expert biases took the same updates (the counts of every rank's tokens).
        ours = load_file(dump / "checkpoint" / "step-4" / "model-rank0.safetensors")
        theirs = load_file(ref / "checkpoint" / "step-4" / "model.safetensors")
        biases = [n for n in theirs if n.endswith("mlp.expert_bias")]
        assert biases and any(theirs[n].abs().max() > 0 for n in biases)
        for name in biases:
            assert torch.allclose(ours[name], theirs[name], atol=1e-7), name


def test_moe_aux_loss_is_each_ranks_mean_as_under_tensor_parallelism(tmp_path, corpus):
    """The aux loss of a cp rank is over its tokens only, divided by cp: CP 2 with contiguous
    pieces of one row and TP 2 without sequence parallelism (whose rank r routes tokens
    [r S/2, (r+1) S/2) of the row) give the MoE layers the same halves, so the same gradients
    (an aux loss weighted 1, so that it dominates them). The logged losses differ by design: TP
    logs its first rank's share of the aux loss, CP the sum over the loss group."""
    aux = ["--model.moe_load_balancing", "aux_loss", "--model.router_aux_loss_coef", "1"]
    runs = {}
    for name, layout in (("cp", ["--parallelism.context_parallel_degree", "2",
                                 "--parallelism.context_parallel_load_balancer", "none"]),
                         ("tp", ["--parallelism.tensor_parallel_degree", "2",
                                 "--parallelism.enable_sequence_parallel", "false"])):
        runs[name] = tmp_path / name
        torchrun(2, args(runs[name], corpus, "moe", 1, *aux, *layout, steps=3))
    assert_close(curves(runs["cp"])[1], curves(runs["tp"])[1], "grad_norm")


def resume(dump, checkpoint, nproc, corpus, local_batch, *extra, documents=False):
    shutil.copytree(checkpoint, dump / "checkpoint")
    torchrun(nproc, args(dump, corpus, "dense", local_batch, "--checkpoint.enable", *extra,
                         documents=documents))
    return [m["loss"] for m in read_metrics(dump)]


def test_checkpoints_reshard_between_context_parallel_and_other_layouts(tmp_path, corpus,
                                                                         single):
    """CP 2 -> 1 process, 1 process -> CP 2, CP 2 x FSDP 2 -> FSDP 4: each resumes at step 2
    to the uninterrupted run's losses; the Hugging Face export of the CP 2 x FSDP 2 state is the
    bytes one process exports from it."""
    ref = single[("dense", True)]
    ref_losses = curves(ref)[0]
    cp = ["--parallelism.context_parallel_degree", "2"]
    split = tmp_path / "cp2_fsdp2"
    torchrun(4, args(split, corpus, "dense", 2, *cp, "--checkpoint.enable",
                     "--checkpoint.interval", "2", "--checkpoint.last_save_in_hf", steps=2,
                     documents=True))
    assert_close(curves(split)[0], ref_losses[:2], "CP 2 x FSDP 2")
    manifest = json.loads((split / "checkpoint" / "step-2" / "manifest.json").read_text())
    assert manifest["mesh"]["dims"]["cp"] == 2 and manifest["mesh"]["dims"]["dp_shard"] == 2
    # The same state exported by one process: the same bytes.
    one = tmp_path / "export_one"
    shutil.copytree(split / "checkpoint", one / "checkpoint")
    torchrun(1, args(one, corpus, "dense", 4, "--checkpoint.enable",
                     "--checkpoint.last_save_in_hf", steps=2, documents=True))
    assert ((one / "hf" / "step-2" / "model.safetensors").read_bytes() ==
            (split / "hf" / "step-2" / "model.safetensors").read_bytes())
    cases = {
        "CP 2 x FSDP 2 -> FSDP 4": (split / "checkpoint", 4, 1, []),
        "1 process -> CP 2": (ref / "checkpoint", 2, 4, cp),
    }
    for what, (checkpoint, nproc, local_batch, extra) in cases.items():
        dump = tmp_path / what.replace(" ", "_").replace(">", "")
        if checkpoint == ref / "checkpoint":
            # Only step 2 of the reference: the run continues from there.
            dump.mkdir()
            shutil.copytree(checkpoint / "step-2", dump / "checkpoint" / "step-2")
            torchrun(nproc, args(dump, corpus, "dense", local_batch, "--checkpoint.enable",
                                 *extra, documents=True))
            losses = [m["loss"] for m in read_metrics(dump)]
        else:
            losses = resume(dump, checkpoint, nproc, corpus, local_batch, *extra, documents=True)
        assert_close(losses[-2:], ref_losses[2:], what)


def test_checkpoint_of_context_parallel_alone_resumes_on_one_process(tmp_path, corpus, single):
    """CP 2 (FSDP over the cp ranks only) -> 1 process."""
    ref_losses = curves(single[("dense", False)])[0]
    cp2 = tmp_path / "cp2"
    torchrun(2, args(cp2, corpus, "dense", 4, "--parallelism.context_parallel_degree", "2",
                     "--checkpoint.enable", "--checkpoint.interval", "2", steps=2))
    losses = resume(tmp_path / "one", cp2 / "checkpoint", 1, corpus, 4)
    assert_close(losses[-2:], ref_losses[2:], "CP 2 -> 1 process")


@pytest.mark.parametrize("balancer, seq_len, needle", [
    ("headtail", 30, "training.seq_len = 30 does not split into 4 equal chunks"),
    ("none", 31, "training.seq_len = 31 does not split into 2 equal chunks"),
    ("ptrr", 32, "parallelism.context_parallel_load_balancer"),
])
def test_a_length_that_does_not_split_is_one_clear_error(tmp_path, corpus, balancer, seq_len,
                                                         needle):
    proc = torchrun(2, ["train", "--module", "qwen3", "--config", "qwen3_debugmodel",
                        "--parallelism.context_parallel_degree", "2",
                        "--parallelism.context_parallel_load_balancer", balancer,
                        "--training.seq_len", seq_len, "--training.steps", "1",
                        "--training.dataset_path", corpus, "--job.dump_folder", tmp_path / "bad"],
                    check=False, timeout=200)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert needle in out, out[-3000:]
    if balancer != "ptrr":
        assert "parallelism.context_parallel_degree = 2" in out


def test_configs_print_shows_the_context_parallel_groups():
    """cp ranks sit just outside tp (torchtitan's [pp, dp_replicate, dp_shard, cp, tp]); the
    loss is summed over dp x cp and FSDP shards over dp_shard x cp."""
    proc = subprocess.run([str(TITAN), "configs", "--module", "qwen3", "--config",
                           "qwen3_debugmodel", "--parallelism.context_parallel_degree", "2",
                           "--parallelism.tensor_parallel_degree", "2", "--print"],
                          capture_output=True, text=True, env=dict(os.environ, WORLD_SIZE="8"))
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert 'context_parallel_load_balancer = "headtail"' in text, text
    mesh = torch.arange(8).view(1, 1, 2, 2, 2)  # pp, dp_replicate, dp_shard, cp, tp
    expected = {"cp": mesh[0, 0, 0, :, 0], "dp_cp": mesh[0, 0, :, :, 0],
                "dp_shard_cp": mesh[0, 0, :, :, 0], "tp": mesh[0, 0, 0, 0, :]}
    for group, ranks in expected.items():
        line = f"{group} of rank 0: ranks " + ", ".join(str(int(r)) for r in ranks.flatten())
        assert line in text, (line, text)


def test_a_context_parallel_export_is_what_docs_distributed_md_says(tmp_path, corpus, single):
    """A model trained under CP 2 exports the weights one process trains, to float rounding:
    the attention's sums are split over the cp ranks, so after a few steps they differ in the
    last bits. docs/distributed.md says so (it once claimed the bytes were equal)."""
    dump = tmp_path / "cp2"
    torchrun(2, args(dump, corpus, "dense", 4, "--parallelism.context_parallel_degree", "2",
                     "--checkpoint.last_save_in_hf"))
    ref = tmp_path / "one"
    subprocess.run([str(TITAN), "convert", "--from", single[("dense", False)] / "checkpoint" /
                    "step-4", "--to", ref], check=True, capture_output=True)
    ours = load_file(dump / "hf" / f"step-{STEPS}" / "model.safetensors")
    theirs = load_file(ref / "model.safetensors")
    assert ours.keys() == theirs.keys()
    worst = max(((ours[k] - theirs[k]).abs().max() / theirs[k].abs().max().clamp_min(1e-12)).item()
                for k in ours)
    page = (REPO / "docs" / "distributed.md").read_text()
    paragraph = page.split("**Composition.**")[1].split("\n\n")[0]
    # AdamW's normalised steps turn the rounding of the smallest gradients into differences
    # of a step size (lr 8e-4 here): measured 1.8e-4 of a tensor's largest entry.
    assert worst < 1e-3, worst
    if worst > 0:
        assert "byte-identical to one process's" not in paragraph, paragraph
        assert "to float rounding" in paragraph, paragraph
