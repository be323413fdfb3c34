"""Pipeline stages of a Transformers decoder (docs/transformers_backend.md, "Pipeline
parallelism"), run in titan's embedded interpreter.

A stage holding layers a..b-1 keeps the decoder's own forward: the layers it does not hold are
replaced by pass-through stand-ins (the list keeps its length, so layer indices, Qwen2/Qwen3's
layer_types and the parameter names stay the whole model's), the one just before layer a hands
on what the previous stage sent, and the final norm is an identity unless the stage is the
last. A stage without the embedding calls the decoder with inputs_embeds (any tensor of the
right shape: a family's input transform, such as Granite's embedding_multiplier, applies to it
and is then discarded by the stand-in). The rotary embedding is recomputed on every stage from
the positions. Nothing here knows a family.
"""
import torch


class Elsewhere(torch.nn.Module):
    """A decoder layer another stage holds: the hidden state passes through unchanged, or, in
    the place just before this stage's first layer, becomes what the previous stage sent."""

    def __init__(self):
        super().__init__()
        self.received = None

    def forward(self, hidden_states, *args, **kwargs):
        return hidden_states if self.received is None else self.received


def refusal(model):
    """Why the model's decoder is not a plain sequence of layers that can be cut into stages
    (None when it is): parameters outside the embedding, the layers, the final norm and the
    head; parameters shared between layers; layers that are not attention layers."""
    name = type(model).__name__
    decoder = model.get_decoder()
    norm = getattr(decoder, "norm", None)
    if not isinstance(norm, torch.nn.Module):
        return f"{name}'s decoder has no final norm `norm`"
    known = set()
    for module in (decoder.layers, norm, model.get_input_embeddings(),
                   model.get_output_embeddings()):
        if module is not None:
            known |= {id(p) for p in module.parameters()}
    others = [n for n, p in model.named_parameters() if id(p) not in known]
    if others:
        return (f"{name} has parameters outside its embedding, decoder layers, final norm and "
                f"head ({', '.join(others[:4])})")
    seen = {}
    for index, layer in enumerate(decoder.layers):
        for p in layer.parameters():
            if seen.setdefault(id(p), index) != index:
                return f"{name} shares parameters between decoder layers {seen[id(p)]} and {index}"
    kinds = set(getattr(model.config, "layer_types", None) or ["full_attention"])
    others = kinds - {"full_attention", "sliding_attention"}
    if others:
        return f"{name} has layers of type {', '.join(sorted(others))} (layer_types)"
    return None


def keep_only(model, first, end, head):
    """Makes `model` the stage holding layers first..end-1 (and the final norm when `head`).
    Returns the stand-in that receives the previous stage's output (None on a first stage)."""
    why = refusal(model)
    if why is not None:
        raise ValueError(why)
    decoder = model.get_decoder()
    layers = decoder.layers
    for i in range(len(layers)):
        if not first <= i < end:
            layers[i] = Elsewhere()
    if not head:
        decoder.norm = torch.nn.Identity()
    return layers[first - 1] if first > 0 else None


def release(sites):
    """Lets go of the tensors titan pushed into modules this stage no longer holds."""
    for place in sites:
        for module, attr in place:
            module.__dict__.pop(attr, None)


def stage_forward(decoder, ids, hidden, receiver, position_ids=None, document_ids=None):
    """The stage's output: from token ids on a first stage, else from `hidden`, the previous
    stage's output (the decoder's last_hidden_state, after the final norm on a last stage)."""
    extra = {}
    if position_ids is not None:
        extra["position_ids"] = position_ids
    if document_ids is not None:
        extra["titan_document_ids"] = document_ids
    if hidden is None:
        return decoder(input_ids=ids, use_cache=False, **extra).last_hidden_state
    receiver.received = hidden
    try:
        return decoder(inputs_embeds=hidden.detach(), use_cache=False, **extra).last_hidden_state
    finally:
        receiver.received = None
