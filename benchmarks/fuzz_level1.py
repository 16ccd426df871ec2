"""Random BLAS level-1 calls (axpy, scal, copy, swap, rot, dot, dotc, nrm2, asum, iamax, iamin)
against the reference BLAS's rules in fp64, for as long as asked: a check beyond the test suite's
examples. Lengths across block edges, every increment sign and zero (the reference's sequential
results), vectors strided inside bigger buffers, batches (2-D vectors, a read-only one 1-D beside
them), fp16 / bf16 / fp32 / fp64 and, for the reductions, complex64 / complex128; axpy, copy and
rot between dtypes; axpy, copy and swap on the very same vector twice; three calls a signature with fresh
operands and scalars, so that the second and third replay the first's launches.

The reference runs the reference BLAS's loop, element after element, on fp64 copies of the
buffers, so zero increments and a vector given twice come out as the reference's. Every element
of a buffer that no vector covers is NaN (what no call may read); after a call each buffer must
equal the reference's: exactly where nothing is written, within a bound where something is.
Bounds, u the result's unit roundoff and u' the accumulation's (fp32, or fp64 for 64-bit data),
M the result's magnitude (the loop run on |values|):
- axpy, scal, copy, swap, rot: (2u + (k + 2)·u')·M, k the elements summed into one (n where the
  written increment is 0, else 1); rot with an increment 0 rounds on every step of its walk, so
  4(n + 2)·u·‖the entry's elements‖ there;
- dot / dotc: 2u·|want| + 2(n + 2)·u'·Σ|x_i|·|y_i| (complex: |re| + |im| for each);
- nrm2, asum: (2u + (n + 2)·u')·want;
- iamax / iamin: exactly the first index of the largest / smallest |x_i| (complex: |re| + |im|,
  summed in the accumulation's precision, as the kernel sums it);
- each plus 2u·(the smallest normal number): a result among the subnormals is rounded absolutely.

    python benchmarks/fuzz_level1.py [--device cuda] [--seconds 60] [--seed 1] [--max-size N]

Exits non-zero at the first mismatch, printing the case."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import numpy as np
import torch
from fuzz_loop import positions, run, units  # this folder is on sys.path when run as a script

REAL = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
COMPLEX = (torch.complex64, torch.complex128)
ELEMENT_WISE = ("axpy", "scal", "copy", "swap", "rot")
REDUCTIONS = ("dot", "dotc", "nrm2", "asum", "iamax", "iamin")
ONE_VECTOR = ("scal", "nrm2", "asum", "iamax", "iamin")
WRITES = {"axpy": "y", "scal": "x", "copy": "y", "swap": "xy", "rot": "xy"}


@dataclass(frozen=True)
class Signature:
    """One call's shape: what stays the same over its three calls (so they replay)."""

    op: str
    dtype: torch.dtype  # x's (and y's, but for a mixed axpy, copy or rot)
    y_dtype: torch.dtype
    n: int
    incx: int
    incy: int
    explicit_n: bool  # n passed (the vectors may then be longer than it reaches)
    batch: int | None
    x_batched: bool  # x 2-D (one vector a row); a read-only 1-D one serves every row
    y_batched: bool
    x_strided: bool  # every other element of a bigger buffer, rows padded
    y_strided: bool
    alias: bool  # y is x itself (axpy, copy, swap)


def _draw(rng: random.Random, largest: int) -> Signature:
    op = rng.choice(ELEMENT_WISE + REDUCTIONS)
    dtype = rng.choice(REAL + (COMPLEX if op in REDUCTIONS else ()))
    y_dtype = rng.choice(REAL) if op in ("axpy", "copy", "rot") and rng.random() < 0.4 else dtype
    n = rng.choice([0, 1, rng.randint(1, largest), rng.randint(1, largest), rng.randint(1, largest)])
    incx, incy = rng.choice([-3, -2, -1, 0, 1, 1, 2]), rng.choice([-2, -1, 0, 1, 1, 3])
    if op in ONE_VECTOR:
        incy = 1
    batch = None if rng.random() < 0.55 else rng.choice([0, 1, 2, 3, 4])
    written = WRITES.get(op, "")
    x_batched = batch is not None and ("x" in written or op in ONE_VECTOR or rng.random() < 0.7)
    y_batched = batch is not None and op not in ONE_VECTOR and ("y" in written or rng.random() < 0.7
                                                                 or not x_batched)
    x_strided, y_strided = rng.random() < 0.3, rng.random() < 0.3
    alias = (op in ("axpy", "copy", "swap") and y_dtype == dtype and incx != 0 and x_batched == y_batched
             and rng.random() < 0.15)
    if alias:
        incy, y_strided = incx, x_strided
    zero = incx == 0 or (incy == 0 and op not in ONE_VECTOR)
    return Signature(op, dtype, y_dtype, n, incx, incy, zero or rng.random() < 0.4, batch, x_batched,
                     y_batched, x_strided, y_strided, alias)


def _buffer(length: int, rows: int | None, strided: bool, dtype: torch.dtype,
            device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(a vector of ``length`` elements, a batch of them with ``rows``; the buffer it is a view of)."""
    lead = () if rows is None else (rows,)
    shape = (*lead, 2 * length + 3) if strided else (*lead, length)
    buffer = torch.randn(shape, dtype=torch.complex128 if dtype.is_complex else torch.float64).to(dtype)
    buffer = buffer.to(device)
    return (buffer[..., 1:1 + 2 * length:2] if strided else buffer), buffer


def _flat_index(buffer: torch.Tensor, view: torch.Tensor) -> np.ndarray:
    """For each element of ``view`` (a view of ``buffer``), its index in the flattened buffer."""
    index = torch.arange(buffer.numel()).reshape(buffer.shape)
    return index.as_strided(view.shape, view.stride(), view.storage_offset()).numpy()


def _to_numpy(t: torch.Tensor) -> np.ndarray:
    """A tensor's values, flattened, in fp64 (complex128 for complex data) on the host."""
    t = t.detach().cpu()
    return (t.to(torch.complex128) if t.is_complex() else t.double()).reshape(-1).numpy().copy()


class _Vectors:
    """A call's vectors, their buffers, and each entry's element positions in the flat buffers."""

    def __init__(self, s: Signature, device: str) -> None:
        length = 0 if s.n == 0 else (s.n - 1) * abs(s.incx) + 1
        y_length = 0 if s.n == 0 else (s.n - 1) * abs(s.incy) + 1
        extra = (2, 1) if s.explicit_n else (0, 0)  # longer than n reaches: only n may be touched
        self.x, self.x_buffer = _buffer(length + extra[0], s.batch if s.x_batched else None, s.x_strided,
                                        s.dtype, device)
        if s.op in ONE_VECTOR:
            self.y, self.y_buffer = None, None
        elif s.alias:
            self.y, self.y_buffer = self.x, self.x_buffer
        else:
            self.y, self.y_buffer = _buffer(y_length + extra[1], s.batch if s.y_batched else None,
                                            s.y_strided, s.y_dtype, device)
        self.entries = 1 if s.batch is None else s.batch
        self.fx = self._positions(self.x_buffer, self.x, s.n, s.incx)
        self.fy = None if self.y is None else self._positions(self.y_buffer, self.y, s.n, s.incy)
        for buffer, places in ((self.x_buffer, self.fx), (self.y_buffer, self.fy)):
            if buffer is not None:  # what no vector covers is NaN: no call may read it
                covered = np.zeros(buffer.numel(), dtype=bool)
                covered[places.reshape(-1)] = True
                flat = buffer.view(-1)
                flat[torch.from_numpy(~covered).to(flat.device)] = float("nan")

    def _positions(self, buffer: torch.Tensor, view: torch.Tensor, n: int, inc: int) -> np.ndarray:
        """(entries, n) flat-buffer indices of each entry's elements in BLAS order."""
        index = _flat_index(buffer, view)
        index = index if index.ndim == 2 else np.broadcast_to(index, (self.entries, index.shape[-1]))
        return index[:, positions(n, inc).numpy()] if n else np.zeros((self.entries, 0), dtype=np.int64)


def _element_wise(s: Signature, v: _Vectors, scalars: tuple[float, float],
                  absolute: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """The reference BLAS's loop on fp64 copies of the buffers, flat (on |values| with |scalars|
    when ``absolute``: the result's magnitude M); returns x's and y's buffers after it."""
    x = _to_numpy(v.x_buffer)
    y = x if s.alias else None if v.y_buffer is None else _to_numpy(v.y_buffer)
    a, b = scalars
    if absolute:
        x, a, b = np.abs(x), abs(a), abs(b)
        y = x if s.alias else None if y is None else np.abs(y)
    sequential = s.incx == 0 or s.incy == 0  # element after element; else all at once
    steps = range(s.n) if sequential else [slice(None)]
    for i in steps:
        for e in range(v.entries) if sequential else [slice(None)]:
            px, py = v.fx[e, i], None if v.fy is None else v.fy[e, i]
            if s.op == "axpy" and a != 0.0:
                y[py] = a * x[px] + y[py]
            elif s.op == "scal" and s.incx > 0:
                x[px] = a * x[px]
            elif s.op == "copy":
                y[py] = x[px]
            elif s.op == "swap":
                x[px], y[py] = y[py], x[px]
            elif s.op == "rot":
                xv, yv = x[px], y[py]
                x[px], y[py] = a * xv + b * yv, (a * yv + b * xv) if absolute else (a * yv - b * xv)
    return x, y


def _check_buffer(name: str, got: torch.Tensor, want: np.ndarray, bound: np.ndarray) -> str | None:
    """Whether a buffer after the call is the reference's: within ``bound`` (0 where nothing is
    written), NaN exactly where the reference has NaN."""
    g = _to_numpy(got)
    nan = np.isnan(want)
    if not np.array_equal(np.isnan(g), nan):
        return f"{name}'s buffer has a NaN where the reference has none, or the other way round"
    excess = np.abs(np.where(nan, 0, g - want)) - bound
    if (excess > 0).any():
        at = int(np.flatnonzero(excess > 0)[0])
        return f"{name}'s buffer element {at}: got {g[at]}, want {want[at]}, bound {bound[at]:.3e}"
    return None


def _call_element_wise(s: Signature, v: _Vectors, rng: random.Random) -> str | None:
    """axpy, scal, copy, swap or rot with fresh scalars: every buffer against the reference loop's."""
    from tessera.blas import axpy, copy, rot, scal, swap

    alpha = rng.choice([1.0, -0.5, 2.0, 0.0, rng.gauss(0, 1)])
    angle = rng.choice([0.0, math.pi / 2, rng.uniform(0, 2 * math.pi)])
    scalars = (math.cos(angle), math.sin(angle)) if s.op == "rot" else (alpha, 0.0)
    want = dict(zip("xy", _element_wise(s, v, scalars, absolute=False), strict=True))
    size = dict(zip("xy", _element_wise(s, v, scalars, absolute=True), strict=True))
    norm = math.sqrt(sum(float(np.nansum(m**2)) for m in size.values() if m is not None))  # before: rot's
    incs = {"n": s.n if s.explicit_n else None, "incx": s.incx}
    if s.op != "scal":
        incs["incy"] = s.incy
    returned = {"axpy": lambda: axpy(alpha, v.x, v.y, **incs), "scal": lambda: scal(alpha, v.x, **incs),
                "copy": lambda: copy(v.x, v.y, **incs), "swap": lambda: swap(v.x, v.y, **incs),
                "rot": lambda: rot(v.x, v.y, *scalars, **incs)}[s.op]()
    returned = returned if isinstance(returned, tuple) else (returned,)
    expected = tuple(v.x if name == "x" else v.y for name in WRITES[s.op])
    if len(returned) != len(expected) or any(r is not e for r, e in zip(returned, expected, strict=True)):
        return "the result is not the written vector itself"
    for name in WRITES[s.op]:
        if name == "y" and s.alias:
            continue  # y's buffer is x's
        buffer, places = (v.x_buffer, v.fx) if name == "x" else (v.y_buffer, v.fy)
        u, u_acc = units(buffer.dtype)  # mixed dtypes: each buffer rounded to its own
        if s.op == "rot" and (s.incx == 0 or s.incy == 0):  # both rounded on every step of the walk
            coarse = max(units(s.dtype)[0], units(s.y_dtype)[0])
            error = np.full(size[name].shape, 4 * (s.n + 2) * coarse * norm)
        else:
            summed = s.n if name == "y" and s.incy == 0 else 1  # axpy into one element: all of αx
            error = (2 * u + (summed + 2) * u_acc) * np.nan_to_num(size[name])
        bound = np.zeros_like(error)
        written = places.reshape(-1)
        bound[written] = error[written] + 2 * u * torch.finfo(buffer.dtype).tiny
        problem = _check_buffer(name, buffer, want[name], bound)
        if problem is not None:
            return problem
    if "x" not in WRITES[s.op] and not s.alias and _check_buffer(
            "x", v.x_buffer, want["x"], np.zeros(want["x"].shape)) is not None:
        return "x, read only, changed"
    return None


def _gathered(buffer: torch.Tensor, places: np.ndarray) -> np.ndarray:
    """(entries, n) values of each entry's elements in BLAS order, fp64 or complex128."""
    return _to_numpy(buffer)[places]


def _call_reduction(s: Signature, v: _Vectors) -> str | None:
    """dot, dotc, nrm2, asum, iamax or iamin: the result, its dtype and shape; nothing written."""
    from tessera.blas import asum, dot, dotc, iamax, iamin, nrm2

    u, u_acc = units(s.dtype)
    real = torch.empty(0, dtype=s.dtype).real.dtype  # of nrm2's and asum's result
    tiny = 2 * u * torch.finfo(real).tiny
    x_before = _to_numpy(v.x_buffer)
    y_before = None if v.y is None else _to_numpy(v.y_buffer)
    xs = _gathered(v.x_buffer, v.fx)
    n = s.n if s.explicit_n else None
    if s.op in ("dot", "dotc"):
        ys = _gathered(v.y_buffer, v.fy)
        got = (dot if s.op == "dot" else dotc)(v.x, v.y, n=n, incx=s.incx, incy=s.incy)
        want = ((np.conj(xs) if s.op == "dotc" else xs) * ys).sum(-1)
        parts = (np.abs(xs.real) + np.abs(xs.imag)) * (np.abs(ys.real) + np.abs(ys.imag))
        bound = 2 * u * np.abs(want) + 2 * (s.n + 2) * u_acc * parts.sum(-1) + tiny
        dtype = s.dtype
    elif s.op in ("nrm2", "asum"):
        if s.op == "nrm2":
            got, want = nrm2(v.x, n=n, incx=s.incx), np.sqrt((np.abs(xs) ** 2).sum(-1))
        else:
            got = asum(v.x, n=n, incx=s.incx)
            want = (np.abs(xs.real) + np.abs(xs.imag)).sum(-1) * (s.incx > 0)
        bound = (2 * u + (s.n + 2) * u_acc) * want + tiny
        dtype = real
    else:
        got = (iamax if s.op == "iamax" else iamin)(v.x, n=n, incx=s.incx)
        work = np.float64 if s.dtype in (torch.float64, torch.complex128) else np.float32
        sizes = np.abs(xs.real).astype(work) + np.abs(xs.imag).astype(work)  # summed in `work`
        pick = np.argmax if s.op == "iamax" else np.argmin
        want = pick(sizes, -1) if s.n and s.incx > 0 else np.full(v.entries, -1)
        bound, dtype = np.zeros(v.entries), torch.int64
    shape = () if s.batch is None else (s.batch,)
    if got.dtype != dtype or tuple(got.shape) != shape:
        return f"a result of dtype {got.dtype}, shape {tuple(got.shape)}; want {dtype}, {shape}"
    if _check_buffer("x", v.x_buffer, x_before, np.zeros(x_before.shape)) is not None or (
            y_before is not None and _check_buffer("y", v.y_buffer, y_before, np.zeros(y_before.shape))):
        return "a vector the reduction only reads changed"
    g = _to_numpy(got).reshape(np.shape(want))
    excess = np.abs(g - want) - bound
    if not np.isfinite(g).all() or (excess > 0).any():
        at = int(np.flatnonzero(~np.isfinite(g) | (excess > 0))[0])
        return f"entry {at}: got {g.reshape(-1)[at]}, want {np.reshape(want, -1)[at]}, bound " \
               f"{np.reshape(bound, -1)[at]:.3e}"
    return None


def _call(s: Signature, device: str, rng: random.Random) -> str | None:
    """One call of ``s`` with fresh operands (and scalars); what went wrong, or None."""
    vectors = _Vectors(s, device)
    return _call_element_wise(s, vectors, rng) if s.op in ELEMENT_WISE else _call_reduction(s, vectors)


def main() -> None:
    run(__doc__.split("\n\n")[0], {"level 1": (_draw, _call)}, (300, 5000))


if __name__ == "__main__":
    main()
