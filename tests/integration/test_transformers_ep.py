"""Expert parallelism on the Transformers backend: what a family's expert-parallel plan cannot
honour is one error naming the family, the degree and why. EP 2 against one process (Qwen3-MoE,
and DeepSeek-V2's group-limited routing, shared experts and dense first layer) are cells of
test_transformers_layouts.py."""
import pytest

from hf_families import make_family
from launch import torchrun
from test_transformers_tp import args

EP2 = ["--parallelism.expert_parallel_degree", "2"]


@pytest.mark.parametrize("family, overrides, needle", [
    ("qwen3_moe", dict(num_experts=3), "2 does not divide its 3 experts"),
    ("qwen3", {}, "it has no experts module in an expert-parallel plan"),
])
def test_what_ep_cannot_honour_is_one_error(tmp_path, small_corpus, tokenizer_dir, family,
                                            overrides, needle):
    hf = tmp_path / "hf"
    make_family(hf, family, tokenizer_dir, **overrides)
    proc = torchrun(2, args(tmp_path / "run", small_corpus, hf, *EP2, steps=1), check=False)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "parallelism.expert_parallel_degree = 2: the Transformers model " in out, out[-3000:]
    assert f"(model_type '{family}') cannot split its experts over ep: {needle}" in out, out[-3000:]
