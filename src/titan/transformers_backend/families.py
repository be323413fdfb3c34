"""What a Transformers family does around its decoder that titan must reproduce, found by probing
the model rather than by a table of families (docs/transformers_backend.md, "Families").

titan applies the head itself (the loss reads lm_head's weight), so whatever a CausalLM's
forward does between its decoder's last hidden state and its logits has to be known: a constant
factor (Granite's logits_scaling divides the logits) is applied to the hidden state; anything
else (soft-capping, a head bias) is refused.
"""
import sys

import torch


def logits_scale(model):
    """The constant c with model(ids).logits == c * lm_head(decoder(ids)), from one tiny forward
    of the built model (parameters still in place). Raises when the logits are not a constant
    multiple of the head's output."""
    head = model.get_output_embeddings()
    if getattr(head, "bias", None) is not None:
        raise ValueError(f"{type(model).__name__}: its head (lm_head) has a bias; titan applies "
                         "the head as a bias-free projection in its loss")
    was_training = model.training
    model.eval()
    try:
        vocab = head.weight.shape[0]
        ids = (torch.arange(6, device=head.weight.device) * 7 % vocab).unsqueeze(0)
        with torch.no_grad():
            logits = model(input_ids=ids, use_cache=False).logits.double()
            hidden = model.get_decoder()(input_ids=ids, use_cache=False).last_hidden_state
            plain = head(hidden).double()
    finally:
        model.train(was_training)
    c = float((logits * plain).sum() / (plain * plain).sum())
    tolerance = 1e-3 if head.weight.dtype in (torch.bfloat16, torch.float16) else 1e-5
    if not torch.allclose(logits, c * plain, rtol=tolerance, atol=tolerance * plain.abs().max()):
        raise ValueError(f"{type(model).__name__}: its logits are not a constant multiple of "
                         "lm_head(last hidden state) (soft-capping or another transform after the "
                         "head); titan's loss applies the head itself and cannot reproduce it")
    return 1.0 if abs(c - 1.0) < tolerance else c


def auxiliary_loss_function(model):
    """The family's load_balancing_loss_func (Transformers' MoE auxiliary loss), or None."""
    return getattr(sys.modules[type(model).__module__], "load_balancing_loss_func", None)


def check_balancing(model):
    """model.moe_load_balancing = aux_loss on a family that computes none is refused (it would
    silently train without balancing)."""
    if getattr(model.config, "output_router_logits", False) and auxiliary_loss_function(model) is None:
        raise ValueError(f"model.moe_load_balancing = \"aux_loss\": {type(model).__name__} "
                         "(model_type " f"'{model.config.model_type}') computes no auxiliary "
                         "load-balancing loss in Transformers; use moe_load_balancing = \"none\"")
