"""NF4 (QLoRA's 4-bit NormalFloat, kernels/nf4.h) against bitsandbytes, on the CPU, blocksize 64:

- quantize_4bit(quant_type="nf4"): the packed codes and the scales equal bitsandbytes' exactly;
- dequantisation equals bitsandbytes' own pure-PyTorch implementation of it (the default
  backend's _dequantize_4bit_compute) exactly, and its CPU kernel (dequantize_4bit) wherever
  that kernel agrees with the former (it does not for some shapes, see docs/lora.md);
- the double quantisation of the scales (compress_statistics=True) equals an independent Python
  implementation of bitsandbytes' published algorithm (nearest value of the signed dynamic map,
  ties to the lower index, blocks of 256 around the scales' mean) exactly; bitsandbytes' CPU
  quantiser differs from it only where its approximate binary search keeps the farther of two
  neighbouring values.
Odd sizes: a last block shorter than 64, rows not a multiple of the block, an odd number of
elements (a padding nibble), an all-zero block, a single block of scales."""
import subprocess

import pytest
import torch
from safetensors.torch import load_file, save_file

from conftest import TITAN

TOOL = TITAN.parent / "titan_safetensors_tool"
F = pytest.importorskip("bitsandbytes.functional")
from bitsandbytes.backends.default.ops import _dequantize_4bit_compute  # noqa: E402
from bitsandbytes.backends.utils import _get_4bit_code  # noqa: E402

SHAPES = {
    "square": (64, 64),
    "short_last_block": (100, 70),  # 7000 = 109 * 64 + 24
    "odd_count": (3, 5),  # 15 elements: the last byte holds a padding nibble
    "rows_across_blocks": (129, 33),
    "cols_96": (64, 96),
    "one": (1, 1),
    "wide": (7, 300),
    "many_scales": (160, 200),  # 500 scales: two blocks of double quantisation
}
NAMES = list(SHAPES) + ["zero_block", "heavy_tails"]


@pytest.fixture(scope="module")
def quantised(tmp_path_factory):
    torch.manual_seed(0)
    weights = {name: torch.randn(shape) * (0.02 + 0.3 * i) for i, (name, shape) in
               enumerate(SHAPES.items())}
    weights["zero_block"] = torch.cat([torch.zeros(64), torch.randn(80)]).reshape(8, 18)
    weights["heavy_tails"] = torch.distributions.StudentT(2.0).sample((48, 40))
    tmp = tmp_path_factory.mktemp("nf4")
    save_file(weights, tmp / "in.safetensors")
    subprocess.run([str(TOOL), "nf4", str(tmp / "in.safetensors"), str(tmp / "out.safetensors")],
                   check=True, capture_output=True)
    return weights, load_file(tmp / "out.safetensors")


def bnb_reference_dequantise(packed, absmax, shape):
    code = _get_4bit_code("nf4", torch.device("cpu"))
    return _dequantize_4bit_compute(packed.reshape(-1), absmax, code, 64, shape, torch.float32)


@pytest.mark.parametrize("name", NAMES)
def test_quantise_and_dequantise_equal_bitsandbytes(quantised, name):
    weights, ours = quantised
    w = weights[name]
    packed, state = F.quantize_4bit(w, blocksize=64, quant_type="nf4", compress_statistics=False)
    assert torch.equal(ours[f"{name}.packed"], packed.flatten())
    assert torch.equal(ours[f"{name}.absmax"], state.absmax)
    assert torch.equal(ours[f"{name}.dequantized"],
                       bnb_reference_dequantise(packed, state.absmax, w.shape))
    kernel = F.dequantize_4bit(packed, state)
    if torch.equal(kernel, bnb_reference_dequantise(packed, state.absmax, w.shape)):
        assert torch.equal(ours[f"{name}.dequantized"], kernel)


def published_double_quantisation(absmax):
    """bitsandbytes' published algorithm for compress_statistics, written out independently."""
    dynamic = F.create_dynamic_map().double()
    offset = absmax.mean()
    centred = absmax - offset
    codes, scales = [], []
    for block in centred.split(256):
        m = block.abs().max()
        scales.append(m)
        normed = (block / m).double()
        if not torch.isfinite(normed).all():  # a block of equal scales: 0 / 0
            codes += [0] * block.numel()
            continue
        search = dynamic.clone()
        search[0] = -1.0  # the CPU quantiser's search starts at -1
        dist = (normed[:, None] - search[None, :]).abs().float()
        codes += [int(torch.nonzero(d == d.min())[0]) for d in dist]  # the lower index on ties
    return (torch.tensor(codes, dtype=torch.uint8), torch.stack(scales).float(),
            offset.reshape(1))


@pytest.mark.parametrize("name", NAMES)
def test_double_quantisation_follows_the_published_algorithm(quantised, name):
    weights, ours = quantised
    w = weights[name]
    packed, state = F.quantize_4bit(w, blocksize=64, quant_type="nf4", compress_statistics=True)
    assert torch.equal(ours[f"{name}.packed"], packed.flatten())
    codes, scales, offset = published_double_quantisation(ours[f"{name}.absmax"])
    assert torch.equal(ours[f"{name}.scale_codes"], codes)
    assert torch.equal(ours[f"{name}.scale_absmax"], scales)
    assert torch.equal(ours[f"{name}.scale_offset"], offset)
    # bitsandbytes' own quantiser: the same scales and offset, the same codes but where its
    # search kept the farther neighbour (never more than one index away, never nearer).
    assert torch.equal(ours[f"{name}.scale_absmax"], state.state2.absmax)
    assert torch.equal(ours[f"{name}.scale_offset"], state.offset.reshape(1))
    dynamic = F.create_dynamic_map()
    centred = (ours[f"{name}.absmax"] - offset)
    normed = centred / scales.repeat_interleave(256)[: centred.numel()]
    theirs = state.absmax.long()
    mine = codes.long()
    differ = mine != theirs
    assert int(differ.sum()) <= max(1, centred.numel() // 50)
    assert bool(((mine - theirs).abs()[differ] == 1).all())
    assert bool(((normed - dynamic[mine]).abs()[differ] <=
                 (normed - dynamic[theirs]).abs()[differ]).all())
    # Dequantised through those scales: bitsandbytes' own arithmetic on our codes.
    absmax = F.dequantize_blockwise(codes, absmax=scales, code=dynamic, blocksize=256) + offset
    assert torch.equal(ours[f"{name}.dequantized_double"],
                       bnb_reference_dequantise(packed, absmax, w.shape))


def test_dequantised_weight_is_close_to_the_original(quantised):
    # NF4's error is at most half the widest gap between code values (0.16 of the absmax).
    weights, ours = quantised
    for name in NAMES:
        w, d = weights[name].reshape(-1), ours[f"{name}.dequantized"].reshape(-1)
        assert d.shape == w.shape
        pad = (-w.numel()) % 64
        blocks = torch.nn.functional.pad(w, (0, pad)).reshape(-1, 64).abs().amax(1)
        bound = 0.17 * blocks.repeat_interleave(64)[: w.numel()]
        assert bool(((w - d).abs() <= bound + 1e-12).all()), name
