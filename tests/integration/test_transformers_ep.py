"""Expert parallelism on the Transformers backend, from each MoE family's own expert-parallel
plan: the family's router and block run unchanged and only its experts module's forward is
wrapped (tokens exchanged to the rank that holds their expert). Under torchrun (Gloo, CPU), EP 2
(the dense weights sharded by FSDP over the same two ranks) gives the one-process losses,
gradient norms and validation losses (float32, 3 steps, 1e-5) on the same global batch,
balancing off (the auxiliary loss is a per-rank mean by design); what the plan cannot honour is
one error naming the family, the degree and why. Every MoE family has the same ep_plan; Qwen3-MoE
and DeepSeek-V2 (group-limited routing, shared experts beside the experts module, a dense first
layer) are the two run; Mixtral and OLMoE route as Qwen3-MoE does (softmax top-k, the
experts module alone wrapped)."""
import pytest

from hf_families import make_family
from launch import torchrun
from test_transformers_tp import args, assert_same_run

EP2 = ["--parallelism.expert_parallel_degree", "2"]


@pytest.mark.parametrize("family", ["deepseek_v2", "qwen3_moe"])
def test_ep2_matches_one_process(tmp_path, small_corpus, tokenizer_dir, family):
    hf = tmp_path / "hf"
    make_family(hf, family, tokenizer_dir)
    torchrun(1, args(tmp_path / "one", small_corpus, hf))
    proc = torchrun(2, args(tmp_path / "ep", small_corpus, hf, *EP2,
                            "--training.local_batch_size", "1"))
    assert "ep=2" in proc.stdout
    assert_same_run(tmp_path / "ep", tmp_path / "one")


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
