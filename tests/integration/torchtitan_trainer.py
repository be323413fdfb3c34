"""torchtitan 0.3.0 itself, the peer of titan's torchtitan checkpoints (docs/from_torchtitan.md,
"Your checkpoints"): its trainer (torchtitan.train.main) on the CPU in one process, or its Qwen3
model loading a DCP checkpoint.

    python torchtitan_trainer.py train MODEL.json DATA.jsonl [torchtitan's flags ...]
        prints `TTSTEP {"step": N, "loss": L, "grad_norm": G}` after every step, exact values
    python torchtitan_trainer.py logits MODEL.json CHECKPOINT_DIR TOKENS.json OUT.pt
        loads CHECKPOINT_DIR as torchtitan's CheckpointManager loads a model-only checkpoint
        (ModelWrapper state dict -> dcp.load -> load_state_dict) and saves the logits of the
        token ids in TOKENS.json ([[...], ...])

MODEL.json gives the Qwen3 model that stands in for flavor debugmodel ({"vocab_size", "dim",
"n_layers", "n_heads", "n_kv_heads", "head_dim", "hidden_dim", "rope_theta", "tied"}), so that
titan can build the same one from a config.json and the real Qwen3 tokenizer fits it.

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
    """Qwen3's debugmodel with the sizes of MODEL.json (torchtitan/models/qwen3/__init__.py)."""
    import torchtitan.models.qwen3 as qwen3
    from torchtitan.models.common.rope import CosSinRoPE

    def build(attn_backend="flex"):
        dim, vocab, head_dim = spec["dim"], spec["vocab_size"], spec["head_dim"]
        return qwen3.Qwen3Model.Config(
            vocab_size=vocab, dim=dim, norm=qwen3._qwen3_norm(dim),
            enable_weight_tying=spec.get("tied", True),
            tok_embeddings=qwen3.Embedding.Config(num_embeddings=vocab, embedding_dim=dim,
                                                  param_init=qwen3._EMBEDDING_SKIP_INIT),
            lm_head=qwen3.Linear.Config(in_features=dim, out_features=vocab,
                                        param_init=qwen3._LINEAR_INIT),
            layers=qwen3._build_qwen3_layers(
                fuse_qkv=True, n_layers=spec["n_layers"], dim=dim, n_heads=spec["n_heads"],
                n_kv_heads=spec["n_kv_heads"], head_dim=head_dim, hidden_dim=spec["hidden_dim"],
                attn_backend=attn_backend,
                rope=CosSinRoPE.Config(dim=head_dim, max_seq_len=4096,
                                       theta=spec.get("rope_theta", 1000000.0))))

    qwen3.qwen3_configs["debugmodel"] = build
    return build


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
    import torch.distributed.checkpoint as dcp

    _shim_attention()
    model = _model_config(spec)().build()
    model.init_states()  # the rotary tables (buffers a checkpoint does not hold)
    state = model.state_dict()  # FusedQKVLinear's hook splits wqkv into wq/wk/wv
    dcp.load(state, checkpoint_id=checkpoint)
    model.load_state_dict(state)  # and merges them back
    model.eval()
    tokens = torch.tensor(json.load(open(tokens_path)), dtype=torch.long)
    positions = torch.arange(tokens.shape[1]).expand(tokens.shape[0], -1)
    with torch.no_grad():
        masks = model.get_attention_masks(positions)
        torch.save(model(tokens, positions, masks).float(), out)


if __name__ == "__main__":
    _paths()
    _shim_torch()
    mode, model_json = sys.argv[1], json.load(open(sys.argv[2]))
    if mode == "train":
        train(model_json, sys.argv[3], sys.argv[4:])
    else:
        logits(model_json, *sys.argv[3:6])
