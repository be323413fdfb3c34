"""Document masking (training.document_masking, titan eval --document-masking): a packed row's
loss equals the losses of its documents each run alone through Hugging Face Transformers, with
positions restarting at every document; training with masking, shuffling and prefetching
resumes exactly."""
import json

import pytest
import torch
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM

from conftest import read_metrics, run_titan
from hf_models import EOS, documents_alone_loss, make_hf_model

# Documents of very different lengths, so rows hold several whole documents and cut others.
TEXTS = ["x = 1", "def f(a, b):\n    return a + b\n", "Hello, world!", "ok",
         "import os\nprint(os.getcwd())\n", "The quick brown fox jumps over the lazy dog. " * 3,
         "αβγ δεζ", "#", "for i in range(3):\n    pass\n", "end of the corpus"]
# The file holds them three times: enough for the windows eval reads (it stops at the end of the
# data; training starts over, as packed_rows does).
DOCUMENTS = TEXTS * 3


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("docs") / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in DOCUMENTS), encoding="utf-8")
    return path


def packed_rows(tokenizer_dir, seq_len, rows):
    """The loader's windows re-made in Python: tokens and the document each one belongs to."""
    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    ids, owner, doc = [], [], 0
    while len(ids) < rows * (seq_len + 1):
        for text in DOCUMENTS:
            piece = tok.encode(text).ids + [EOS]
            ids += piece
            owner += [doc] * len(piece)
            doc += 1
    n = seq_len + 1
    return [(ids[r * n:(r + 1) * n], owner[r * n:(r + 1) * n], None) for r in range(rows)]


@pytest.fixture(scope="module", params=[False, True], ids=["dense", "moe"])
def hf_dir(request, tmp_path_factory, tokenizer_dir):
    path = tmp_path_factory.mktemp("hf") / "model"
    make_hf_model(path, moe=request.param, tied=not request.param, seed=5,
                  tokenizer_dir=tokenizer_dir)
    return path


def hf_model(hf_dir):
    return AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32,
                                                attn_implementation="eager").eval()


def test_eval_of_packed_rows_equals_documents_alone(hf_dir, corpus, tokenizer_dir):
    seq_len, steps = 40, 3
    out = run_titan("eval", "--model", hf_dir, "--data", corpus, "--seq-len", seq_len,
                    "--steps", steps, "--document-masking")
    ours = json.loads(out.stdout.strip().splitlines()[-1])
    total, count = documents_alone_loss(hf_model(hf_dir), packed_rows(tokenizer_dir, seq_len, steps))
    assert ours["tokens"] == count
    assert ours["loss"] == pytest.approx(total / count, rel=1e-5)
    # Without masking the documents see each other: a different loss over more labels.
    plain = json.loads(run_titan("eval", "--model", hf_dir, "--data", corpus, "--seq-len", seq_len,
                                 "--steps", steps).stdout.strip().splitlines()[-1])
    assert plain["tokens"] == seq_len * steps > count
    assert plain["loss"] != pytest.approx(ours["loss"], rel=1e-4)


def test_training_step_loss_equals_documents_alone(hf_dir, corpus, tokenizer_dir, tmp_path):
    seq_len, batch = 24, 2
    dump = tmp_path / "run"
    run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel",
              "--model.flavor", "auto", "--model.hf_assets_path", hf_dir,
              "--checkpoint.initial_load_in_hf", "--training.steps", "1",
              "--training.local_batch_size", batch, "--training.seq_len", seq_len,
              "--training.document_masking", "true", "--metrics.log_freq", "1",
              "--training.dataset_path", corpus, "--job.dump_folder", dump)
    loss = read_metrics(dump)[0]["loss"]
    total, count = documents_alone_loss(hf_model(hf_dir), packed_rows(tokenizer_dir, seq_len, batch))
    assert loss == pytest.approx(total / count, rel=1e-5)


def train_args(dump, corpus, tokenizer_dir, steps, *extra, shuffle="true"):
    return ["train", "--module", "qwen3", "--config", "qwen3_debugmodel",
            "--training.local_batch_size", "2", "--training.seq_len", "24",
            "--training.document_masking", "true", "--training.shuffle", shuffle,
            "--training.seed", "9", "--training.prefetch_batches", "3",
            "--metrics.log_freq", "1", "--training.steps", str(steps),
            "--lr_scheduler.total_steps", "8", "--lr_scheduler.warmup_steps", "2",
            "--training.dataset_path", corpus, "--model.hf_assets_path", tokenizer_dir,
            "--job.dump_folder", dump, "--checkpoint.enable", *extra]


def test_masked_shuffled_prefetched_training_resumes_exactly(tmp_path, corpus, tokenizer_dir):
    straight = tmp_path / "straight"
    run_titan(*train_args(straight, corpus, tokenizer_dir, 8, "--checkpoint.interval", "100"))
    split = tmp_path / "split"
    run_titan(*train_args(split, corpus, tokenizer_dir, 4, "--checkpoint.interval", "4"))
    proc = run_titan(*train_args(split, corpus, tokenizer_dir, 8, "--checkpoint.interval", "4"))
    assert "resumed from training checkpoint" in proc.stdout
    a = {m["step"]: m["loss"] for m in read_metrics(straight)}
    b = {m["step"]: m["loss"] for m in read_metrics(split)}
    for step in range(5, 9):
        assert a[step] == b[step], (step, a[step], b[step])
    assert all(m["data_loading_s"] >= 0 for m in read_metrics(straight))
    # Resuming without the shuffle the checkpoint was saved with is refused, naming it.
    bad = run_titan(*train_args(split, corpus, tokenizer_dir, 10, "--checkpoint.interval", "4",
                                shuffle="false"), check=False)
    assert bad.returncode != 0 and "training.shuffle" in bad.stderr
