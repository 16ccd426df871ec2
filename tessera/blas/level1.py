"""BLAS level 1 with the reference BLAS's vector model, on torch tensors.

A vector argument is a 1-D tensor ``x`` read as BLAS reads an array: ``n`` elements with increment
``incx`` counted in elements of ``x`` (``x.stride(0)`` is honoured too). A negative increment walks
from the far end: element i is ``x[(n − 1 − i)·|incx|]``. ``n`` defaults to as many elements as the
increment reaches. Results of reductions are 0-d tensors on the device (no host synchronisation);
``iamax``/``iamin`` return a 0-d int64 tensor holding a 0-based index (SciPy's convention; BLAS's
1-based result minus one), −1 where the reference returns 0.

Batched (rocBLAS's ``*_strided_batched``): a 2-D tensor is a batch of vectors, one a row, with
``n`` and the increments shared by the batch and ``x.stride(0)`` the batch stride; every routine
runs the whole batch in one launch (one binary for any batch size) and a reduction returns one
value a row. A vector that is only read may stay 1-D beside a batched one (the same vector for
every entry, batch stride 0); one that is written must hold the batch, its rows sharing no
element. The pointer-array form (``*_batched``: entries anywhere in memory) is not offered: a
list of tensors is ``torch.stack``-ed by the caller.

A written vector must share no element with the other argument (Fortran BLAS leaves that
undefined; on a GPU other programs would read what one wrote), except that axpy, copy and swap
take the very same vector twice (element i of each in one place: ``axpy(α, x, x)`` scales x).
Interleaved vectors, such as two columns of one row-major matrix, share no element and are
taken (``tessera._core.footprint`` decides it element by element, not by byte range).

Edge cases follow the reference BLAS (LAPACK 3.12): n ≤ 0 does nothing and reduces to 0; ``scal``,
``asum``, ``iamax``, ``iamin`` do nothing / return 0 (−1) for incx ≤ 0; ``nrm2`` walks any increment
(0 repeats the first element); an output increment of 0 (axpy, copy, swap, rot into one element)
gives the reference's sequential result. ``nrm2`` is LAPACK 3.10's (Blue's algorithm): squares of
tiny and huge |x| are summed scaled by fixed powers of two, so none overflows or underflows where
the true norm is representable (barring, as in the reference, more than ~2^24 fp32 elements near
2^52, whose unscaled sum overflows).
"""

from __future__ import annotations

import copy as copy_module
import math
from dataclasses import dataclass

import torch

from tessera._core.errors import invalid
from tessera._core.footprint import Footprint, check_apart
from tessera._core.launch import next_power_of_2
from tessera._core.validate import (
    as_tensor,
    check_dtype,
    check_same_device,
    check_untracked_write,
    integer,
    mark_written,
    real_scalar,
)
from tessera.blas import repeat, space
from tessera.blas.kernels import level1 as k

REAL = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
COMPLEX = (torch.complex64, torch.complex128)


class Vector:
    """A validated BLAS vector, or a batch of them: the tensor the kernel indexes, the first
    element, the increment and (batched) the step from one entry's vector to the next.

    A 1-D tensor is one vector. With ``batched`` a 2-D tensor is a batch of vectors, one a row
    (rocBLAS's strided-batched routines: the batch stride is ``x.stride(0)``, the increment counts
    elements along a row); ``n`` and the increment are the batch's."""

    def __init__(self, name: str, x: object, n: int | None, inc: int, complex_ok: bool = False,
                 batched: bool = False) -> None:
        x = as_tensor(name, x)
        if x.dim() != 1 and not (batched and x.dim() == 2):
            expected = "1-D (a BLAS vector) or 2-D (a batch of vectors, one a row)" if batched else "1-D"
            raise invalid(f"{name}.dim()", f"{x.dim()} (shape {tuple(x.shape)})", expected)
        check_dtype(name, x, REAL + (COMPLEX if complex_ok else ()))
        given_inc, inc = inc, integer(inc)
        if inc is None:
            raise invalid(f"inc{name}", repr(given_inc), "an integer (negative walks from the far end)")
        length = x.shape[-1]
        if n is None:
            n = length if inc == 0 else (length - 1) // abs(inc) + 1 if length else 0
        given_n, n = n, integer(n)
        if n is None:
            raise invalid("n", repr(given_n), "an integer")
        if n > 0 and (n - 1) * abs(inc) >= length:
            raise invalid(f"{name}.shape[{x.dim() - 1}]", length, f"at least (n − 1)·|inc{name}| + 1 = "
                                                                   f"{(n - 1) * abs(inc) + 1} for n = {n}")
        self.name, self.tensor, self.n, self.inc = name, x, max(n, 0), inc
        self.batched = x.dim() == 2
        self.batch = x.shape[0] if self.batched else 1
        self.complex = x.dtype in COMPLEX
        width = 2 if self.complex else 1  # complex: (re, im) pairs of self.data
        self.data = torch.view_as_real(x) if self.complex else x
        self.step = x.stride(-1) * inc * width  # in elements of self.data
        self.batch_step = x.stride(0) * width if self.batched else 0
        self.start = (self.n - 1) * -self.step if self.step < 0 and self.n else 0

    def kernel_args(self) -> tuple[torch.Tensor, int, int, int]:
        """(tensor whose first element the kernel indexes from, first element, increment, batch step)."""
        return self.data, self.start, self.step, self.batch_step

    def entry(self, b: int) -> Vector:
        """Entry b of a batch (the vector itself when not batched), as an unbatched vector."""
        if not self.batched:
            return self
        return Vector(self.name, self.tensor[b], self.n, self.inc, complex_ok=True)

    def sub(self, first: int, count: int) -> Vector:
        """Elements first … first + count − 1 of this (unbatched) vector, as a vector."""
        part = copy_module.copy(self)
        part.start, part.n = self.start + first * self.step, count
        return part

    def elements(self) -> torch.Tensor:
        """The n elements as one strided view (in address order: reversed for a negative increment),
        a row an entry for a batch."""
        low = self.start + min(0, (self.n - 1) * self.step)
        offset = self.data.storage_offset() + low
        if self.batched:
            return self.data.as_strided((self.batch, self.n), (self.batch_step, abs(self.step)), offset)
        return self.data.as_strided((self.n,), (abs(self.step),), offset)

    def footprint(self) -> Footprint:
        """The bytes of the n elements (of every entry of a batch), for :func:`check_apart`."""
        size = self.data.element_size()
        entries = ((self.batch, self.batch_step * size),) if self.batched else ()
        return Footprint(self.data.data_ptr() + self.start * size, (*entries, (self.n, self.step * size)),
                         size * (2 if self.complex else 1))

    def check_writable(self) -> None:
        """A written vector must not be tracked by autograd (:func:`check_untracked_write`), its
        elements must be distinct where the increment is not 0 (not an expanded tensor: BLAS's
        one-element output is increment 0), and an output batch's rows must not share elements
        (overlapping strides): entries are written at once."""
        check_untracked_write(self.name, self.tensor)
        if self.n > 1 and self.inc != 0 and self.tensor.stride(-1) == 0:
            raise invalid(f"{self.name}.stride()", tuple(self.tensor.stride()),
                          f"a non-zero element stride for a written vector (no expand()); for BLAS's "
                          f"one-element output pass inc{self.name}=0")
        if not self.batched or self.batch < 2 or self.n == 0 or self.step == 0:
            return
        step, across = abs(self.tensor.stride(-1) * self.inc), abs(self.tensor.stride(0))
        apart = math.gcd(step, across)
        # rows b and b + d share an element iff d·across = k·step with |k| < n: first at d = step / gcd
        if across == 0 or (step // apart <= self.batch - 1 and across // apart <= self.n - 1):
            raise invalid(f"{self.name}.stride()", tuple(self.tensor.stride()),
                          f"rows that share no element for a batched output written with inc{self.name} = "
                          f"{self.inc} (no expand(); make it contiguous)")

    @property
    def fp64(self) -> bool:
        return self.tensor.dtype in (torch.float64, torch.complex128)


def _vectors(x: object, y: object, n: int | None, incx: int, incy: int, complex_ok: bool = False,
             written: str = "y", same_ok: bool = True) -> tuple[Vector, Vector, int]:
    """Both vectors with one n (by default as many elements as the shorter one reaches). Batched
    (2-D) operands share their batch; an unbatched read-only one is used for every entry, a written
    one (``written``: "y", "xy" or "") must have the batch and share no element with the other —
    unless ``same_ok`` and both are the very same elements in one order (element-wise routines)."""
    vx = Vector("x", x, n, incx, complex_ok, batched=True)
    vy = Vector("y", y, n, incy, complex_ok, batched=True)
    if vx.n != vy.n:
        n = min(vx.n, vy.n)
        vx = Vector("x", x, n, incx, complex_ok, batched=True)
        vy = Vector("y", y, n, incy, complex_ok, batched=True)
    check_same_device({"x": vx.tensor, "y": vy.tensor})
    if vx.batched and vy.batched and vx.batch != vy.batch:
        raise invalid("y.shape[0]", vy.batch, f"x's batch {vx.batch} (one vector a row of each)")
    for v in (vx, vy):
        if v.name in written:
            if not v.batched and (vx.batched or vy.batched):
                raise invalid(f"{v.name}.dim()", 1, "2-D, as the other vector: a written vector "
                                                    "holds the whole batch")
            v.check_writable()
    if written:
        w, other = (vy, vx) if written == "y" else (vx, vy)
        check_apart(w.name, w.footprint(), {other.name: other.footprint()},
                    frozenset({other.name}) if _same_allowed(vx, vy, same_ok) else frozenset())
    return vx, vy, vx.n


def _same_allowed(x: Vector, y: Vector, same_ok: bool) -> bool:
    """Whether x and y may be the very same elements in one order: for the element-wise routines
    that take it (``same_ok``), and neither increment 0 (those calls run in order on the host)."""
    return same_ok and x.inc != 0 and y.inc != 0


def _batch(*vectors: Vector) -> tuple[int, bool]:
    """(entries, whether the call is batched) of the vectors of one call: the batched ones' batch
    (``_vectors`` checked they agree), 1 when none is batched."""
    batched = [v.batch for v in vectors if v.batched]
    return (batched[0], True) if batched else (1, False)


def _shape(op: str, x: Vector, batch: int) -> k.VectorConfig:
    """The launch shape of ``op`` for x's length (logic files, else the heuristic: tuned on long
    vectors). Each entry of a batch takes programs of its own, so for a batch of short vectors
    the shape is cut to the length: steps a program no more than the vector fills, and a block
    no longer than it (at least a warp's 32 lanes, warps to match) — otherwise every program of a
    4096 × 64 batch would issue eight masked 1024-lane steps for one of 64 elements."""
    config = space.shape_of(op, (x.n,), x.tensor)
    if batch <= 1 or x.n >= config.block * config.iters:
        return config
    block = min(config.block, max(32, next_power_of_2(x.n)))
    iters = min(config.iters, -(-x.n // block))
    return k.VectorConfig(block, iters, max(1, min(config.num_warps, block // 128)))


def _map(op: int, x: Vector, y: Vector | None, alpha: float = 0.0, beta: float = 0.0,
         key: tuple | None = None) -> None:
    """The element-wise routine ``op`` over x (and y), in one launch, recorded for the repeat calls
    of ``key`` (``repeat``: they replay it with their own alpha and beta)."""
    batch, _ = _batch(x, y or x)
    if x.n == 0 or batch == 0:
        return
    given = (x.tensor,) if y is None else (x.tensor, y.tensor)
    written = (0, 1) if op in (k.SWAP, k.ROT) else (len(given) - 1,)
    with repeat.recording(key) as calls:
        k.launch_map(op, x.kernel_args(), (y or x).kernel_args(), x.n, alpha, beta,
                     fp64=x.fp64 or (y is not None and y.fp64),
                     config=_shape("level1_swap" if op == k.SWAP else "level1_map", x, batch), batch=batch)
    mark_written(*(given[i] for i in written))
    scalars = (alpha, beta) if op == k.ROT else (alpha,) if op in (k.AXPY, k.SCAL) else ()
    repeat.remember(key, calls, given, given[-1], written=written, scalars=scalars)


def _element(v: Vector, i: int) -> torch.Tensor:
    """Element i of an unbatched vector, as a 1-element view (for the sequential zero-increment cases)."""
    return v.sub(i, 1).elements()


def _entries(*vectors: Vector) -> list[tuple[Vector, ...]]:
    """The call's vectors entry by entry (an unbatched one repeated): for the sequential
    zero-increment cases, which run on the host one entry after another."""
    batch, _ = _batch(*vectors)
    return [tuple(v.entry(b) for v in vectors) for b in range(batch)]


def axpy(alpha: float, x: object, y: object, *, n: int | None = None, incx: int = 1,
         incy: int = 1) -> torch.Tensor:
    """y ← αx + y (in place); returns y. Batched: x and y 2-D, one vector a row (x may be 1-D,
    the same for every row of y)."""
    key, done = repeat.replayed("axpy", (x, y), (n, incx, incy), (alpha,))
    if done is not None:
        return done
    alpha = real_scalar("alpha", alpha)
    vx, vy, n = _vectors(x, y, n, incx, incy)
    if n == 0 or alpha == 0.0:
        return vy.tensor
    if vy.inc == 0:  # the reference adds every αx_i into y's one element: y₀ + α·Σx
        for ex, ey in _entries(vx, vy):
            _element(ey, 0).add_((alpha * _signed_sum(ex, vy.fp64)).to(vy.tensor.dtype))
        return vy.tensor
    _map(k.AXPY, vx, vy, alpha, key=key)
    return vy.tensor


def _signed_sum(v: Vector, fp64: bool) -> torch.Tensor:
    """Σ x_i (signed) of an unbatched vector in the arithmetic's dtype — fp64 where ``fp64`` (y is
    fp64) or x is, else fp32: the zero-increment axpy's total."""
    if fp64 and not v.fp64:
        return v.elements().double().sum()
    ones = torch.ones(1, dtype=v.tensor.dtype, device=v.tensor.device)
    made, total = _reduce(k.DOT, v, Vector("y", ones, v.n, 0))
    return total(made)


def scal(alpha: float, x: object, *, n: int | None = None, incx: int = 1) -> torch.Tensor:
    """x ← αx (in place; nothing for incx ≤ 0, as the reference); returns x. Batched: x 2-D."""
    key, done = repeat.replayed("scal", (x,), (n, incx), (alpha,))
    if done is not None:
        return done
    alpha = real_scalar("alpha", alpha)
    vx = Vector("x", x, n, incx, batched=True)
    if vx.inc > 0:
        vx.check_writable()
        _map(k.SCAL, vx, None, alpha, key=key)
    return vx.tensor


def copy(x: object, y: object, *, n: int | None = None, incx: int = 1, incy: int = 1) -> torch.Tensor:
    """y ← x; returns y. x and y may differ in dtype (the value is converted). Batched: y 2-D
    (x 2-D too, or 1-D: copied into every row)."""
    key, done = repeat.replayed("copy", (x, y), (n, incx, incy))
    if done is not None:
        return done
    vx, vy, n = _vectors(x, y, n, incx, incy)
    if n and vy.inc == 0:  # sequential: the last element written wins
        for ex, ey in _entries(vx, vy):
            _element(ey, 0).copy_(_element(ex, n - 1))
    elif n:
        _map(k.COPY, vx, vy, key=key)
    return vy.tensor


def swap(x: object, y: object, *, n: int | None = None, incx: int = 1,
         incy: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Exchange x and y (in place); returns (x, y). Batched: both 2-D."""
    key, done = repeat.replayed("swap", (x, y), (n, incx, incy))
    if done is not None:
        return x, done  # type: ignore[return-value]  # replayed: x is a tensor
    vx, vy, n = _vectors(x, y, n, incx, incy, written="xy")
    if vx.tensor.dtype != vy.tensor.dtype:
        raise invalid("y.dtype", vy.tensor.dtype, f"x's dtype {vx.tensor.dtype}")
    if n and (vx.inc == 0 or vy.inc == 0):
        for ex, ey in _entries(vx, vy):
            _sequential_swap(ex, ey, n)
    elif n:
        _map(k.SWAP, vx, vy, key=key)
    return vx.tensor, vy.tensor


def _sequential_swap(vx: Vector, vy: Vector, n: int) -> None:
    """The reference's in-order swaps when an increment is 0 (then one side is a single element)."""
    xs = [_element(vx, i).clone() for i in range(n)] if vx.inc else None
    ys = [_element(vy, i).clone() for i in range(n)] if vy.inc else None
    x0, y0 = _element(vx, 0).clone(), _element(vy, 0).clone()
    if vx.inc == 0 and vy.inc == 0:
        if n % 2:
            _element(vx, 0).copy_(y0)
            _element(vy, 0).copy_(x0)
        return
    if vx.inc == 0:  # x0 ↔ y_0, then that value ↔ y_1, …: y shifts by one, x0 gets y_{n−1}
        _element(vx, 0).copy_(ys[n - 1])
        for i in range(n - 1, 0, -1):
            _element(vy, i).copy_(ys[i - 1])
        _element(vy, 0).copy_(x0)
    else:
        _element(vy, 0).copy_(xs[n - 1])
        for i in range(n - 1, 0, -1):
            _element(vx, i).copy_(xs[i - 1])
        _element(vx, 0).copy_(y0)


def rot(x: object, y: object, c: float, s: float, *, n: int | None = None, incx: int = 1,
        incy: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Plane rotation (x, y) ← (c·x + s·y, c·y − s·x) in place; returns (x, y). Batched: both
    2-D, one rotation (c, s) for every row."""
    key, done = repeat.replayed("rot", (x, y), (n, incx, incy), (c, s))
    if done is not None:
        return x, done  # type: ignore[return-value]  # replayed: x is a tensor
    c, s = real_scalar("c", c), real_scalar("s", s)
    vx, vy, n = _vectors(x, y, n, incx, incy, written="xy", same_ok=False)
    if n and (vx.inc == 0 or vy.inc == 0):  # in order, on the host: a degenerate case
        for ex, ey in _entries(vx, vy):
            for i in range(n):
                xe, ye = _element(ex, i), _element(ey, i)
                xv, yv = xe.double().clone(), ye.double().clone()
                xe.copy_(c * xv + s * yv)
                ye.copy_(c * yv - s * xv)
    elif n:
        _map(k.ROT, vx, vy, c, s, key=key)
    return vx.tensor, vy.tensor


@dataclass(frozen=True)
class _Total:
    """The torch steps from what a reduction's launches wrote to its wide-dtype result — the sum of
    dot's or asum's partials (kind, entry, program) over the programs (a view when there is one),
    nrm2's norms as they are — taken by the full path and by a replay alike (``repeat``)."""

    shape: tuple[int, ...]  # () or (batch,)
    partials: bool
    complex_dot: bool  # (re, im) partials: a complex result

    def __call__(self, made: torch.Tensor) -> torch.Tensor:
        if not self.partials:
            return made.reshape(self.shape)
        sums = made[..., 0] if made.shape[-1] == 1 else made.sum(-1)
        total = torch.complex(sums[0], sums[1]) if self.complex_dot else sums[0]
        return total.reshape(self.shape)


def _reduce(op: int, x: Vector, y: Vector | None = None,
            conj: bool = False) -> tuple[torch.Tensor, _Total]:
    """The wide-dtype reduction of each entry (a complex dot gives a complex result; a 0-d tensor,
    or one value a row for a batched call) as the buffer its launches wrote and the steps that
    make the result of it: ``total(made)``."""
    batch, batched = _batch(x, y or x)
    shape = (batch,) if batched else ()
    if x.n == 0 or batch == 0:
        zeros = torch.zeros(shape, dtype=torch.float64 if x.fp64 else torch.float32, device=x.tensor.device)
        return zeros, _Total(shape, False, False)
    parts = k.launch_reduce(op, x.kernel_args(), (y or x).kernel_args(), x.n, complex_=x.complex, conj=conj,
                            fp64=x.fp64, config=_shape("level1_reduce", x, batch),
                            batch=batch)
    if op == k.NRM2:
        return k.launch_nrm2_finish(parts, fp64=x.fp64), _Total(shape, False, False)
    return parts, _Total(shape, True, x.complex and op == k.DOT)


def _reduced(op: int, key: tuple | None, x: Vector, y: Vector | None = None,
             conj: bool = False) -> torch.Tensor:
    """A reduction's result in its real dtype (a complex dot's in x's), recorded for repeat calls
    of ``key`` (``repeat``: they replay the launches into a new buffer and take the same steps)."""
    with repeat.recording(key) as calls:
        made, total = _reduce(op, x, y, conj)
    dtype = x.tensor.dtype if op == k.DOT else _real_dtype(x)
    given = (x.tensor,) if y is None else (x.tensor, y.tensor)
    repeat.remember(key, calls, given, made, made=(made,), finish=total, cast=dtype)
    return total(made).to(dtype)


def _dot(x: object, y: object, n: int | None, incx: int, incy: int, conj: bool) -> torch.Tensor:
    key, done = repeat.replayed("dotc" if conj else "dot", (x, y), (n, incx, incy))
    if done is not None:
        return done
    vx, vy, _ = _vectors(x, y, n, incx, incy, complex_ok=True, written="")
    if vx.tensor.dtype != vy.tensor.dtype:
        raise invalid("y.dtype", vy.tensor.dtype, f"x's dtype {vx.tensor.dtype}")
    return _reduced(k.DOT, key, vx, vy, conj=conj)


def dot(x: object, y: object, *, n: int | None = None, incx: int = 1, incy: int = 1) -> torch.Tensor:
    """Σ x_i·y_i (complex: unconjugated, BLAS's dotu), accumulated in fp32 (fp64 for 64-bit data).
    Batched (x or y 2-D, the other 2-D or 1-D): one result a row."""
    return _dot(x, y, n, incx, incy, conj=False)


def dotc(x: object, y: object, *, n: int | None = None, incx: int = 1, incy: int = 1) -> torch.Tensor:
    """Σ conj(x_i)·y_i (equal to dot for real data); batched as :func:`dot`."""
    return _dot(x, y, n, incx, incy, conj=True)


def _real_dtype(v: Vector) -> torch.dtype:
    return v.tensor.real.dtype if v.complex else v.tensor.dtype


def nrm2(x: object, *, n: int | None = None, incx: int = 1) -> torch.Tensor:
    """Euclidean norm in one pass by Blue's algorithm, as LAPACK 3.10's xNRM2 (no overflow or
    underflow of intermediate squares, no division per element); batched (x 2-D): one a row."""
    key, done = repeat.replayed("nrm2", (x,), (n, incx))
    if done is not None:
        return done
    return _reduced(k.NRM2, key, Vector("x", x, n, incx, complex_ok=True, batched=True))


def asum(x: object, *, n: int | None = None, incx: int = 1) -> torch.Tensor:
    """Σ |x_i| (complex: Σ |re| + |im|, as BLAS); 0 for incx ≤ 0; batched (x 2-D): one a row."""
    key, done = repeat.replayed("asum", (x,), (n, incx))
    if done is not None:
        return done
    vx = Vector("x", x, n, incx, complex_ok=True, batched=True)
    if vx.inc <= 0:
        return torch.zeros((vx.batch,) if vx.batched else (), dtype=_real_dtype(vx), device=vx.tensor.device)
    return _reduced(k.ASUM, key, vx)


def _extreme(x: object, n: int | None, incx: int, largest: bool) -> torch.Tensor:
    key, done = repeat.replayed("iamax" if largest else "iamin", (x,), (n, incx))
    if done is not None:
        return done
    vx = Vector("x", x, n, incx, complex_ok=True, batched=True)
    shape = (vx.batch,) if vx.batched else ()
    if vx.n == 0 or vx.inc <= 0 or vx.batch == 0:
        return torch.full(shape, -1, dtype=torch.int64, device=vx.tensor.device)
    with repeat.recording(key) as calls:
        index = k.launch_extreme(vx.kernel_args(), vx.n, largest, complex_=vx.complex, fp64=vx.fp64,
                                 config=_shape("level1_extreme", vx, vx.batch), batch=vx.batch)
    result = index.reshape(shape)
    repeat.remember(key, calls, (vx.tensor,), result, made=(index,))
    return result


def iamax(x: object, *, n: int | None = None, incx: int = 1) -> torch.Tensor:
    """0-based index of the first largest |x_i| (|re| + |im| for complex); −1 if n = 0 or incx ≤ 0;
    batched (x 2-D): one a row."""
    return _extreme(x, n, incx, largest=True)


def iamin(x: object, *, n: int | None = None, incx: int = 1) -> torch.Tensor:
    """0-based index of the first smallest |x_i|; −1 if n = 0 or incx ≤ 0; batched (x 2-D): one a row."""
    return _extreme(x, n, incx, largest=False)
