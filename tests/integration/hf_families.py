"""Random Transformers models of the families the Transformers backend claims, built with
Transformers itself at debug size (AutoConfig.for_model + from_config), written with
save_pretrained beside the project's tokenizer."""
import shutil

import torch
from transformers import AutoConfig, AutoModelForCausalLM

from hf_models import QWEN3_VOCAB

COMMON = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, vocab_size=QWEN3_VOCAB, max_position_embeddings=512,
              pad_token_id=0, bos_token_id=1, eos_token_id=151643, tie_word_embeddings=False)
# Each family's own fields; DeepSeek-V2 at V2-Lite's shape (MLA without a query LoRA, one
# shared expert, a dense first layer).
FAMILIES = {
    "llama": {},
    "mistral": dict(sliding_window=None),
    "qwen2": dict(attention_bias=True),
    "qwen3": dict(head_dim=16, tie_word_embeddings=True),
    "qwen3_moe": dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=24,
                      head_dim=16),
    "mixtral": dict(num_local_experts=4, num_experts_per_tok=2, intermediate_size=40),
    "olmoe": dict(num_experts=4, num_experts_per_tok=2, intermediate_size=40),
    "olmo2": {},
    "phi3": {},
    "granite": dict(attention_bias=True, embedding_multiplier=3.0, residual_multiplier=0.5,
                    attention_multiplier=0.2, logits_scaling=2.0),
    "deepseek_v2": dict(n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=24,
                        n_shared_experts=1, first_k_dense_replace=1, kv_lora_rank=32,
                        q_lora_rank=None, qk_rope_head_dim=8, qk_nope_head_dim=16,
                        v_head_dim=16, n_group=2, topk_group=1, num_key_value_heads=4),
}
MOE = {"qwen3_moe", "mixtral", "olmoe", "deepseek_v2"}


def make_family(path, family, tokenizer_dir, seed=0, **overrides):
    """Writes a random `family` model to `path`; returns it (float32, eval)."""
    config = AutoConfig.for_model(family, **{**COMMON, **FAMILIES[family], **overrides})
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    model.save_pretrained(path)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizer_dir / f, path / f)
    return model


def documents_alone_loss_and_norm(model, rows):
    """Transformers' own forward and backward of packed rows with document masking: each
    document piece of a row run alone (positions from 0), the mean loss over the labels inside
    a document (hf_models.documents_alone_loss's, with gradients) and the norm of its
    gradient. `rows` holds (ids, owner) per row: seq_len + 1 token ids and the document of each."""
    model.train()
    model.zero_grad()
    losses = []
    for ids, owner in rows:
        start = 0
        while start < len(ids) - 1:
            end = start
            while end + 1 < len(ids) - 1 and owner[end + 1] == owner[start]:
                end += 1
            logits = model(torch.tensor([ids[start:end + 1]]), use_cache=False).logits[0]
            for k in range(end + 1 - start):
                if owner[start + k + 1] == owner[start + k]:
                    losses.append(torch.nn.functional.cross_entropy(
                        logits[k], torch.tensor(ids[start + k + 1])))
            start = end + 1
    loss = torch.stack(losses).mean()
    loss.backward()
    norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in model.parameters()
                          if p.grad is not None))
    return loss.item(), norm.item()
