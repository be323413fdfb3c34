"""titan's safetensors reader and writer against Python's safetensors (the reference Rust code):
files Python writes are read and rewritten byte for byte; damaged files are rejected, like the
reference rejects them, with one error line naming the file; sharded directories read back."""
import json
import os
import struct
import subprocess

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from conftest import TITAN

TOOL = TITAN.parent / "titan_safetensors_tool"


def run_tool(*args, check=True):
    assert TOOL.exists(), f"{TOOL} not built; run `make build`"
    proc = subprocess.run([str(TOOL), *map(str, args)], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, OMP_NUM_THREADS="1"))
    if check and proc.returncode != 0:
        raise AssertionError(f"{args} exited {proc.returncode}: {proc.stderr}")
    return proc


def every_dtype_tensors(seed=0):
    g = torch.Generator().manual_seed(seed)
    floats = torch.randn(7, 5, generator=g)
    return {
        "model.f32": floats,
        "model.bf16": torch.randn(3, 4, 5, generator=g).to(torch.bfloat16),
        "model.f16": torch.randn(9, generator=g).to(torch.float16),
        "model.f64": torch.randn(2, 3, generator=g, dtype=torch.float64),
        "model.i64": torch.randint(-2**40, 2**40, (5,), generator=g, dtype=torch.int64),
        "model.i32": torch.randint(-2**30, 2**30, (2, 2), generator=g, dtype=torch.int32),
        "model.i16": torch.randint(-2**15, 2**15, (3,), generator=g, dtype=torch.int16),
        "model.i8": torch.randint(-128, 128, (11,), generator=g, dtype=torch.int8),
        "model.u8": torch.randint(0, 256, (13,), generator=g, dtype=torch.uint8),
        "model.bool": torch.randint(0, 2, (6,), generator=g).bool(),
        "a.scalar": torch.randn((), generator=g),
        "z.empty": torch.empty(0, 4, dtype=torch.bfloat16),
        "another.f32": torch.randn(1, generator=g),
    }


def test_copy_is_byte_identical_and_values_exact(tmp_path):
    tensors = every_dtype_tensors()
    original, copy = tmp_path / "orig.safetensors", tmp_path / "copy.safetensors"
    save_file(tensors, original, metadata={"format": "pt"})
    run_tool("copy", original, copy)
    loaded = load_file(copy)
    assert loaded.keys() == tensors.keys()
    for name, expected in tensors.items():
        assert loaded[name].dtype == expected.dtype, name
        assert loaded[name].shape == expected.shape, name
        assert torch.equal(loaded[name], expected), name
    assert copy.read_bytes() == original.read_bytes()


def test_list_matches_the_header_python_wrote(tmp_path):
    path = tmp_path / "a.safetensors"
    save_file(every_dtype_tensors(1), path, metadata={"format": "pt"})
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    listed = json.loads(run_tool("list", path).stdout)
    assert listed["metadata"] == header.pop("__metadata__")
    assert {t["name"]: {"dtype": t["dtype"], "shape": t["shape"],
                        "data_offsets": t["data_offsets"]} for t in listed["tensors"]} == header
    offsets = [t["data_offsets"] for t in listed["tensors"]]
    assert offsets == sorted(offsets)  # file order


def test_metadata_with_several_keys_is_preserved(tmp_path):
    original, copy = tmp_path / "orig.safetensors", tmp_path / "copy.safetensors"
    metadata = {"format": "pt", "note": "line\nbreak \"quoted\" é", "step": "12"}
    save_file({"x": torch.arange(4.0)}, original, metadata=metadata)
    run_tool("copy", original, copy)
    with safe_open(copy, framework="pt") as f:
        assert f.metadata() == metadata
        assert torch.equal(f.get_tensor("x"), torch.arange(4.0))


# ---- damaged files -----------------------------------------------------------------------------

def raw_file(header, data=b"", length=None, pad=True):
    """A safetensors file from a header (dict or raw bytes) and a data section."""
    if isinstance(header, dict):
        header = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        header += b" " * ((8 - len(header) % 8) % 8)
    return struct.pack("<Q", len(header) if length is None else length) + header + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def valid_bytes():
    return raw_file({"a": entry("F32", [2], 0, 8), "b": entry("U8", [4], 8, 12)}, bytes(12))


DAMAGED = {
    # name: (file bytes, words the error must contain)
    "truncated": (valid_bytes()[:-3], ["truncated", "12 bytes of data", "has 9"]),
    "too_small": (b"\x10\x00\x00", ["truncated", "3 bytes"]),
    "header_past_end": (struct.pack("<Q", 5000) + b"{}", ["truncated", "5000"]),
    "header_too_large": (struct.pack("<Q", 100_000_001) + b"{}" + bytes(8),
                         ["100000001", "exceeds"]),
    "invalid_json": (raw_file(b'{"a": {"dtype": "F32",'), ["invalid JSON"]),
    "not_an_object": (raw_file(b'["a", 1]'), ["does not start with '{'"]),
    "offsets_past_data": (raw_file({"a": entry("F32", [100], 0, 400)}, bytes(16)),
                          ["truncated", "400 bytes of data", "has 16"]),
    "gap": (raw_file({"a": entry("F32", [2], 0, 8), "b": entry("F32", [2], 12, 20)}, bytes(20)),
            ["'b'", "[12, 20]", "previous tensor ends at 8", "gaps"]),
    "overlap": (raw_file({"a": entry("F32", [2], 0, 8), "b": entry("F32", [2], 4, 12)}, bytes(12)),
                ["'b'", "[4, 12]"]),
    "size_mismatch": (raw_file({"a": entry("F32", [3], 0, 8)}, bytes(8)),
                      ["'a'", "8 bytes", "F32", "[3]", "needs 12"]),
    "duplicate_key": (raw_file(b'{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},'
                               b'"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}', b"abcd"),
                      ["duplicate key 'a'"]),
    "unknown_dtype": (raw_file({"a": entry("Q7", [2], 0, 2)}, bytes(2)),
                      ["'a'", "unknown dtype 'Q7'"]),
    "trailing_bytes": (raw_file({"a": entry("U8", [2], 0, 2)}, bytes(5)), ["3 unexpected bytes"]),
    "metadata_not_string": (raw_file({"__metadata__": {"step": 3}, "a": entry("U8", [1], 0, 1)},
                                     bytes(1)), ["__metadata__", "'step'", "string"]),
    "negative_shape": (raw_file({"a": entry("U8", [-2], 0, 2)}, bytes(2)), ["'a'", "shape"]),
}


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_damaged_file_is_rejected_with_one_clear_line(tmp_path, case):
    content, words = DAMAGED[case]
    path = tmp_path / f"{case}.safetensors"
    path.write_bytes(content)
    with pytest.raises(Exception):  # the reference rejects it too
        load_file(path)
    proc = run_tool("list", path, check=False)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert str(path) in lines[0]
    for word in words:
        assert word in lines[0], (word, lines[0])


def test_what_the_reference_accepts_is_accepted(tmp_path):
    # No tensors at all, null metadata and extra entry fields all load with the reference.
    for name, content in {
        "empty": raw_file({}),
        "null_metadata": raw_file({"__metadata__": None, "a": entry("U8", [2], 0, 2)}, b"ab"),
        "extra_field": raw_file(b'{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2],"x":1}}',
                                b"ab"),
    }.items():
        path = tmp_path / f"{name}.safetensors"
        path.write_bytes(content)
        expected = load_file(path)
        listed = json.loads(run_tool("list", path).stdout)
        assert [t["name"] for t in listed["tensors"]] == list(expected), name


# ---- sharded directories -----------------------------------------------------------------------

def write_sharded(directory, tensors, split_after):
    names = list(tensors)
    shards = {"model-00001-of-00002.safetensors": names[:split_after],
              "model-00002-of-00002.safetensors": names[split_after:]}
    weight_map = {}
    for file, keys in shards.items():
        save_file({k: tensors[k] for k in keys}, directory / file, metadata={"format": "pt"})
        weight_map.update({k: file for k in keys})
    index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
    (directory / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    return index


def test_sharded_directory_reads_back_every_key(tmp_path):
    tensors = every_dtype_tensors(2)
    write_sharded(tmp_path, tensors, split_after=5)
    assert json.loads(run_tool("list-dir", tmp_path).stdout) == sorted(tensors)
    run_tool("gather", tmp_path, tmp_path / "all.bin")
    gathered = load_file(tmp_path / "all.bin")
    assert gathered.keys() == tensors.keys()
    for name, expected in tensors.items():
        assert torch.equal(gathered[name], expected), name


def test_weight_map_naming_a_missing_file_names_it(tmp_path):
    tensors = every_dtype_tensors(3)
    index = write_sharded(tmp_path, tensors, split_after=4)
    index["weight_map"]["model.extra"] = "model-00003-of-00003.safetensors"
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    proc = run_tool("list-dir", tmp_path, check=False)
    assert proc.returncode == 1
    assert "model-00003-of-00003.safetensors" in proc.stderr
    assert "does not exist" in proc.stderr


def test_index_without_weight_map_is_rejected(tmp_path):
    write_sharded(tmp_path, every_dtype_tensors(4), split_after=2)
    (tmp_path / "model.safetensors.index.json").write_text('{"metadata": {}}')
    proc = run_tool("list-dir", tmp_path, check=False)
    assert proc.returncode == 1
    assert "model.safetensors.index.json" in proc.stderr and "weight_map" in proc.stderr
