"""SFT (training.sft): chat records render byte-identical to transformers'
apply_chat_template, tokenize to HF tokenizers' ids, train only their assistant turns, and a
training step's loss equals Hugging Face's on the same packed conversations."""
import json
import re
import shutil

import pytest
import torch
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM, AutoTokenizer

from conftest import read_metrics, run_titan
from hf_models import EOS, documents_alone_loss, make_hf_model

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}

CONVERSATIONS = [
    {"messages": [{"role": "user", "content": "Hi!"},
                  {"role": "assistant", "content": "Hello, how can I help?"}]},
    {"messages": [{"role": "system", "content": "You answer in one word."},
                  {"role": "user", "content": "Capital of France?"},
                  {"role": "assistant", "content": "Paris."},
                  {"role": "user", "content": "And of Japan? 日本の首都は？"},
                  {"role": "assistant", "content": "東京 (Tokyo) 🗼"}]},
    {"messages": [{"role": "user", "content": "Think first: 17 * 3?"},
                  {"role": "assistant", "content": "<think>\n17*3 = 51\n</think>\n\n51"}]},
    {"messages": [{"role": "user", "content": "Explain\n\n  indentation"},
                  {"role": "assistant", "content": "\n\nIt is    whitespace.\n",
                   "reasoning_content": "short answer"}]},
    {"tools": [WEATHER_TOOL],
     "messages": [{"role": "system", "content": "Use tools when needed."},
                  {"role": "user", "content": "Weather in Zürich?"},
                  {"role": "assistant", "content": "",
                   "tool_calls": [{"type": "function", "function": {
                       "name": "get_weather", "arguments": {"city": "Zürich"}}}]},
                  {"role": "tool", "content": "{\"temp\": 21, \"sky\": \"clear\"}"},
                  {"role": "assistant", "content": "It is 21 °C and clear in Zürich."}]},
    {"tools": [WEATHER_TOOL],
     "messages": [{"role": "user", "content": "Weather in Oslo and Rome?"},
                  {"role": "assistant", "content": "Checking both.",
                   "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}},
                                  {"function": {"name": "get_weather", "arguments": {"city": "Rome"}}}]},
                  {"role": "tool", "content": "cold"},
                  {"role": "tool", "content": "warm"},
                  {"role": "assistant", "content": "Oslo is cold, Rome is warm."}]},
]


def write_records(path, records):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                    encoding="utf-8")
    return path


def expected_chat(tokenizer_dir, record):
    """The peers' view: transformers' text, HF tokenizers' ids, and the ids that overlap an
    assistant turn ("<|im_start|>assistant\\n" ... "<|im_end|>") as the trained ones."""
    auto = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    text = auto.apply_chat_template(record["messages"], tools=record.get("tools"), tokenize=False)
    enc = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json")).encode(text)
    spans = [(m.end(), text.index("<|im_end|>", m.end()) + len("<|im_end|>"))
             for m in re.finditer(re.escape("<|im_start|>assistant\n"), text)]
    trainable = [int(any(a < end and b > begin for begin, end in spans)) for a, b in enc.offsets]
    return text, enc.ids, trainable


def test_render_chat_matches_transformers(tmp_path, tokenizer_dir):
    data = write_records(tmp_path / "chats.jsonl", CONVERSATIONS)
    out = run_titan("render-chat", "--tokenizer", tokenizer_dir, "--input", data)
    ours = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(ours) == len(CONVERSATIONS)
    for got, record in zip(ours, CONVERSATIONS):
        text, ids, trainable = expected_chat(tokenizer_dir, record)
        assert got["text"] == text
        assert got["ids"] == ids
        assert got["trainable"] == trainable
        assert 0 < sum(trainable) < len(ids)


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory, tokenizer_dir):
    path = tmp_path_factory.mktemp("hf") / "model"
    make_hf_model(path, moe=False, tied=True, seed=7, tokenizer_dir=tokenizer_dir)
    return path


def test_sft_step_loss_equals_transformers(tmp_path, hf_dir, tokenizer_dir):
    data = write_records(tmp_path / "chats.jsonl", CONVERSATIONS)
    seq_len, batch = 64, 2
    dump = tmp_path / "run"
    run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel_sft",
              "--model.flavor", "auto", "--model.hf_assets_path", hf_dir,
              "--checkpoint.initial_load_in_hf", "--training.steps", "1",
              "--training.shuffle", "false", "--training.local_batch_size", batch,
              "--training.seq_len", seq_len, "--training.dataset_path", data,
              "--job.dump_folder", dump)
    loss = read_metrics(dump)[0]["loss"]

    # The loader's rows re-made: conversations + eos back to back, windows of seq_len + 1; a
    # label counts when its token is trained and in the same conversation.
    ids, owner, trained = [], [], []
    for n, record in enumerate(CONVERSATIONS * 4):
        _, conv_ids, conv_trainable = expected_chat(tokenizer_dir, record)
        ids += conv_ids + [EOS]
        owner += [n] * (len(conv_ids) + 1)
        trained += conv_trainable + [0]
    model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    n = seq_len + 1
    rows = [(ids[r * n:(r + 1) * n], owner[r * n:(r + 1) * n], trained[r * n:(r + 1) * n])
            for r in range(batch)]
    total, count = documents_alone_loss(model, rows)
    assert count > 0
    assert loss == pytest.approx(total / count, rel=1e-5)


def test_sft_errors_name_the_record_and_the_folder(tmp_path, tokenizer_dir):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(CONVERSATIONS[0]) + "\n" + json.dumps({"text": "plain"}) + "\n")
    proc = run_titan("render-chat", "--tokenizer", tokenizer_dir, "--input", bad, check=False)
    assert proc.returncode != 0 and f"{bad}:2" in proc.stderr and "messages" in proc.stderr

    no_template = tmp_path / "tok"
    no_template.mkdir()
    shutil.copy(tokenizer_dir / "tokenizer.json", no_template / "tokenizer.json")
    good = write_records(tmp_path / "good.jsonl", CONVERSATIONS[:1])
    proc = run_titan("train", "--module", "qwen3", "--config", "qwen3_debugmodel_sft",
                     "--model.hf_assets_path", no_template, "--training.dataset_path", good,
                     "--job.dump_folder", tmp_path / "run", check=False)
    assert proc.returncode != 0 and "has no chat template" in proc.stderr
    assert str(no_template) in proc.stderr


def test_eval_sft_masks_the_conversations_as_sft_trains(tmp_path, hf_dir, tokenizer_dir):
    """`titan eval --sft` packs as the SFT config functions train (hf_flattening: each
    conversation attends to itself only, and only assistant tokens count), so its loss is
    Hugging Face's on the conversations alone."""
    data = write_records(tmp_path / "chats.jsonl", CONVERSATIONS * 4)
    seq_len, batch = 64, 2
    out = run_titan("eval", "--model", hf_dir, "--data", data, "--sft", "--seq-len", seq_len,
                    "--batch-size", batch, "--steps", 1)
    loss = json.loads(out.stdout.splitlines()[-1])["loss"]
    ids, owner, trained = [], [], []
    for n, record in enumerate(CONVERSATIONS * 4):
        _, conv_ids, conv_trainable = expected_chat(tokenizer_dir, record)
        ids += conv_ids + [EOS]
        owner += [n] * (len(conv_ids) + 1)
        trained += conv_trainable + [0]
    model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    n = seq_len + 1
    rows = [(ids[r * n:(r + 1) * n], owner[r * n:(r + 1) * n], trained[r * n:(r + 1) * n])
            for r in range(batch)]
    total, count = documents_alone_loss(model, rows)
    assert loss == pytest.approx(total / count, rel=1e-5)


def test_sft_reads_parquet_and_arrow_records_as_their_jsonl_lines(tmp_path, tokenizer_dir):
    """Conversations stored as Parquet rows or a datasets save_to_disk folder (lists of structs;
    a column absent from a record is null) pack into the same rows as the jsonl lines."""
    from datasets import Dataset

    records = CONVERSATIONS[:4]
    jsonl = write_records(tmp_path / "chats.jsonl", records)
    Dataset.from_list(records).to_parquet(str(tmp_path / "chats.parquet"))
    Dataset.from_list(records).save_to_disk(str(tmp_path / "saved"))

    def rows(path):
        proc = run_titan("check-data", "--module", "qwen3", "--config", "qwen3_debugmodel_sft",
                         "--model.hf_assets_path", tokenizer_dir, "--training.dataset_path", path,
                         "--training.shuffle", "false", "--training.seq_len", 64, "--rows", 4)
        return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]

    want = rows(jsonl)
    assert len(want) == 4
    assert rows(tmp_path / "chats.parquet") == want
    assert rows(tmp_path / "saved") == want
