"""Context parallelism on the Transformers backend (model.name transformers): Transformers' own
attention goes through titan's context attention (registered with Transformers' attention
interface), each cp rank running the decoder on its head-tail chunks of the rows; a family whose
attention titan's context attention cannot reproduce (a sliding window shorter than the rows)
is refused with one error. CP 2 with packed documents that cross the chunk boundaries against
one process, for every family Qwen3 included, is a cell of test_transformers_layouts.py."""
import json

import pytest
from transformers import AutoConfig

from conftest import TOKENIZER_DIR
from launch import torchrun
from test_context_parallel import TEXTS

MODULE = "transformers_modeling_backend"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("cp") / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in TEXTS * 20), encoding="utf-8")
    return path


def test_a_short_sliding_window_is_refused(tmp_path, corpus):
    """Mistral attends within a window; titan's context attention is causal over the rows."""
    model_dir = tmp_path / "mistral"
    AutoConfig.for_model("mistral", vocab_size=151936, hidden_size=64, intermediate_size=96,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=16, sliding_window=8).save_pretrained(model_dir)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (model_dir / name).write_bytes((TOKENIZER_DIR / name).read_bytes())
    proc = torchrun(2, ["train", "--module", MODULE, "--config", f"{MODULE}_debugmodel",
                        "--model.flavor", "auto", "--model.hf_assets_path", model_dir,
                        "--parallelism.context_parallel_degree", 2, "--training.seq_len", 32,
                        "--training.steps", 1, "--training.dataset_path", corpus,
                        "--job.dump_folder", tmp_path / "run"], check=False, timeout=200)
    assert proc.returncode != 0
    assert ("parallelism.context_parallel_degree = 2: the Transformers backend cannot run this "
            "model under context parallelism: ValueError: MistralConfig attends within a sliding "
            "window of 8 tokens, shorter than training.seq_len = 32") in proc.stdout + proc.stderr, \
        (proc.stdout + proc.stderr)[-3000:]
