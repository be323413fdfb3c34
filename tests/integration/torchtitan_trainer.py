"""torchtitan 0.3.0 itself, the peer of titan's torchtitan checkpoints (docs/from_torchtitan.md,
"Your checkpoints"): its trainer (torchtitan.train.main) on the CPU in one process, its models
loading a DCP checkpoint, and its state-dict adapters.

    python torchtitan_trainer.py train MODEL.json DATA.jsonl [torchtitan's flags ...]
        prints `TTSTEP {"step": N, "loss": L, "grad_norm": G}` after every step, exact values
    python torchtitan_trainer.py logits MODEL.json CHECKPOINT_DIR TOKENS.json OUT.pt
        loads CHECKPOINT_DIR as torchtitan's CheckpointManager loads a model-only checkpoint
        (the model's state dict -> dcp.load -> load_state_dict) and saves the logits of the
        token ids in TOKENS.json ([[...], ...]) (Qwen3 dense)
    python torchtitan_trainer.py to_hf MODEL.json CHECKPOINT_DIR OUT.safetensors
        loads CHECKPOINT_DIR the same way and writes the model's weights as its state-dict
        adapter's to_hf names and lays them out
    python torchtitan_trainer.py from_hf MODEL.json HF_DIR CHECKPOINT_DIR
        the weights of a Hugging Face folder through the adapter's from_hf, saved with dcp.save
        as torchtitan saves a model-only checkpoint (flat, torchtitan's names)

MODEL.json gives the model that stands in for the family's flavor debugmodel ({"family": qwen3
(default) or llama3, "vocab_size", "dim", "n_layers", "n_heads", "n_kv_heads", "head_dim",
"hidden_dim", "rope_theta", "tied"; for Qwen3 MoE also "num_experts", "top_k",
"moe_hidden_dim"}), so that titan can build the same one from a config.json and the real Qwen3
tokenizer fits it.

torchtitan 0.3.0 is installed beside the venv, and the packages its trainer imports that the venv
lacks (tyro, torchdata, spmd_types, torch_checkpointing, ...) in a folder next to it
(scripts/setup); both come on sys.path from TITAN_TORCHTITAN_DIR and TITAN_TORCHTITAN_DEPS.
torchtitan 0.3.0 targets a newer torch on CUDA; on torch 2.11's CPU it needs these shims:
  - torch.distributed.fsdp.DataParallelMeshDims, which 0.3.0 imports and 2.11 lacks (never used
    here: nothing is sharded on one process);
  - the device: torchtitan falls back to "cuda" when no accelerator is found, so the CPU is
    named, and torch.cpu gets the memory-monitor functions torchtitan asks of a device module;
  - flex attention: compiled flex has no CPU backward in 2.11, so the block mask torchtitan
    builds is applied densely through scaled_dot_product_attention (the same mask, the same
    maths); 2.11's create_block_mask has no separate_full_blocks argument;
  - FSDP is not applied (one rank: nothing to shard; FSDP2 on a one-rank CPU mesh fails in
    backward) and the process-group timeout call (a barrier with device_ids=['cpu']) is skipped;
  - a "local" dataset: DATA.jsonl read as torchtitan reads c4_test (datasets' json loader).
"""
import json
import os
import sys
import types


def _paths():
    home = os.path.expanduser("~/.cache/titan-cpp")
    torchtitan = os.environ.get("TITAN_TORCHTITAN_DIR", os.path.join(home, "torchtitan-0.3.0"))
    deps = os.environ.get("TITAN_TORCHTITAN_DEPS", torchtitan + "-trainer-deps")
    sys.path[:0] = [deps, torchtitan]


def _shim_torch():
    import torch
    import torch._utils
    import torch.distributed.fsdp as fsdp

    torch._utils._get_available_device_type = lambda: "cpu"
    for name, fn in dict(get_device_name=lambda *a: "cpu", current_device=lambda: 0,
                         get_device_properties=lambda *a: types.SimpleNamespace(
                             total_memory=16 << 30, name="cpu"),
                         reset_peak_memory_stats=lambda *a: None, empty_cache=lambda: None,
                         memory_stats=lambda *a: {}).items():
        if not hasattr(torch.cpu, name):
            setattr(torch.cpu, name, fn)
    if not hasattr(fsdp, "DataParallelMeshDims"):
        fsdp.DataParallelMeshDims = type("DataParallelMeshDims", (), {
            "__init__": lambda self, *a, **k: None})


def _shim_attention():
    import torch.nn.functional as F
    from torch.nn.attention.flex_attention import create_block_mask, create_mask

    import torchtitan.models.common.attention as attention

    def dense_flex(q, k, v, *, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
                   return_aux=None, kernel_options=None):
        assert score_mod is None and not (return_aux is not None and return_aux.lse)
        mask = create_mask(block_mask.mask_mod, q.shape[0], 1, q.shape[2], k.shape[2], q.device)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale,
                                             enable_gqa=enable_gqa)
        return out, None

    attention.FlexAttention._compiled_flex_attn = staticmethod(dense_flex)
    attention._compiled_create_block_mask = (
        lambda *a, separate_full_blocks=None, **k: create_block_mask(*a, **k))


def _model_config(spec):
    """The family's debugmodel with the sizes of MODEL.json (torchtitan/models/<family>/
    __init__.py), registered as flavor debugmodel; returns its builder."""
    if spec.get("family", "qwen3") == "llama3":
        import torchtitan.models.llama3 as llama3
        from torchtitan.models.common.rope import ComplexRoPE

        def build(attn_backend="flex"):
            dim, vocab = spec["dim"], spec["vocab_size"]
            return llama3.Llama3Model.Config(
                dim=dim, vocab_size=vocab, enable_weight_tying=spec.get("tied", False),
                tok_embeddings=llama3.Embedding.Config(num_embeddings=vocab, embedding_dim=dim,
                                                       param_init=llama3._EMBEDDING_INIT),
                norm=llama3.RMSNorm.Config(normalized_shape=dim, param_init=llama3._NORM_INIT),
                lm_head=llama3.Linear.Config(in_features=dim, out_features=vocab,
                                             param_init=llama3._output_linear_init(dim)),
                layers=llama3._build_llama3_layers(
                    fuse_qkv=True, n_layers=spec["n_layers"], dim=dim, n_heads=spec["n_heads"],
                    n_kv_heads=spec["n_kv_heads"], hidden_dim=spec["hidden_dim"],
                    rope=ComplexRoPE.Config(dim=dim // spec["n_heads"], max_seq_len=4096,
                                            theta=spec.get("rope_theta", 500000.0),
                                            scaling="llama"),
                    attn_backend=attn_backend))

        llama3.llama3_configs["debugmodel"] = build
        return build

    import torchtitan.models.qwen3 as qwen3
    from torchtitan.models.common.rope import CosSinRoPE

    def build(attn_backend="flex"):
        dim, vocab, head_dim = spec["dim"], spec["vocab_size"], spec["head_dim"]
        rope = CosSinRoPE.Config(dim=head_dim, max_seq_len=4096,
                                 theta=spec.get("rope_theta", 1000000.0))
        common = dict(fuse_qkv=True, n_layers=spec["n_layers"], dim=dim, n_heads=spec["n_heads"],
                      n_kv_heads=spec["n_kv_heads"], head_dim=head_dim,
                      attn_backend=attn_backend, rope=rope)
        if spec.get("num_experts"):
            layers = qwen3._build_qwen3_moe_layers(
                **common, moe_hidden_dim=spec["moe_hidden_dim"], num_experts=spec["num_experts"],
                top_k=spec["top_k"], moe_comm_backend="standard")
        else:
            layers = qwen3._build_qwen3_layers(**common, hidden_dim=spec["hidden_dim"])
        return qwen3.Qwen3Model.Config(
            vocab_size=vocab, dim=dim, norm=qwen3._qwen3_norm(dim),
            enable_weight_tying=spec.get("tied", True),
            tok_embeddings=qwen3.Embedding.Config(num_embeddings=vocab, embedding_dim=dim,
                                                  param_init=qwen3._EMBEDDING_SKIP_INIT),
            lm_head=qwen3.Linear.Config(in_features=dim, out_features=vocab,
                                        param_init=qwen3._LINEAR_INIT),
            layers=layers)

    qwen3.qwen3_configs["debugmodel"] = build
    return build


def _adapter(spec, config):
    if spec.get("family", "qwen3") == "llama3":
        from torchtitan.models.llama3.state_dict_adapter import Llama3StateDictAdapter
        return Llama3StateDictAdapter(config, None)
    from torchtitan.models.qwen3.state_dict_adapter import Qwen3StateDictAdapter
    return Qwen3StateDictAdapter(config, None)


def _load_model(spec, checkpoint):
    """The model loaded as torchtitan's CheckpointManager loads a model-only checkpoint."""
    import torch.distributed.checkpoint as dcp

    _shim_attention()
    config = _model_config(spec)()
    model = config.build()
    model.init_states()  # the rotary tables (buffers a checkpoint does not hold)
    state = model.state_dict()  # FusedQKVLinear's hook splits wqkv into wq/wk/wv
    dcp.load(state, checkpoint_id=checkpoint)
    model.load_state_dict(state)  # and merges them back
    return config, model.eval()


def train(spec, data, args):
    for key, value in dict(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
                           MASTER_ADDR="127.0.0.1").items():
        os.environ.setdefault(key, value)
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 2000))
    _model_config(spec)
    _shim_attention()
    from datasets import load_dataset
    from torchtitan.hf_datasets import DatasetConfig, text_datasets

    text_datasets.DATASETS["local"] = DatasetConfig(
        path=data, loader=lambda path: load_dataset("json", data_files=path, split="train"),
        sample_processor=lambda sample: sample["text"])
    import torchtitan.distributed.utils as dist_utils
    import torchtitan.models.qwen3.parallelize as qwen3_parallelize
    from torchtitan.components.metrics import MetricsProcessor

    qwen3_parallelize.apply_fsdp_to_decoder = lambda *a, **k: None
    dist_utils.set_pg_timeouts = lambda *a, **k: None
    log = MetricsProcessor.log

    def log_exact(self, step, global_avg_loss, global_max_loss, grad_norm, *a, **k):
        print("TTSTEP " + json.dumps({"step": step, "loss": global_avg_loss,
                                      "grad_norm": grad_norm}), flush=True)
        return log(self, step, global_avg_loss, global_max_loss, grad_norm, *a, **k)

    MetricsProcessor.log = log_exact
    from torchtitan.train import main

    sys.argv = [sys.argv[0]] + args
    main()


def logits(spec, checkpoint, tokens_path, out):
    import torch

    _, model = _load_model(spec, checkpoint)
    tokens = torch.tensor(json.load(open(tokens_path)), dtype=torch.long)
    positions = torch.arange(tokens.shape[1]).expand(tokens.shape[0], -1)
    with torch.no_grad():
        masks = model.get_attention_masks(positions)
        torch.save(model(tokens, positions, masks).float(), out)


def to_hf(spec, checkpoint, out):
    from safetensors.torch import save_file

    config, model = _load_model(spec, checkpoint)
    state = {k: v for k, v in model.state_dict().items() if not k.endswith("expert_bias_E")}
    hf = _adapter(spec, config).to_hf(state)
    save_file({k: v.contiguous() for k, v in hf.items()}, out)


def from_hf(spec, hf_dir, checkpoint):
    import glob

    import torch.distributed.checkpoint as dcp
    from safetensors.torch import load_file

    config = _model_config(spec)()
    hf = {}
    for path in sorted(glob.glob(os.path.join(hf_dir, "*.safetensors"))):
        hf.update(load_file(path))
    dcp.save(_adapter(spec, config).from_hf(hf), checkpoint_id=checkpoint)


if __name__ == "__main__":
    _paths()
    _shim_torch()
    mode, model_json = sys.argv[1], json.load(open(sys.argv[2]))
    {"train": lambda: train(model_json, sys.argv[3], sys.argv[4:]),
     "logits": lambda: logits(model_json, *sys.argv[3:6]),
     "to_hf": lambda: to_hf(model_json, *sys.argv[3:5]),
     "from_hf": lambda: from_hf(model_json, *sys.argv[3:5])}[mode]()
