"""training.packing, through `titan check-data --rows` (the rows training packs) and `titan train`:
  torchtitan     torchtitan 0.3.0's packing: for the same jsonl, the rows of torchtitan 0.3.0's
                 own text pipeline (run when torchtitan 0.3.0 is installed beside the venv) and
                 of its algorithm written again here: the tokenizer config's eos, inputs and
                 labels shifted within each document, no token pair lost at a row's end,
                 positions restarting per document; its block-causal rows train to the loss
                 Transformers gives each document alone;
  megatron       older torchtitan and Megatron-LM: windows of seq_len + 1 across documents;
  hf_flattening  Hugging Face's DataCollatorWithFlattening: the same windows, positions
                 restarting, no label across documents (training.document_masking alone).
"""
import json
import math
import os
import subprocess
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer

from conftest import REPO, read_metrics, run_titan
from hf_models import make_hf_model

TORCHTITAN_DIR = Path(os.environ.get("TITAN_TORCHTITAN_DIR",
                                     Path.home() / ".cache" / "titan-cpp" / "torchtitan-0.3.0"))

# Documents of very different lengths (an empty one, ones longer than a row), some non-ASCII.
TEXTS = ["hello world", "", "a" * 10, "def f(x):\n    return x * 2\n" * 12, "short",
         "αβγ δεζ — naïve café", "x", "The quick brown fox jumps over the lazy dog. " * 5,
         "import os\nprint(os.getcwd())\n", "end"]
SEQ_LEN = 16


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("packing") / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS), encoding="utf-8")
    return path


def titan_rows(corpus, count, *overrides, seq_len=SEQ_LEN):
    out = run_titan("check-data", "--module", "qwen3", "--config", "qwen3_debugmodel",
                    "--training.dataset_path", corpus, "--training.seq_len", seq_len,
                    *overrides, "--rows", count)
    return [json.loads(line) for line in out.stdout.splitlines()]


def tokenizer_and_eos(tokenizer_dir, eos_token=None):
    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    if eos_token is None:  # as torchtitan's HuggingFaceTokenizer takes it
        eos_token = json.loads((tokenizer_dir / "tokenizer_config.json").read_text())["eos_token"]
    return tok, tok.token_to_id(eos_token)


def torchtitan_algorithm(tokenizer_dir, seq_len):
    """torchtitan 0.3.0's HuggingFaceTextDataset, one pass, written again: each document's ids
    and eos, inputs ids[:-1] and labels ids[1:] of the document, positions 0.. per document;
    rows of seq_len pairs; a row that starts inside a document numbers it from 0."""
    tok, eos = tokenizer_and_eos(tokenizer_dir)
    inputs, labels, positions = [], [], []
    for text in TEXTS:
        ids = tok.encode(text).ids + [eos]
        inputs += ids[:-1]
        labels += ids[1:]
        positions += list(range(len(ids) - 1))
    rows = []
    for start in range(0, len(inputs) - seq_len + 1, seq_len):
        row_positions = positions[start:start + seq_len]
        offset, i = row_positions[0], 0
        while offset > 0 and i < seq_len and row_positions[i] != 0:
            row_positions[i] -= offset
            i += 1
        rows.append({"input": inputs[start:start + seq_len],
                     "labels": labels[start:start + seq_len], "positions": row_positions})
    return rows


def window_algorithm(tokenizer_dir, seq_len, count, flattening):
    """The windows of seq_len + 1 tokens over documents joined by <|endoftext|>; with
    flattening, positions restart at each document and at the row's start, and the label that
    would predict the next document's first token is -100."""
    tok, eos = tokenizer_and_eos(tokenizer_dir, "<|endoftext|>")
    ids, starts = [], []
    while len(ids) < count * (seq_len + 1):
        for text in TEXTS:
            piece = tok.encode(text).ids + [eos]
            ids += piece
            starts += [1] + [0] * (len(piece) - 1)
    rows = []
    for r in range(count):
        w = ids[r * (seq_len + 1):(r + 1) * (seq_len + 1)]
        s = starts[r * (seq_len + 1):(r + 1) * (seq_len + 1)]
        row = {"input": w[:-1], "labels": w[1:]}
        if flattening:
            positions, p = [], 0
            for i in range(seq_len):
                p = 0 if i > 0 and s[i] else p
                positions.append(p)
                p += 1
            row["positions"] = positions
            row["labels"] = [-100 if s[i + 1] else w[i + 1] for i in range(seq_len)]
        rows.append(row)
    return rows


def test_torchtitan_packing_follows_torchtitan_0_3_0s_algorithm(corpus, tokenizer_dir):
    expected = torchtitan_algorithm(tokenizer_dir, SEQ_LEN)
    rows = titan_rows(corpus, len(expected), "--training.packing", "torchtitan")
    assert rows == expected
    # What the algorithm promises, stated: the eos (tokenizer_config.json's <|im_end|>) ends
    # documents as a label but is never an input, and every label is a real token (none is
    # dropped at a document's edge).
    _, eos = tokenizer_and_eos(tokenizer_dir)
    assert eos == 151645
    assert all(eos not in r["input"] and -100 not in r["labels"] for r in rows)
    assert sum(r["labels"].count(eos) for r in rows) >= 5


@pytest.mark.skipif(not (TORCHTITAN_DIR / "torchtitan" / "hf_datasets").is_dir(),
                    reason=f"torchtitan 0.3.0 is not installed in {TORCHTITAN_DIR} (pip install "
                           f"--target {TORCHTITAN_DIR} torchtitan==0.3.0 --no-deps)")
def test_torchtitan_packing_equals_torchtitans_own_pipeline(corpus, tokenizer_dir, tmp_path):
    env = dict(os.environ, HF_DATASETS_CACHE=str(tmp_path / "datasets"), HF_HUB_OFFLINE="1",
               HF_DATASETS_OFFLINE="1")
    peer = subprocess.run(
        [str(REPO / "build" / "python"), str(Path(__file__).parent / "torchtitan_peer.py"),
         str(TORCHTITAN_DIR), str(tokenizer_dir), str(corpus), str(SEQ_LEN)],
        capture_output=True, text=True, env=env, timeout=300)
    assert peer.returncode == 0, peer.stderr[-3000:]
    expected = [json.loads(line) for line in peer.stdout.splitlines()]
    assert len(expected) >= 8
    assert titan_rows(corpus, len(expected), "--training.packing", "torchtitan") == expected


def test_megatron_packing_keeps_the_windows_across_documents(corpus, tokenizer_dir):
    rows = titan_rows(corpus, 6)  # the default
    assert rows == window_algorithm(tokenizer_dir, SEQ_LEN, 6, flattening=False)
    assert rows == titan_rows(corpus, 6, "--training.packing", "megatron")


def test_hf_flattening_packing_is_what_document_masking_alone_gives(corpus, tokenizer_dir):
    expected = window_algorithm(tokenizer_dir, SEQ_LEN, 6, flattening=True)
    assert titan_rows(corpus, 6, "--training.packing", "hf_flattening") == expected
    assert titan_rows(corpus, 6, "--training.document_masking", "true") == expected


def test_packing_and_document_masking_that_contradict_are_one_error(corpus):
    proc = run_titan("check-data", "--module", "qwen3", "--config", "qwen3_debugmodel",
                     "--training.packing", "torchtitan", "--training.document_masking", "false",
                     "--rows", "1", check=False)
    assert proc.returncode != 0
    assert ('error: training.document_masking = false contradicts training.packing = '
            '"torchtitan", which is block-causal') in proc.stderr, proc.stderr


def test_torchtitan_packing_trains_to_each_documents_own_loss(corpus, tokenizer_dir, tmp_path):
    """Step 1's loss (before any update) over block-causal torchtitan rows is the mean token loss
    of their document pieces, each run alone through Transformers from position 0."""
    from transformers import AutoModelForCausalLM
    hf = tmp_path / "hf"
    make_hf_model(hf, seed=3, tokenizer_dir=tokenizer_dir)
    flags = ["--training.packing", "torchtitan", "--training.local_batch_size", "2",
             "--model.flavor", "auto", "--model.hf_assets_path", hf]
    proc = run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel",
                     "--training.dataset_path", corpus, "--training.seq_len", SEQ_LEN,
                     "--checkpoint.initial_load_path", hf, "--training.steps", "1",
                     "--job.dump_folder", tmp_path / "job", *flags)
    assert 'training.eos_token = "<|im_end|>": the eos_token of' in proc.stdout
    rows = titan_rows(corpus, 2, *flags)
    model = AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for row in rows:
            starts = [i for i, p in enumerate(row["positions"]) if p == 0] + [SEQ_LEN]
            for begin, end in zip(starts, starts[1:]):
                logits = model(torch.tensor([row["input"][begin:end]])).logits[0]
                total += F.cross_entropy(logits, torch.tensor(row["labels"][begin:end]),
                                         reduction="sum").item()
                count += end - begin
    loss = read_metrics(tmp_path / "job")[0]["loss"]
    assert math.isclose(loss, total / count, rel_tol=1e-5), (loss, total / count)
