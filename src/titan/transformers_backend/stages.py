"""Pipeline stages of a Transformers decoder (docs/transformers_backend.md, "Pipeline
parallelism"), run in titan's embedded interpreter.

A stage holding layers a..b-1 keeps the decoder's own forward: the layers it does not hold are
replaced by pass-through stand-ins (the list keeps its length, so layer indices, Qwen2/Qwen3's
layer_types and the parameter names stay the whole model's), a pre-hook on the stage's first
module puts in what the previous stage sent, and the final norm is an identity unless the stage
is the last. A stage without the embedding calls the decoder with inputs_embeds (any tensor of
the right shape: a family's input transform, such as Granite's embedding_multiplier, applies to
it and is then replaced by the received hidden state). The rotary embedding is recomputed on every stage from
the positions. Nothing here knows a family.
"""
import torch


class Elsewhere(torch.nn.Module):
    """A decoder layer another stage holds: the hidden state passes through unchanged."""

    def forward(self, hidden_states, *args, **kwargs):
        return hidden_states


class Receiver:
    """Puts what the previous stage sent in place of the hidden state that reaches the stage's
    first module (its first layer, or the final norm of a stage holding only the head): a
    forward pre-hook, so that the family's forward runs unchanged around it."""

    def __init__(self, module, scale=1.0):
        self.received = None
        # The last stage's factor on its output (Granite's logits_scaling, families.py), as
        # helper.decoder_forward applies it to the whole model's.
        self.scale = scale
        module.register_forward_pre_hook(self.hook, with_kwargs=True)

    def hook(self, module, args, kwargs):
        if self.received is None:
            return None
        if args:
            return (self.received, *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": self.received}


def refusal(model, names, sites):
    """Why the model's decoder is not a plain sequence of layers that can be cut into stages
    (None when it is): parameters (titan's, `names` with their `sites`, the (module, attribute)
    places that read each) outside the embedding, the layers, the final norm and the head, or
    shared between layers; layers that are not attention layers."""
    name = type(model).__name__
    decoder = model.get_decoder()
    norm = getattr(decoder, "norm", None)
    if not isinstance(norm, torch.nn.Module):
        return f"{name}'s decoder has no final norm `norm`"
    outside = set(norm.modules())
    for module in (model.get_input_embeddings(), model.get_output_embeddings()):
        if module is not None:
            outside.add(module)
    layer_of = {}
    for index, layer in enumerate(decoder.layers):
        for module in layer.modules():
            layer_of[id(module)] = index
    for param, place in zip(names, sites):
        layers = {layer_of.get(id(module)) for module, _ in place}
        if None in layers and not all(module in outside for module, _ in place):
            return (f"{name} has a parameter outside its embedding, decoder layers, final norm "
                    f"and head ({param})")
        if len(layers - {None}) > 1:
            return f"{name} shares {param} between decoder layers {sorted(layers - {None})}"
    kinds = set(getattr(model.config, "layer_types", None) or ["full_attention"])
    others = kinds - {"full_attention", "sliding_attention"}
    if others:
        return f"{name} has layers of type {', '.join(sorted(others))} (layer_types)"
    return None


def keep_only(model, names, sites, first, end, head):
    """Makes `model` the stage holding layers first..end-1 (and the final norm when `head`).
    Returns the Receiver of the previous stage's output (None on a first stage: pass 0 as
    `first` with the embedding)."""
    why = refusal(model, names, sites)
    if why is not None:
        raise ValueError(why)
    decoder = model.get_decoder()
    layers = decoder.layers
    entry = layers[first] if first < end else decoder.norm
    for i in range(len(layers)):
        if not first <= i < end:
            layers[i] = Elsewhere()
    if not head:
        decoder.norm = torch.nn.Identity()
    return Receiver(entry, getattr(model, "_titan_logits_scale", 1.0) if head else 1.0)


def release(sites):
    """Lets go of the tensors titan pushed into modules this stage no longer holds."""
    for place in sites:
        for module, attr in place:
            module.__dict__.pop(attr, None)


def stage_forward(decoder, ids, hidden, receiver, position_ids=None, document_ids=None):
    """The stage's output: from token ids on a stage with the embedding, else from `hidden`, the
    previous stage's output, through `receiver` (the decoder's last_hidden_state, after the
    final norm on a last stage)."""
    extra = {}
    if position_ids is not None:
        extra["position_ids"] = position_ids
    if document_ids is not None:
        extra["titan_document_ids"] = document_ids
    if hidden is None:
        out = decoder(input_ids=ids, use_cache=False, **extra).last_hidden_state
    else:
        receiver.received = hidden
        try:
            out = decoder(inputs_embeds=hidden.detach(), use_cache=False,
                          **extra).last_hidden_state
        finally:
            receiver.received = None
    return out if receiver.scale == 1.0 else out * receiver.scale
