"""DPO on the other models titan trains, against TRL 1.16's DPOTrainer (trl_dpo_peer.py) on the
same small checkpoint, records and optimizer, four steps in float32 on the CPU: Qwen3-MoE and
Llama 3 fully fine-tuned, and QLoRA (an NF4 base) with the adapters off as the reference."""
import pytest
import torch

from conftest import read_metrics
from hf_models import make_hf_model, make_llama_model
from test_dpo_train import (ALPHA, BATCH, BETA, LR, RANK, STEPS, assert_steps_match,
                            starting_adapter, titan_dpo, write_records)
from test_lora import dequantised_base
from trl_dpo_peer import records, trl_dpo

peft = pytest.importorskip("peft")
from transformers import AutoModelForCausalLM  # noqa: E402


def test_moe_matches_trl(tmp_path, tokenizer_dir):
    """Qwen3-MoE (4 experts, 2 a token), without the load-balancing loss on either side: the
    router's choices and the experts' gradients go through the DPO loss alone."""
    base = tmp_path / "moe"
    make_hf_model(base, moe=True, tied=True, seed=5, tokenizer_dir=tokenizer_dir)
    rows = records("standard")
    data = write_records(tmp_path / "pairs.jsonl", rows)
    ours = titan_dpo(base, data, tmp_path / "run", "--model.moe_load_balancing", "none")
    theirs = trl_dpo(base, rows, steps=STEPS, batch=BATCH, lr=LR, beta=BETA,
                     router_aux_loss_coef=0.0)
    # A reward is beta x (policy - reference) of two float32 sums near -70, each summed in
    # another order than TRL's (here the experts' grouped products): ~5e-7 of a sum apart, and
    # AdamW's steps, which divide by the gradients' own size, carry such differences on. That
    # is ~4e-6 in a reward (of ~0.03 at step 2): beyond 1e-4 relative, within 2e-5 absolute.
    assert_steps_match(ours, theirs, abs=2e-5)


def test_llama3_matches_trl(tmp_path, tokenizer_dir):
    base = tmp_path / "llama"
    make_llama_model(base, tied=False, seed=6, tokenizer_dir=tokenizer_dir)
    rows = records("standard")
    data = write_records(tmp_path / "pairs.jsonl", rows)
    ours = titan_dpo(base, data, tmp_path / "run", module="llama3")
    theirs = trl_dpo(base, rows, steps=STEPS, batch=BATCH, lr=LR, beta=BETA)
    # Rewards within float32's cancellation, as for the MoE (step 4: 8e-6 apart, of ~6e-3).
    assert_steps_match(ours, theirs, abs=2e-5)


def test_qlora_with_the_adapters_off_as_reference_matches_trl_on_the_dequantised_base(
        tmp_path, tokenizer_dir):
    """QLoRA computes with the NF4 weights dequantised (test_lora.py: the same losses as LoRA on
    the dequantised base), so TRL's peer is a PEFT model on that base. The starting adapter is
    not zero, so the reference (TRL: the adapters disabled; titan: dpo.reference adapters_off)
    differs from the starting policy and shows in the first step's rewards."""
    base = tmp_path / "dense"
    make_hf_model(base, moe=False, tied=True, seed=11, tokenizer_dir=tokenizer_dir)
    rows = records("standard")
    data = write_records(tmp_path / "pairs.jsonl", rows)
    adapter = starting_adapter(base, tmp_path / "adapter")
    proc = titan_dpo(base, data, tmp_path / "run", "--model.converters", "lora",
                     "--lora.rank", RANK, "--lora.alpha", ALPHA,
                     "--lora.initial_adapter_path", adapter, "--lora.base_quantization", "nf4",
                     "--lora.double_quantization", "false", "--dpo.reference", "adapters_off",
                     check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "with its projections in NF4" in proc.stdout
    ours = read_metrics(tmp_path / "run")
    dequantised = dequantised_base(base, tmp_path / "dequantised")
    model = AutoModelForCausalLM.from_pretrained(dequantised, dtype=torch.float32)
    model = peft.PeftModel.from_pretrained(model, adapter, is_trainable=True)
    theirs = trl_dpo(dequantised, rows, steps=STEPS, batch=BATCH, lr=LR, beta=BETA, model=model,
                     adapters_off=True)
    assert abs(theirs[0]["rewards/chosen"]) > 1e-4
    # NF4 products (titan's nf4_linear) against float32 ones on the dequantised weights: the
    # log-probability sums agree to ~2e-6 of themselves, ~1e-5 in a reward (see test_moe_...).
    assert_steps_match(ours, theirs, abs=2e-5)
