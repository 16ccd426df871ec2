"""How fast can a bf16 normal draw be? The Philox arithmetic alone, measured beside the real draw.

The target "bf16 normal ≥ 3× torch" asks for 2^28 bf16 normals in a third of torch's time. This
script times, in one run and interleaved over rounds (``triton.testing.do_bench``, median):

- ``production``: ``Generator("philox4x32_10").normal(..., dtype=bf16)`` as shipped;
- ``philox_only``: the same Philox blocks (the cuRAND stream's counters, ten rounds) with the same
  8 bytes stored per block, but the words' top halves stored as the bf16 bits (no Box–Muller);
- ``box_muller_only``: the shipped Box–Muller and stores on words from one multiply (no Philox);
- designs that spend fewer Philox words per value (``DESIGNS``; "words per value" is what
  decides: ``philox_only`` alone takes ~0.98 of the time 3× allows): ``six`` (one block → three
  pairs of a 24-bit radius and a 16-bit angle; tiled or packed stores), ``sixteen`` (three blocks
  → eight pairs of 24-bit radius and 24-bit angle, two 16-byte stores per lane) and ``eight``
  (one block → four pairs of 16 + 16 bits: a speed bound only, its tails end at 4.7σ),
  ``eight_refined`` (``eight`` whose radii below 16·2⁻¹⁶ take 32 more bits from a second block
  computed only by programs that need it: tails to 8σ), each at
  a few (block, warps), with the special-function instructions of the shipped kernel;
- ``torch``: ``torch.Tensor.normal_`` on bf16, and a device-to-device copy of the same bytes.

If ``philox_only`` alone needs more than a third of torch's time, no Box–Muller can reach 3× while
every value still costs one Philox word (the cuRAND-compatible stream, the same words as the fp32
normal). The design rows are scaled to N values (they write whole programs, a few thousand values short
of N); the summary checks that a design's variants write the same bits and gives its values'
mean, standard deviation and tail fractions. Earlier variants (sin/cos as polynomials on the
FMA pipe; other block sizes) are in philox-floor-h200-ba39378/95447ed.json.
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
from tessera._core.timing import flushed_ms, git_revision, write_result
from tessera.rand.api import Generator
from tessera.rand.kernels.philox import _box_muller_half, _philox, _radius_sincos

N = 1 << 28
BLOCK, WARPS = 1024, 2  # the shipped sm_90 logic's choice at 2^28 (rand.philox_normal.bf16.yaml)
ROUNDS = 3
DEVICE = "cuda"


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
def _pair_u(u, angle_bits, A_BITS: tl.constexpr):
    """Box–Muller with the shipped kernel's ftz special-function instructions (CUDA only) on the
    uniform ``u`` and the angle 2π·(a + ½)·2^−A_BITS taken in [−π, π) (a: uint32 of A_BITS bits)."""
    turn: tl.constexpr = 6.283185307179586 / (1 << A_BITS)
    top: tl.constexpr = 1 << (A_BITS - 1)
    signed = angle_bits.to(tl.int32) - ((angle_bits & top) << 1).to(tl.int32)  # [−top, top)
    return _radius_sincos(u, signed.to(tl.float32) * turn + 0.5 * turn)


@triton.jit
def _pair(radius_bits, R_BITS: tl.constexpr, angle_bits, A_BITS: tl.constexpr):
    """``_pair_u`` on u = (r + ½)·2^−R_BITS (r: uint32 of R_BITS bits)."""
    step: tl.constexpr = 1.0 / (1 << R_BITS)
    return _pair_u(radius_bits.to(tl.float32) * step + 0.5 * step, angle_bits, A_BITS)  # one FFMA


@triton.jit
def _bf16x2(even, odd):
    """Two fp32 values rounded to bf16 and packed in one 32-bit word (``even`` in the low half,
    the lower address): one ``cvt.rn.bf16x2.f32`` (CUDA only)."""
    return tl.inline_asm_elementwise("cvt.rn.bf16x2.f32 $0, $2, $1;", "=r,f,f", [even, odd],
                                     dtype=tl.int32, is_pure=True, pack=1)


@triton.jit
def _block(c0, key0, key1):
    zero = tl.zeros(c0.shape, tl.uint32)
    return _philox(c0, zero, zero, zero, zero + key0.to(tl.uint32), zero + key1.to(tl.uint32))


@triton.jit
def _six_kernel(out_ptr, key0, key1, PACKED: tl.constexpr, BLOCK: tl.constexpr):
    """One Philox block → three (24-bit radius, 16-bit angle) pairs → 6 bf16 normals: radii from
    the top 24 bits of w0, w1, w2; angles from w3's halves and the low bytes of w0 and w1.
    PACKED: three bf16x2 words stored at word stride 3; else (BLOCK, 4) and (BLOCK, 2) tiles."""
    pid = tl.program_id(0).to(tl.int64)
    w0, w1, w2, w3 = _block((pid * BLOCK + tl.arange(0, BLOCK)).to(tl.uint32), key0, key1)
    v0, v1 = _pair(w0 >> 8, 24, w3 & 0xFFFF, 16)
    v2, v3 = _pair(w1 >> 8, 24, w3 >> 16, 16)
    v4, v5 = _pair(w2 >> 8, 24, ((w0 & 0xFF) << 8) | (w1 & 0xFF), 16)
    if PACKED:
        words_ptr = out_ptr.to(tl.pointer_type(tl.int32)) + 3 * (pid * BLOCK + tl.arange(0, BLOCK))
        tl.store(words_ptr, _bf16x2(v0, v1))
        tl.store(words_ptr + 1, _bf16x2(v2, v3))
        tl.store(words_ptr + 2, _bf16x2(v4, v5))
    else:
        four = tl.reshape(tl.join(tl.join(v0, v2), tl.join(v1, v3)), (BLOCK, 4)).to(tl.bfloat16)
        two = tl.join(v4, v5).to(tl.bfloat16)
        rows = pid * BLOCK * 6 + tl.arange(0, BLOCK)[:, None] * 6
        tl.store(out_ptr + rows + tl.arange(0, 4)[None, :], four)
        tl.store(out_ptr + rows + 4 + tl.arange(0, 2)[None, :], two)


@triton.jit
def _store_words4(words_ptr, x0, x1, x2, x3, BLOCK: tl.constexpr, STRIDE: tl.constexpr):
    """Four int32 per lane as one 16-byte store: lane i's words at ``words_ptr`` + STRIDE·i + [0, 4)
    (a two-level join keeps them in one thread: no layout conversion)."""
    tile = tl.reshape(tl.join(tl.join(x0, x1), tl.join(x2, x3)), (BLOCK, 4))
    tl.store(words_ptr + tl.arange(0, BLOCK)[:, None] * STRIDE + tl.arange(0, 4)[None, :], tile)


@triton.jit
def _sixteen_kernel(out_ptr, key0, key1, BLOCK: tl.constexpr):
    """Three Philox blocks (3i, 3i+1, 3i+2) → eight (24-bit radius, 24-bit angle) pairs → 16 bf16
    normals, two 16-byte stores per lane: radii from the top 24 bits of w0…w7, angles from
    the halves of w8…w11 above the low bytes of w0…w7."""
    pid = tl.program_id(0).to(tl.int64)
    c = (3 * (pid * BLOCK + tl.arange(0, BLOCK))).to(tl.uint32)
    w0, w1, w2, w3 = _block(c, key0, key1)
    w4, w5, w6, w7 = _block(c + 1, key0, key1)
    w8, w9, w10, w11 = _block(c + 2, key0, key1)
    v0, v1 = _pair(w0 >> 8, 24, ((w8 & 0xFFFF) << 8) | (w0 & 0xFF), 24)
    v2, v3 = _pair(w1 >> 8, 24, ((w8 >> 16) << 8) | (w1 & 0xFF), 24)
    v4, v5 = _pair(w2 >> 8, 24, ((w9 & 0xFFFF) << 8) | (w2 & 0xFF), 24)
    v6, v7 = _pair(w3 >> 8, 24, ((w9 >> 16) << 8) | (w3 & 0xFF), 24)
    v8, v9 = _pair(w4 >> 8, 24, ((w10 & 0xFFFF) << 8) | (w4 & 0xFF), 24)
    v10, v11 = _pair(w5 >> 8, 24, ((w10 >> 16) << 8) | (w5 & 0xFF), 24)
    v12, v13 = _pair(w6 >> 8, 24, ((w11 & 0xFFFF) << 8) | (w6 & 0xFF), 24)
    v14, v15 = _pair(w7 >> 8, 24, ((w11 >> 16) << 8) | (w7 & 0xFF), 24)
    words_ptr = out_ptr.to(tl.pointer_type(tl.int32)) + pid * BLOCK * 8
    _store_words4(words_ptr, _bf16x2(v0, v1), _bf16x2(v2, v3), _bf16x2(v4, v5), _bf16x2(v6, v7), BLOCK, 8)
    _store_words4(words_ptr + 4, _bf16x2(v8, v9), _bf16x2(v10, v11), _bf16x2(v12, v13),
                  _bf16x2(v14, v15), BLOCK, 8)


@triton.jit
def _eight_kernel(out_ptr, key0, key1, BLOCK: tl.constexpr):
    """One Philox block → four (16-bit radius, 16-bit angle) pairs → 8 bf16 normals, one 16-byte
    store per lane. A speed bound only: a 16-bit radius ends the tails at 4.7σ."""
    pid = tl.program_id(0).to(tl.int64)
    w0, w1, w2, w3 = _block((pid * BLOCK + tl.arange(0, BLOCK)).to(tl.uint32), key0, key1)
    v0, v1 = _pair(w0 >> 16, 16, w0 & 0xFFFF, 16)
    v2, v3 = _pair(w1 >> 16, 16, w1 & 0xFFFF, 16)
    v4, v5 = _pair(w2 >> 16, 16, w2 & 0xFFFF, 16)
    v6, v7 = _pair(w3 >> 16, 16, w3 & 0xFFFF, 16)
    _store_words4(out_ptr.to(tl.pointer_type(tl.int32)) + pid * BLOCK * 4, _bf16x2(v0, v1),
                  _bf16x2(v2, v3), _bf16x2(v4, v5), _bf16x2(v6, v7), BLOCK, 4)


REFINE_BELOW = tl.constexpr(16)  # 16-bit radii below this get 32 more bits (u < 2⁻¹², r > 4.08)


@triton.jit
def _refined_u(r, e):
    """u = (r + f)·2⁻¹⁶ with f = ½, or f = (e + ½)·2⁻³² where r < REFINE_BELOW."""
    f = tl.where(r < REFINE_BELOW, e.to(tl.float32) * 2.3283064e-10 + 1.1641532e-10, 0.5)
    return (r.to(tl.float32) + f) * 1.5258789e-05


@triton.jit
def _eight_refined_kernel(out_ptr, key0, key1, BLOCK: tl.constexpr):
    """``_eight_kernel`` with full tails: a 16-bit radius below REFINE_BELOW (p = 2⁻¹² a pair)
    takes 32 more bits from a second Philox block (counter high word with its top bit set, a
    range no stream reaches), computed by the program only when one of its radii needs it."""
    pid = tl.program_id(0).to(tl.int64)
    c0 = (pid * BLOCK + tl.arange(0, BLOCK)).to(tl.uint32)
    w0, w1, w2, w3 = _block(c0, key0, key1)
    r0, r1, r2, r3 = w0 >> 16, w1 >> 16, w2 >> 16, w3 >> 16
    low = ((r0 < REFINE_BELOW) | (r1 < REFINE_BELOW) | (r2 < REFINE_BELOW) | (r3 < REFINE_BELOW))
    if tl.max(low.to(tl.int32)) > 0:
        zero = tl.zeros((BLOCK,), tl.uint32)
        e0, e1, e2, e3 = _philox(c0, zero + 0x80000000, zero, zero, zero + key0.to(tl.uint32),
                                 zero + key1.to(tl.uint32))
        u0, u1, u2, u3 = _refined_u(r0, e0), _refined_u(r1, e1), _refined_u(r2, e2), _refined_u(r3, e3)
    else:
        u0 = r0.to(tl.float32) * 1.5258789e-05 + 7.6293945e-06
        u1 = r1.to(tl.float32) * 1.5258789e-05 + 7.6293945e-06
        u2 = r2.to(tl.float32) * 1.5258789e-05 + 7.6293945e-06
        u3 = r3.to(tl.float32) * 1.5258789e-05 + 7.6293945e-06
    v0, v1 = _pair_u(u0, w0 & 0xFFFF, 16)
    v2, v3 = _pair_u(u1, w1 & 0xFFFF, 16)
    v4, v5 = _pair_u(u2, w2 & 0xFFFF, 16)
    v6, v7 = _pair_u(u3, w3 & 0xFFFF, 16)
    _store_words4(out_ptr.to(tl.pointer_type(tl.int32)) + pid * BLOCK * 4, _bf16x2(v0, v1),
                  _bf16x2(v2, v3), _bf16x2(v4, v5), _bf16x2(v6, v7), BLOCK, 4)


# design → (kernel, values per lane, extra constexprs)
DESIGNS = {"six_tiled": (_six_kernel, 6, {"PACKED": False}), "six_packed": (_six_kernel, 6, {"PACKED": True}),
           "sixteen": (_sixteen_kernel, 16, {}), "eight": (_eight_kernel, 8, {}),
           "eight_refined": (_eight_refined_kernel, 8, {})}
VARIANTS = [("six_packed", 256, 4), ("sixteen", 256, 4), ("eight", 256, 4), ("eight", 512, 4),
            ("eight_refined", 32, 1), ("eight_refined", 64, 1), ("eight_refined", 128, 1),
            ("eight_refined", 128, 2), ("eight_refined", 256, 4), ("eight_refined", 512, 4)]


def draw(design: str, out: torch.Tensor, key: int, block: int, warps: int) -> int:
    """Fill the first whole programs' values of 1-D bf16 ``out`` with a design; returns their count."""
    kernel, per_lane, constexprs = DESIGNS[design]
    programs = out.numel() // (per_lane * block)
    kernel[(programs,)](out, key, 0, BLOCK=block, num_warps=warps, **constexprs)
    return programs * per_lane * block


def main() -> None:
    out = torch.empty(N, dtype=torch.bfloat16, device=DEVICE)
    source = torch.empty(N // 2, dtype=torch.float32, device=DEVICE)  # a copy of N·2 bytes
    copy_dest = torch.empty_like(source)
    gen = Generator("philox4x32_10", seed=1234, device=DEVICE)

    def production() -> None:
        gen.offset = 0
        gen.normal((N,), dtype=torch.bfloat16, out=out)

    def stage(philox: bool, box_muller: bool):
        grid = (N // 4 // BLOCK,)
        return lambda: _floor_kernel[grid](out, 1234, 0, PHILOX=philox, BOX_MULLER=box_muller,
                                           BLOCK=BLOCK, num_warps=WARPS)

    candidates = {"production": production, "philox_only": stage(True, False),
                  "box_muller_only": stage(False, True),
                  **{f"{d}_{b}x{w}": partial(draw, d, out, 1234, b, w) for d, b, w in VARIANTS},
                  "torch": lambda: out.normal_(),
                  "copy": lambda: copy_dest.copy_(source)}
    times: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(ROUNDS):
        for name, fn in candidates.items():
            times[name].append(flushed_ms(fn))
    ms = {name: statistics.median(v) for name, v in times.items()}
    for design, block, warps in VARIANTS:  # scaled to N values: a design writes whole programs
        _, per_lane, _ = DESIGNS[design]
        ms[f"{design}_{block}x{warps}"] *= N / (N // (per_lane * block) * per_lane * block)
    rows = {name: {"us": 1e3 * t, "gbs_of_bf16_output": 2 * N / t / 1e6} for name, t in ms.items()}
    rows["copy"]["gbs_of_bf16_output"] = 4 * N / ms["copy"] / 1e6  # read + write
    needed = ms["torch"] / 3
    summary = {"three_x_torch_needs_us": 1e3 * needed,
               "philox_only_fraction_of_3x_budget": ms["philox_only"] / needed,
               **{f"{name}_vs_torch": ms["torch"] / t for name, t in ms.items() if name != "copy"}}
    for name, row in rows.items():
        print(f"{name:<20} {row['us']:8.1f} us  {row['gbs_of_bf16_output']:7.0f} GB/s", flush=True)
    summary["moments"] = {}
    for design in dict.fromkeys(d for d, _, _ in VARIANTS):  # each design's values (key 99)
        drawn = []
        for d, block, warps in VARIANTS:
            if d == design:
                values = torch.zeros_like(out)
                drawn.append(values[:draw(design, values, 99, block, warps)])
        shortest = min(v.numel() for v in drawn)
        agree = all(torch.equal(v[:shortest].view(torch.int16), drawn[0][:shortest].view(torch.int16))
                    for v in drawn)  # whether its variants wrote the same bits
        values = drawn[0].float()
        summary["moments"][design] = {
            "variants_agree": agree, "mean": values.mean().item(), "std": values.std().item(),
            **{f"beyond_{k}": (values.abs() > k).float().mean().item() for k in (3, 4, 5)},
            "max_abs": values.abs().max().item()}
        del drawn, values
    print(json.dumps(summary, indent=1))
    info = device_info()
    write_result(sys.argv[1], {"device": info.name, "arch": info.arch, "git": git_revision(),
                               "versions": {"torch": torch.__version__, "triton": triton.__version__},
                               "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                               "n": N, "block": BLOCK, "num_warps": WARPS, "rounds": ROUNDS,
                               "rows": rows, "summary": summary})


if __name__ == "__main__":
    main()
