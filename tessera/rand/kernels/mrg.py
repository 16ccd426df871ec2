"""MRG32k3a (L'Ecuyer, Oper. Res. 47 (1999) 159–164): the reference recurrence, with skip-ahead.

Two order-3 recurrences mod m1 = 2³² − 209 and m2 = 2³² − 22853:
    x1[n] = (1403580·x1[n−2] − 810728·x1[n−3]) mod m1
    x2[n] = (527612·x2[n−1] − 1370589·x2[n−3]) mod m2
output u[n] = ((x1[n] − x2[n]) mod m1, with 0 read as m1) / (m1 + 1), in (0, 1) — computed in
fp64 exactly as L'Ecuyer's reference code does (every product stays below 2⁵³).

Stream layout: the seed gives the initial state (see :func:`seed_state`); subsequence k starts
k·2⁷⁶ steps later (cuRAND's spacing); word offset p is step p of that subsequence. Each program
lane produces CHUNK consecutive values: it jumps to its first position with the precomputed
matrices A^(2^j) (exact modular arithmetic in fp64, RngStreams' MultModM), then runs the recurrence.
"""

from __future__ import annotations

from functools import cache

import torch
import triton
import triton.language as tl

M1, M2 = 4294967087, 4294944443
A1 = ((0, 1, 0), (0, 0, 1), (-810728, 1403580, 0))
A2 = ((0, 1, 0), (0, 0, 1), (-1370589, 0, 527612))
JUMP_BITS = 62
SUBSEQUENCE_SPACING = 2**76


def _mat_mul(a, b, m):
    return tuple(tuple(sum(a[i][k] * b[k][j] for k in range(3)) % m for j in range(3)) for i in range(3))


def _mat_pow(a, e: int, m: int):
    result = ((1, 0, 0), (0, 1, 0), (0, 0, 1))
    base = tuple(tuple(x % m for x in row) for row in a)
    while e:
        if e & 1:
            result = _mat_mul(result, base, m)
        base = _mat_mul(base, base, m)
        e >>= 1
    return result


def _mat_vec(a, v, m):
    return tuple(sum(a[i][k] * v[k] for k in range(3)) % m for i in range(3))


def seed_state(seed: int, subsequence: int) -> tuple[int, ...]:
    """Initial state (x1[0..2], x2[0..2]) for a seed, advanced to the start of a subsequence.

    The seed's 64 bits fill the first words of each component (L'Ecuyer's default 12345 where the
    seed gives zero), so seed 0 is the classic all-12345 start; no component can be all zero."""
    lo, hi = seed & 0xFFFFFFFF, seed >> 32
    s1 = (lo % M1 or 12345, hi % M1 or 12345, 12345)
    s2 = (hi % M2 or 12345, lo % M2 or 12345, 12345)
    if subsequence:
        s1 = _mat_vec(_mat_pow(A1, subsequence * SUBSEQUENCE_SPACING, M1), s1, M1)
        s2 = _mat_vec(_mat_pow(A2, subsequence * SUBSEQUENCE_SPACING, M2), s2, M2)
    return (*s1, *s2)


@cache
def _jump_tables(device_key: str) -> torch.Tensor:
    """(2, JUMP_BITS, 9) float64: A1^(2^j) and A2^(2^j), row-major."""
    rows = []
    for a, m in ((A1, M1), (A2, M2)):
        power = tuple(tuple(x % m for x in row) for row in a)
        table = []
        for _ in range(JUMP_BITS):
            table.append([float(x) for row in power for x in row])
            power = _mat_mul(power, power, m)
        rows.append(table)
    return torch.tensor(rows, dtype=torch.float64, device=device_key)


@triton.jit
def _mulmod(a, s, c, m):
    """(a·s + c) mod m for 0 ≤ a, s, c < m < 2³² in exact fp64 (RngStreams' MultModM)."""
    two17 = 131072.0
    a1 = tl.floor(a / two17)
    a0 = a - a1 * two17
    v = a1 * s
    v = v - tl.floor(v / m) * m
    v = v * two17 + a0 * s + c
    v = v - tl.floor(v / m) * m
    v = tl.where(v < 0, v + m, v)
    return tl.where(v >= m, v - m, v)  # both corrections: v/m may round either way near an integer


@triton.jit
def _apply(t_ptr, x0, x1, x2, m):
    """(x0, x1, x2) ← T · (x0, x1, x2) mod m for the 3×3 matrix at t_ptr."""
    zero = x0 * 0.0
    y0 = _mulmod(tl.load(t_ptr + 0), x0, _mulmod(tl.load(t_ptr + 1), x1,
                                                 _mulmod(tl.load(t_ptr + 2), x2, zero, m), m), m)
    y1 = _mulmod(tl.load(t_ptr + 3), x0, _mulmod(tl.load(t_ptr + 4), x1,
                                                 _mulmod(tl.load(t_ptr + 5), x2, zero, m), m), m)
    y2 = _mulmod(tl.load(t_ptr + 6), x0, _mulmod(tl.load(t_ptr + 7), x1,
                                                 _mulmod(tl.load(t_ptr + 8), x2, zero, m), m), m)
    return y0, y1, y2


@triton.jit
def _mod(p, m):
    """p mod m for an exact integer-valued fp64 |p| < 2⁵³ (the reference's k = p/m; p −= k·m)."""
    p = p - tl.floor(p / m) * m
    return tl.where(p < 0, p + m, p)  # p/m may round up to the next integer


@triton.jit
def _cast_out(value, out_ptr):
    """fp64 → the output dtype; 16-bit outputs go through fp32 (the interpreter's direct fp64 → bf16
    conversion returns zeros)."""
    if out_ptr.dtype.element_ty == tl.float64 or out_ptr.dtype.element_ty == tl.int32:
        return value.to(out_ptr.dtype.element_ty)
    return value.to(tl.float32).to(out_ptr.dtype.element_ty)


@triton.jit
def _mrg_kernel(out_ptr, jump_ptr, n, offset, s10, s11, s12, s20, s21, s22,
                mean: tl.float64, std: tl.float64, KIND: tl.constexpr,
                CHUNK: tl.constexpr, BLOCK: tl.constexpr, JUMPS: tl.constexpr):
    # Float literals are fp32 in Triton and m1, m2 are not fp32 numbers: build fp64 constants.
    m1 = tl.full((BLOCK,), 4294967087.0, tl.float64)
    m2 = tl.full((BLOCK,), 4294944443.0, tl.float64)
    norm = tl.full((BLOCK,), 2.328306549295727688e-10, tl.float64)
    two_pi = tl.full((BLOCK,), 6.283185307179586, tl.float64)
    lane = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    start = offset + lane * CHUNK
    zero = tl.zeros((BLOCK,), tl.float64)
    x10, x11, x12 = zero + s10, zero + s11, zero + s12
    x20, x21, x22 = zero + s20, zero + s21, zero + s22
    for j in range(JUMPS):  # jump each lane to its first position: x ← A^(2^j)·x for set bits
        take = ((start >> j) & 1) != 0
        y0, y1, y2 = _apply(jump_ptr + j * 9, x10, x11, x12, m1)
        x10, x11, x12 = tl.where(take, y0, x10), tl.where(take, y1, x11), tl.where(take, y2, x12)
        y0, y1, y2 = _apply(jump_ptr + (JUMPS + j) * 9, x20, x21, x22, m2)
        x20, x21, x22 = tl.where(take, y0, x20), tl.where(take, y1, x21), tl.where(take, y2, x22)
    index = lane * CHUNK
    spare = zero + 0.5
    for c in range(CHUNK):
        p1 = _mod(1403580.0 * x11 - 810728.0 * x10, m1)
        x10, x11, x12 = x11, x12, p1
        p2 = _mod(527612.0 * x22 - 1370589.0 * x20, m2)
        x20, x21, x22 = x21, x22, p2
        u = tl.where(p1 <= p2, p1 - p2 + m1, p1 - p2) * norm
        mask = (index + c) < n
        if KIND == 0:
            value = tl.floor(u * 4294967296.0).to(tl.uint32).to(tl.int32, bitcast=True)
        elif KIND == 2:  # Box–Muller on uniforms (u, v): value 2t = s·sin 2πv, 2t+1 = s·cos 2πv
            odd = (c % 2) == 1
            radius = tl.sqrt(-2.0 * tl.log(spare))
            first = radius * tl.sin(u * two_pi) * std + mean
            tl.store(out_ptr + index + c - 1, _cast_out(first, out_ptr),
                     mask=odd & ((index + c - 1) < n))
            value = radius * tl.cos(u * two_pi) * std + mean
            mask = mask & odd
            spare = u
        else:
            value = u
        tl.store(out_ptr + index + c, _cast_out(value, out_ptr), mask=mask)


def launch_mrg(out, kind: int, seed: int, subsequence: int, offset: int, mean: float, std: float,
               chunk: int = 64, block: int = 64) -> None:
    """Fill contiguous 1-D ``out`` with values from step ``offset`` of the subsequence."""
    n = out.numel()
    lanes = triton.cdiv(n, chunk)
    state = [float(x) for x in seed_state(seed, subsequence)]
    tables = _jump_tables(str(out.device))
    _mrg_kernel[(triton.cdiv(lanes, block),)](
        out, tables, n, offset, *state, float(mean), float(std), KIND=kind, CHUNK=chunk, BLOCK=block,
        JUMPS=JUMP_BITS)
