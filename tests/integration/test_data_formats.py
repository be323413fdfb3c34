"""Dataset files in compressed jsonl (.jsonl.gz with Python's gzip, .jsonl.zst with the zstd
tool), Parquet (written by pyarrow) and Arrow (HF datasets' save_to_disk folders) give the token
stream of the plain jsonl of the same records, a configurable text field reads other record
layouts, and broken files fail with one error naming the file (and line or row)."""
import gzip
import json
import shutil
import subprocess

import pytest

from conftest import read_metrics, run_titan


@pytest.fixture(scope="module")
def records(small_corpus):
    return [json.loads(line) for line in small_corpus.read_text().splitlines() if line.strip()]


def write_jsonl(path, records, field="text", extra=None):
    lines = [json.dumps({field: r["text"], **(extra or {})}) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def gz(path):
    out = path.with_name(path.name + ".gz")
    out.write_bytes(gzip.compress(path.read_bytes()))
    return out


def zst(path):
    out = path.with_name(path.name + ".zst")
    subprocess.run(["zstd", "-q", "-f", str(path), "-o", str(out)], check=True)
    return out


def shards(tmp_path, tokenizer_dir, name, *inputs):
    prefix = tmp_path / name
    run_titan("tokenize", "--tokenizer", tokenizer_dir, "--input", *inputs, "--output", prefix)
    meta = json.loads(prefix.with_suffix(".json").read_text())
    data = b"".join((tmp_path / s["file"]).read_bytes() for s in meta["shards"])
    return meta["documents"], data


def test_compressed_jsonl_gives_the_plain_token_stream(tmp_path, tokenizer_dir, records):
    plain = write_jsonl(tmp_path / "c.jsonl", records)
    docs, expected = shards(tmp_path, tokenizer_dir, "plain", plain)
    assert docs == len(records) and len(expected) > 1000
    for name, path in (("gz", gz(plain)), ("zst", zst(plain))):
        assert shards(tmp_path, tokenizer_dir, name, path) == (docs, expected), name


def test_multi_member_gzip_and_multi_frame_zstd(tmp_path, tokenizer_dir, records):
    half = len(records) // 2
    a = write_jsonl(tmp_path / "a.jsonl", records[:half])
    b = write_jsonl(tmp_path / "b.jsonl", records[half:])
    whole = write_jsonl(tmp_path / "whole.jsonl", records)
    expected = shards(tmp_path, tokenizer_dir, "whole", whole)
    (tmp_path / "two.jsonl.gz").write_bytes(gz(a).read_bytes() + gz(b).read_bytes())
    (tmp_path / "two.jsonl.zst").write_bytes(zst(a).read_bytes() + zst(b).read_bytes())
    assert shards(tmp_path, tokenizer_dir, "g2", tmp_path / "two.jsonl.gz") == expected
    assert shards(tmp_path, tokenizer_dir, "z2", tmp_path / "two.jsonl.zst") == expected


def train(tmp_path, name, corpus, tokenizer_dir, *extra):
    dump = tmp_path / name
    run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel",
              "--training.local_batch_size", "1", "--training.seq_len", "32",
              "--training.steps", "3", "--metrics.log_freq", "1", "--job.dump_folder", dump,
              "--training.dataset_path", corpus, "--model.hf_assets_path", tokenizer_dir, *extra)
    return [m["loss"] for m in read_metrics(dump)]


def test_tokenize_reads_another_text_field(tmp_path, tokenizer_dir, records):
    plain = shards(tmp_path, tokenizer_dir, "p", write_jsonl(tmp_path / "t.jsonl", records))
    body = gz(write_jsonl(tmp_path / "body.jsonl", records, field="body"))
    prefix = tmp_path / "b"
    run_titan("tokenize", "--tokenizer", tokenizer_dir, "--input", body, "--output", prefix,
              "--text-field", "body")
    meta = json.loads(prefix.with_suffix(".json").read_text())
    assert (meta["documents"], b"".join((tmp_path / s["file"]).read_bytes()
                                        for s in meta["shards"])) == plain


def test_training_on_compressed_data_and_another_text_field(tmp_path, tokenizer_dir, records):
    plain = train(tmp_path, "plain", write_jsonl(tmp_path / "p.jsonl", records), tokenizer_dir)
    content = zst(write_jsonl(tmp_path / "content.jsonl", records, field="content",
                              extra={"text": 7}))
    assert train(tmp_path, "zst", content, tokenizer_dir,
                 "--training.dataset_text_field", "content") == plain


def error_of(tmp_path, tokenizer_dir, path, *extra):
    proc = run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel",
                     "--training.steps", "1", "--training.seq_len", "32",
                     "--training.local_batch_size", "1", "--job.dump_folder", tmp_path / "e",
                     "--training.dataset_path", path, "--model.hf_assets_path", tokenizer_dir,
                     *extra, check=False)
    assert proc.returncode != 0
    lines = [l for l in proc.stderr.splitlines() if l.startswith("error:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_broken_compressed_files_name_the_file(tmp_path, tokenizer_dir, records):
    plain = write_jsonl(tmp_path / "r.jsonl", records)
    not_gzip = tmp_path / "junk.jsonl.gz"
    not_gzip.write_bytes(b"this is not gzip at all\n" * 10)
    assert f"{not_gzip}: not gzip data" in error_of(tmp_path, tokenizer_dir, not_gzip)
    cut = tmp_path / "cut.jsonl.gz"
    data = gz(plain).read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    assert f"{cut}: corrupt or truncated gzip data" in error_of(tmp_path, tokenizer_dir, cut)
    junk_zst = tmp_path / "junk.jsonl.zst"
    junk_zst.write_bytes(b"\x00" * 64)
    assert f"{junk_zst}: corrupt zstd data" in error_of(tmp_path, tokenizer_dir, junk_zst)
    cut_zst = tmp_path / "cut.jsonl.zst"
    data = zst(plain).read_bytes()
    cut_zst.write_bytes(data[: len(data) // 2])
    assert f"{cut_zst}: truncated zstd data" in error_of(tmp_path, tokenizer_dir, cut_zst)


def test_record_without_the_text_field_names_file_and_line(tmp_path, tokenizer_dir, records):
    path = gz(write_jsonl(tmp_path / "f.jsonl", records))
    message = error_of(tmp_path, tokenizer_dir, path, "--training.dataset_text_field", "body")
    assert f"dataset file {path}:1: expected an object with a string field \"body\"" in message


def test_folders_and_globs_read_their_files_in_sorted_order(tmp_path, tokenizer_dir, records):
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    quarter = len(records) // 4
    a = write_jsonl(data / "a.jsonl", records[:quarter])
    b = gz(write_jsonl(tmp_path / "b.jsonl", records[quarter:2 * quarter]))
    shutil.move(b, data / "b.jsonl.gz")
    c = zst(write_jsonl(tmp_path / "c.jsonl", records[2 * quarter:3 * quarter]))
    shutil.move(c, data / "sub" / "c.jsonl.zst")
    (data / "d.txt").write_text(records[-1]["text"], encoding="utf-8")
    (data / ".hidden.jsonl").write_text('{"text": "skipped"}\n')
    (data / "README.md").write_text("not data\n")
    explicit = shards(tmp_path, tokenizer_dir, "explicit", a, data / "b.jsonl.gz", data / "d.txt",
                      data / "sub" / "c.jsonl.zst")
    assert explicit[0] == 3 * quarter + 1
    assert shards(tmp_path, tokenizer_dir, "folder", data) == explicit
    globbed = shards(tmp_path, tokenizer_dir, "glob", data / "*.jsonl*")
    assert globbed == shards(tmp_path, tokenizer_dir, "two", a, data / "b.jsonl.gz")
    # Training reads a folder as the concatenation of its files, in the same order.
    concatenated = write_jsonl(tmp_path / "all.jsonl",
                               records[:2 * quarter] + [{"text": records[-1]["text"]}]
                               + records[2 * quarter:3 * quarter])
    assert train(tmp_path, "folder_run", data, tokenizer_dir) == \
        train(tmp_path, "file_run", concatenated, tokenizer_dir)


def test_a_glob_or_folder_with_nothing_to_read_is_an_error(tmp_path, tokenizer_dir):
    pattern = tmp_path / "none-*.jsonl"
    assert f"dataset glob {pattern} matches no file" in error_of(tmp_path, tokenizer_dir, pattern)
    empty = tmp_path / "empty_folder"
    empty.mkdir()
    (empty / "notes.md").write_text("x")
    assert f"dataset folder {empty} has no .jsonl" in error_of(tmp_path, tokenizer_dir, empty)


# ---- Parquet and Arrow (HF datasets' save_to_disk) ------------------------------------------

def short_records(records, count=300):
    """Many short documents (lines of the corpus), so that a few training steps cross several
    row groups / record batches."""
    lines = [l for r in records for l in r["text"].splitlines() if l.strip()]
    return [{"text": l} for l in lines[:count]]


def write_parquet(path, texts, column="text", row_group_size=7, large=False, extra=True):
    import pyarrow as pa
    import pyarrow.parquet as pq
    columns = {}
    if extra:  # columns before the text one, one of them nested (several Parquet leaf columns)
        columns["id"] = pa.array(range(len(texts)), pa.int64())
        columns["meta"] = pa.array([{"n": i, "tag": "t%d" % i} for i in range(len(texts))])
    columns[column] = pa.array(texts, pa.large_string() if large else pa.string())
    if extra:
        columns["score"] = pa.array([0.5] * len(texts))
    pq.write_table(pa.table(columns), path, row_group_size=row_group_size)
    return path


def save_to_disk(folder, records, num_shards=2):
    import datasets
    datasets.Dataset.from_list(records).save_to_disk(str(folder), num_shards=num_shards)
    return folder


def test_parquet_gives_the_plain_token_stream(tmp_path, tokenizer_dir, records):
    expected = shards(tmp_path, tokenizer_dir, "plain", write_jsonl(tmp_path / "p.jsonl", records))
    texts = [r["text"] for r in records]
    pq = write_parquet(tmp_path / "t.parquet", texts)
    assert shards(tmp_path, tokenizer_dir, "pq", pq) == expected
    large = write_parquet(tmp_path / "large.parquet", texts, column="body", large=True,
                          row_group_size=1000)
    prefix = tmp_path / "body"
    run_titan("tokenize", "--tokenizer", tokenizer_dir, "--input", large, "--output", prefix,
              "--text-field", "body")
    meta = json.loads(prefix.with_suffix(".json").read_text())
    assert (meta["documents"], b"".join((tmp_path / s["file"]).read_bytes()
                                        for s in meta["shards"])) == expected


def test_saved_dataset_folders_and_arrow_files(tmp_path, tokenizer_dir, records):
    import pyarrow as pa
    expected = shards(tmp_path, tokenizer_dir, "plain", write_jsonl(tmp_path / "p.jsonl", records))
    saved = save_to_disk(tmp_path / "saved", [{"id": i, **r} for i, r in enumerate(records)])
    arrows = sorted(saved.glob("data-*.arrow"))
    assert len(arrows) == 2 and (saved / "state.json").exists()
    assert shards(tmp_path, tokenizer_dir, "saved", saved) == expected
    # A cache file of a later map() in the folder is not the dataset: state.json says which are.
    shutil.copy(arrows[0], saved / "cache-0123abcd.arrow")
    assert shards(tmp_path, tokenizer_dir, "cached", saved) == expected
    # One .arrow file alone, and the IPC file format (not the stream one) of the same table.
    half = len(records) // 2
    first = shards(tmp_path, tokenizer_dir, "first", write_jsonl(tmp_path / "h.jsonl",
                                                                 records[:half]))
    assert shards(tmp_path, tokenizer_dir, "one", arrows[0]) == first
    table = pa.table({"text": [r["text"] for r in records]})
    ipc_file = tmp_path / "file_format.arrow"
    with pa.ipc.new_file(str(ipc_file), table.schema) as writer:
        for batch in table.to_batches(max_chunksize=9):
            writer.write_batch(batch)
    assert shards(tmp_path, tokenizer_dir, "ipcfile", ipc_file) == expected


def test_a_folder_mixes_parquet_arrow_and_jsonl(tmp_path, tokenizer_dir, records):
    third = len(records) // 3
    data = tmp_path / "data"
    data.mkdir()
    a = write_jsonl(data / "a.jsonl", records[:third])
    b = write_parquet(data / "b.parquet", [r["text"] for r in records[third:2 * third]])
    save_to_disk(data / "c_saved", records[2 * third:])
    whole = write_jsonl(tmp_path / "whole.jsonl", records)
    assert shards(tmp_path, tokenizer_dir, "mixed", data) == \
        shards(tmp_path, tokenizer_dir, "whole", whole)
    assert shards(tmp_path, tokenizer_dir, "explicit", a, b, data / "c_saved") == \
        shards(tmp_path, tokenizer_dir, "whole2", whole)


def resume_args(dump, corpus, tokenizer_dir, steps, *extra):
    return ["train", "--module", "qwen3", "--config", "qwen3_debugmodel",
            "--training.local_batch_size", "2", "--training.seq_len", "32",
            "--training.steps", str(steps), "--lr_scheduler.total_steps", "4",
            "--metrics.log_freq", "1", "--job.dump_folder", dump,
            "--training.dataset_path", corpus, "--model.hf_assets_path", tokenizer_dir, *extra]


def test_training_on_parquet_equals_jsonl_and_resumes(tmp_path, tokenizer_dir, records):
    short = short_records(records)
    text = tmp_path / "text"
    run_titan(*resume_args(text, write_jsonl(tmp_path / "s.jsonl", short), tokenizer_dir, 4))
    expected = {m["step"]: m["loss"] for m in read_metrics(text)}
    # Row groups of 5 short rows: the resumed run starts inside a row group far from the first.
    pq = write_parquet(tmp_path / "s.parquet", [r["text"] for r in short], column="content",
                       row_group_size=5)
    split = tmp_path / "split"
    ckpt = ("--checkpoint.enable", "--checkpoint.interval", "2",
            "--training.dataset_text_field", "content")
    run_titan(*resume_args(split, pq, tokenizer_dir, 2, *ckpt))
    proc = run_titan(*resume_args(split, pq, tokenizer_dir, 4, *ckpt))
    assert "resumed from training checkpoint" in proc.stdout
    assert {m["step"]: m["loss"] for m in read_metrics(split)} == expected


def test_broken_parquet_and_arrow_files_name_the_file(tmp_path, tokenizer_dir, records):
    texts = [r["text"] for r in records]
    good = write_parquet(tmp_path / "good.parquet", texts)
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(b"this is not parquet\n" * 20)
    message = error_of(tmp_path, tokenizer_dir, garbage)
    assert f"dataset file {garbage}: not a valid Parquet file" in message
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    assert f"dataset file {cut}: not a valid Parquet file" in error_of(tmp_path, tokenizer_dir, cut)
    message = error_of(tmp_path, tokenizer_dir, good, "--training.dataset_text_field", "body")
    assert f"dataset file {good} has no column \"body\"" in message
    assert "its columns: id, meta, text, score" in message
    message = error_of(tmp_path, tokenizer_dir, good, "--training.dataset_text_field", "id")
    assert f"dataset file {good}: column \"id\" holds int64, not strings" in message
    garbage_arrow = tmp_path / "garbage.arrow"
    garbage_arrow.write_bytes(b"\xff" * 64)
    message = error_of(tmp_path, tokenizer_dir, garbage_arrow)
    assert f"dataset file {garbage_arrow}: not a valid Arrow IPC file" in message
    saved = save_to_disk(tmp_path / "saved", records[:10], num_shards=1)
    message = error_of(tmp_path, tokenizer_dir, saved, "--training.dataset_text_field", "body")
    assert f"dataset file {saved / 'data-00000-of-00001.arrow'} has no column \"body\"" in message


def test_null_text_and_empty_files_name_the_file(tmp_path, tokenizer_dir):
    import pyarrow as pa
    import pyarrow.parquet as pq
    nulls = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"text": ["a b", "c d", None, "e f"]}), nulls, row_group_size=2)
    message = error_of(tmp_path, tokenizer_dir, nulls)
    assert f"dataset file {nulls}, row 2 (counting from 0): column \"text\" is null" in message
    empty = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"text": pa.array([], pa.string())}), empty)
    assert f"dataset file {empty} is empty" in error_of(tmp_path, tokenizer_dir, empty)
    empty_arrow = tmp_path / "empty.arrow"
    with pa.ipc.new_stream(str(empty_arrow), pa.schema([("text", pa.string())])):
        pass
    assert f"dataset file {empty_arrow} is empty" in error_of(tmp_path, tokenizer_dir, empty_arrow)
    import datasets
    features = datasets.Features({"text": datasets.Value("string")})
    none = tmp_path / "none"
    datasets.Dataset.from_dict({"text": []}, features=features).save_to_disk(str(none))
    assert f"dataset folder {none} is empty" in error_of(tmp_path, tokenizer_dir, none)
