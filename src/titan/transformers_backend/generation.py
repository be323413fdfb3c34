"""Incremental decoding for titan generate on the Transformers backend, run in titan's embedded
interpreter: the model's own forward with Transformers' own KV cache (DynamicCache), as its
generate() runs it, so that greedy decoding gives Transformers' tokens."""
import torch
import transformers


def forward_cached(model, ids, cache):
    """Logits [B, n, V] of `ids` [B, n] after the tokens in `cache` (None: a new cache), and
    the cache with their keys and values appended."""
    if cache is None:
        cache = transformers.DynamicCache(config=model.config)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = model(input_ids=ids, past_key_values=cache, use_cache=True)
    finally:
        model.train(was_training)
    return out.logits, out.past_key_values
