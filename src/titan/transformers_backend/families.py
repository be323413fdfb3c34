"""What a Transformers family does around its decoder that titan must reproduce, found by probing
the model rather than by a table of families (docs/transformers_backend.md, "Families").

titan applies the head itself (the loss reads lm_head's weight), so whatever a CausalLM's
forward does between its decoder's last hidden state and its logits has to be known: a constant
factor (Granite's logits_scaling divides the logits) is applied to the hidden state; anything
else (soft-capping, a head bias) is refused.
"""
import contextlib
import sys

import torch
from transformers.modeling_outputs import MoeModelOutputWithPast


@contextlib.contextmanager
def _stand_ins(model):
    """For a model built as shapes (parameters on the meta device): a small random head and a
    decoder that returns a random hidden state, so that what the causal LM's forward does
    between the two, which the probe is about, runs on real values."""
    head, decoder = model.get_output_embeddings(), model.get_decoder()
    weight = head._parameters["weight"]
    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(1, 6, weight.shape[1], generator=gen).to(weight.dtype)
    head._parameters["weight"] = torch.nn.Parameter(
        torch.randn(16, weight.shape[1], generator=gen).to(weight.dtype), requires_grad=False)
    own_forward = decoder.__dict__.get("forward")
    decoder.forward = lambda *args, **kwargs: MoeModelOutputWithPast(last_hidden_state=hidden)
    try:
        yield
    finally:
        head._parameters["weight"] = weight
        if own_forward is None:
            del decoder.forward
        else:
            decoder.forward = own_forward


def logits_scale(model):
    """The constant c with model(ids).logits == c * lm_head(decoder(ids)), from one tiny forward
    of the built model (parameters still in place; stand-ins for a model built as shapes).
    Raises when the logits are not a constant multiple of the head's output."""
    head = model.get_output_embeddings()
    if getattr(head, "bias", None) is not None:
        raise ValueError(f"{type(model).__name__}: its head (lm_head) has a bias; titan applies "
                         "the head as a bias-free projection in its loss")
    was_training = model.training
    model.eval()
    shapes = head.weight.is_meta
    try:
        with _stand_ins(model) if shapes else contextlib.nullcontext():
            return _logits_scale(model, head)
    finally:
        model.train(was_training)


def _logits_scale(model, head):
    vocab = head.weight.shape[0]
    ids = (torch.arange(6, device=head.weight.device) * 7 % vocab).unsqueeze(0)
    with torch.no_grad():
        logits = model(input_ids=ids, use_cache=False).logits.double()
        hidden = model.get_decoder()(input_ids=ids, use_cache=False).last_hidden_state
        plain = head(hidden).double()
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
