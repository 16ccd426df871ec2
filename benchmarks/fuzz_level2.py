"""Random BLAS level-2 calls (gemv, symv, ger, trsv) against fp64 references, for as long as asked:
a check beyond the test suite's examples. Sizes across tile edges, every increment sign, row- and
column-major and strided matrices, batches (3-D A and/or 2-D vectors), fp16 / bf16 / fp32 / fp64,
the written operand (y; A for ger; x for trsv) now and then in another dtype than the rest;
three calls a signature with fresh operands and fresh scalars (α or β zero among them), so that the
second and third replay the first's launches.

What a call must not read is NaN: y when β = 0, symv's other triangle, trsv's other triangle and
its diagonal when it is a unit one. What it must not write stays as it was: the elements between a
written vector's increments, and the rest of the buffer a strided matrix is cut from. Bounds, u the
result's unit roundoff and u' the accumulation's (fp32, or fp64 for fp64):
- gemv and symv: 2u·|want| + 2(n + 2)u'·(|α|·|A|·|x| + |β|·|y|);
- ger: 4u·(|A| + |α|·|x|·|y|ᵀ) (α rounded to the working precision, two products and a sum);
- trsv, through its residual: |op(A)·x − b| ≤ 16(n + 2)u·(|op(A)|·|x| + |b|), on triangles with a
  dominant diagonal;
- each plus 2u·(the smallest normal number): a result among the subnormals is rounded absolutely.

    python benchmarks/fuzz_level2.py [--device cuda] [--seconds 60] [--seed 1] [--max-size N]

Exits non-zero at the first mismatch, printing the case."""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

# this folder is on sys.path when run as a script
from fuzz_loop import matrix, outside, positions, run, same, units

DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


@dataclass(frozen=True)
class Signature:
    """One call's shape: what stays the same over its three calls (so they replay)."""

    op: str
    dtype: torch.dtype
    rows: int
    cols: int
    flag: bool  # gemv / trsv: trans; symv: lower
    lower: bool  # trsv
    unit: bool  # trsv
    incx: int
    incy: int
    layout: str  # "row", "col" or "strided"
    batch: int | None  # vectors 2-D with this many rows
    batched_a: bool  # A 3-D too (always for ger with a batch)
    new_y: bool  # gemv with y = None (β = 0)
    written_dtype: torch.dtype  # of what the call writes (y; A for ger; x for trsv): mixed or not


def _draw(rng: random.Random, max_size: int) -> Signature:
    op = rng.choice(["gemv", "symv", "ger", "trsv"])
    rows, cols = rng.randint(1, max_size), rng.randint(1, max_size)
    if op in ("symv", "trsv"):
        rows = cols
    batch = None if rng.random() < 0.6 else rng.randint(1, 3)
    dtype = rng.choice(DTYPES)
    new_y = op == "gemv" and rng.random() < 0.2
    written = dtype if new_y or rng.random() < 0.7 else rng.choice(DTYPES)
    return Signature(op, dtype, rows, cols, rng.random() < 0.5, rng.random() < 0.5,
                     rng.random() < 0.5, rng.choice([-3, -2, -1, 1, 2]), rng.choice([-2, -1, 1, 3]),
                     rng.choice(["row", "col", "strided"]), batch,
                     batch is not None and (op == "ger" or rng.random() < 0.5),
                     new_y, written)


def _vector(n: int, inc: int, batch: int | None, dtype: torch.dtype, device: str,
            nan: bool = False) -> torch.Tensor:
    length = (n - 1) * abs(inc) + 1
    shape = (length,) if batch is None else (batch, length)
    values = torch.full(shape, float("nan")) if nan else torch.randn(shape, dtype=torch.float64)
    return values.to(dtype).to(device)


def _elements(v: torch.Tensor, n: int, inc: int) -> torch.Tensor:
    """A vector's n elements in BLAS order, in fp64 on the CPU (a batch: one row each)."""
    return v.detach().cpu().double()[..., positions(n, inc)]


def _gaps_kept(before: torch.Tensor, after: torch.Tensor, n: int, inc: int) -> bool:
    """Whether a vector's elements between its increments are as they were."""
    covered = torch.zeros(before.shape[-1], dtype=torch.bool)
    covered[positions(n, inc)] = True
    return same(before[..., ~covered.to(before.device)], after[..., ~covered.to(after.device)])


def _outside_kept(before: torch.Tensor, after: torch.Tensor, view: torch.Tensor) -> bool:
    """Whether a buffer (``after``; ``before`` its clone) is as it was outside ``view``, a view of it."""
    covered = torch.zeros(before.shape, dtype=torch.bool, device=before.device)
    covered.as_strided(view.shape, view.stride(), view.storage_offset()).fill_(True)
    return same(before[~covered], after[~covered])


def _products(a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """A·x with batches broadcast: A (…, r, c), x (…, c) → (…, r)."""
    return (a @ x[..., None])[..., 0]


def _call(s: Signature, device: str, rng: random.Random) -> str | None:
    """One call of ``s`` with fresh operands and scalars; a description of what went wrong, or None."""
    from tessera.blas import gemv, ger, symv, trsv

    u, u_acc = units(s.written_dtype)  # the result's rounding
    if s.dtype != s.written_dtype:  # mixed: fp64 arithmetic only where both are fp64 (or either: looser)
        u_acc = max(u_acc, units(s.dtype)[1])
    alpha = rng.choice([1.0, -0.5, 2.0, 0.0, rng.gauss(0, 1)])
    beta = rng.choice([0.0, 1.0, 0.5, rng.gauss(0, 1)])
    a_batch = s.batch if s.batched_a else None
    a_dtype = s.written_dtype if s.op == "ger" else s.dtype
    a, buffer = matrix(s.rows, s.cols, a_batch, a_dtype, device, s.layout)
    if s.op in ("gemv", "symv"):
        n_out, n_in = (s.cols, s.rows) if s.op == "gemv" and s.flag else (s.rows, s.cols)
        if s.op == "symv":
            full = a.detach().cpu().double()
            keep = torch.ones(s.rows, s.rows, dtype=torch.bool)
            keep = keep.tril() if s.flag else keep.triu()
            with torch.no_grad():
                a.masked_fill_(~keep.to(device), float("nan"))  # the other triangle is not read
            strict = full.tril(-1) if s.flag else full.triu(1)
            op_a = (full.tril() if s.flag else full.triu()) + strict.transpose(-1, -2)
        else:
            op_a = a.detach().cpu().double()
            op_a = op_a.transpose(-1, -2) if s.flag else op_a
        x = _vector(n_in, s.incx, s.batch, s.dtype, device)
        new_y = s.new_y and beta == 0.0
        y = None if new_y else _vector(n_out, s.incy, s.batch, s.written_dtype, device, nan=beta == 0.0)
        y_before = None if y is None else y.clone()
        xs = _elements(x, n_in, s.incx)
        ys = torch.zeros(n_out, dtype=torch.float64) if y is None else _elements(y, n_out, s.incy)
        ys = ys.nan_to_num()  # β = 0: y is NaN, and not read
        want = alpha * _products(op_a, xs) + beta * ys
        magnitude = abs(alpha) * _products(op_a.abs(), xs.abs()) + abs(beta) * ys.abs()
        incy = 1 if new_y else s.incy  # a new y (None) is contiguous
        if s.op == "gemv":
            got = gemv(a, x, y, alpha=alpha, beta=beta, trans=s.flag, incx=s.incx, incy=incy)
        else:
            got = symv(a, x, y, alpha=alpha, beta=beta, lower=s.flag, incx=s.incx, incy=s.incy)
        if y is not None and got is not y:
            return "the result is not y itself"
        if y_before is not None and not _gaps_kept(y_before, y, n_out, s.incy):
            return "an element between y's increments changed"
        got64 = _elements(got, n_out, 1 if y is None else s.incy)
        bound = 2 * u * want.abs() + 2 * (n_in + 2) * u_acc * magnitude
    elif s.op == "ger":
        x = _vector(s.rows, s.incx, s.batch, s.dtype, device)
        y = _vector(s.cols, s.incy, s.batch, s.dtype, device)
        before = buffer.clone()
        a0 = a.detach().cpu().double()
        outer = _elements(x, s.rows, s.incx)[..., :, None] * _elements(y, s.cols, s.incy)[..., None, :]
        want = a0 + alpha * outer
        if ger(alpha, x, y, a, incx=s.incx, incy=s.incy) is not a:
            return "the result is not A itself"
        if not _outside_kept(before, buffer, a):
            return "an element of A's buffer outside A changed"
        got64 = a.detach().cpu().double()
        bound = 4 * u * (a0.abs() + abs(alpha) * outer.abs())  # α rounded, α·x, ·y, + A
    else:  # trsv: x ← op(A)⁻¹ b, checked by its residual
        with torch.no_grad():
            a.div_(s.rows)  # small off the diagonal: well conditioned with a unit diagonal too
            diagonal = torch.diagonal(a, dim1=-2, dim2=-1)
            diagonal.copy_(torch.where(diagonal < 0, -1.0, 1.0) * (1 + diagonal.abs()))
        tri = a.detach().cpu().double()
        tri = tri.tril() if s.lower else tri.triu()
        if s.unit:
            ones = torch.eye(s.rows, dtype=torch.float64)
            tri = tri - torch.diag_embed(tri.diagonal(dim1=-2, dim2=-1)) + ones
        keep = torch.ones(s.rows, s.rows, dtype=torch.bool)
        keep = keep.tril(-1 if s.unit else 0) if s.lower else keep.triu(1 if s.unit else 0)
        with torch.no_grad():
            a.masked_fill_(~keep.to(device), float("nan"))  # the other triangle (and a unit diagonal) unread
        op_a = tri.transpose(-1, -2) if s.flag else tri
        x = _vector(s.rows, s.incx, s.batch, s.written_dtype, device)
        x_before = x.clone()
        b = _elements(x, s.rows, s.incx)
        if trsv(a, x, lower=s.lower, trans=s.flag, unit_diagonal=s.unit, incx=s.incx) is not x:
            return "the result is not x itself"
        if not _gaps_kept(x_before, x, s.rows, s.incx):
            return "an element between x's increments changed"
        solution = _elements(x, s.rows, s.incx)
        got64 = _products(op_a, solution)
        want = b.expand_as(got64)
        coarse = max(u, units(s.dtype)[0])  # A rounded to its dtype, x to its own
        bound = 16 * (s.rows + 2) * coarse * (_products(op_a.abs(), solution.abs()) + want.abs())
    bound = bound + 2 * u * torch.finfo(s.written_dtype).tiny  # subnormal results: rounded absolutely
    if not bool(got64.isfinite().all()):
        return "a NaN or an infinity in the result"
    return outside((got64 - want).abs(), bound)


def main() -> None:
    run(__doc__.split("\n\n")[0], {"level 2": (_draw, _call)}, (140, 1200))


if __name__ == "__main__":
    main()
