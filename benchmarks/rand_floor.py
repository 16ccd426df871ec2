"""How fast can a bf16 normal draw be? The Philox arithmetic alone, measured beside the real draw.

The target "bf16 normal ≥ 3× torch" asks for 2^28 bf16 normals in a third of torch's time. This
script times, in one run and interleaved over rounds (``triton.testing.do_bench``, median):

- ``production``: ``Generator("philox4x32_10").normal(..., dtype=bf16)`` as shipped;
- ``philox_only``: the same Philox blocks (the cuRAND stream's counters, ten rounds) with the same
  8 bytes stored per block, but the words' top halves stored as the bf16 bits (no Box–Muller);
- ``box_muller_only``: the shipped Box–Muller and stores on words from one multiply (no Philox);
- ``six_per_block``: the design docs/status.md proposes for fewer words per value — Box–Muller on
  a 24-bit radius uniform and a 16-bit angle per pair, three pairs (6 bf16 normals) from each
  Philox block instead of two, the same special-function instructions as the shipped kernel;
- ``six_per_block_poly``: the same, with sin/cos as short polynomials after an exact quadrant
  reduction of the 16-bit angle (FMA pipe), the special-function unit left to log2 and sqrt;
- ``six_packed*``: the same values stored as three packed bf16x2 words per block (no tiles, so no
  layout conversion through shared memory), at the shipped and other (block, warps);
- ``torch``: ``torch.Tensor.normal_`` on bf16, and a device-to-device copy of the same bytes.

If ``philox_only`` alone needs more than a third of torch's time, no Box–Muller can reach 3× while
every value still costs one Philox word (the cuRAND-compatible stream, the same words as the fp32
normal). The six-per-block rows are scaled to N values (they write whole programs of 6·block
values, a few thousand short of N); the summary checks that the packed stores write the tiled
kernel's bits, and gives the packed values' mean, standard deviation and tail fractions.
Usage: python benchmarks/rand_floor.py OUT.json (results: benchmarks/results/philox-floor-*.json)
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from functools import partial

import torch
import triton
import triton.language as tl

from tessera._core.device import device_info
from tessera._core.timing import flushed_ms, git_revision
from tessera.rand.api import Generator
from tessera.rand.kernels.philox import _approx, _box_muller_half, _philox

N = 1 << 28
BLOCK, WARPS = 1024, 2  # the shipped sm_90 logic's choice at 2^28 (rand.philox_normal.bf16.yaml)
ROUNDS = 3


@triton.jit
def _floor_kernel(out_ptr, key0, key1, PHILOX: tl.constexpr, BOX_MULLER: tl.constexpr,
                  BLOCK: tl.constexpr):
    """One Philox block (4 words → 4 bf16) per element, either stage left out."""
    pid = tl.program_id(0)
    zero = tl.zeros((BLOCK,), tl.uint32)
    c0 = (pid * BLOCK + tl.arange(0, BLOCK)).to(tl.uint32)
    if PHILOX:
        w0, w1, w2, w3 = _philox(c0, zero, zero, zero, zero + key0.to(tl.uint32), zero + key1.to(tl.uint32))
    else:  # distinct, cheap words
        w0, w1 = c0 * 0x9E3779B9, c0 * 0x85EBCA6B
        w2, w3 = w0 ^ 0x5BD1E995, w1 ^ 0x1B873593
    if BOX_MULLER:
        v0, v1 = _box_muller_half(w0, w1)
        v2, v3 = _box_muller_half(w2, w3)
        values = tl.reshape(tl.join(tl.join(v0, v2), tl.join(v1, v3)), (BLOCK, 4)).to(tl.bfloat16)
        local = tl.arange(0, BLOCK)[:, None] * 4 + tl.arange(0, 4)[None, :]
        tl.store(out_ptr + pid * BLOCK * 4 + local, values)
    else:  # the top half of each word as the bf16 bits: two int32 stores' worth per block
        pair = tl.join((w0 & 0xFFFF0000) | (w1 >> 16), (w2 & 0xFFFF0000) | (w3 >> 16))
        local = tl.arange(0, BLOCK)[:, None] * 2 + tl.arange(0, 2)[None, :]
        words_ptr = out_ptr.to(tl.pointer_type(tl.int32))
        tl.store(words_ptr + pid * BLOCK * 2 + local, pair.to(tl.int32, bitcast=True))


@triton.jit
def _sincos_16(a):
    """sin and cos of 2π·(a + ½)·2⁻¹⁶ for 16-bit ``a`` (uint32): the quadrant from the top bits
    (exact), then degree-7/6 polynomials on [−π/4, π/4] (errors below 4e-6: far under bf16's and
    fp16's spacing). FMA-pipe only: leaves the special-function unit to the radius."""
    q = ((a + 0x2000) >> 14) & 3
    f = (a - (q << 14)).to(tl.int32, bitcast=True)
    f = tl.where(f >= 0x8000, f - 0x10000, f)  # [−2¹³, 2¹³)
    x = (f.to(tl.float32) + 0.5) * 9.587379924285257e-05  # 2π·2⁻¹⁶
    x2 = x * x
    s = x + x * x2 * (-1.6666667e-01 + x2 * (8.3333333e-03 - x2 * 1.9841270e-04))
    c = 1.0 + x2 * (-0.5 + x2 * (4.1666668e-02 - x2 * 1.3888889e-03))
    odd = (q & 1) != 0
    sin_abs, cos_abs = tl.where(odd, c, s), tl.where(odd, s, c)
    return tl.where((q & 2) != 0, -sin_abs, sin_abs), tl.where(((q + 1) & 2) != 0, -cos_abs, cos_abs)


@triton.jit
def _pair_24_16(radius_bits, angle_bits, MATH: tl.constexpr):
    """Box–Muller on u = (r + ½)·2⁻²⁴ (r: 24 bits) and the angle 2π·(a + ½)·2⁻¹⁶ taken in [−π, π)
    (a: 16 bits). MATH = 1: the shipped kernel's ftz special-function instructions (CUDA only)."""
    u = (radius_bits.to(tl.float32) + 0.5) * 5.9604645e-08  # 2⁻²⁴
    signed = angle_bits.to(tl.int32) - ((angle_bits & 0x8000) << 1).to(tl.int32)  # [−2¹⁵, 2¹⁵)
    angle = (signed.to(tl.float32) + 0.5) * 9.587379924285257e-05  # 2π·2⁻¹⁶
    if MATH == 1:
        s = _approx(tl.abs(_approx(u, "lg2") * -1.3862944), "sqrt")  # √(−2·ln u); abs: lg2(1) ≈ +0
        return s * _approx(angle, "sin"), s * _approx(angle, "cos")
    if MATH == 2:  # radius on the SFU, sin/cos as polynomials on the FMA pipe
        s = _approx(tl.abs(_approx(u, "lg2") * -1.3862944), "sqrt")
        sin_v, cos_v = _sincos_16(angle_bits)
        return s * sin_v, s * cos_v
    s = tl.sqrt(-2.0 * tl.log(u))
    return s * tl.sin(angle), s * tl.cos(angle)


@triton.jit
def _six_per_block_kernel(out_ptr, key0, key1, MATH: tl.constexpr, BLOCK: tl.constexpr):
    """One Philox block → three (24-bit radius, 16-bit angle) pairs → 6 bf16 normals: radii from
    the top 24 bits of w0, w1, w2; angles from w3's halves and the low bytes of w0 and w1."""
    pid = tl.program_id(0)
    zero = tl.zeros((BLOCK,), tl.uint32)
    c0 = (pid * BLOCK + tl.arange(0, BLOCK)).to(tl.uint32)
    w0, w1, w2, w3 = _philox(c0, zero, zero, zero, zero + key0.to(tl.uint32), zero + key1.to(tl.uint32))
    v0, v1 = _pair_24_16(w0 >> 8, w3 & 0xFFFF, MATH)
    v2, v3 = _pair_24_16(w1 >> 8, w3 >> 16, MATH)
    v4, v5 = _pair_24_16(w2 >> 8, ((w0 & 0xFF) << 8) | (w1 & 0xFF), MATH)
    four = tl.reshape(tl.join(tl.join(v0, v2), tl.join(v1, v3)), (BLOCK, 4)).to(tl.bfloat16)
    two = tl.join(v4, v5).to(tl.bfloat16)
    base = pid * BLOCK * 6
    rows = tl.arange(0, BLOCK)[:, None] * 6
    tl.store(out_ptr + base + rows + tl.arange(0, 4)[None, :], four)
    tl.store(out_ptr + base + rows + 4 + tl.arange(0, 2)[None, :], two)


@triton.jit
def _bf16x2(even, odd):
    """Two fp32 values rounded to bf16 and packed in one 32-bit word (``even`` in the low half,
    the lower address): one ``cvt.rn.bf16x2.f32`` (CUDA only)."""
    return tl.inline_asm_elementwise("cvt.rn.bf16x2.f32 $0, $2, $1;", "=r,f,f", [even, odd],
                                     dtype=tl.int32, is_pure=True, pack=1)


@triton.jit
def _six_packed_kernel(out_ptr, key0, key1, MATH: tl.constexpr, BLOCK: tl.constexpr):
    """``_six_per_block_kernel`` without tiles: each block's six values as three packed words,
    stored at word stride 3 (no joins, so no layout conversion through shared memory)."""
    pid = tl.program_id(0).to(tl.int64)
    zero = tl.zeros((BLOCK,), tl.uint32)
    c0 = (pid * BLOCK + tl.arange(0, BLOCK)).to(tl.uint32)
    w0, w1, w2, w3 = _philox(c0, zero, zero, zero, zero + key0.to(tl.uint32), zero + key1.to(tl.uint32))
    v0, v1 = _pair_24_16(w0 >> 8, w3 & 0xFFFF, MATH)
    v2, v3 = _pair_24_16(w1 >> 8, w3 >> 16, MATH)
    v4, v5 = _pair_24_16(w2 >> 8, ((w0 & 0xFF) << 8) | (w1 & 0xFF), MATH)
    words_ptr = out_ptr.to(tl.pointer_type(tl.int32)) + 3 * (pid * BLOCK + tl.arange(0, BLOCK))
    tl.store(words_ptr, _bf16x2(v0, v1))
    tl.store(words_ptr + 1, _bf16x2(v2, v3))
    tl.store(words_ptr + 2, _bf16x2(v4, v5))


def six_packed(out: torch.Tensor, key: int, math: int, block: int = BLOCK, warps: int = WARPS) -> int:
    """As ``six_per_block``, through ``_six_packed_kernel``."""
    programs = out.numel() // (6 * block)
    _six_packed_kernel[(programs,)](out, key, 0, MATH=math, BLOCK=block, num_warps=warps)
    return programs * 6 * block


def six_per_block(out: torch.Tensor, key: int, math: int, block: int = BLOCK, warps: int = WARPS) -> int:
    """Fill the first 6·block·⌊numel / (6·block)⌋ values of 1-D bf16 ``out``; returns that count."""
    programs = out.numel() // (6 * block)
    _six_per_block_kernel[(programs,)](out, key, 0, MATH=math, BLOCK=block, num_warps=warps)
    return programs * 6 * block


def main() -> None:
    out = torch.empty(N, dtype=torch.bfloat16, device="cuda")
    source = torch.empty(N // 2, dtype=torch.float32, device="cuda")  # a copy of N·2 bytes
    copy_dest = torch.empty_like(source)
    gen = Generator("philox4x32_10", seed=1234, device="cuda")

    def production() -> None:
        gen.offset = 0
        gen.normal((N,), dtype=torch.bfloat16, out=out)

    def stage(philox: bool, box_muller: bool):
        grid = (N // 4 // BLOCK,)
        return lambda: _floor_kernel[grid](out, 1234, 0, PHILOX=philox, BOX_MULLER=box_muller,
                                           BLOCK=BLOCK, num_warps=WARPS)

    candidates = {"production": production, "philox_only": stage(True, False),
                  "box_muller_only": stage(False, True),
                  "six_per_block": lambda: six_per_block(out, 1234, 1),
                  "six_per_block_poly": lambda: six_per_block(out, 1234, 2),
                  "six_packed": lambda: six_packed(out, 1234, 1),
                  "six_packed_poly": lambda: six_packed(out, 1234, 2),
                  **{f"six_packed_{b}x{w}": partial(six_packed, out, 1234, 1, b, w)
                     for b, w in ((256, 4), (512, 4), (2048, 8))},
                  "torch": lambda: out.normal_(),
                  "copy": lambda: copy_dest.copy_(source)}
    times: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(ROUNDS):
        for name, fn in candidates.items():
            times[name].append(flushed_ms(fn))
    ms = {name: statistics.median(v) for name, v in times.items()}
    rows = {name: {"us": 1e3 * t, "gbs_of_bf16_output": 2 * N / t / 1e6} for name, t in ms.items()}
    rows["copy"]["gbs_of_bf16_output"] = 4 * N / ms["copy"] / 1e6  # read + write
    sixes = [name for name in rows if name.startswith("six_")]
    for name in sixes:  # times scaled to N values (a kernel writes whole programs of 6·block)
        block = int(name.rsplit("_", 1)[1].split("x")[0]) if name[-1].isdigit() else BLOCK
        ms[name] *= N / (N // (6 * block) * 6 * block)
        rows[name] = {"us": 1e3 * ms[name], "gbs_of_bf16_output": 2 * N / ms[name] / 1e6}
    needed = ms["torch"] / 3
    summary = {"three_x_torch_needs_us": 1e3 * needed,
               "production_vs_torch": ms["torch"] / ms["production"],
               "philox_only_vs_torch": ms["torch"] / ms["philox_only"],
               "philox_only_fraction_of_3x_budget": ms["philox_only"] / needed,
               **{f"{name}_vs_torch": ms["torch"] / ms[name] for name in sixes}}
    tiled, packed = torch.zeros_like(out), torch.zeros_like(out)
    written = six_per_block(tiled, 99, 1)
    six_packed(packed, 99, 1)
    values = packed[:written].float()
    summary["packed_equals_tiled"] = bool(torch.equal(tiled.view(torch.int16), packed.view(torch.int16)))
    summary["packed_moments"] = {"mean": values.mean().item(), "std": values.std().item(),
                                 "beyond_3": (values.abs() > 3).float().mean().item(),
                                 "beyond_4": (values.abs() > 4).float().mean().item(),
                                 "max_abs": values.abs().max().item()}
    for name, row in rows.items():
        print(f"{name:<16} {row['us']:8.1f} us  {row['gbs_of_bf16_output']:7.0f} GB/s")
    print(json.dumps(summary, indent=1))
    info = device_info()
    with open(sys.argv[1], "w") as f:
        json.dump({"device": info.name, "arch": info.arch, "git": git_revision(),
                   "versions": {"torch": torch.__version__, "triton": triton.__version__},
                   "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "n": N, "block": BLOCK, "num_warps": WARPS, "rounds": ROUNDS,
                   "rows": rows, "summary": summary}, f, indent=1)


if __name__ == "__main__":
    main()
