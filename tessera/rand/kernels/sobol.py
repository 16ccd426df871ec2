"""Sobol' points (base 2, 32 bits) in Gray-code order, with an optional random digital shift.

Point ``i`` in dimension ``d`` is the XOR of the direction numbers ``V[d, k]`` for the bits ``k``
set in ``gray(i) = i ^ (i >> 1)`` — the order SciPy's ``qmc.Sobol`` and Joe & Kuo use, so the first
point is the origin. Each program fills a (BLOCK_N points × BLOCK_D dimensions) tile of the
row-major (n, dims) output, coalesced along dimensions.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import triton
import triton.language as tl

MAX_DIMENSIONS = 1024
BITS = 32
_DATA = Path(__file__).resolve().parents[1] / "data" / "joe_kuo_1024.npz"


@cache
def direction_numbers() -> np.ndarray:
    """(1024, 32) uint32 direction numbers from Joe & Kuo's (poly, m) data (their recurrence)."""
    data = np.load(_DATA)
    poly, vinit = data["poly"].astype(np.int64), data["vinit"].astype(np.int64)
    v = np.zeros((MAX_DIMENSIONS, BITS), dtype=np.int64)
    v[0] = 1  # dimension 0: van der Corput (all m_i = 1)
    for d in range(1, MAX_DIMENSIONS):
        s = int(poly[d]).bit_length() - 1  # degree of the primitive polynomial
        a = (int(poly[d]) >> 1) & ((1 << (s - 1)) - 1) if s > 1 else 0  # its inner coefficients
        m = [int(x) for x in vinit[d, :s]]
        for i in range(s, BITS):
            value = m[i - s] ^ (m[i - s] << s)
            for k in range(1, s):
                if (a >> (s - 1 - k)) & 1:
                    value ^= m[i - k] << k
            m.append(value)
        v[d] = m[:BITS]
    shifts = BITS - 1 - np.arange(BITS)
    return (v << shifts).astype(np.uint32)  # V[d, k] = m_{k+1} · 2^(31-k)


@triton.jit
def _sobol_kernel(v_ptr, shift_ptr, out_ptr, n, dims, first, SCRAMBLE: tl.constexpr,
                  KIND: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    dmask = d < dims
    gray = (first + i) ^ ((first + i) >> 1)
    x = tl.zeros((BLOCK_N, BLOCK_D), tl.uint32)
    for k in tl.static_range(32):
        vk = tl.load(v_ptr + d * 32 + k, mask=dmask, other=0).to(tl.uint32, bitcast=True)
        bit = ((gray >> k) & 1) != 0
        x = x ^ tl.where(bit[:, None], vk[None, :], tl.zeros_like(vk)[None, :])
    if SCRAMBLE:
        x = x ^ tl.load(shift_ptr + d, mask=dmask, other=0).to(tl.uint32, bitcast=True)[None, :]
    if KIND == 0:
        value = x.to(tl.int32, bitcast=True)
    elif KIND == 1:
        value = x.to(tl.float32) * 2.3283064e-10 + 1.1641532e-10
    else:
        value = x.to(tl.float64) * 2.3283064365386963e-10 + 1.1641532182693481e-10
    mask = (i < n)[:, None] & dmask[None, :]
    tl.store(out_ptr + i[:, None] * dims + d[None, :], value.to(out_ptr.dtype.element_ty), mask=mask)


def launch_sobol(out, directions, shifts, first: int, kind: int, block_n: int = 64,
                 block_d: int = 16) -> None:
    """Fill contiguous (n, dims) ``out`` with points first … first + n − 1."""
    n, dims = out.shape
    grid = (triton.cdiv(n, block_n), triton.cdiv(dims, block_d))
    _sobol_kernel[grid](directions, shifts if shifts is not None else directions, out, n, dims, first,
                        SCRAMBLE=shifts is not None, KIND=kind, BLOCK_N=block_n, BLOCK_D=block_d)
