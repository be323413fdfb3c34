"""What titan cannot honour of a Transformers family is one error. (Each family's one process
against Transformers' own forward and backward is a cell of test_transformers_layouts.py, whose
one-process run is also the baseline of the family's layouts.)"""
from conftest import run_titan
from hf_families import make_family

SEQ_LEN = 32
BATCH = 2


def train(dump, corpus, hf_dir, *extra, check=True):
    return run_titan(
        "train", "--module", "transformers_modeling_backend", "--config",
        "transformers_modeling_backend_debugmodel", "--model.flavor", "auto",
        "--model.hf_assets_path", hf_dir, "--checkpoint.initial_load_in_hf",
        "--model.moe_load_balancing", "none", "--training.steps", "1",
        "--training.local_batch_size", BATCH, "--training.seq_len", SEQ_LEN,
        "--training.max_norm", "1e9", "--metrics.log_freq", "1",
        "--training.dataset_path", corpus, "--job.dump_folder", dump, *extra, check=check)


def test_balancing_a_family_without_an_auxiliary_loss_is_refused(tmp_path, small_corpus,
                                                                  tokenizer_dir):
    make_family(tmp_path / "hf", "deepseek_v2", tokenizer_dir)
    proc = train(tmp_path / "run", small_corpus, tmp_path / "hf", "--model.moe_load_balancing",
                 "aux_loss", check=False)
    assert proc.returncode != 0
    lines = [l for l in proc.stderr.splitlines() if not l.startswith("[titan] warning: ")]
    assert len(lines) == 1 and "computes no auxiliary load-balancing loss" in lines[0], proc.stderr
    assert "deepseek_v2" in lines[0]
