"""Expert parallelism for a Transformers MoE model, from the model's own expert-parallel plan
(`base_model_ep_plan`): the module whose style is moe_tp_experts is the experts module, its
grouped_gemm parameters the expert stacks, split on dim 0 (the experts) over ep. The family's
router, its block and its auxiliary loss run unchanged; only the experts module's forward is
wrapped (docs/transformers_backend.md, "Expert parallelism"):

  experts(hidden [T, H], top_k_index [T, k], top_k_weights [T, k])
    -> one row per (token, slot), sent to the rank that holds its expert (all-to-all)
    -> each rank runs the family's own experts forward on what it received, with its experts'
       slices, local expert ids and weight 1
    -> the rows come back (all-to-all) and are weighted and summed over the k slots at home,
       so the routing weights' gradient stays local.
"""
import torch

from titan_tp_plan import style_of


def _plan(model):
    plan = getattr(model, "_ep_plan", None)
    if plan is None:
        decoder_plan = getattr(model.get_decoder(), "base_model_ep_plan", None) or {}
        plan = {f"{model.base_model_prefix}.{k}": v for k, v in decoder_plan.items()}
    return dict(plan or {})


def _refuse(model, degree, why):
    raise ValueError(f"parallelism.expert_parallel_degree = {degree}: the Transformers model "
                     f"{type(model).__name__} (model_type '{model.config.model_type}') cannot "
                     f"split its experts over ep: {why}")


def expert_stacks(model, names, degree):
    """The names (of `names`) that are expert stacks, split on dim 0 over ep; or one error
    naming the model, the degree and why not."""
    plan = _plan(model)
    modules = dict(model.named_modules())
    experts = [m for path, m in modules.items() if path and
               style_of(plan, path, is_weight=False) == "moe_tp_experts"]
    if not experts:
        _refuse(model, degree, "it has no experts module in an expert-parallel plan "
                "(base_model_ep_plan)")
    implementation = getattr(model.config, "_experts_implementation", None) or "eager"
    if implementation not in ("eager", "grouped_mm"):
        _refuse(model, degree, f"model.experts_implementation '{implementation}' (titan "
                "exchanges tokens around eager or grouped_mm experts)")
    count = experts[0].num_experts
    if count % degree:
        _refuse(model, degree, f"{degree} does not divide its {count} experts")
    stacks = [n for n in names if style_of(plan, n) == "grouped_gemm"]
    if not stacks:
        _refuse(model, degree, "its plan names no expert stacks (grouped_gemm)")
    return stacks


def install(model, degree, rank, all_to_all, exchange_counts):
    """Wraps each experts module's forward. all_to_all(rows, receive, send) and
    exchange_counts(counts) are titan's (differentiable) exchanges over ep."""
    plan = _plan(model)
    for path, module in model.named_modules():
        if path and style_of(plan, path, is_weight=False) == "moe_tp_experts":
            _wrap(module, degree, all_to_all, exchange_counts)


def _wrap(experts, degree, all_to_all, exchange_counts):
    local = experts.num_experts // degree
    experts.num_experts = local  # the stacks it reads hold this rank's experts only
    original = experts.forward

    def forward(hidden_states, top_k_index, top_k_weights):
        tokens, k = top_k_index.shape
        width = hidden_states.shape[-1]
        ids = top_k_index.reshape(-1)
        owner = torch.div(ids, local, rounding_mode="floor")
        order = torch.argsort(owner, stable=True)
        rows = hidden_states.unsqueeze(1).expand(tokens, k, width).reshape(-1, width)[order]
        send = torch.bincount(owner, minlength=degree)
        receive = exchange_counts(send.to(torch.int64)).tolist()
        send = send.tolist()
        received = all_to_all(rows, receive, send)
        # The expert ids travel as the rows' dtype (exact below 2^24 experts), without gradient.
        local_ids = all_to_all((ids[order] % local).to(rows.dtype).unsqueeze(-1).detach(),
                               receive, send).detach().to(torch.int64)
        ones = torch.ones(local_ids.shape, dtype=top_k_weights.dtype, device=rows.device)
        computed = original(received, local_ids, ones) if received.shape[0] else received * 0
        back = all_to_all(computed, send, receive)
        out = torch.empty_like(back).index_copy(0, order, back)
        return (out.view(tokens, k, width) * top_k_weights.unsqueeze(-1).to(out.dtype)).sum(1)

    experts.forward = forward
