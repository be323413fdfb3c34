"""Start-up memory of the Transformers backend (docs/transformers_backend.md, "Start-up memory"):
under TP 2 and PP 2 a pretrained model is built as shapes and each rank reads only its share of
the safetensors files, so no rank holds the whole model at full precision. Qwen3s of about
500 MB in float32, most of it Qwen3's 151936-row vocabulary, saved by Transformers in bfloat16
(as Hugging Face checkpoints come) and trained in float32: what each rank has allocated at the
end of its start-up, beyond what it has for a tiny model, is about half the model's float32 size
(each rank used to convert the whole checkpoint to float32 first: 100% and more)."""
import os
import re
import shutil
import subprocess
import threading
import time

import pytest
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from conftest import TITAN, TOKENIZER_DIR
from launch import TORCHRUN, rank_pid

MODULE = "transformers_modeling_backend"
SHAPE = dict(vocab_size=151936, num_attention_heads=4, num_key_value_heads=2,
             max_position_embeddings=512)
TP2 = ["--parallelism.tensor_parallel_degree", 2, "--parallelism.enable_sequence_parallel", "false"]
PP2 = ["--parallelism.pipeline_parallel_degree", 2, "--parallelism.pipeline_parallel_schedule",
       "1F1B"]
# Every rank has started once it logs what it holds (before its first step).
STARTED = re.compile(r"\[titan\] rank (\d+) of \d+ holds")


def write_model(path, hidden, layers, tied):
    """A random Qwen3 of hidden size `hidden`, saved by Transformers in bfloat16; returns its
    float32 bytes."""
    config = Qwen3Config(hidden_size=hidden, intermediate_size=4 * hidden, head_dim=hidden // 4,
                         num_hidden_layers=layers, tie_word_embeddings=tied, **SHAPE)
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(path)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TOKENIZER_DIR / name, path / name)
    return 4 * sum(p.numel() for p in model.parameters())


@pytest.fixture(scope="module")
def baseline(tmp_path_factory, small_corpus):
    """Each rank's peak for a tiny model under TP 2 (the interpreter, Transformers, titan)."""
    root = tmp_path_factory.mktemp("tiny")
    write_model(root / "hf", 8, 1, True)
    peaks, _ = start_up_peaks(root / "hf", root / "job", small_corpus, TP2)
    return peaks


def start_up_peaks(model_dir, dump, corpus, layout):
    """Runs one step under torchrun with 2 ranks; returns each rank's peak RssAnon (what it
    allocated, not the file pages it maps) from its start until it logs what it holds."""
    args = ["train", "--module", MODULE, "--config", f"{MODULE}_debugmodel",
            "--model.name", "transformers", "--model.flavor", "auto",
            "--model.hf_assets_path", model_dir, "--checkpoint.initial_load_in_hf",
            "--training.steps", 1, "--training.seq_len", 32, "--training.local_batch_size", 2,
            "--training.dataset_path", corpus, "--job.dump_folder", dump, *layout]
    agent = subprocess.Popen([*TORCHRUN, "--no-python", "--nproc_per_node=2", "--rdzv_backend",
                              "c10d", "--rdzv_endpoint=localhost:0", "--role", "rank", "--tee",
                              "3", str(TITAN), *map(str, args)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=dict(os.environ, OMP_NUM_THREADS="1"))
    peaks, started, pids = [0, 0], [False, False], [None, None]

    def sample():
        while agent.poll() is None and not all(started):
            for rank in (0, 1):
                if started[rank]:
                    continue
                pids[rank] = pids[rank] or rank_pid(agent.pid, rank)
                try:
                    status = open(f"/proc/{pids[rank]}/status").read()
                    anon = int(re.search(r"RssAnon:\s+(\d+)", status).group(1)) * 1024
                    peaks[rank] = max(peaks[rank], anon)
                except (OSError, AttributeError, TypeError):
                    pass
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    out = []
    for line in agent.stdout:
        out.append(line)
        if m := STARTED.search(line):
            started[int(m.group(1))] = True
    agent.wait(timeout=300)
    sampler.join()
    text = "".join(out)
    assert agent.returncode == 0 and all(started), text[-3000:]
    return peaks, text


# (hidden size, layers, tied) of about 500 MB in float32, so that each rank's share is about
# half: under TP the tied table split on the vocabulary and the layers' projections; under PP
# the untied embedding on one stage and the head on the other. A share is converted to float32
# piece by piece, each piece held in bfloat16 a moment as well: about 65% of the whole under
# TP 2 and 50% under PP 2, against 138% and 199% when every rank loaded the whole model.
@pytest.mark.parametrize("layout, shape", [(TP2, (512, 12, True)), (PP2, (384, 2, False))],
                         ids=["tp2", "pp2"])
def test_each_rank_holds_its_share_of_the_model_at_start_up(baseline, small_corpus, tmp_path,
                                                            layout, shape):
    whole = write_model(tmp_path / "hf", *shape)
    peaks, text = start_up_peaks(tmp_path / "hf", tmp_path / "job", small_corpus, layout)
    assert "each rank loads the whole model" not in text
    for rank in (0, 1):
        held = peaks[rank] - baseline[rank]
        assert held < 0.8 * whole, (rank, held / 2**20, whole / 2**20)
