"""The Python half of titan's Transformers backend, run in titan's embedded interpreter.

It builds a Hugging Face Transformers causal LM and hands its parameters to titan: each
parameter is taken out of its module (titan owns it from then on, so that its optimizer,
activation checkpointing and FSDP can train it) and pushed back, as a plain attribute, into the
modules that read it just before they run. Nothing here knows a model family: it uses only
AutoConfig, AutoModelForCausalLM and the standard decoder attributes (get_decoder(), .layers,
get_input_embeddings(), get_output_embeddings()).
"""
import contextlib
import json
import pathlib
import re

import torch
import transformers

import titan_families

# titan prints its own progress; Transformers' bars and warnings would break its one-line errors.
transformers.utils.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()


def make_config(source_dir, model_type, overrides, attn_implementation, experts_implementation,
                balancing="{}"):
    """The model's config: from `source_dir`/config.json, else a fresh one of `model_type`,
    then the `overrides` (a JSON object of config fields), then `balancing` (the load-balancing
    fields titan's model.moe_load_balancing sets, applied to MoE configs only)."""
    if source_dir:
        config = transformers.AutoConfig.from_pretrained(source_dir)
    else:
        config = transformers.AutoConfig.for_model(model_type)
    known = set(config.to_dict()) | set(type(config).__annotations__ if hasattr(
        type(config), "__annotations__") else ())
    # Attributes a config class does not declare but its model reads when set (Qwen3-MoE's
    # attention takes getattr(config, "head_dim", hidden_size // heads)).
    known |= {"head_dim"}
    for key, value in json.loads(overrides).items():
        if key not in known and not hasattr(config, key):
            raise ValueError(f"model.hf_config_overrides: {type(config).__name__} has no field "
                             f"'{key}' (its fields: {', '.join(sorted(config.to_dict()))})")
        setattr(config, key, value)
    for key, value in json.loads(balancing).items():
        if hasattr(config, "num_experts") or hasattr(config, "num_local_experts"):
            setattr(config, key, value)
    if attn_implementation:
        config._attn_implementation = attn_implementation
    if experts_implementation:
        config._experts_implementation = experts_implementation
    return config


def build(config, pretrained_dir, seed, device, dtype, shares_only=False):
    """AutoModelForCausalLM from pretrained weights or freshly initialised (seeded).

    With `shares_only` (tensor, pipeline or expert parallelism, which keep a share of each
    rank's model) a pretrained model is built as shapes: its parameters on the meta device, its
    buffers real, and model._titan_weights_dir names the checkpoint titan reads each rank's share
    from, and model._titan_weights_plan where each parameter is in it (checkpoint_plan). A
    checkpoint that Transformers converts in other ways while loading is loaded whole, as
    without parallelism."""
    kwargs = {"dtype": getattr(torch, dtype)}
    if config._attn_implementation:
        kwargs["attn_implementation"] = config._attn_implementation
    model = None
    try:
        if pretrained_dir and shares_only:
            model = _as_shapes(config, kwargs, pretrained_dir)
        if model is None and pretrained_dir:
            model = transformers.AutoModelForCausalLM.from_pretrained(pretrained_dir, config=config,
                                                                      **kwargs)
        elif model is None:
            torch.manual_seed(seed)
            model = transformers.AutoModelForCausalLM.from_config(config, **kwargs)
    except ValueError as e:
        if "Unrecognized configuration class" in str(e):
            raise ValueError(f"model_type '{config.model_type}' is not a causal language model: "
                             "AutoModelForCausalLM cannot build it") from None
        raise
    if hasattr(model, "_titan_weights_dir"):
        for module in model.modules():
            for key, buffer in module._buffers.items():
                if buffer is not None:
                    module._buffers[key] = buffer.to(torch.device(device))
    else:
        model.to(device=torch.device(device))
    model._titan_device = torch.device(device)
    model.train()
    titan_families.check_balancing(model)
    # titan applies the head in its loss: a family's constant factor on the logits (Granite's
    # logits_scaling) goes on the last hidden state instead.
    model._titan_logits_scale = titan_families.logits_scale(model)
    # What save_pretrained records, so that exports name their class.
    model.config.architectures = [type(model).__name__]
    return model


def _as_shapes(config, kwargs, pretrained_dir):
    """The model with its parameters on the meta device and where each is in the checkpoint,
    or None when the checkpoint cannot be read so (checkpoint_plan)."""
    with _parameters_on_meta():
        model = transformers.AutoModelForCausalLM.from_config(config, **kwargs)
    try:
        plan = checkpoint_plan(model, pretrained_dir)
    except (ImportError, AttributeError):
        plan = None  # a Transformers whose conversion mapping titan does not know how to read
    if plan is None:
        return None
    model._titan_weights_dir = pretrained_dir
    model._titan_weights_plan = plan
    return model


@contextlib.contextmanager
def _parameters_on_meta():
    """Every parameter a module registers goes to the meta device (no storage; its
    initialisation does nothing), while buffers (rotary frequencies) are made as usual."""
    register = torch.nn.Module.register_parameter

    def on_meta(module, name, param):
        register(module, name, param)
        # (One already on the meta device is kept as it is: tying shares that very parameter.)
        if param is not None and not param.is_meta:
            held = module._parameters[name]
            module._parameters[name] = type(held)(held.to("meta"), held.requires_grad)

    torch.nn.Module.register_parameter = on_meta
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = register


def checkpoint_tensors(pretrained_dir):
    """{name: shape} of the safetensors checkpoint in `pretrained_dir` (its headers only), or
    None when there is none."""
    from safetensors import safe_open

    root = pathlib.Path(pretrained_dir)
    index = root / "model.safetensors.index.json"
    if index.exists():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    elif (root / "model.safetensors").exists():
        files = ["model.safetensors"]
    else:
        return None
    shapes = {}
    for file in files:
        with safe_open(str(root / file), framework="pt") as f:
            for key in f.keys():
                shapes[key] = list(f.get_slice(key).get_shape())
    return shapes


def checkpoint_plan(model, pretrained_dir):
    """Where each parameter of `model` is in the checkpoint, when reading it tensor by tensor
    gives what from_pretrained loads: {name: checkpoint key, or ([[key of each source] for
    each expert], dim) for an expert stack that Transformers' conversion mapping merges from
    per-expert tensors (stacked on dim 0, the sources of an expert concatenated on `dim` of
    theirs)}. None when the checkpoint holds anything else (but tied copies) or when the mapping
    does more than rename keys and merge expert stacks."""
    stored = checkpoint_tensors(pretrained_dir)
    if stored is None:
        return None
    from transformers.conversion_mapping import get_checkpoint_conversion_mapping
    from transformers.core_model_loading import (Concatenate, MergeModulelist, WeightConverter,
                                                 WeightRenaming)

    transforms = get_checkpoint_conversion_mapping(model.config.model_type) or []
    renamed = {}  # the name Transformers gives each stored key -> (key, shape)
    for key, shape in stored.items():
        name = key
        for t in transforms:
            if isinstance(t, WeightRenaming):
                for source, target in zip(t._original_source_patterns, t._original_target_patterns):
                    name = re.sub(source, target, name)
        renamed[name] = (key, shape)
    params = {name: list(p.shape) for name, p in model.named_parameters()}
    plan, used = {}, set()
    for t in transforms:
        if not isinstance(t, WeightConverter):
            continue
        ops = t.operations
        merges = isinstance(ops[0], MergeModulelist) and ops[0].dim == 0 and (
            len(ops) == 1 or (len(ops) == 2 and isinstance(ops[1], Concatenate) and ops[1].dim > 0))
        patterns = [re.compile(re.escape(p).replace(r"\*", r"(\d+)") + "$")
                    for p in t._original_source_patterns]
        found = {}  # target parameter -> {source index: {expert: name}}
        for name in renamed:
            for i, pattern in enumerate(patterns):
                if m := pattern.search(name):
                    target = name[:m.start()] + t._original_target_patterns[0]
                    found.setdefault(target, {}).setdefault(i, {})[int(m.group(1))] = name
        for target, sources in found.items():
            if not merges or len(t._original_target_patterns) != 1 or target not in params:
                return None
            experts, dim = params[target][0], (ops[1].dim - 1 if len(ops) == 2 else 0)
            if sorted(sources) != list(range(len(patterns))) or any(
                    sorted(by_expert) != list(range(experts)) for by_expert in sources.values()):
                return None
            names = [[sources[i][e] for i in range(len(patterns))] for e in range(experts)]
            shape = list(renamed[names[0][0]][1])
            shape[dim] = sum(renamed[n][1][dim] for n in names[0])
            if [experts] + shape != params[target] or any(
                    [renamed[n][1] for n in row] != [renamed[n][1] for n in names[0]]
                    for row in names):
                return None
            plan[target] = ([[renamed[n][0] for n in row] for row in names], dim)
            used.update(n for row in names for n in row)
    for name, shape in params.items():
        if name in plan:
            continue
        if name not in renamed or list(renamed[name][1]) != shape:
            return None
        plan[name] = renamed[name][0]
        used.add(name)
    tied = set(getattr(model, "all_tied_weights_keys", None) or {})
    if any(name not in used and name not in tied for name in renamed):
        return None
    return plan


def structure(model):
    """(decoder, layers, input embedding module, output embedding module or None)."""
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else None
    layers = getattr(decoder, "layers", None)
    if decoder is None or not isinstance(layers, torch.nn.ModuleList) or len(layers) == 0:
        raise ValueError(f"{type(model).__name__} has no decoder with a `layers` list; the "
                         "Transformers backend trains decoder-only causal LMs")
    return decoder, layers, model.get_input_embeddings(), model.get_output_embeddings()


def take_parameters(model):
    """Removes every parameter from its modules. Returns [(name, tensor, [(module, attr)])] in
    named_parameters order: a tied weight appears once, with every place that reads it."""
    owners = {}
    for module_name, module in model.named_modules(remove_duplicate=False):
        for attr, param in module.named_parameters(recurse=False):
            owners.setdefault(id(param), []).append((module, attr))
    taken = []
    for name, param in model.named_parameters():
        sites = owners[id(param)]
        taken.append((name, param.detach(), sites))
    for _, _, sites in taken:
        for module, attr in sites:
            module._parameters.pop(attr, None)
    # Transformers asks a model for its dtype and device through its parameters: one frozen
    # scalar answers for them (it is not trained, exported or checkpointed).
    # (A model built as shapes answers with the device its shares will be on.)
    anchor = taken[0][1] if taken else torch.zeros(())
    device = getattr(model, "_titan_device", anchor.device)
    model.register_parameter("_titan_anchor", torch.nn.Parameter(
        torch.zeros((), dtype=anchor.dtype, device=device), requires_grad=False))
    return taken


def push(sites, tensors):
    """Puts titan's tensors where the modules read their parameters."""
    for place, tensor in zip(sites, tensors):
        for module, attr in place:
            module.__dict__[attr] = tensor


def patch_forward(module, make):
    """Replaces module.forward by make(original_forward)."""
    module.forward = make(module.forward)


def flops_numbers(config):
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    return [int(config.num_hidden_layers), int(heads), int(head_dim)]


def config_json(config):
    return config.to_json_string(use_diff=False)


def plan(model):
    """Takes the parameters out and says where each belongs, as lists C++ reads:
    (names, tensors, sites, units, output_index, input_index, flops numbers, router logits),
    with units[i] = -2 for the root, -1 for the input embedding, n for decoder layer n."""
    decoder, layers, embed, out = structure(model)
    layer_modules = [set(layer.modules()) for layer in layers]
    taken = take_parameters(model)
    names, tensors, sites, units = [], [], [], []
    output_index = input_index = -1
    for index, (name, tensor, places) in enumerate(taken):
        names.append(name)
        tensors.append(tensor)
        sites.append(places)
        modules = [m for m, _ in places]
        if any(m is embed for m in modules):
            input_index = index
        if out is not None and any(m is out for m in modules):
            output_index = index
        unit = -2
        for n, members in enumerate(layer_modules):
            if all(m in members for m in modules):
                unit = n
        if unit == -2 and modules and all(m is embed for m in modules):
            unit = -1
        units.append(unit)
    if output_index < 0:
        raise ValueError(f"{type(model).__name__} has no output embedding (lm_head) parameter")
    router = bool(getattr(model.config, "output_router_logits", False))
    return (names, tensors, sites, units, output_index, input_index,
            flops_numbers(model.config), router)


def decoder_forward(model, decoder, ids, router, position_ids=None, document_ids=None):
    """The decoder's last hidden states (after its final norm), and the auxiliary loss of an MoE
    model that asks for one (output_router_logits), scaled as the model's own forward does.

    With position_ids that restart at 0 where a packed document starts (titan's document
    masking), Transformers builds the block-causal mask itself, as it does for
    DataCollatorWithFlattening's rows: a document attends to itself only. Document ids reach
    the attention function as titan_document_ids (context parallelism: context_attention.py)."""
    extra = {"output_router_logits": True} if router else {}
    if position_ids is not None:
        extra["position_ids"] = position_ids
    if document_ids is not None:
        extra["titan_document_ids"] = document_ids
    out = decoder(input_ids=ids, use_cache=False, **extra)
    aux = None
    logits = getattr(out, "router_logits", None)
    if router and logits is not None:
        balance = titan_families.auxiliary_loss_function(model)
        if balance is not None:
            c = model.config
            experts = getattr(c, "num_experts", None) or getattr(c, "num_local_experts")
            aux = c.router_aux_loss_coef * balance(logits, experts, c.num_experts_per_tok, None)
    hidden = out.last_hidden_state
    scale = getattr(model, "_titan_logits_scale", 1.0)
    return (hidden if scale == 1.0 else hidden * scale), aux


def adaptable_modules(model):
    """[(module path, native name of its weight, is an expert stack)] of what LoRA may adapt in
    the decoder layers: every nn.Linear (PEFT's all-linear), and fused expert parameters
    (3-D, which PEFT adapts through target_parameters)."""
    _, layers, _, _ = structure(model)
    prefix = {id(layer): name for name, layer in model.named_modules() if any(
        layer is l for l in layers)}
    out = []
    for layer in layers:
        base = prefix[id(layer)]
        for name, module in layer.named_modules():
            if ".lora_" in f".{name}":
                continue  # PEFT's own layers, once injected
            # Once PEFT wraps a module its own layer sits under .base_layer; titan names the
            # weight as it was named before.
            path = (f"{base}.{name}" if name else base).replace(".base_layer", "")
            if isinstance(module, torch.nn.Linear):
                out.append((path, path + ".weight", False))
            for attr in ("gate_up_proj", "down_proj"):
                value = module.__dict__.get(attr)  # titan's tensor, pushed as an attribute
                if isinstance(value, torch.Tensor) and value.dim() == 3:
                    out.append((f"{path}.{attr}", f"{path}.{attr}", True))
    return out


def inject_lora(model, modules, rank, alpha, dropout):
    """Adds PEFT's LoRA layers to the named nn.Linear modules (titan holds their weights already)
    and takes their new parameters out as titan's: returns (names, tensors, sites, units), the
    names without PEFT's adapter name ("...q_proj.lora_A.weight"), units the decoder layer of
    each."""
    import peft

    config = peft.LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=dropout,
                             target_modules=list(modules), bias="none")
    peft.inject_adapter_in_model(config, model)
    _, layers, _, _ = structure(model)
    layer_modules = [set(layer.modules()) for layer in layers]
    names, tensors, sites, units = [], [], [], []
    for module_name, module in model.named_modules():
        for attr, param in list(module.named_parameters(recurse=False)):
            if param is getattr(model, "_titan_anchor", None):
                continue
            name = f"{module_name}.{attr}".replace(".default.", ".")
            names.append(name)
            tensors.append(param.detach())
            sites.append([(module, attr)])
            units.append(next(n for n, members in enumerate(layer_modules) if module in members))
            module._parameters.pop(attr)
    return names, tensors, sites, units


def patch_nf4(linear, forward):
    """QLoRA: `linear` (an nn.Linear whose weight titan now holds in NF4) computes
    forward(x) (+ its bias) from now on, and lets go of its dense weight."""
    linear.__dict__.pop("weight", None)

    def run(x, *args, **kwargs):
        y = forward(x)
        bias = getattr(linear, "bias", None)
        return y if bias is None else y + bias.to(y.dtype)

    linear.forward = run
