"""Sobol' points (base 2, 32 bits) in Gray-code order, with an optional random digital shift.

Point ``i`` in dimension ``d`` is the XOR of the direction numbers ``V[d, k]`` for the bits ``k``
set in ``gray(i) = i ^ (i >> 1)`` — the order SciPy's ``qmc.Sobol`` and Joe & Kuo use, so the first
point is the origin.

Gray codes are linear over XOR and ``gray(a + b) = gray(a) ^ gray(b)`` when ``b < 2^j`` divides ``a``,
so point ``base + r·B + p`` (base a multiple of B·R, p < B = 2^L) is
``X(gray(base)) ^ X(gray(r·B)) ^ X(gray(p))``: a per-step row term XORed with a per-program tile.
From step r to r + 1 the row term changes by ``gray(((r+1) ^ r)·B) = 2^(L+c) ^ 2^(L−1)`` with
c = ctz(r + 1), i.e. by two direction numbers. Each program writes R steps of a (B points ×
BLOCK_D dimensions) tile of the row-major (n, dims) output: one XOR per value, contiguous stores.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import torch
import triton
import triton.language as tl

from tessera._core.errors import invalid
from tessera._core.launch import Launcher, cdiv, next_power_of_2, word
from tessera.rand.space import SobolConfig

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
def _xor_rows(bits, v_ptr, dims, d, dmask, LOW: tl.constexpr, HIGH: tl.constexpr):
    """(rows, BLOCK_D) tile: XOR of the direction numbers V[k, d], k in [LOW, HIGH), over the bits
    k set in each row's ``bits`` (uint32)."""
    x = tl.zeros((bits.shape[0], d.shape[0]), tl.uint32)
    for k in tl.static_range(LOW, HIGH):
        vk = tl.load(v_ptr + k * dims + d, mask=dmask, other=0).to(tl.uint32, bitcast=True)
        x = x ^ tl.where((((bits >> k) & 1) != 0)[:, None], vk[None, :], tl.zeros_like(vk)[None, :])
    return x


@triton.jit(do_not_specialize=["first_word"])
def _sobol_kernel(v_ptr, shift_ptr, out_ptr, n, dims, first_word, SCRAMBLE: tl.constexpr,
                  KIND: tl.constexpr, B: tl.constexpr, LOG_B: tl.constexpr, R: tl.constexpr,
                  BLOCK_D: tl.constexpr):
    """Points base + [0, B·R) (base = the B·R-aligned block of pid 0 containing ``first``, plus pid·B·R)
    in dimensions pid_d·BLOCK_D + [0, BLOCK_D); rows outside [first, first + n) are masked.
    ``first`` < 2³² comes as the int32 holding its bits."""
    first = first_word.to(tl.uint32, bitcast=True).to(tl.int64)
    base = (first // (B * R) + tl.program_id(0)) * (B * R)
    d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    dmask = d < dims
    base_gray = (base ^ (base >> 1)).to(tl.uint32)
    row = _xor_rows(tl.zeros((1,), tl.uint32) + base_gray, v_ptr, dims, d, dmask, 0, 32)  # X(gray(base))
    if SCRAMBLE:
        row = row ^ tl.load(shift_ptr + d, mask=dmask, other=0).to(tl.uint32, bitcast=True)[None, :]
    below = tl.zeros((BLOCK_D,), tl.uint32)  # V[L − 1]: part of every step's change (none if B = 1)
    if LOG_B > 0:
        below = tl.load(v_ptr + (LOG_B - 1) * dims + d, mask=dmask, other=0).to(tl.uint32, bitcast=True)
    p = tl.arange(0, B)
    tile = _xor_rows((p ^ (p >> 1)).to(tl.uint32), v_ptr, dims, d, dmask, 0, LOG_B)  # X(gray(p))
    for r in range(R):
        x = tile ^ row
        if KIND == 0:
            value = x.to(tl.int32, bitcast=True)
        elif KIND == 1:
            value = x.to(tl.float32) * 2.3283064e-10 + 1.1641532e-10
        else:
            value = x.to(tl.float64) * 2.3283064365386963e-10 + 1.1641532182693481e-10
        index = base + r * B + p - first  # output row
        mask = ((index >= 0) & (index < n))[:, None] & dmask[None, :]
        tl.store(out_ptr + index[:, None] * dims + d[None, :], value.to(out_ptr.dtype.element_ty), mask=mask)
        step = (r + 1) & -(r + 1)
        ctz = (step.to(tl.float32).to(tl.int32, bitcast=True) >> 23) - 127  # exact: step is 2^c
        vk = tl.load(v_ptr + (LOG_B + ctz) * dims + d, mask=dmask, other=0)  # LOG_B + ctz < 32: B·R ≤ 2³¹
        row = row ^ (vk.to(tl.uint32, bitcast=True) ^ below)[None, :]


_launch = Launcher(_sobol_kernel)


def launch_sobol(out, directions, shifts, first: int, kind: int,
                 config: SobolConfig) -> None:
    """Fill contiguous (n, dims) ``out`` with points first … first + n − 1; ``directions`` is the
    (32, dims) int32 table (bit k of every dimension in a row). A program writes ``config.steps``
    tiles of about ``config.values`` values (a power-of-two number of points × up to 32 dimensions)."""
    n, dims = out.shape
    block_d = min(next_power_of_2(dims), 32)
    points = max(1, next_power_of_2(config.values) // block_d)
    tile = points * config.steps
    if tile & (tile - 1) or tile > 2**31:
        raise invalid("sobol32 config steps", config.steps, "a power of two (tiles of at most 2^31 points)")
    blocks = (first + n - 1) // tile - first // tile + 1
    _launch((blocks, cdiv(dims, block_d)),
            (directions, shifts if shifts is not None else directions, out, n, dims, word(first)),
            {"SCRAMBLE": shifts is not None, "KIND": kind, "B": points, "LOG_B": points.bit_length() - 1,
             "R": config.steps, "BLOCK_D": block_d}, config.num_warps, 3)


def representative_launch(op: str, config: SobolConfig, dtype: str, num_sms: int) -> None:
    """The launch a draw of 2^15 points in 32 dimensions makes (for pack builds, under capture())."""
    dims = 32
    table = torch.from_numpy(np.ascontiguousarray(direction_numbers()[:dims].T.view(np.int32)))
    kind = 0 if op.endswith("_bits") else (3 if dtype == "fp64" else 1)
    wide = {0: torch.int32, 1: torch.float32, 3: torch.float64}[kind]  # 16-bit draws round an fp32 one
    launch_sobol(torch.empty((1 << 15, dims), dtype=wide), table, None, 0, kind, config)
