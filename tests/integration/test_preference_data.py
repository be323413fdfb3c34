"""Preference records (training.objective dpo, docs/preference.md) against TRL 1.16: the pairs
`titan check-data --rows` prints are, token for token, the prompt_ids / chosen_ids /
rejected_ids TRL's DPOTrainer._prepare_dataset makes of each record (standard, conversational
and implicit-prompt records, chat_template_kwargs, tools, TRL's extract_prompt edge cases; from
.jsonl, Parquet and an Arrow save_to_disk folder); TRL's max_length filter; the records that make
no pair counted by kind; a file of them alone one error that says why."""
import json
import os
import tempfile
from types import SimpleNamespace

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import pytest
from datasets import Dataset
from transformers import AutoTokenizer
from trl import DPOConfig, DPOTrainer

from conftest import run_titan

WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


STANDARD = [
    {"prompt": "Q: What color is the sky?\nA:", "chosen": " It is blue.", "rejected": " It is green."},
    {"prompt": "The sky is ", "chosen": "blue.", "rejected": "green."},  # the prompt's end merges
    {"prompt": "Say yes.", "chosen": " Yes<|im_end|>", "rejected": " No"},  # eos already there
    {"prompt": "", "chosen": "Unprompted.", "rejected": "Also unprompted, but worse."},
    {"prompt": "Übersetze: été → ", "chosen": "Sommer 🌞", "rejected": "Winter ❄"},
]
IMPLICIT_TEXT = [
    {"chosen": "The sky is blue.", "rejected": "The sky is green."},
    {"chosen": "abc", "rejected": "abcd"},  # no difference within the shorter: TRL keeps its end
    {"chosen": "Yes ", "rejected": "No"},  # first characters differ, chosen ends in a space
    {"chosen": "Réponse : été", "rejected": "Réponse : hiver"},
]
CONVERSATIONAL = [
    {"prompt": [user("What color is the sky?")], "chosen": [assistant("It is blue.")],
     "rejected": [assistant("It is green.")]},
    {"prompt": [user("What color is the sky?")], "chosen": [assistant("It is blue.")],
     "rejected": [assistant("It is green.")], "chat_template_kwargs": {"enable_thinking": False}},
    {"prompt": [{"role": "system", "content": "Answer in one word."}, user("Capital of France?"),
                assistant("Paris."), user("And of Japan? 日本")],
     "chosen": [assistant("東京")], "rejected": [assistant("Kyoto, I think, or maybe Osaka.")]},
    {"prompt": [user("Weather in Zürich?")], "tools": [WEATHER_TOOL],
     "chosen": [assistant("Let me check.")], "rejected": [assistant("No idea.")]},
    {"prompt": [user("Think first: 17 * 3?")],
     "chosen": [assistant("<think>\n17*3 = 51\n</think>\n\n51")], "rejected": [assistant("41")]},
]
IMPLICIT_CONVERSATIONAL = [
    {"chosen": [user("What color is the sky?"), assistant("It is blue.")],
     "rejected": [user("What color is the sky?"), assistant("It is green.")]},
    {"chosen": [user("Hi"), assistant("Hello!"), user("Bye"), assistant("Goodbye!")],
     "rejected": [user("Hi"), assistant("Hello!"), user("Bye"), assistant("Whatever.")]},
]


@pytest.fixture(scope="module")
def hf_tokenizer(tokenizer_dir):
    return AutoTokenizer.from_pretrained(str(tokenizer_dir))


def trl_columns(tokenizer, record, max_length=1024, truncation_mode="keep_start"):
    """What TRL's trainer makes of one record: its tokenized columns, or None when its
    max_length filter drops it. The record alone in its dataset, since TRL decides on the
    first record whether a dataset has an implicit prompt."""
    with tempfile.TemporaryDirectory() as out:
        args = DPOConfig(output_dir=out, use_cpu=True, bf16=False, report_to="none",
                         max_length=max_length, truncation_mode=truncation_mode)
        trainer = SimpleNamespace(_tokenizer=tokenizer)
        rows = DPOTrainer._prepare_dataset(trainer, Dataset.from_list([record]), tokenizer, args,
                                           "test")
    if len(rows) == 0:
        return None
    return {key: rows[0][key] for key in ("prompt_ids", "chosen_ids", "rejected_ids")}


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                    encoding="utf-8")
    return path


def titan_pairs(tokenizer_dir, path, count, *flags):
    proc = run_titan("check-data", "--module", "qwen3", "--config", "qwen3_debugmodel",
                     "--model.hf_assets_path", tokenizer_dir, "--training.objective", "dpo",
                     "--training.dataset_path", path, *flags, "--rows", count)
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("records", [STANDARD, IMPLICIT_TEXT, CONVERSATIONAL,
                                     IMPLICIT_CONVERSATIONAL],
                         ids=["standard", "implicit_text", "conversational",
                              "implicit_conversational"])
def test_pairs_are_trl_tokens(tmp_path, tokenizer_dir, hf_tokenizer, records):
    path = write_jsonl(tmp_path / "prefs.jsonl", records)
    got = titan_pairs(tokenizer_dir, path, len(records))
    assert len(got) == len(records)
    for i, (record, pair) in enumerate(zip(records, got)):
        assert pair["record"] == f"{path}:{i + 1}"
        want = trl_columns(hf_tokenizer, record)
        assert {k: pair[k] for k in want} == want, (record, hf_tokenizer.decode(pair["chosen_ids"]))


def test_parquet_and_arrow_records_are_the_jsonl_records(tmp_path, tokenizer_dir, hf_tokenizer):
    """Rows of a Parquet file and of a datasets save_to_disk folder read as their jsonl lines,
    conversations (lists of structs, an optional struct column) and text alike."""
    for name, records in [("text", STANDARD + [dict(r, prompt="Q") for r in IMPLICIT_TEXT]),
                          # the optional column first: the columns are the first record's
                          ("chat", [CONVERSATIONAL[1], CONVERSATIONAL[0], CONVERSATIONAL[2]])]:
        dataset = Dataset.from_list(records)  # absent from a record: null
        dataset.to_parquet(str(tmp_path / f"{name}.parquet"))
        dataset.save_to_disk(str(tmp_path / f"{name}_saved"))
        want = [trl_columns(hf_tokenizer, r) for r in records]
        for path in (tmp_path / f"{name}.parquet", tmp_path / f"{name}_saved"):
            got = titan_pairs(tokenizer_dir, path, len(records))
            assert [{k: p[k] for k in w} for p, w in zip(got, want)] == want, path


def test_pairs_whose_prompt_fills_max_length_are_dropped_as_trl_drops_them(
        tmp_path, tokenizer_dir, hf_tokenizer):
    records = [{"prompt": "word " * 12, "chosen": " a", "rejected": " b"},
               {"prompt": "short", "chosen": " answer " * 20, "rejected": " no"}]
    path = write_jsonl(tmp_path / "prefs.jsonl", records)
    assert trl_columns(hf_tokenizer, records[0], max_length=8) is None
    got = titan_pairs(tokenizer_dir, path, 1, "--dpo.max_length", "8")
    assert got[0]["record"].endswith(":2")
    assert {k: got[0][k] for k in ("prompt_ids", "chosen_ids", "rejected_ids")} == \
        trl_columns(hf_tokenizer, records[1], max_length=8)
    check = run_titan("check-data", "--module", "qwen3", "--config", "qwen3_debugmodel",
                      "--model.hf_assets_path", tokenizer_dir, "--training.objective", "dpo",
                      "--training.dataset_path", path, "--dpo.max_length", "8")
    out = check.stdout + check.stderr
    assert "1 of 2 records read have a prompt of dpo.max_length = 8 tokens or more" in out
    assert "1 of 2 records read makes a pair longer than dpo.max_length: cut to it" in out


BAD = [
    ({"prompt": "p", "chosen": "a"}, 'have no "rejected"'),
    ({"prompt": "p", "rejected": "a"}, 'have no "chosen"'),
    ({"prompt": "p", "chosen": "", "rejected": "a"}, 'have an empty "chosen"'),
    ({"prompt": [user("q")], "chosen": [assistant("a")], "rejected": []}, 'have an empty "rejected"'),
    ({"prompt": "p", "chosen": " same", "rejected": " same"}, "have the same chosen and rejected"),
    ({"prompt": "p", "chosen": 3, "rejected": "a"},
     'have a "chosen" that is neither text nor a list of {"role", ...} messages'),
    ({"prompt": "p", "chosen": [assistant("a")], "rejected": [assistant("b")]},
     "mix text and lists of messages in prompt, chosen and rejected"),
    ({"chosen": [user("one"), assistant("a")], "rejected": [user("two"), assistant("a")]},
     "have no prompt message"),
    # Qwen3's template loops over an assistant message's tool_calls.
    ({"prompt": [user("q")], "chosen": [dict(assistant("a"), tool_calls=5)],
      "rejected": [assistant("b")]}, "are rejected by the chat template"),
    ({"prompt": "p", "chosen": "a", "rejected": "b", "chat_template_kwargs": "yes"},
     'have "chat_template_kwargs" that are not an object'),
]


def test_bad_records_are_skipped_and_counted_by_kind(tmp_path, tokenizer_dir):
    good = {"prompt": "Q:", "chosen": " yes", "rejected": " no"}
    records = [good] + [r for r, _ in BAD] + [BAD[0][0], good]
    path = write_jsonl(tmp_path / "prefs.jsonl", records)
    proc = run_titan("check-data", "--module", "qwen3", "--config", "qwen3_debugmodel",
                     "--model.hf_assets_path", tokenizer_dir, "--training.objective", "dpo",
                     "--training.dataset_path", path)
    out = proc.stdout + proc.stderr
    total = len(records)
    assert f"{total} records, 2 preference pairs" in out
    assert f'2 of {total} records read have no "rejected": they are skipped (the first: {path}:2)' in out
    for _, kind in BAD[1:]:
        assert f"1 of {total} records read {kind}" in out, kind
    assert "'int' object is not iterable" in out  # the template's own message
    # Training visits only the good pairs.
    pairs = titan_pairs(tokenizer_dir, path, 2)
    assert [p["record"] for p in pairs] == [f"{path}:1", f"{path}:{total}"]


def test_a_file_of_bad_records_is_one_error_saying_why(tmp_path, tokenizer_dir):
    path = write_jsonl(tmp_path / "prefs.jsonl", [BAD[0][0], BAD[4][0], BAD[0][0]])
    for extra in ([], ["--rows", "1"]):
        proc = run_titan("check-data", "--module", "qwen3", "--config", "qwen3_debugmodel",
                         "--model.hf_assets_path", tokenizer_dir, "--training.objective", "dpo",
                         "--training.dataset_path", path, *extra, check=False)
        assert proc.returncode != 0
        err = proc.stderr.strip().splitlines()[-1]
        assert "none of its 3 records makes a preference pair" in err, err
        assert '2 have no "rejected"' in err and "1 have the same chosen and rejected" in err, err
