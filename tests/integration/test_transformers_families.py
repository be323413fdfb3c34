"""Each Transformers family the backend claims, one process: titan's first loss and gradient
norm on a batch equal Transformers' own forward and backward of the same model on the same
tokens (float32, 1e-5), through the family's own code (multipliers, per-head or whole-width
q/k norms, fused projections, MLA, routed experts); and what titan cannot honour is one error."""
import pytest
import torch

from conftest import read_metrics, run_titan
from hf_families import FAMILIES, make_family
from hf_models import packed_windows

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


def transformers_loss_and_norm(model, corpus, tokenizer_dir):
    """The mean token loss of the first batch and the norm of its gradient, by Transformers."""
    model.train()
    rows = torch.tensor(packed_windows(corpus, tokenizer_dir, SEQ_LEN, BATCH))
    logits = model(rows[:, :-1], use_cache=False).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             rows[:, 1:].reshape(-1))
    loss.backward()
    norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in model.parameters()
                          if p.grad is not None))
    return loss.item(), norm.item()


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_matches_transformers(tmp_path, small_corpus, tokenizer_dir, family):
    model = make_family(tmp_path / "hf", family, tokenizer_dir)
    want_loss, want_norm = transformers_loss_and_norm(model, small_corpus, tokenizer_dir)
    train(tmp_path / "run", small_corpus, tmp_path / "hf")
    [m] = read_metrics(tmp_path / "run")
    assert m["loss"] == pytest.approx(want_loss, rel=1e-5), family
    assert m["grad_norm"] == pytest.approx(want_norm, rel=1e-5), family


def test_balancing_a_family_without_an_auxiliary_loss_is_refused(tmp_path, small_corpus,
                                                                  tokenizer_dir):
    make_family(tmp_path / "hf", "deepseek_v2", tokenizer_dir)
    proc = train(tmp_path / "run", small_corpus, tmp_path / "hf", "--model.moe_load_balancing",
                 "aux_loss", check=False)
    assert proc.returncode != 0
    lines = [l for l in proc.stderr.splitlines() if not l.startswith("[titan] warning: ")]
    assert len(lines) == 1 and "computes no auxiliary load-balancing loss" in lines[0], proc.stderr
    assert "deepseek_v2" in lines[0]
