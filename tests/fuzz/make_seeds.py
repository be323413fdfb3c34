"""Writes the seed inputs of the fuzz targets into tests/fuzz/corpus/<target>/ (committed; run
again only to change the seeds). Crash inputs that `make fuzz` finds are added there by hand
as regression cases, named crash-*. Run with build/python from the repository root."""
import gzip
import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import save
from tokenizers import Tokenizer

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fuzz" / "corpus"
TOKENIZER = ROOT / "assets" / "qwen3-tokenizer" / "tokenizer.json"


def put(target, name, data):
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def safetensors_seeds():
    put("safetensors_header", "two_tensors", save(
        {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.ones(4, dtype=np.int64)},
        metadata={"format": "pt"}))
    put("safetensors_header", "every_dtype", save(
        {str(t): np.zeros(3, dtype=t) for t in
         (np.float16, np.float64, np.int8, np.int16, np.int32, np.uint8, np.bool_)}))
    put("safetensors_header", "empty", save({}))
    put("safetensors_header", "scalar", save({"s": np.array(1.5, dtype=np.float32)}))


def token_shard(documents):
    ends, total = [], 0
    for d in documents:
        total += len(d)
        ends.append(total)
    ids = [i for d in documents for i in d]
    return (b"TITANTOK" + struct.pack("<IIQQ", 2, 4, total, len(documents))
            + struct.pack(f"<{len(ends)}Q", *ends) + struct.pack(f"<{len(ids)}I", *ids))


def token_shard_seeds():
    put("token_shard", "three_documents", token_shard([[1, 2, 151643], [151643], [5, 151643]]))
    put("token_shard", "empty", token_shard([]))
    put("token_shard", "one_long", token_shard([list(range(200)) + [151643]]))


def jsonl_seeds():
    lines = "".join(json.dumps(r) + "\n" for r in [
        {"text": "def f():\n    return 1\n"}, {"text": "中文 😀"}, {"content": "x", "text": ""},
        {"text": "a\u2028b \\ \""}]) + "\n\n" + '{"text": 3}\n' + "not json\n"
    raw = lines.encode()
    # The first byte picks the reader: 0 .jsonl, 1 .jsonl.gz, 2 .jsonl.zst, 3 .txt (+4: field
    # "content" instead of "text").
    put("jsonl_records", "plain", b"\x00" + raw)
    put("jsonl_records", "content_field", b"\x04" + raw)
    put("jsonl_records", "gzip", b"\x01" + gzip.compress(raw))
    put("jsonl_records", "gzip_two_members", b"\x01" + gzip.compress(raw) + gzip.compress(raw))
    zstd = subprocess.run(["zstd", "-q", "-c"], input=raw, check=True, capture_output=True).stdout
    put("jsonl_records", "zstd", b"\x02" + zstd)
    put("jsonl_records", "text", b"\x03" + raw)


def small_tokenizer_json():
    """Qwen3's tokenizer.json cut to its first 400 ids and the merges among them."""
    t = json.loads(TOKENIZER.read_text())
    vocab = {k: v for k, v in t["model"]["vocab"].items() if v < 400}
    merges = [m for m in t["model"]["merges"]
              if m[0] in vocab and m[1] in vocab and m[0] + m[1] in vocab]
    t["model"]["vocab"], t["model"]["merges"] = vocab, merges
    t["added_tokens"] = [dict(a, id=400 + i) for i, a in enumerate(t["added_tokens"][:3])]
    return t


def tokenizer_json_seeds():
    t = small_tokenizer_json()
    put("tokenizer_json", "qwen3_cut", json.dumps(t))
    string_merges = dict(t, model=dict(t["model"], merges=[" ".join(m) for m in t["model"]["merges"]]))
    put("tokenizer_json", "string_merges", json.dumps(string_merges))
    no_normalizer = dict(t, normalizer=None)
    put("tokenizer_json", "no_normalizer", json.dumps(no_normalizer))
    Tokenizer.from_str(json.dumps(t))  # the seeds are tokenizers HF itself accepts


def tokenizer_encode_seeds():
    for i, text in enumerate(["def f(x):\n    return x + 1\n", "中文 😀 café e\u0301",
                              "<|im_start|>user\nhi<|im_end|><|endoftext|>",
                              "   \t\n\n  x  ", "don't I'LL 12345 ٣٤", "\u2028\r\n\x00"]):
        put("tokenizer_encode", f"text{i}", text)
    put("tokenizer_encode", "invalid_utf8", b"ab\xff\xc3(\xed\xa0\x80")


def preference_record_seeds():
    user = {"role": "user", "content": "What color is the sky?"}
    records = {
        "standard": {"prompt": "Q:", "chosen": " yes", "rejected": " no"},
        "implicit_text": {"chosen": "The sky is blue.", "rejected": "The sky is green."},
        "edge_text": {"chosen": "Yes ", "rejected": "Nö"},
        "conversational": {"prompt": [user], "chosen": [{"role": "assistant", "content": "Blue."}],
                           "rejected": [{"role": "assistant", "content": "Green."}],
                           "tools": "[]", "chat_template_kwargs": {"enable_thinking": False}},
        "implicit_chat": {"chosen": [user, {"role": "assistant", "content": "Blue."}],
                          "rejected": [user]},
        "bad": {"prompt": 1, "chosen": [{}], "rejected": None},
    }
    for name, record in records.items():
        put("preference_record", name, json.dumps(record, ensure_ascii=False))


def config_seeds(titan):
    printed = subprocess.run([titan, "configs", "--module", "qwen3", "--config", "qwen3_debugmodel",
                              "--print"], check=True, capture_output=True).stdout
    put("config", "toml_debugmodel", b"\x00" + printed)
    put("config", "toml_small", b"\x00[training]\nsteps = 3\nseq_len = 64\n[optimizer]\nlr = 1e-3\n"
        b"[override]\nimports = [\"rms_norm=fused\"]\n")
    put("config", "cli_lines", b"\x01training.steps=7\nmetrics.enable_tensorboard=true\n"
        b"optimizer.lr=0.5\ncheckpoint.enable=\noverride.imports=a=b,c=d\n")


def dcp_pickle_seeds(tmp):
    """A DCP folder torch writes (a tensor, a bf16 view, an int, nested plain values): its
    .metadata (kind 1), each item's archive (kind 3) and the pickles inside them (0 and 2)."""
    import zipfile

    import torch
    import torch.distributed.checkpoint as dcp

    state = {"w": torch.arange(12, dtype=torch.float32).reshape(3, 4),
             "h": torch.tensor([1.0, -2.5], dtype=torch.bfloat16).view(2, 1).t(),
             "step": torch.tensor(7), "info": {"lr": 1e-3, "name": "x", "ids": [1, 70000],
                                               "blob": b"\x00\xff", "ok": True}}
    dcp.save(state, checkpoint_id=str(tmp))
    put("dcp_pickle", "metadata", b"\x01" + (tmp / ".metadata").read_bytes())
    from torch.distributed.checkpoint import FileSystemReader
    metadata = FileSystemReader(str(tmp)).read_metadata()
    blob = (tmp / "__0_0.distcp").read_bytes()
    for index, info in metadata.storage_data.items():
        item = blob[info.offset:info.offset + info.length]
        name = index.fqn.replace(".", "_")
        put("dcp_pickle", f"archive_{name}", b"\x03" + item)
        with zipfile.ZipFile(__import__("io").BytesIO(item)) as z:
            pkl = next(n for n in z.namelist() if n.endswith("/data.pkl"))
            kind = b"\x02" if index.fqn in ("w", "h", "step") else b"\x00"
            put("dcp_pickle", f"pickle_{name}", kind + z.read(pkl))


if __name__ == "__main__":
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        dcp_pickle_seeds(Path(tmp) / "dcp")
    safetensors_seeds()
    token_shard_seeds()
    jsonl_seeds()
    tokenizer_json_seeds()
    tokenizer_encode_seeds()
    preference_record_seeds()
    config_seeds(sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "build" / "bin" / "titan"))
