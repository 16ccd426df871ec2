"""BLAS level 1 kernels: strided vectors given as (pointer, first element, signed increment).

A vector of ``n`` elements is read at ``start + i·inc`` (element units of the tensor passed in), so
BLAS's negative increments (the vector walked from its far end) and zero increments need no copy.
Arithmetic runs in fp32 for 16-bit and fp32 data and in fp64 for fp64 data; complex vectors come as
their real view (re, im interleaved; the caller doubles the increments).

``_map_kernel`` serves the element-wise routines (axpy, scal, copy, swap, rot); ``_reduce_kernel``
writes one partial result per program (dot, dotc, asum; nrm2's largest |x| and scaled sum of
squares), which the caller combines in a fixed order, so results are deterministic;
``_extreme_kernel`` gives each program's first index of the largest (or smallest) |x| for
iamax/iamin.
"""

from __future__ import annotations

import triton
import triton.language as tl

from tessera._core.launch import Launcher, cdiv

AXPY, SCAL, COPY, SWAP, ROT = 0, 1, 2, 3, 4
DOT, ASUM, NRM2 = 0, 1, 2
BLOCK = 1024
ITERS = 8  # reductions: BLOCK·ITERS elements a program


@triton.jit
def _wide(v, FP64: tl.constexpr):
    """A tensor in the arithmetic dtype."""
    return v.to(tl.float64) if FP64 else v.to(tl.float32)


@triton.jit
def _arg(v, FP64: tl.constexpr):
    """A float argument in the arithmetic dtype, as a 1-element tensor (``tl.full`` keeps an fp64
    argument exact in the interpreter too, where a cast would round it through fp32)."""
    return tl.full((1,), v, tl.float64) if FP64 else tl.full((1,), v, tl.float32)


@triton.jit
def _map_kernel(x_ptr, y_ptr, n, x_start, incx, y_start, incy, alpha: tl.float64, beta: tl.float64,
                OP: tl.constexpr, FP64: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    xi = x_start + i * incx
    yi = y_start + i * incy
    x = tl.load(x_ptr + xi, mask=mask)
    a = _arg(alpha, FP64)
    if OP == 0:  # axpy: y ← αx + y
        y = tl.load(y_ptr + yi, mask=mask)
        tl.store(y_ptr + yi, (a * _wide(x, FP64) + _wide(y, FP64)).to(y.dtype), mask=mask)
    elif OP == 1:  # scal: x ← αx
        tl.store(x_ptr + xi, (a * _wide(x, FP64)).to(x.dtype), mask=mask)
    elif OP == 2:  # copy: y ← x
        tl.store(y_ptr + yi, x.to(y_ptr.dtype.element_ty), mask=mask)
    elif OP == 3:  # swap
        y = tl.load(y_ptr + yi, mask=mask)
        tl.store(x_ptr + xi, y, mask=mask)
        tl.store(y_ptr + yi, x, mask=mask)
    else:  # rot: (x, y) ← (c·x + s·y, c·y − s·x), c = alpha, s = beta
        y = tl.load(y_ptr + yi, mask=mask)
        s = _arg(beta, FP64)
        xw, yw = _wide(x, FP64), _wide(y, FP64)
        tl.store(x_ptr + xi, (a * xw + s * yw).to(x.dtype), mask=mask)
        tl.store(y_ptr + yi, (a * yw - s * xw).to(y.dtype), mask=mask)


@triton.jit
def _reduce_kernel(x_ptr, y_ptr, part_ptr, n, x_start, incx, y_start, incy,
                   OP: tl.constexpr, COMPLEX: tl.constexpr, CONJ: tl.constexpr, FP64: tl.constexpr,
                   BLOCK: tl.constexpr, ITERS: tl.constexpr):
    """Partial of program p over elements [p·BLOCK·ITERS, (p+1)·BLOCK·ITERS) into part[p]; a complex
    dot also writes its imaginary part, and NRM2 its scaled sum, to part[P + p] (P programs).

    NRM2 keeps (m, s) with m the largest |x| so far and s = Σ (x/m)², rescaled when m grows (once
    per BLOCK elements): one pass, and no square overflows or underflows."""
    pid = tl.program_id(0).to(tl.int64)
    acc = tl.zeros((BLOCK,), tl.float64 if FP64 else tl.float32)
    acc_im = tl.zeros((BLOCK,), tl.float64 if FP64 else tl.float32)
    largest = tl.sum(acc, 0)  # NRM2: m and s, scalars
    scaled = tl.sum(acc, 0)
    for it in range(ITERS):
        i = (pid * ITERS + it) * BLOCK + tl.arange(0, BLOCK)
        mask = i < n
        xi = x_start + i * incx
        xr = _wide(tl.load(x_ptr + xi, mask=mask, other=0), FP64)
        if COMPLEX:
            xm = _wide(tl.load(x_ptr + xi + 1, mask=mask, other=0), FP64)
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
        else:
            block_max = tl.max(tl.abs(xr), 0)
            if COMPLEX:
                block_max = tl.maximum(block_max, tl.max(tl.abs(xm), 0))
            grown = tl.maximum(largest, block_max)
            inv = 1.0 / tl.where(grown > 0, grown, 1.0)  # 0 only while every x so far is 0
            block = tl.sum((xr * inv) * (xr * inv), 0)
            if COMPLEX:
                block += tl.sum((xm * inv) * (xm * inv), 0)
            scaled = scaled * ((largest * inv) * (largest * inv)) + block
            largest = grown
    if OP == 2:
        tl.store(part_ptr + pid, largest)
        tl.store(part_ptr + tl.num_programs(0) + pid, scaled)
    else:
        tl.store(part_ptr + pid, tl.sum(acc, 0))
        if COMPLEX and OP == 0:
            tl.store(part_ptr + tl.num_programs(0) + pid, tl.sum(acc_im, 0))


@triton.jit
def _nrm2_finish_kernel(part_ptr, out_ptr, P, BLOCK: tl.constexpr):
    """One program: m = max m_p, then m·sqrt(Σ s_p (m_p/m)²) over the P partials."""
    largest = tl.max(tl.load(part_ptr + tl.arange(0, BLOCK), mask=tl.arange(0, BLOCK) < P, other=0), 0)
    for start in range(BLOCK, P, BLOCK):
        j = start + tl.arange(0, BLOCK)
        largest = tl.maximum(largest, tl.max(tl.load(part_ptr + j, mask=j < P, other=0), 0))
    inv = 1.0 / tl.where(largest > 0, largest, 1.0)
    total = tl.sum(tl.zeros((BLOCK,), part_ptr.dtype.element_ty), 0)
    for start in range(0, P, BLOCK):
        j = start + tl.arange(0, BLOCK)
        m = tl.load(part_ptr + j, mask=j < P, other=0) * inv
        total += tl.sum(tl.load(part_ptr + P + j, mask=j < P, other=0) * m * m, 0)
    tl.store(out_ptr, largest * tl.sqrt(total))


@triton.jit
def _extreme_kernel(x_ptr, val_ptr, idx_ptr, n, x_start, incx, LARGEST: tl.constexpr,
                    COMPLEX: tl.constexpr, FP64: tl.constexpr, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    """Per program: the extreme |x| (|re| + |im| for complex, as BLAS) and its first index."""
    pid = tl.program_id(0).to(tl.int64)
    best = tl.full((BLOCK,), float("-inf") if LARGEST else float("inf"),
                   tl.float64 if FP64 else tl.float32)
    where_best = tl.full((BLOCK,), 2**62, tl.int64)
    for it in range(ITERS):
        i = (pid * ITERS + it) * BLOCK + tl.arange(0, BLOCK)
        mask = i < n
        xi = x_start + i * incx
        v = tl.abs(_wide(tl.load(x_ptr + xi, mask=mask, other=0), FP64))
        if COMPLEX:
            v += tl.abs(_wide(tl.load(x_ptr + xi + 1, mask=mask, other=0), FP64))
        better = (v > best) if LARGEST else (v < best)
        better = better & mask
        best = tl.where(better, v, best)
        where_best = tl.where(better, i, where_best)
    extreme = tl.max(best, 0) if LARGEST else tl.min(best, 0)
    tl.store(val_ptr + pid, extreme)
    tl.store(idx_ptr + pid, tl.min(tl.where(best == extreme, where_best, 2**62), 0))


map_launch = Launcher(_map_kernel)
reduce_launch = Launcher(_reduce_kernel)
nrm2_finish_launch = Launcher(_nrm2_finish_kernel)
extreme_launch = Launcher(_extreme_kernel)


def programs(n: int, per_program: int) -> int:
    return max(1, cdiv(n, per_program))
