"""Small random Qwen3 / Qwen3-MoE / Llama 3 models made with transformers itself, for round
trips."""
import json
import shutil

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM

QWEN3_VOCAB = 151936  # room for the real tokenizer's ids


def make_hf_model(path, moe=False, tied=True, seed=0, tokenizer_dir=None, vocab=QWEN3_VOCAB,
                  **overrides):
    """Writes a random HF model with save_pretrained (and the tokenizer files) to `path`;
    `overrides` replace config values (hidden_size, intermediate_size, head_dim ...)."""
    torch.manual_seed(seed)
    common = dict(
        vocab_size=vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=512, rope_theta=1e6,
        tie_word_embeddings=tied, rms_norm_eps=1e-6, intermediate_size=96,
    )
    common.update(overrides)
    if moe:
        cfg = Qwen3MoeConfig(**common, moe_intermediate_size=32,
                             num_experts=4, num_experts_per_tok=2, norm_topk_prob=True)
        model = Qwen3MoeForCausalLM(cfg)
    else:
        cfg = Qwen3Config(**common)
        model = Qwen3ForCausalLM(cfg)
    model = model.float().eval()
    model.save_pretrained(path)
    if tokenizer_dir is not None:
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(tokenizer_dir / f, path / f)
    return model


# Llama 3.1's RoPE scaling at a context small enough that head_dim 16 at theta 10000 has
# frequencies in all three of its bands (kept, smoothed, slowed by `factor`).
LLAMA3_ROPE = dict(rope_type="llama3", rope_theta=10000.0, factor=4.0, low_freq_factor=1.0,
                   high_freq_factor=4.0, original_max_position_embeddings=64)


def make_llama_model(path, tied=True, seed=0, tokenizer_dir=None, vocab=QWEN3_VOCAB, **overrides):
    """Writes a random LlamaForCausalLM (GQA, llama3 RoPE scaling) with save_pretrained."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    args = dict(vocab_size=vocab, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                max_position_embeddings=512, rope_parameters=dict(LLAMA3_ROPE),
                tie_word_embeddings=tied, rms_norm_eps=1e-5, bos_token_id=None,
                eos_token_id=151643)
    args.update(overrides)
    model = LlamaForCausalLM(LlamaConfig(**args)).float().eval()
    model.save_pretrained(path)
    if tokenizer_dir is not None:
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(tokenizer_dir / f, path / f)
    return model


def hf_logits(model_dir, tokens, dtype=torch.float32):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, attn_implementation="eager")
    model.eval()
    with torch.no_grad():
        return model(torch.tensor([tokens])).logits[0].float()


def rel_err(a, b):
    a, b = torch.as_tensor(a).double(), torch.as_tensor(b).double()
    return ((a - b).abs().max() / max(b.abs().max().item(), 1e-12)).item()


EOS = 151643  # <|endoftext|>, what training packs documents with


def packed_windows(corpus, tokenizer_dir, seq_len, count):
    """Training's packing, re-done with HF tokenizers: documents + eos, windows of seq_len+1."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    ids = []
    for line in corpus.read_text(encoding="utf-8").splitlines():
        ids += tok.encode(json.loads(line)["text"]).ids + [EOS]
        if len(ids) >= (seq_len + 1) * count:
            break
    return [ids[i * (seq_len + 1):(i + 1) * (seq_len + 1)] for i in range(count)]


def documents_alone_loss(model, rows):
    """The summed loss and label count of packed rows with document masking, from `model` (HF)
    running each document piece of a row alone, positions from 0. `rows` holds (ids, owner,
    trained) per row: seq_len + 1 token ids, the document of each, and whether each is a target
    (None: all are). A label counts when its token is a target in the same document."""
    import torch.nn.functional as F

    total, count = 0.0, 0
    with torch.no_grad():
        for ids, owner, trained in rows:
            start = 0
            while start < len(ids) - 1:
                end = start
                while end + 1 < len(ids) - 1 and owner[end + 1] == owner[start]:
                    end += 1
                logits = model(torch.tensor([ids[start:end + 1]])).logits[0]
                for k in range(end + 1 - start):
                    t = start + k
                    if owner[t + 1] == owner[t] and (trained is None or trained[t + 1]):
                        total += F.cross_entropy(logits[k], torch.tensor(ids[t + 1]),
                                                 reduction="sum").item()
                        count += 1
                start = end + 1
    return total, count

