"""Tensor parallelism for a Transformers model, read from the model's own tensor-parallel plan
(`tp_plan`: its class's `base_model_tp_plan` under the decoder's prefix, plus the head's entry).
No table per family: each parameter's role follows the style its plan gives it
(docs/transformers_backend.md, "Tensor parallelism").

titan's scheme is Megatron's single entry per parallel region: a region is a direct child of a
decoder layer that holds a planned parameter (the attention, the MLP). Its input goes through
`enter` (identity forward, gradients summed over tp backward); its output, a partial sum over
the tp ranks, through `exit` (summed over tp). Inside a region:
  colwise                 weight (and bias) split on the output dim: heads or MLP columns
  colwise_gather_output   as colwise, and the output gathered whole (its gradient summed back)
  rowwise                 weight split on the input dim; the output is a partial sum
  rowwise_split_input     as rowwise, the module taking its slice of a whole input
  replicated_with_grad_allreduce, mla_kv_a_proj, and unplanned parameters inside a region:
                          whole, their gradients partial sums over tp
A row module's bias is added once: each rank adds bias / T before the exit sums them. The head
(lm_head, colwise_gather_output) is split on the vocabulary and read by titan's
vocabulary-parallel loss; a tied input embedding looks up the rows it holds and sums over tp.

Sequence parallelism (Megatron-SP) shards the residual stream between the regions over the
sequence: a region's entry all-gathers it ([B, S/T, H] -> [B, S, H]), its exit reduce-scatters
the partial sums back, and the norms between the regions (and the final norm) run on the rank's
share, so their gradients are partial sums over tp. The decoder itself still sees whole rows
(Transformers builds positions and masks from the embedding's output): the embedding's output
stays whole and the first layer's input is split, this rank keeping its share of the sequence.
"""
import re

import torch

SPLIT_STYLES = {"colwise", "colwise_gather_output", "rowwise", "rowwise_split_input"}
WHOLE_STYLES = {"replicated_with_grad_allreduce", "mla_kv_a_proj"}
MODULE_STYLES = {"moe_tp_experts"}
REFUSED_STYLES = {
    "packed_colwise": "its expert stacks are packed [gate; up] (packed_colwise), which titan's "
                      "placements cannot split as one block per rank; use expert parallelism "
                      "(parallelism.expert_parallel_degree) for this family",
}


def _refuse(model, degree, why):
    raise ValueError(f"parallelism.tensor_parallel_degree = {degree}: the Transformers model "
                     f"{type(model).__name__} (model_type '{model.config.model_type}') cannot be "
                     f"split over tp: {why}")


def _refuse_sequence(model, degree, why):
    raise ValueError(f"parallelism.enable_sequence_parallel = true with tensor_parallel_degree = "
                     f"{degree}: the Transformers model {type(model).__name__} (model_type "
                     f"'{model.config.model_type}') cannot shard its sequence between the "
                     f"tensor-parallel regions: {why}; set parallelism.enable_sequence_parallel "
                     "= false")


def model_plan(model):
    """The model-level plan: {pattern: style}, patterns with '*' for layer indices."""
    plan = getattr(model, "tp_plan", None)
    if plan is None:
        plan = dict(getattr(type(model), "_tp_plan", None) or {})
        decoder_plan = getattr(model.get_decoder(), "base_model_tp_plan", None) or {}
        prefix = model.base_model_prefix
        plan.update({f"{prefix}.{k}": v for k, v in decoder_plan.items()})
    return dict(plan or {})


def style_of(plan, name, is_weight=True):
    """Transformers' lookup: indices become '*'; a parameter takes its own entry, else its
    module's."""
    generic = re.sub(r"\.\d+(?=\.|$)", ".*", name)
    if generic in plan:
        return plan[generic]
    if is_weight and "." in generic:
        return plan.get(generic.rsplit(".", 1)[0])
    return None


def _path_of(model, module):
    return next(n for n, m in model.named_modules() if m is module)


def vocabulary_embedding(model):
    """Whether the input embedding is split on the vocabulary (tied to the head, or planned
    embedding_rowwise): each rank then looks up the rows it holds."""
    embed, head = model.get_input_embeddings(), model.get_output_embeddings()
    tied = head is not None and embed.__dict__.get("weight", getattr(embed, "weight", None)) is \
        head.__dict__.get("weight", getattr(head, "weight", None))
    return tied or style_of(model_plan(model), _path_of(model, embed), is_weight=False) == \
        "embedding_rowwise"


def _regions(model, plan):
    """{region module: its path} for every decoder layer's children holding a planned
    parameter."""
    paths = {id(m): n for n, m in model.named_modules()}
    regions = {}
    for layer in model.get_decoder().layers:
        for _, child in layer.named_children():
            base = paths[id(child)]
            if any(style_of(plan, f"{base}.{n}") for n, _ in child.named_parameters()) or any(
                    style_of(plan, f"{base}.{n}" if n else base, is_weight=False)
                    for n, _ in child.named_modules()):
                regions[child] = base
    return regions


def _sequence_sites(model, regions):
    """{id(module): True when it runs on the sequence-sharded stream (in a decoder layer outside
    the regions, or the final norm), False when on whole rows (the input embedding)}."""
    decoder = model.get_decoder()
    inside = {id(m) for r in regions for m in r.modules()}
    sites = {id(m): False for m in model.get_input_embeddings().modules()}
    norm = getattr(decoder, "norm", None)
    for part in list(decoder.layers) + ([norm] if isinstance(norm, torch.nn.Module) else []):
        sites.update({id(m): True for m in part.modules() if id(m) not in inside})
    return sites


def _sequence_role(model, sites, module, name, size):
    """The role of a parameter outside the regions under sequence parallelism: partial when its
    module runs on the rank's share of the sequence, replicated when on whole rows; or why the
    model cannot run sequence parallel (the caller refuses it)."""
    where = sites.get(id(module))
    if where is None:
        return None, (f"{name} lies outside the input embedding, the decoder layers, the final "
                      "norm and the head, so it is neither before nor after the split of the "
                      "sequence")
    if where and len(size) >= 2:
        return None, (f"{name} ({len(size)}-D) runs between the tensor-parallel regions of its "
                      "layer on this rank's share of the sequence, which only modules that act "
                      "on each token alone (norms) may, and titan cannot tell that of a module "
                      "with a matrix")
    return ("partial" if where else "replicated"), None


def roles(model, names, sizes, output_name, degree, sequence_parallel=False):
    """[(role, dim)] for each parameter name (sizes: their shapes), role one of column, row,
    partial, replicated, vocabulary; or one error naming the model, the degree and why not.
    Under sequence parallelism the parameters between the regions (norms) are partial too."""
    if any(".lora_" in n for n in names):
        _refuse(model, degree, "its LoRA adapters (PEFT's layers, which the plan does not name) "
                "are not split; train LoRA on this backend with data parallelism")
    plan = model_plan(model)
    decoder_entries = [k for k in plan if k.split(".")[0] != "lm_head"]
    if not decoder_entries:
        _refuse(model, degree, "its class has no tensor-parallel plan for the decoder "
                "(base_model_tp_plan is empty)")
    embedding = _path_of(model, model.get_input_embeddings())
    for pattern, style in plan.items():
        if style == "embedding_rowwise" and pattern == embedding:
            continue  # the vocabulary-parallel lookup (vocabulary_embedding)
        if style in REFUSED_STYLES:
            _refuse(model, degree, f"{pattern}: {REFUSED_STYLES[style]}")
        if style not in SPLIT_STYLES | WHOLE_STYLES | MODULE_STYLES:
            _refuse(model, degree, f"{pattern} has the style '{style}', which titan does not "
                    "map onto its tensor-parallel roles")
    regions = _regions(model, plan)
    members = {id(m) for r in regions for m in r.modules()}
    modules = dict(model.named_modules())
    config = model.config
    for region in regions:
        # (titan holds the parameters by now: the modules' paths carry the styles)
        base = regions[region]
        plain_column = any(style_of(plan, f"{base}.{n}" if n else base, is_weight=False) ==
                           "colwise" for n, _ in region.named_modules())
        if plain_column and hasattr(region, "head_dim"):
            heads = config.num_attention_heads
            kv = getattr(config, "num_key_value_heads", None) or heads
            if heads % degree or kv % degree:
                _refuse(model, degree, f"its attention splits heads over tp, and {degree} does "
                        f"not divide the {heads} attention heads and {kv} key-value heads")
    sites = _sequence_sites(model, regions) if sequence_parallel else {}
    out = []
    for name, size in zip(names, sizes):
        if name == output_name or (name == f"{embedding}.weight" and
                                   vocabulary_embedding(model)):
            out.append(("vocabulary", 0))
            continue
        module = modules[name.rsplit(".", 1)[0]]
        style = style_of(plan, name)
        inside = id(module) in members
        if style in ("colwise", "colwise_gather_output"):
            role, dim = "column", len(size) - 2 if len(size) > 1 else 0
        elif style in ("rowwise", "rowwise_split_input"):
            role, dim = ("row", len(size) - 1) if len(size) > 1 else ("partial", 0)
        elif inside or not sequence_parallel:
            role, dim = ("partial" if inside else "replicated"), 0
        else:
            role, why = _sequence_role(model, sites, module, name, size)
            if why is not None:
                _refuse_sequence(model, degree, why)
            dim = 0
        if role in ("column", "row") and size[dim] % degree:
            _refuse(model, degree, f"{name} {list(size)} ({style}) splits dim {dim} of "
                    f"{size[dim]}, which {degree} does not divide")
        out.append((role, dim))
    return out


def install(model, degree, rank, enter, exit_, vocab_begin, vocab_rows, sequence=None):
    """Puts the region entries and exits, the gathers, input slices and bias scaling on the
    modules (forward hooks; the modules' code is Transformers' own). `enter`/`exit_` are titan's
    differentiable collectives over tp (identity / sum); a vocabulary-parallel embedding looks
    up rows [vocab_begin, vocab_begin + vocab_rows) of the vocabulary. `sequence`, under
    sequence parallelism: (all-gather, reduce-scatter, split), each on the sequence dim, which
    become the regions' entry and exit, the split taking the first layer's input."""
    plan = model_plan(model)
    regions = _regions(model, plan)
    members = {id(m) for r in regions for m in r.modules()}
    region_enter, region_exit = (sequence[0], sequence[1]) if sequence else (enter, exit_)

    def entry(module, args, kwargs):
        return _on_hidden(region_enter, args, kwargs)

    def leave(module, args, output):
        if isinstance(output, tuple):
            return (region_exit(output[0]),) + tuple(output[1:])
        return region_exit(output)

    for region in regions:
        region.register_forward_pre_hook(entry, with_kwargs=True)
        region.register_forward_hook(leave)

    def gather(module, args, output):
        # Whole = the sum over tp of each rank's piece in its place; inside a region the
        # gradients after it are partial, so they are summed back (enter) before the slice.
        n = output.shape[-1]
        padded = torch.nn.functional.pad(output, (rank * n, (degree - 1 - rank) * n))
        return enter(exit_(padded))

    def split_input(module, args):
        x = args[0]
        n = x.shape[-1] // degree
        return (x.narrow(-1, rank * n, n),) + tuple(args[1:])

    def bias_share(module, args):
        bias = module.__dict__.get("bias")
        if isinstance(bias, torch.Tensor):
            module.__dict__["_titan_whole_bias"] = bias
            module.__dict__["bias"] = bias / degree

    def bias_back(module, args, output):
        whole = module.__dict__.pop("_titan_whole_bias", None)
        if whole is not None:
            module.__dict__["bias"] = whole

    for path, module in model.named_modules():
        if id(module) not in members or not path:
            continue
        style = style_of(plan, path, is_weight=False)
        if style == "colwise_gather_output":
            module.register_forward_hook(gather)
        elif style in ("rowwise", "rowwise_split_input"):
            if style == "rowwise_split_input":
                module.register_forward_pre_hook(split_input)
            module.register_forward_pre_hook(bias_share)
            module.register_forward_hook(bias_back)

    if vocabulary_embedding(model):
        _vocab_parallel_embedding(model.get_input_embeddings(), exit_, vocab_begin, vocab_rows)
    if sequence:
        split = sequence[2]

        def share(module, args, kwargs):
            # [B, S, H] -> this rank's [B, S/T, H] (its gradient all-gathered back).
            return _on_hidden(lambda x: split(x.transpose(0, 1)).transpose(0, 1).contiguous(),
                              args, kwargs)

        model.get_decoder().layers[0].register_forward_pre_hook(share, with_kwargs=True)


def _on_hidden(fn, args, kwargs):
    """A forward pre-hook's (args, kwargs) with fn applied to the hidden state (the first
    argument, or the keyword hidden_states)."""
    if args:
        return (fn(args[0]),) + tuple(args[1:]), kwargs
    kwargs["hidden_states"] = fn(kwargs["hidden_states"])
    return args, kwargs


def _vocab_parallel_embedding(embed, exit_, begin, rows):
    """The embedding holds vocabulary rows [begin, begin + rows): ids outside look up row 0 and
    are zeroed; the ranks' lookups are summed (exit_)."""
    state = {}

    def before(module, args):
        ids = args[0]
        outside = (ids < begin) | (ids >= begin + rows)
        state["outside"] = outside
        state["padding_idx"] = getattr(module, "padding_idx", None)
        pad = state["padding_idx"]
        module.padding_idx = pad - begin if pad is not None and begin <= pad < begin + rows else None
        return ((ids - begin).masked_fill(outside, 0),) + tuple(args[1:])

    def after(module, args, output):
        module.padding_idx = state.pop("padding_idx")
        outside = state.pop("outside")
        return exit_(output.masked_fill(outside.unsqueeze(-1), 0))

    embed.register_forward_pre_hook(before)
    embed.register_forward_hook(after)
