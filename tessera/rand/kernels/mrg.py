"""MRG32k3a (L'Ecuyer, Oper. Res. 47 (1999) 159–164): the reference recurrence, with skip-ahead.

Two order-3 recurrences mod m1 = 2³² − 209 and m2 = 2³² − 22853:
    x1[n] = (1403580·x1[n−2] − 810728·x1[n−3]) mod m1
    x2[n] = (527612·x2[n−1] − 1370589·x2[n−3]) mod m2
output u[n] = ((x1[n] − x2[n]) mod m1, with 0 read as m1) / (m1 + 1), in (0, 1) — computed in
fp64 exactly as L'Ecuyer's reference code does (every product stays below 2⁵³; the quotient is
taken with a reciprocal and corrected, which gives the same exact remainder as his division).

Stream layout: the seed gives the initial state (see :func:`seed_state`); subsequence k starts
k·2⁷⁶ steps later (cuRAND's spacing); word offset p is step p of that subsequence. The host
advances the state to the draw's first step; each program lane then produces CHUNK consecutive
values: it jumps to its first position with the precomputed matrices A^(2^j) (exact 64-bit
integer arithmetic, using 2³² ≡ 2³² − m), runs the recurrence, and stores eight values at a time.
"""

from __future__ import annotations

from functools import cache

import torch
import triton
import triton.language as tl

from tessera._core.convert import convert
from tessera._core.launch import Launcher, cdiv, word
from tessera.rand.space import TORCH_DTYPES, MrgConfig

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


@cache
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
def _powers() -> tuple[list, list]:
    """A1^(2^j) and A2^(2^j) for j < JUMP_BITS, as Python integer matrices."""
    tables = []
    for a, m in ((A1, M1), (A2, M2)):
        power = tuple(tuple(x % m for x in row) for row in a)
        table = []
        for _ in range(JUMP_BITS):
            table.append(power)
            power = _mat_mul(power, power, m)
        tables.append(table)
    return tables[0], tables[1]


def state_at(seed: int, subsequence: int, offset: int) -> tuple[int, ...]:
    """The state after ``offset`` steps of the subsequence (one mat-vec per set bit of offset)."""
    state = seed_state(seed, subsequence)
    s1, s2 = state[:3], state[3:]
    p1, p2 = _powers()
    for j in range(offset.bit_length()):
        if offset >> j & 1:
            s1, s2 = _mat_vec(p1[j], s1, M1), _mat_vec(p2[j], s2, M2)
    return (*s1, *s2)


@cache
def _jump_tables(device_key: str) -> torch.Tensor:
    """(2, JUMP_BITS, 9) int64: A1^(2^j) and A2^(2^j), row-major."""
    p1, p2 = _powers()
    rows = [[[x for row in power for x in row] for power in table] for table in (p1, p2)]
    return torch.tensor(rows, dtype=torch.int64, device=device_key)


@triton.jit
def _fold(p, c):
    """p mod m (m = 2³² − c, c < 2¹⁵) for a uint64 p, using 2³² ≡ c: two folds, one subtraction."""
    low = tl.full(p.shape, 0xFFFFFFFF, tl.uint64)
    p = (p >> 32) * c + (p & low)  # < 2⁴⁷ + 2³²
    p = (p >> 32) * c + (p & low)  # < 2¹⁵·c + 2³² < 2m
    m = tl.full(p.shape, 0x100000000, tl.uint64) - c
    return tl.where(p >= m, p - m, p)


@triton.jit
def _row(t_ptr, x0, x1, x2, c):
    """(T[0]·x0 + T[1]·x1 + T[2]·x2) mod (2³² − c) for one matrix row at t_ptr (uint64 lanes)."""
    return _fold(_fold(tl.load(t_ptr).to(tl.uint64) * x0, c) + _fold(tl.load(t_ptr + 1).to(tl.uint64) * x1, c)
                 + _fold(tl.load(t_ptr + 2).to(tl.uint64) * x2, c), c)


@triton.jit
def _apply(t_ptr, x0, x1, x2, c):
    """(x0, x1, x2) ← T · (x0, x1, x2) mod (2³² − c) for the row-major 3×3 matrix at t_ptr."""
    return _row(t_ptr, x0, x1, x2, c), _row(t_ptr + 3, x0, x1, x2, c), _row(t_ptr + 6, x0, x1, x2, c)


@triton.jit
def _mod(p, m, inv_m, round_magic):
    """p mod m for an exact integer-valued fp64 |p| < 2⁵³ (the reference's k = p/m; p −= k·m).

    The quotient is rounded to the nearest integer by adding and subtracting 1.5·2⁵² (two adds
    instead of a floor, which runs at a quarter of the fp64 rate); the fused multiply-add gives the
    exact remainder, in (−m, m) whichever way the quotient rounded, and one correction makes it the
    reference's [0, m)."""
    k = (p * inv_m + round_magic) - round_magic
    r = tl.fma(-k, m, p)
    return tl.where(r < 0, r + m, r)


@triton.jit
def _component(lag, old, A: tl.constexpr, B: tl.constexpr, C: tl.constexpr, INTEGER: tl.constexpr,
               m, inv_m, magic):
    """(A·lag − B·old) mod (2³² − C): one step of a component, exactly.

    fp64 lanes (INTEGER = 0): the reference's arithmetic (see :func:`_mod`). uint32 lanes
    (INTEGER = 1): A·lag + B·(m − old) < 2⁵⁴ with one 32×32→64-bit multiply each, then
    :func:`_fold`; the same remainder on the integer pipes."""
    if INTEGER:  # one return of either type (Triton 3.6 refuses a return in each branch)
        modulus = tl.full(old.shape, 4294967296 - C, tl.uint32)
        result = _fold(lag.to(tl.uint64) * A + (modulus - old).to(tl.uint64) * B, C).to(tl.uint32)
    else:
        result = _mod(A * 1.0 * lag - B * 1.0 * old, m, inv_m, magic)
    return result


@triton.jit
def _step(a10, a11, a12, a20, a21, a22, k, INT1: tl.constexpr, INT2: tl.constexpr):
    """One step of both recurrences (each component in fp64 or uint32 lanes, see :func:`_component`);
    ``k`` holds the fp64 constants (m1, m2, 1/m1, 1/m2, 1/(m1+1), 1.5·2⁵²). Returns the new state
    and the uniform, (p1 − p2 mod m1, 0 read as m1)/(m1 + 1) rounded once, as the reference."""
    m1, m2, inv_m1, inv_m2, norm, magic = k
    p1 = _component(a11, a10, 1403580, 810728, 209, INT1, m1, inv_m1, magic)
    p2 = _component(a22, a20, 527612, 1370589, 22853, INT2, m2, inv_m2, magic)
    if INT1 and INT2:  # p1 − p2 (+ m1) lies in (0, m1]: exact in uint32 wrap-around arithmetic
        d = tl.where(p1 <= p2, p1 - p2 + tl.full(p1.shape, 4294967087, tl.uint32), p1 - p2)
        u = d.to(tl.float64) * norm
    else:
        f1 = p1.to(tl.float64) if INT1 else p1
        f2 = p2.to(tl.float64) if INT2 else p2
        u = tl.where(f1 <= f2, f1 - f2 + m1, f1 - f2) * norm
    return a11, a12, p1, a21, a22, p2, u


@triton.jit
def _transform(u0, u1, mean, std, KIND: tl.constexpr, out_ptr):
    """Two consecutive uniforms → two output values of the kind."""
    if KIND == 0:
        v0 = tl.floor(u0 * 4294967296.0).to(tl.uint32).to(tl.int32, bitcast=True)
        v1 = tl.floor(u1 * 4294967296.0).to(tl.uint32).to(tl.int32, bitcast=True)
        return v0, v1
    if KIND == 2:  # Box–Muller on (u, v): value 2t = s·sin 2πv, 2t+1 = s·cos 2πv
        radius = tl.sqrt(-2.0 * tl.log(u0))
        angle = u1 * tl.full(u1.shape, 6.283185307179586, tl.float64)  # a bare literal would be fp32
        return (convert(radius * tl.sin(angle) * std + mean, out_ptr.dtype.element_ty),
                convert(radius * tl.cos(angle) * std + mean, out_ptr.dtype.element_ty))
    return convert(u0, out_ptr.dtype.element_ty), convert(u1, out_ptr.dtype.element_ty)


@triton.jit
def _word64(zero, word):
    """A 32-bit word passed as the int32 holding its bits, as uint64 lanes."""
    return zero + word.to(tl.uint32, bitcast=True).to(tl.uint64)


@triton.jit
def _lanes(x, INTEGER: tl.constexpr):
    """A component's state word (uint64 < 2³²) in the lanes its arithmetic uses."""
    return x.to(tl.uint32) if INTEGER else x.to(tl.float64)


@triton.jit(do_not_specialize=["first_bit", "last_bit", "s10", "s11", "s12", "s20", "s21", "s22"])
def _mrg_kernel(out_ptr, jump_ptr, n, chunk, first_bit, last_bit, s10, s11, s12, s20, s21, s22,
                mean: tl.float64, std: tl.float64, KIND: tl.constexpr, BLOCK: tl.constexpr,
                JUMPS: tl.constexpr, INT1: tl.constexpr, INT2: tl.constexpr):
    # Float literals are fp32 in Triton and m1, m2 are not fp32 numbers: build fp64 constants.
    m1 = tl.full((BLOCK,), 4294967087.0, tl.float64)
    m2 = tl.full((BLOCK,), 4294944443.0, tl.float64)
    inv_m1 = tl.full((BLOCK,), 1.0 / 4294967087.0, tl.float64)
    inv_m2 = tl.full((BLOCK,), 1.0 / 4294944443.0, tl.float64)
    norm = tl.full((BLOCK,), 2.328306549295727688e-10, tl.float64)  # 1 / (m1 + 1)
    k = (m1, m2, inv_m1, inv_m2, norm, tl.full((BLOCK,), 6755399441055744.0, tl.float64))
    lane = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    start = lane * chunk  # this lane's first value, relative to the state passed in
    zero = tl.zeros((BLOCK,), tl.uint64)
    x10, x11, x12 = _word64(zero, s10), _word64(zero, s11), _word64(zero, s12)
    x20, x21, x22 = _word64(zero, s20), _word64(zero, s21), _word64(zero, s22)
    for j in range(first_bit, last_bit):  # x ← A^(2^j)·x for the set bits of start
        take = ((start >> j) & 1) != 0
        y0, y1, y2 = _apply(jump_ptr + j * 9, x10, x11, x12, 209)
        x10, x11, x12 = tl.where(take, y0, x10), tl.where(take, y1, x11), tl.where(take, y2, x12)
        y0, y1, y2 = _apply(jump_ptr + (JUMPS + j) * 9, x20, x21, x22, 22853)
        x20, x21, x22 = tl.where(take, y0, x20), tl.where(take, y1, x21), tl.where(take, y2, x22)
    a10, a11, a12 = _lanes(x10, INT1), _lanes(x11, INT1), _lanes(x12, INT1)
    a20, a21, a22 = _lanes(x20, INT2), _lanes(x21, INT2), _lanes(x22, INT2)
    column = tl.arange(0, 8)[None, :]
    for g in range(0, chunk // 8):  # eight values, then one (BLOCK, 8) store
        a10, a11, a12, a20, a21, a22, u0 = _step(a10, a11, a12, a20, a21, a22, k, INT1, INT2)
        a10, a11, a12, a20, a21, a22, u1 = _step(a10, a11, a12, a20, a21, a22, k, INT1, INT2)
        a10, a11, a12, a20, a21, a22, u2 = _step(a10, a11, a12, a20, a21, a22, k, INT1, INT2)
        a10, a11, a12, a20, a21, a22, u3 = _step(a10, a11, a12, a20, a21, a22, k, INT1, INT2)
        a10, a11, a12, a20, a21, a22, u4 = _step(a10, a11, a12, a20, a21, a22, k, INT1, INT2)
        a10, a11, a12, a20, a21, a22, u5 = _step(a10, a11, a12, a20, a21, a22, k, INT1, INT2)
        a10, a11, a12, a20, a21, a22, u6 = _step(a10, a11, a12, a20, a21, a22, k, INT1, INT2)
        a10, a11, a12, a20, a21, a22, u7 = _step(a10, a11, a12, a20, a21, a22, k, INT1, INT2)
        v0, v1 = _transform(u0, u1, mean, std, KIND, out_ptr)
        v2, v3 = _transform(u2, u3, mean, std, KIND, out_ptr)
        v4, v5 = _transform(u4, u5, mean, std, KIND, out_ptr)
        v6, v7 = _transform(u6, u7, mean, std, KIND, out_ptr)
        # one (BLOCK, 8) store: Triton spreads each lane's 32 bytes over two threads through shared
        # memory, so every write fills whole 32-byte sectors (two 16-byte stores per lane, one per
        # thread, ran at half the speed on the H200: benchmarks/results/sweep-rand-h200-*.json)
        values = tl.reshape(tl.join(tl.join(tl.join(v0, v4), tl.join(v2, v6)),
                                    tl.join(tl.join(v1, v5), tl.join(v3, v7))), (BLOCK, 8))  # v0 … v7
        index = (start + g * 8)[:, None] + column
        tl.store(out_ptr + index, values, mask=index < n)


_launch = Launcher(_mrg_kernel)


def launch_mrg(out, kind: int, seed: int, subsequence: int, offset: int, mean: float, std: float,
               config: MrgConfig) -> None:
    """Fill contiguous 1-D ``out`` with values from step ``offset`` of the subsequence (``kind``:
    0 words, 1 uniform, 2 normal). Lanes produce ``config.chunk(n)`` consecutive values each: long
    enough to pay for the lane's jump, short enough to leave enough lanes on small draws."""
    n = out.numel()
    chunk = config.chunk(n)
    lanes = cdiv(n, chunk)
    state = [word(x) for x in state_at(seed, subsequence, offset)]
    _launch((cdiv(lanes, config.block),),
            (out, _jump_tables(str(out.device)), n, chunk, chunk.bit_length() - 1,
             (lanes * chunk).bit_length(), *state, float(mean), float(std)),
            {"KIND": kind, "BLOCK": config.block, "JUMPS": JUMP_BITS, "INT1": config.int_m1,
             "INT2": config.int_m2}, config.num_warps, 3)


def representative_launch(op: str, config: MrgConfig, dtype: str, num_sms: int) -> None:
    """The launch a draw of 2^20 values makes (for pack builds, under capture())."""
    out = torch.empty(1 << 20, dtype=TORCH_DTYPES[dtype])
    launch_mrg(out, {"bits": 0, "uniform": 1, "normal": 2}[op.split("_", 1)[1]], 0, 0, 0, 0.0, 1.0, config)
