"""Save/load throughput of titan's safetensors writer/reader beside Python's safetensors, on
the tensors of Qwen3-0.6B (28 layers, bf16, random values, about 1.2 GB), in the same run.

  build/python bench/safetensors_throughput.py [--layers 28] [--repeats 3] [--dir /tmp]

Load = open the file and copy every tensor into preallocated tensors (so every byte is read),
from a warm page cache for both. Save = write the file; titan's writer always fsyncs (it
writes a temporary file, fsyncs and renames), so Python is shown with and without an fsync.
The best of the repeats is reported. A benchmark, not a test: it prints numbers only."""
import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

REPO = Path(__file__).resolve().parents[1]
TOOL = Path(os.environ.get("TITAN_BIN", REPO / "build" / "bin" / "titan")).parent / \
    "titan_safetensors_tool"


def qwen3_0_6b_tensors(layers):
    hidden, inter, heads, kv_heads, head_dim, vocab = 1024, 3072, 16, 8, 128, 151936
    shapes = {"model.embed_tokens.weight": (vocab, hidden), "model.norm.weight": (hidden,)}
    for i in range(layers):
        p = f"model.layers.{i}."
        shapes.update({
            p + "self_attn.q_proj.weight": (heads * head_dim, hidden),
            p + "self_attn.k_proj.weight": (kv_heads * head_dim, hidden),
            p + "self_attn.v_proj.weight": (kv_heads * head_dim, hidden),
            p + "self_attn.o_proj.weight": (hidden, heads * head_dim),
            p + "self_attn.q_norm.weight": (head_dim,),
            p + "self_attn.k_norm.weight": (head_dim,),
            p + "mlp.gate_proj.weight": (inter, hidden),
            p + "mlp.up_proj.weight": (inter, hidden),
            p + "mlp.down_proj.weight": (hidden, inter),
            p + "input_layernorm.weight": (hidden,),
            p + "post_attention_layernorm.weight": (hidden,),
        })
    g = torch.Generator().manual_seed(0)
    return {name: torch.randn(*shape, generator=g).to(torch.bfloat16)
            for name, shape in shapes.items()}


def best_of(repeats, fn):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=28)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    args = parser.parse_args()
    assert TOOL.exists(), f"{TOOL} not built; run `make build`"

    tensors = qwen3_0_6b_tensors(args.layers)
    nbytes = sum(t.numel() * t.element_size() for t in tensors.values())
    work = Path(tempfile.mkdtemp(prefix="st_bench_", dir=args.dir))
    py_file, titan_file = work / "python.safetensors", work / "titan.safetensors"
    try:
        def py_save():
            save_file(tensors, py_file, metadata={"format": "pt"})

        def py_save_fsync():
            py_save()
            fd = os.open(py_file, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)

        destination = {k: torch.zeros_like(v) for k, v in tensors.items()}

        def py_load():
            for name, tensor in load_file(py_file).items():
                destination[name].copy_(tensor)

        py = {"save": best_of(args.repeats, py_save),
              "save+fsync": best_of(args.repeats, py_save_fsync),
              "load": best_of(args.repeats, py_load)}
        proc = subprocess.run([str(TOOL), "bench", str(py_file), str(titan_file),
                               str(args.repeats)], capture_output=True, text=True, check=True)
        titan = json.loads(proc.stdout)
        assert titan["bytes"] == nbytes
        assert titan_file.read_bytes() == py_file.read_bytes(), "titan's file differs"

        gb = nbytes / 1e9
        rows = [("python save_file (no fsync)", py["save"]),
                ("python save_file + fsync", py["save+fsync"]),
                ("titan write_safetensors (fsync)", min(titan["write_s"])),
                ("python load_file + copy", py["load"]),
                ("titan SafetensorsFile + copy", min(titan["read_s"]))]
        print(f"{len(tensors)} tensors, {gb:.3f} GB bf16, best of {args.repeats}, "
              f"threads={torch.get_num_threads()}")
        for label, seconds in rows:
            print(f"  {label:34s} {seconds:7.3f} s  {gb / seconds:6.2f} GB/s")
        print(f"  save ratio titan/python(+fsync): {py['save+fsync'] / min(titan['write_s']):.2f}x"
              f"   load ratio titan/python: {py['load'] / min(titan['read_s']):.2f}x")
    finally:
        for f in (py_file, titan_file):
            f.unlink(missing_ok=True)
        work.rmdir()


if __name__ == "__main__":
    main()
