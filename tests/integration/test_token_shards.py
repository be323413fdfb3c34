"""Token shards (`titan tokenize`, read back by training): the binary format read here by an
independent Python reader holds HF `tokenizers`' ids of every document, training on the shards
sees the batches of the text they came from (also across a resume), and damaged shards fail
with one error naming the file."""
import json
import struct

import pytest
from tokenizers import Tokenizer

from conftest import read_metrics, run_titan

MAGIC = b"TITANTOK"


def read_shard(path):
    """The documents of one shard file, as lists of ids (the format of README.md)."""
    data = path.read_bytes()
    assert data[:8] == MAGIC
    version, width, tokens, documents = struct.unpack_from("<IIQQ", data, 8)
    assert (version, width) == (2, 4)
    ends = struct.unpack_from(f"<{documents}Q", data, 32)
    ids = struct.unpack_from(f"<{tokens}I", data, 32 + 8 * documents)
    assert len(data) == 32 + 8 * documents + 4 * tokens
    starts = (0,) + ends[:-1]
    return [list(ids[a:b]) for a, b in zip(starts, ends)]


def tokenize(tmp_path, tokenizer_dir, name, *inputs, extra=()):
    prefix = tmp_path / name
    run_titan("tokenize", "--tokenizer", tokenizer_dir, "--input", *inputs, "--output", prefix,
              *extra)
    meta = json.loads(prefix.with_suffix(".json").read_text())
    return prefix.with_suffix(".json"), meta


@pytest.fixture(scope="module")
def texts():
    return ["def f(x):\n    return x + 1\n", "中文 😀 café", "a literal <|endoftext|> inside",
            "x" * 300, "   spaces\n\n\ttabs", "class A:\n    pass\n" * 20]


def write_jsonl(path, texts):
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    return path


def test_shards_hold_the_ids_of_hf_tokenizers(tmp_path, tokenizer_dir, texts):
    corpus = write_jsonl(tmp_path / "c.jsonl", texts)
    meta_path, meta = tokenize(tmp_path, tokenizer_dir, "c", corpus,
                               extra=("--shard-tokens", "40"))
    assert meta["format"] == "titan-token-shards-v2"
    hf = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    eos = hf.token_to_id("<|endoftext|>")
    expected = [hf.encode(t, add_special_tokens=False).ids + [eos] for t in texts]
    docs = [d for s in meta["shards"] for d in read_shard(tmp_path / s["file"])]
    # A literal eos inside a text stays inside its document: the ends say where documents stop.
    assert docs == expected
    assert len(meta["shards"]) > 1
    assert [s["documents"] for s in meta["shards"]] == [
        len(read_shard(tmp_path / s["file"])) for s in meta["shards"]]
    assert meta["documents"] == len(texts) and meta["tokens"] == sum(map(len, expected))


def train_args(dump, corpus, tokenizer_dir, steps, *extra):
    return ["train", "--module", "qwen3", "--config", "qwen3_debugmodel",
            "--training.local_batch_size", "2", "--training.seq_len", "32",
            "--training.steps", str(steps), "--lr_scheduler.total_steps", "6",
            "--metrics.log_freq", "1", "--job.dump_folder", dump,
            "--training.dataset_path", corpus, "--model.hf_assets_path", tokenizer_dir, *extra]


def losses(dump):
    return {m["step"]: m["loss"] for m in read_metrics(dump)}


def test_training_on_shards_equals_training_on_text_and_resumes(tmp_path, tokenizer_dir,
                                                                 small_corpus):
    text = tmp_path / "text"
    run_titan(*train_args(text, small_corpus, tokenizer_dir, 6))
    meta_path, _ = tokenize(tmp_path, tokenizer_dir, "corpus", small_corpus,
                            extra=("--shard-tokens", "20000"))
    split = tmp_path / "split"
    ckpt = ("--checkpoint.enable", "--checkpoint.interval", "3")
    run_titan(*train_args(split, meta_path, tokenizer_dir, 3, *ckpt))
    proc = run_titan(*train_args(split, meta_path, tokenizer_dir, 6, *ckpt))
    assert "resumed from training checkpoint" in proc.stdout
    assert losses(split) == losses(text)
    # A glob of the shard files reads the same documents.
    glob = tmp_path / "glob"
    run_titan(*train_args(glob, tmp_path / "corpus-*.bin", tokenizer_dir, 2))
    assert losses(glob) == {s: l for s, l in losses(text).items() if s <= 2}


def test_a_folder_of_shards_is_a_dataset(tmp_path, tokenizer_dir, small_corpus):
    """The folder titan tokenize wrote into (its .json and .bin files) reads as its shards."""
    folder = tmp_path / "shards"
    folder.mkdir()
    meta_path, _ = tokenize(folder, tokenizer_dir, "corpus", small_corpus,
                            extra=("--shard-tokens", "20000"))
    (folder / "notes.json").write_text('{"not": "shard metadata"}')  # another JSON file
    by_meta, by_folder = tmp_path / "meta", tmp_path / "folder"
    run_titan(*train_args(by_meta, meta_path, tokenizer_dir, 2))
    run_titan(*train_args(by_folder, folder, tokenizer_dir, 2))
    assert len(losses(by_folder)) == 2 and losses(by_folder) == losses(by_meta)


def test_damaged_shards_name_the_file(tmp_path, tokenizer_dir, texts):
    corpus = write_jsonl(tmp_path / "c.jsonl", texts)
    meta_path, meta = tokenize(tmp_path, tokenizer_dir, "c", corpus)
    shard = tmp_path / meta["shards"][0]["file"]
    good = shard.read_bytes()

    def train_error(path):
        proc = run_titan(*train_args(tmp_path / "d", path, tokenizer_dir, 1), check=False)
        assert proc.returncode != 0
        return proc.stderr

    shard.write_bytes(good[:-3])
    assert f"token shard {shard}: " in train_error(meta_path)
    assert "truncated or corrupt" in train_error(meta_path)
    shard.write_bytes(b"NOTTITAN" + good[8:])
    assert "not a token shard" in train_error(meta_path)
    shard.write_bytes(good[:8] + struct.pack("<I", 9) + good[12:])
    assert "format version 9" in train_error(shard)
    # The first document's end moved before its start.
    shard.write_bytes(good[:32] + struct.pack("<Q", 0) + good[40:])
    assert "document 0 ends at token 0" in train_error(shard)
    shard.write_bytes(good)
    meta["eos_id"] = 0
    meta_path.write_text(json.dumps(meta))
    err = train_error(meta_path)
    assert str(meta_path) in err and "eos id 0" in err
    # Fields of the wrong type are the same clear errors, not a JSON library exception.
    meta_path.write_text(json.dumps(dict(meta, eos_id="x")))
    assert 'written with eos id "x"' in train_error(meta_path)
    meta_path.write_text(json.dumps(dict(meta, format=2)))
    assert '"format" is not "titan-token-shards-v2"' in train_error(meta_path)
    meta_path.write_text("{not json")
    assert f"token shard metadata {meta_path}: invalid JSON" in train_error(meta_path)
    assert "matches no file" in train_error(tmp_path / "none-*.bin")
    missing = tmp_path / "missing.json"
    assert f'training.dataset_path = "{missing}": no such file' in train_error(missing)


def test_threads_do_not_change_the_shards(tmp_path, tokenizer_dir, small_corpus):
    outputs = []
    for threads in ("1", "3"):
        folder = tmp_path / f"t{threads}"
        folder.mkdir()
        _, meta = tokenize(folder, tokenizer_dir, "c", small_corpus,
                           extra=("--shard-tokens", "30000", "--threads", threads))
        outputs.append([(folder / s["file"]).read_bytes() for s in meta["shards"]])
    assert len(outputs[0]) > 1 and outputs[0] == outputs[1]
