"""BLAS level 1 kernels: strided vectors given as (pointer, first element, signed increment).

A vector of ``n`` elements is read at ``start + i·inc`` (element units of the tensor passed in), so
BLAS's negative increments (the vector walked from its far end) and zero increments need no copy.
A batch of such vectors (rocBLAS's strided-batched routines) adds ``b·batch_step`` for entry b: a
vector argument is (tensor, start, inc) or (tensor, start, inc, batch_step), batch step 0 reading
the same vector for every entry. The grid is the entries' programs one after another (axis 0:
program p of entry p // P, P = the programs one vector needs), so one binary serves any batch.
Arithmetic runs in fp32 for 16-bit and fp32 data and in fp64 for fp64 data; complex vectors come as
their real view (re, im interleaved; the caller doubles the increments).

``_map_kernel`` serves the element-wise routines (axpy, scal, copy, swap, rot); ``_reduce_kernel``
writes one partial result per program (dot, dotc, asum; nrm2's three sums of Blue's algorithm,
from plain squares where they cannot have overflowed or underflowed), which the caller combines
in a fixed order, so results are deterministic;
``_extreme_kernel`` gives each program's first index of the largest (or smallest) |x| for
iamax/iamin.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from tessera._core.convert import convert, scalar
from tessera._core.device import torch_dtype
from tessera._core.errors import InvalidArgumentError
from tessera._core.launch import Launcher, cdiv, scratch

AXPY, SCAL, COPY, SWAP, ROT = 0, 1, 2, 3, 4
DOT, ASUM, NRM2 = 0, 1, 2


@dataclass(frozen=True)
class VectorConfig:
    """Launch parameters of the level-1 kernels (the tuner forks over these): ``block`` elements
    a step, ``iters`` steps a program (the reductions and iamax/iamin; the element-wise kernel does
    one step), ``num_warps``. Reductions add a program's partial in a fixed order, so a config
    changes the rounding of dot/asum/nrm2 (as the block size does in any BLAS), never the result of
    the others."""

    block: int = 1024
    iters: int = 8
    num_warps: int = 4

    kernel = "level1"

    def short(self) -> str:
        return f"{self.kernel} block {self.block} x{self.iters} w{self.num_warps}"


@triton.jit
def _wide(v, FP64: tl.constexpr):
    """A tensor in the arithmetic dtype."""
    return v.to(tl.float64) if FP64 else v.to(tl.float32)


@triton.jit
def _arg(v, FP64: tl.constexpr):
    """A float argument in the arithmetic dtype (``convert.scalar``: exact in fp64 everywhere)."""
    return scalar(v, tl.float64) if FP64 else scalar(v, tl.float32)


@triton.jit
def batch_entry(per_entry):
    """(batch entry, program within it) of this program along grid axis 0, where each entry of a
    batch takes ``per_entry`` programs, the entries one after another (``batch_grid``)."""
    pid = tl.program_id(0)  # 32-bit division where per_entry is 32-bit (the grid is under 2³¹)
    b = pid // per_entry
    return b.to(tl.int64), (pid - b * per_entry).to(tl.int64)


@triton.jit
def _map_kernel(x_ptr, y_ptr, n, x_start, incx, y_start, incy, x_batch, y_batch, alpha: tl.float64,
                beta: tl.float64, OP: tl.constexpr, FP64: tl.constexpr, BLOCK: tl.constexpr):
    b, pid = batch_entry(tl.cdiv(n, BLOCK))
    i = pid * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    xi = x_start + b * x_batch + i * incx
    yi = y_start + b * y_batch + i * incy
    x = tl.load(x_ptr + xi, mask=mask)
    a = _arg(alpha, FP64)
    if OP == 0:  # axpy: y ← αx + y
        y = tl.load(y_ptr + yi, mask=mask)
        tl.store(y_ptr + yi, convert(a * _wide(x, FP64) + _wide(y, FP64), y.dtype), mask=mask)
    elif OP == 1:  # scal: x ← αx
        tl.store(x_ptr + xi, convert(a * _wide(x, FP64), x.dtype), mask=mask)
    elif OP == 2:  # copy: y ← x
        tl.store(y_ptr + yi, convert(x, y_ptr.dtype.element_ty), mask=mask)
    elif OP == 3:  # swap
        y = tl.load(y_ptr + yi, mask=mask)
        tl.store(x_ptr + xi, y, mask=mask)
        tl.store(y_ptr + yi, x, mask=mask)
    else:  # rot: (x, y) ← (c·x + s·y, c·y − s·x), c = alpha, s = beta
        y = tl.load(y_ptr + yi, mask=mask)
        s = _arg(beta, FP64)
        xw, yw = _wide(x, FP64), _wide(y, FP64)
        tl.store(x_ptr + xi, convert(a * xw + s * yw, x.dtype), mask=mask)
        tl.store(y_ptr + yi, convert(a * yw - s * xw, y.dtype), mask=mask)


@triton.jit
def _blue_constants(FP64: tl.constexpr):
    """Blue's thresholds and scales (LAPACK 3.10's xNRM2; Anderson, ACM TOMS Algorithm 978) for
    the arithmetic dtype: |x| < tsml is summed as (x·ssml)², |x| > tbig as (x·sbig)², the rest as
    x² — no square overflows or underflows, and no division. (The values are powers of two;
    ``tl.full`` keeps the fp64 ones out of fp32 literals.)"""
    if FP64:
        tsml = tl.full((1,), 2.0**-511, tl.float64)
        tbig = tl.full((1,), 2.0**486, tl.float64)
        ssml = tl.full((1,), 2.0**537, tl.float64)
        sbig = tl.full((1,), 2.0**-538, tl.float64)
    else:
        tsml = tl.full((1,), 2.0**-63, tl.float32)
        tbig = tl.full((1,), 2.0**52, tl.float32)
        ssml = tl.full((1,), 2.0**75, tl.float32)
        sbig = tl.full((1,), 2.0**-76, tl.float32)
    return tsml, tbig, ssml, sbig


@triton.jit
def _blue_add(v, small, medium, big, FP64: tl.constexpr):
    """Add v's squares to the three accumulators (a NaN lands in ``medium``: it propagates)."""
    tsml, tbig, ssml, sbig = _blue_constants(FP64)
    a = tl.abs(v)
    is_big = a > tbig
    is_small = a < tsml
    zero = tl.zeros_like(v)
    small += tl.where(is_small, (v * ssml) * (v * ssml), zero)
    big += tl.where(is_big, (v * sbig) * (v * sbig), zero)
    medium += tl.where(is_small | is_big, zero, v * v)
    return small, medium, big


@triton.jit
def _squares_trusted(squares, COUNT: tl.constexpr, FP64: tl.constexpr):
    """Whether a plain sum of at most COUNT squares equals what Blue's three sums would give within
    rounding: no square passed Blue's medium range (sum ≤ tbig²), and the squares that underflow
    (each below tsml²) add up to less than the sum's last bit (sum ≥ COUNT·tsml²/ε). NaN fails."""
    tsml, tbig, _, _ = _blue_constants(FP64)
    scale = COUNT * (2.0**53 if FP64 else 2.0**24)  # COUNT / ε
    ok = (squares <= tbig * tbig) & (squares >= (tsml * tsml) * scale)
    return tl.max(ok.to(tl.int32), 0) > 0


@triton.jit
def _x_block(x_ptr, n, x_start, incx, it, pid, P, COMPLEX: tl.constexpr, FP64: tl.constexpr,
             BLOCK: tl.constexpr, POLICY: tl.constexpr):
    """Block ``it`` of program pid's grid-stride walk (blocks pid, pid + P, …): its element
    indices, their mask, and x there in the arithmetic dtype — real part, imaginary part (for real
    data the real part again); loaded with eviction policy POLICY ("" or "evict_first")."""
    i = (it * P + pid) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    xi = x_start + i * incx
    xr = _wide(tl.load(x_ptr + xi, mask=mask, other=0, eviction_policy=POLICY), FP64)
    if COMPLEX:
        xm = _wide(tl.load(x_ptr + xi + 1, mask=mask, other=0, eviction_policy=POLICY), FP64)
    else:
        xm = xr
    return i, mask, xr, xm


@triton.jit
def _blue_pass(x_ptr, n, x_start, incx, pid, P, COMPLEX: tl.constexpr, FP64: tl.constexpr,
               BLOCK: tl.constexpr, ITERS: tl.constexpr):
    """Blue's three sums (small, medium, big) over the blocks ``_reduce_kernel`` gives program pid."""
    small = tl.zeros((BLOCK,), tl.float64 if FP64 else tl.float32)
    medium = tl.zeros((BLOCK,), tl.float64 if FP64 else tl.float32)
    big = tl.zeros((BLOCK,), tl.float64 if FP64 else tl.float32)
    for it in range(ITERS):
        _, _, xr, xm = _x_block(x_ptr, n, x_start, incx, it, pid, P, COMPLEX, FP64, BLOCK, "")
        small, medium, big = _blue_add(xr, small, medium, big, FP64)
        if COMPLEX:
            small, medium, big = _blue_add(xm, small, medium, big, FP64)
    return tl.sum(small, 0), tl.sum(medium, 0), tl.sum(big, 0)


@triton.jit
def _reduce_kernel(x_ptr, y_ptr, part_ptr, n, x_start, incx, y_start, incy, x_batch, y_batch,
                   OP: tl.constexpr, COMPLEX: tl.constexpr, CONJ: tl.constexpr, FP64: tl.constexpr,
                   BLOCK: tl.constexpr, ITERS: tl.constexpr):
    """Partial of program p of batch entry b over blocks p, p + P, …, p + (ITERS − 1)·P of BLOCK
    elements (P programs an entry: the programs running at once read neighbouring blocks, a
    grid-stride walk) into part[0, b, p] (part laid out (kind, entry, program)); a complex dot
    also writes its imaginary part to part[1, b, p]. Each lane keeps its own sums, so the loop
    has no cross-lane step.

    NRM2 writes Blue's three sums (small, medium, big: see ``_blue_constants``) to part[0, b, p],
    part[1, b, p], part[2, b, p]. It first sums plain squares (one multiply-add per element, as dot);
    when ``_squares_trusted`` holds — all but vectors with elements near the overflow or
    underflow thresholds — that sum is the medium one and the others are zero; otherwise the
    program reads its blocks again for Blue's sums.

    asum's and nrm2's x is loaded ``evict_first`` (each element is read once, so L2 need not keep
    it): nrm2 at 2^26 fp32 68.6 → 66.4 µs graph-replayed, 81.5 → 78.6–78.9 flushed (0.97 → 1.00×
    torch), asum 64.1 → 63.9 and 77.3 → 76.4–76.6. dot's two vectors keep the default: 123.1 →
    121.9 µs replayed but 136.3 → 139.4–139.8 flushed (l1-hints-h200-7171676/)."""
    P = tl.cdiv(n, BLOCK * ITERS)  # an entry's programs (a constant where n is: Triton specializes 1)
    b, pid = batch_entry(P)
    x_start += b * x_batch
    y_start += b * y_batch
    kind = tl.num_programs(0).to(tl.int64)  # the partials of one kind: P for each entry
    part_ptr += b * P
    acc = tl.zeros((BLOCK,), tl.float64 if FP64 else tl.float32)
    acc_im = tl.zeros((BLOCK,), tl.float64 if FP64 else tl.float32)
    POLICY: tl.constexpr = "" if OP == 0 else "evict_first"
    for it in range(ITERS):
        i, mask, xr, xm = _x_block(x_ptr, n, x_start, incx, it, pid, P, COMPLEX, FP64, BLOCK, POLICY)
        if OP == 0:
            yi = y_start + i * incy
            yr = _wide(tl.load(y_ptr + yi, mask=mask, other=0), FP64)
            if COMPLEX:
                ym = _wide(tl.load(y_ptr + yi + 1, mask=mask, other=0), FP64)
                if CONJ:
                    xm = -xm
                acc += xr * yr - xm * ym
                acc_im += xr * ym + xm * yr
            else:
                acc += xr * yr
        elif OP == 1:
            acc += tl.abs(xr)
            if COMPLEX:
                acc += tl.abs(xm)
        else:  # NRM2: plain squares, checked below
            acc += xr * xr
            if COMPLEX:
                acc += xm * xm
    total = tl.sum(acc, 0)
    if OP == 2:
        zero = tl.sum(tl.zeros((BLOCK,), tl.float64 if FP64 else tl.float32), 0)
        if _squares_trusted(total, BLOCK * ITERS * (2 if COMPLEX else 1), FP64):
            small, medium, big = zero, total, zero
        else:
            small, medium, big = _blue_pass(x_ptr, n, x_start, incx, pid, P, COMPLEX, FP64, BLOCK, ITERS)
        tl.store(part_ptr + pid, small)
        tl.store(part_ptr + kind + pid, medium)
        tl.store(part_ptr + 2 * kind + pid, big)
    else:
        tl.store(part_ptr + pid, total)
        if COMPLEX and OP == 0:
            tl.store(part_ptr + kind + pid, tl.sum(acc_im, 0))


@triton.jit
def _nrm2_finish_kernel(part_ptr, out_ptr, P, FP64: tl.constexpr, BLOCK: tl.constexpr):
    """One program a batch entry: Blue's three sums over the entry's P partials (fixed order),
    combined as LAPACK's xNRM2 does: the big sum with the medium one scaled in, else the small and
    medium square roots by the larger, else the medium sum alone."""
    b = tl.program_id(0).to(tl.int64)
    kind = tl.num_programs(0).to(tl.int64) * P  # the partials of one kind: P for each entry
    part_ptr += b * P
    small = tl.sum(tl.zeros((BLOCK,), part_ptr.dtype.element_ty), 0)
    medium = small
    big = small
    for start in range(0, P, BLOCK):
        j = start + tl.arange(0, BLOCK)
        small += tl.sum(tl.load(part_ptr + j, mask=j < P, other=0), 0)
        medium += tl.sum(tl.load(part_ptr + kind + j, mask=j < P, other=0), 0)
        big += tl.sum(tl.load(part_ptr + 2 * kind + j, mask=j < P, other=0), 0)
    _, _, ssml, sbig = _blue_constants(FP64)
    medium_counts = (medium > 0) | (medium != medium)
    from_big = tl.sqrt(big + tl.where(medium_counts, (medium * sbig) * sbig, 0.0)) / sbig
    root_medium, root_small = tl.sqrt(medium), tl.sqrt(small) / ssml
    high, low = tl.maximum(root_medium, root_small), tl.minimum(root_medium, root_small)
    ratio = low / tl.where(high > 0, high, 1.0)
    from_small = tl.where(medium_counts, high * tl.sqrt(1.0 + ratio * ratio), root_small)
    result = tl.where(big > 0, from_big, tl.where(small > 0, from_small, root_medium))
    result = tl.where(medium != medium, medium, result)  # a NaN anywhere: NaN
    tl.store(out_ptr + b + tl.arange(0, 1), result)


@triton.jit
def _extreme_kernel(x_ptr, val_ptr, idx_ptr, n, x_start, incx, x_batch, LARGEST: tl.constexpr,
                    COMPLEX: tl.constexpr, FP64: tl.constexpr, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    """Per program: the extreme |x| (|re| + |im| for complex, as BLAS) and its first index over
    one contiguous chunk of ITERS blocks (the reductions' grid-stride walk showed no gain here
    on the H200: a budget-limited tuning of it, 39 of 61 shapes at 2^26, reached 3500 GB/s
    against the contiguous chunks' 3644, 469c61b). Lanes track the position within the
    program in 32 bits (BLOCK·ITERS < 2³¹) and add the program's first index once. x is loaded
    ``evict_first``, as asum's: iamax at 2^26 fp32 67.8 → 66.1–66.2 µs graph-replayed, 80.7 →
    80.2–80.4 flushed (l1-hints-h200-7171676/). Batch entry b's programs write val[b, p], idx[b, p]."""
    b, pid = batch_entry(tl.cdiv(n, BLOCK * ITERS))
    x_start += b * x_batch
    best = tl.full((BLOCK,), float("-inf") if LARGEST else float("inf"),
                   tl.float64 if FP64 else tl.float32)
    NONE: tl.constexpr = BLOCK * ITERS  # past every position of the program
    where_best = tl.full((BLOCK,), NONE, tl.int32)
    for it in range(ITERS):
        local = it * BLOCK + tl.arange(0, BLOCK)
        i = pid * (BLOCK * ITERS) + local
        mask = i < n
        xi = x_start + i * incx
        v = tl.abs(_wide(tl.load(x_ptr + xi, mask=mask, other=0, eviction_policy="evict_first"), FP64))
        if COMPLEX:
            im = tl.load(x_ptr + xi + 1, mask=mask, other=0, eviction_policy="evict_first")
            v += tl.abs(_wide(im, FP64))
        better = (v > best) if LARGEST else (v < best)
        better = better & mask
        best = tl.where(better, v, best)
        where_best = tl.where(better, local, where_best)
    extreme = tl.max(best, 0) if LARGEST else tl.min(best, 0)
    tl.store(val_ptr + tl.program_id(0), extreme)
    first = tl.min(tl.where(best == extreme, where_best, NONE), 0)
    # a program whose values are all NaN keeps NONE: past every index, as the int64 sentinel was
    tl.store(idx_ptr + tl.program_id(0), tl.where(first == NONE, 2**62, pid * (BLOCK * ITERS) + first))


@triton.jit(do_not_specialize=["count"])
def _extreme_finish_kernel(val_ptr, idx_ptr, x_ptr, x_start, x_batch, out_ptr, count, LARGEST: tl.constexpr,
                           COMPLEX: tl.constexpr, BLOCK: tl.constexpr):
    """One program a batch entry: the first index among the entry's ``count`` programs whose
    extreme is the extreme of all (one pass over the partials in a fixed order: each lane keeps its
    extreme and the first index holding it), as int64. NaNs never win a comparison, as in the
    reference BLAS loop, which also starts from |x₀|: a NaN there wins outright (index 0)."""
    b = tl.program_id(0).to(tl.int64)
    val_ptr += b * count
    idx_ptr += b * count
    x_start += b * x_batch
    none = tl.full((BLOCK,), float("-inf") if LARGEST else float("inf"), val_ptr.dtype.element_ty)
    past = tl.full((BLOCK,), 2**62, tl.int64)  # what a program without a comparable value stores
    best = none
    first = past
    for start in range(0, count, BLOCK):
        j = start + tl.arange(0, BLOCK)
        v = tl.load(val_ptr + j, mask=j < count, other=none)
        w = tl.load(idx_ptr + j, mask=j < count, other=2**62)
        better = v > best if LARGEST else v < best
        first = tl.where(better, w, tl.where(v == best, tl.minimum(first, w), first))
        best = tl.where(better, v, best)
    extreme = tl.max(best, 0) if LARGEST else tl.min(best, 0)
    first = tl.min(tl.where(best == extreme, first, past), 0)
    x0 = tl.load(x_ptr + x_start + tl.arange(0, 1))
    nan_first = x0 != x0
    if COMPLEX:
        im0 = tl.load(x_ptr + x_start + 1 + tl.arange(0, 1))
        nan_first = nan_first | (im0 != im0)
    tl.store(out_ptr + b + tl.arange(0, 1), tl.where(nan_first, 0, first))


map_launch = Launcher(_map_kernel)
reduce_launch = Launcher(_reduce_kernel)
nrm2_finish_launch = Launcher(_nrm2_finish_kernel)
extreme_launch = Launcher(_extreme_kernel)
extreme_finish_launch = Launcher(_extreme_finish_kernel)


def programs(n: int, per_program: int) -> int:
    return max(1, cdiv(n, per_program))


StridedVector = tuple  # (tensor, first element, increment[, batch step]): see the module docstring


def vector_parts(v: StridedVector) -> tuple[torch.Tensor, int, int, int]:
    """(tensor, first, increment, batch step) of a vector argument (batch step 0 when not given)."""
    return (v[0], v[1], v[2], v[3] if len(v) > 3 else 0)


def batch_grid(batch: int, per_entry: int) -> int:
    """Grid axis 0's programs for ``batch`` entries of ``per_entry`` programs each, one entry after
    another (Triton's limit: 2³¹ − 1)."""
    total = batch * per_entry
    if total >= 2**31:
        raise InvalidArgumentError(f"{batch} batch entries of {per_entry} programs each exceed a launch's "
                                   f"2^31 - 1 programs; expected fewer entries a call (split the batch)")
    return total


def launch_map(op: int, x: StridedVector, y: StridedVector, n: int, alpha: float, beta: float, *,
               fp64: bool, config: VectorConfig, batch: int = 1) -> None:
    """The element-wise routine ``op`` on n elements of each of ``batch`` pairs of vectors."""
    (xd, xs, xi, xb), (yd, ys, yi, yb) = vector_parts(x), vector_parts(y)
    map_launch((batch_grid(batch, programs(n, config.block)),),
               (xd, yd, n, xs, xi, ys, yi, xb, yb, alpha, beta),
               {"OP": op, "FP64": fp64, "BLOCK": config.block}, config.num_warps, 3)


def launch_reduce(op: int, x: StridedVector, y: StridedVector, n: int, *, complex_: bool, conj: bool,
                  fp64: bool, config: VectorConfig, batch: int = 1) -> torch.Tensor:
    """The reduction ``op`` of n elements of each of ``batch`` vectors as partials, laid out
    (kind, entry, program): nrm2 three kinds (a view of a kept scratch buffer: only
    :func:`launch_nrm2_finish` reads them), a complex dot two, else one (a new tensor, which a
    dot's or asum's result may be a view of)."""
    (xd, xs, xi, xb), (yd, ys, yi, yb) = vector_parts(x), vector_parts(y)
    count = programs(n, config.block * config.iters)
    shape = (3 if op == NRM2 else 2 if complex_ and op == DOT else 1, batch, count)
    wide = torch.float64 if fp64 else torch.float32
    if op == NRM2:
        size = shape[0] * batch * count
        parts = scratch("nrm2 partials", size, wide, xd.device, False)[:size].view(shape)
    else:
        parts = torch.empty(shape, dtype=wide, device=xd.device)
    reduce_launch((batch_grid(batch, count),), (xd, yd, parts, n, xs, xi, ys, yi, xb, yb),
                  {"OP": op, "COMPLEX": complex_, "CONJ": conj, "FP64": fp64, "BLOCK": config.block,
                   "ITERS": config.iters}, config.num_warps, 3)
    return parts


def launch_nrm2_finish(parts: torch.Tensor, *, fp64: bool) -> torch.Tensor:
    """nrm2 of each batch entry from ``launch_reduce``'s partials (kind, entry, program), as a
    tensor of one value an entry."""
    result = torch.empty(parts.shape[1], dtype=parts.dtype, device=parts.device)
    nrm2_finish_launch((parts.shape[1],), (parts, result, parts.shape[2]), {"FP64": fp64, "BLOCK": 1024},
                       4, 3)
    return result


def launch_extreme(x: StridedVector, n: int, largest: bool, *, complex_: bool, fp64: bool,
                   config: VectorConfig, batch: int = 1) -> torch.Tensor:
    """The 0-based index of the first extreme |x| of each of ``batch`` vectors (x with a positive
    step) as an int64 tensor of one index an entry: each program's extreme and its first index,
    then one program an entry that picks among them (the pick was four torch operations, four
    launches, before)."""
    xd, xs, xi, xb = vector_parts(x)
    count = programs(n, config.block * config.iters)
    wide = torch.float64 if fp64 else torch.float32  # each program's extreme and where: kept scratch
    values = scratch("extreme values", batch * count, wide, xd.device, False)[:batch * count]
    where = scratch("extreme indices", batch * count, torch.int64, xd.device, False)[:batch * count]
    extreme_launch((batch_grid(batch, count),), (xd, values, where, n, xs, xi, xb),
                   {"LARGEST": largest, "COMPLEX": complex_, "FP64": fp64, "BLOCK": config.block,
                    "ITERS": config.iters}, config.num_warps, 3)
    index = torch.empty(batch, dtype=torch.int64, device=xd.device)
    extreme_finish_launch((batch,), (values, where, xd, xs, xb, index, count),
                          {"LARGEST": largest, "COMPLEX": complex_, "BLOCK": 1024}, 4, 1)
    return index


# op (logic file) → the routines it serves: what a pack precompiles for each configuration
LEVEL1_OPS = {"level1_map": (AXPY, SCAL, COPY, ROT), "level1_swap": (SWAP,),
              "level1_reduce": (DOT, ASUM, NRM2), "level1_extreme": (True, False)}
ELEMENTWISE_OPS = ("level1_map", "level1_swap")  # the ops :func:`launch_map` serves
REPRESENTATIVE_N = (1 << 20, (1 << 20) - 3)  # a length multiple of 16 and one that is not


def representative_launch(op: str, config: VectorConfig, dtype: str, num_sms: int) -> None:
    """The launches op's routines make with ``config`` on contiguous vectors (unit increments) of
    each length in REPRESENTATIVE_N; complex dtypes for the reductions and iamax/iamin (run under
    ``tessera._core.launch.capture()``: pack builds precompile what it records)."""
    complex_ = dtype.startswith("complex")
    elem = torch_dtype(dtype).to_real()  # a complex vector is launched as its real view
    fp64 = elem == torch.float64
    for n in REPRESENTATIVE_N:
        x = torch.empty(2 * n if complex_ else n, dtype=elem)
        y = torch.empty_like(x)
        step = 2 if complex_ else 1
        for routine in LEVEL1_OPS[op]:
            if op in ELEMENTWISE_OPS:
                launch_map(routine, (x, 0, 1), (y, 0, 1), n, 1.5, 0.5, fp64=fp64, config=config)
            elif op == "level1_reduce":
                conjugates = (False, True) if complex_ and routine == DOT else (False,)
                for conj in conjugates:
                    parts = launch_reduce(routine, (x, 0, step), (y, 0, step), n, complex_=complex_,
                                          conj=conj, fp64=fp64, config=config)
                    if routine == NRM2:
                        launch_nrm2_finish(parts, fp64=fp64)
            else:
                launch_extreme((x, 0, step), n, routine, complex_=complex_, fp64=fp64, config=config)
