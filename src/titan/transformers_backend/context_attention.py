"""Context parallelism for the Transformers backend (docs/transformers_backend.md, "Context
parallelism"), run in titan's embedded interpreter.

Each cp rank runs Transformers' decoder on its own tokens of the rows (titan's sequence shards:
head-tail chunks, or contiguous pieces), with position_ids = their places in the whole rows (or
in their documents), so the family's own rotary embedding is right. Attention is the one
function registered here with Transformers' attention interface (its v5 registry): it hands the
layer's queries, keys and values to titan's context parallel attention, which all-gathers the
keys and values over cp and runs titan's context_attention op with the global places of this
rank's queries and the rows' document ids. No family code is patched: every family forwards an
extra keyword of the decoder's forward (titan_document_ids) to its attention call untouched,
and with no mask function registered under this name Transformers builds no mask at all.
"""
import torch
import transformers

NAME = "titan_context_parallel"

# The keywords the families pass to their attention function (Transformers 5.x) that this
# function understands; any other one (attention sinks, soft-capping, position biases) is a
# family it cannot run exactly, and is refused rather than ignored.
HANDLED = {"position_ids", "use_cache", "sliding_window", "output_router_logits",
           "titan_document_ids", "past_key_values", "cache_position"}


def refusal(config, seq_len):
    """Why this config cannot run under context parallelism (None when it can): what would make
    one rank's attention or rotary embedding differ from its part of the whole rows'."""
    name = type(config).__name__
    rope = (getattr(config, "rope_parameters", None) or {}).get("rope_type", "default")
    if rope in ("dynamic", "longrope"):
        return (f"{name} uses rope_type '{rope}', whose frequencies depend on the largest "
                "position a rank sees")
    if float(getattr(config, "attention_dropout", 0.0) or 0.0) > 0:
        return f"{name} has attention_dropout = {config.attention_dropout}"
    kinds = set(getattr(config, "layer_types", None) or ["full_attention"])
    others = kinds - {"full_attention", "sliding_attention"}
    if others:
        return f"{name} has layers of type {', '.join(sorted(others))} (layer_types)"
    window = getattr(config, "sliding_window", None)
    if window is not None and "sliding_attention" in (
            getattr(config, "layer_types", None) or ["sliding_attention"]) and window < seq_len:
        return (f"{name} attends within a sliding window of {window} tokens, shorter than "
                f"training.seq_len = {seq_len}; titan's context attention is causal over the "
                "whole rows")
    return None


def install(model, attend, seq_len):
    """Makes `model` attend through `attend(q, k, v, scale, document_ids)` (titan's context
    parallel attention: q [B, Hq, S_local, d], k/v [B, Hkv, S_local, d] -> [B, Hq, S_local,
    d]) from its next forward on."""
    why = refusal(model.config, seq_len)
    if why is not None:
        raise ValueError(why)

    def attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                  sliding_window=None, **kwargs):
        unknown = set(kwargs) - HANDLED
        if unknown:
            raise ValueError(f"{type(module).__name__} passes {', '.join(sorted(unknown))} to "
                             "its attention, which context parallelism does not handle")
        if attention_mask is not None or dropout:
            raise ValueError(f"{type(module).__name__}: context parallelism takes no attention "
                             "mask and no attention dropout")
        if sliding_window is not None and sliding_window < seq_len:
            raise ValueError(f"{type(module).__name__}: a sliding window of {sliding_window} "
                             "tokens under context parallelism")
        if scaling is None:
            scaling = query.shape[-1] ** -0.5
        # titan's op takes one head size for q, k and v: zeros added to the smaller ones change
        # neither the scores nor the kept part of the output (MLA's values are narrower).
        dq, dv = query.shape[-1], value.shape[-1]
        if dv < dq:
            value = torch.nn.functional.pad(value, (0, dq - dv))
        elif dq < dv:
            query = torch.nn.functional.pad(query, (0, dv - dq))
            key = torch.nn.functional.pad(key, (0, dv - dq))
        out = attend(query, key, value, float(scaling), kwargs.get("titan_document_ids"))
        return out[..., :dv].transpose(1, 2).contiguous(), None

    transformers.AttentionInterface.register(NAME, attention)
    model.config._attn_implementation = NAME
