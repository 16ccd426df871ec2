"""BLAS level 2 on torch tensors: gemv, ger, symv, trsv.

Matrices are 2-D tensors with any strides (BLAS's leading dimension is the stride; a transposed or
sliced view needs no copy); vectors follow ``tessera.blas.level1`` (1-D tensor, ``incx``/``incy``
in elements, negative increments from the far end). As the reference BLAS: a zero increment is an
error, an empty matrix returns at once (y untouched), α = 0 does not read A, β = 0 does not read y
(NaN there does not propagate). Arithmetic is fp32 for 16-bit and fp32 data, fp64 for fp64.

Batched (rocBLAS's ``*_strided_batched``): a 3-D matrix is a batch of matrices and a 2-D vector a
batch of vectors (one a row), ``a.stride(0)`` / ``x.stride(0)`` the batch strides; every routine
runs the batch in the launches of one call. An operand that is only read may stay unbatched (the
same matrix or vector for every entry); the written one (y; A for ger; x for trsv) holds the
batch, its entries sharing no element. α and β are the batch's. The written operand shares no
element with one the call reads (y = x in gemv is refused: its programs would read x as others
write it); a vector in A's padding or interleaved with it is taken (``tessera._core.footprint``).
"""

from __future__ import annotations

import dataclasses

import torch

from tessera._core import launch
from tessera._core.device import device_info
from tessera._core.errors import invalid
from tessera._core.footprint import Footprint, check_apart
from tessera._core.launch import next_power_of_2
from tessera._core.validate import (
    as_tensor,
    check_bools,
    check_dtype,
    check_no_internal_overlap,
    check_same_device,
    check_untracked_write,
    mark_written,
    real_scalar,
)
from tessera.blas import repeat, space
from tessera.blas.api import gemm
from tessera.blas.kernels import level2 as k
from tessera.blas.level1 import REAL, Vector

# trans / lower / unit_diagonal are bools: BLAS's characters are truthy strings here
_LETTERS = " (BLAS's letters 'N', 'T', 'U', 'L' are not taken)"


def _matrix(name: str, a: object) -> torch.Tensor:
    a = as_tensor(name, a)
    if a.dim() not in (2, 3):
        raise invalid(f"{name}.dim()", f"{a.dim()} (shape {tuple(a.shape)})", "2-D, or 3-D for a batch")
    check_dtype(name, a, REAL)
    return a


def _square(a: torch.Tensor) -> int:
    if a.shape[-2] != a.shape[-1]:
        raise invalid("a.shape", tuple(a.shape), "square matrices (n, n), or (batch, n, n)")
    return a.shape[-1]


def _vector(name: str, v: object, n: int, inc: int) -> Vector:
    if inc == 0:
        raise invalid(f"inc{name}", 0, "non-zero (the reference BLAS rejects 0 for level 2)")
    return Vector(name, v, n, inc, batched=True)


def _batch(a: torch.Tensor, *vectors: Vector, written: Vector | None = None) -> tuple[int, int]:
    """(entries, A's batch stride) of one call: 3-D matrices and 2-D vectors are batches, all of
    one size; an unbatched read operand serves every entry; the written vector holds the batch."""
    sizes = {("a", a.shape[0])} if a.dim() == 3 else set()
    sizes |= {(v.name, v.batch) for v in vectors if v.batched}
    batch = max((size for _, size in sizes), default=1)
    for name, size in sizes:
        if size != batch:
            raise invalid(f"{name}'s batch", size, f"the call's batch of {batch} entries (one size for all)")
    if written is not None and sizes and not written.batched:
        raise invalid(f"{written.name}.dim()", 1, "2-D, one vector a row: the written vector holds the "
                                                  f"batch of {batch}")
    if written is not None:
        written.check_writable()
        check_apart(written.name, written.footprint(), {"a": Footprint.of_tensor(a), **{
            v.name: v.footprint() for v in vectors if v is not written}})
    return batch, a.stride(0) if a.dim() == 3 else 0


def _fp64(*tensors: torch.Tensor) -> bool:
    return any(t.dtype == torch.float64 for t in tensors)


def _gemv(a: torch.Tensor, sam: int, san: int, m: int, n: int, x: Vector, y: Vector, alpha: float,
          beta: float, batch: int, a_batch: int) -> tuple[torch.Tensor, ...] | None:
    """y ← α op(A)·x + β y for op(A) of m × n elements at a + i·sam + j·san; the launch shape comes
    from ``space.select_shape`` (forced, logic files, heuristic): a tile of the gemv kernel, or the
    GEMM with one row where x and y allow it (unbatched calls). Returns the views of A, x and y its
    launches took, or None: A, x and y themselves (``repeat.remember``)."""
    info = device_info(a.device)
    dtype = space.gemv_dtype(a.dtype, sam == 1)
    choice = space.select_shape("gemv", (m, n), dtype, info)
    config = choice.config
    if isinstance(config, k.GemvGemmConfig):
        if (batch == 1 and a.dim() == 2 and x.step == 1 and y.step == 1 and not (x.batched or y.batched)
                and x.tensor.dtype == y.tensor.dtype == a.dtype):
            # yᵀ (1 × m) = xᵀ (1 × n) · op(A)ᵀ, op(A)ᵀ an (n × m) view of A: no copy
            op_a_t = a.as_strided((n, m), (san, sam), a.storage_offset())
            y_row = y.elements()[None, :]
            x_row = x.elements()[None, :]
            with torch.no_grad():  # level 2 records no gradients (gemm would, for an A that wants one)
                gemm(x_row, op_a_t, y_row if beta != 0.0 else None, alpha=alpha, beta=beta, out=y_row)
            return op_a_t, x_row, y_row
        config = space.SHAPE_OPS["gemv"].heuristic(dtype, info.backend).config  # the gemv kernel's tile
    if batch > 1:  # each entry has programs of its own: a tile no larger than its matrix
        if choice.reason != "forced" and info.backend != "interpreter":
            config = space.GEMV_BATCHED  # logic rows are tuned unbatched, on one large matrix
        config = dataclasses.replace(config, block_m=min(config.block_m, max(16, next_power_of_2(m))),
                                     block_n=min(config.block_n, max(32, next_power_of_2(n))))
    k.launch_gemv(a, sam, san, m, n, x.kernel_args(), y.kernel_args(), alpha, beta,
                  fp64=_fp64(a, x.tensor, y.tensor), config=config, num_sms=info.multiprocessors or 8,
                  max_split=2 if info.backend == "interpreter" else 64,  # the CPU runs programs one by one
                  batch=batch, a_batch=a_batch)
    return None  # the kernel takes A, x and y themselves (real dtypes: Vector.data is the tensor)


def _remember(key: tuple | None, calls: list[launch.Call], a: torch.Tensor, x: Vector, y: Vector, made: bool,
              scalars: tuple[float, float], launched: tuple[torch.Tensor, ...] | None = None) -> None:
    """Keep a gemv's or symv's launches for its repeat calls: y written in place, or made (y = None)."""
    given = (a, x.tensor, None if made else y.tensor)
    repeat.remember(key, calls, given, y.tensor, made=(y.tensor,) if made else (),
                    written=() if made else (2,), launched=launched, scalars=scalars)


def _scale_only(y: Vector, beta: float) -> None:
    """y ← β y (α = 0: A is not read); β = 0 writes zeros, as the reference."""
    if beta == 0.0:
        y.elements().zero_()
    elif beta != 1.0:
        y.elements().mul_(beta)


def _output(a: torch.Tensor, x: Vector, y: object | None, rows: int, incy: int, beta: float) -> Vector:
    """y as given, or (β = 0) a new vector — a batch of them where A or x is batched."""
    if y is None:
        if beta != 0.0:
            raise invalid("y", None, "a vector when beta ≠ 0")
        if incy != 1:  # the new vector is contiguous: a spacing would only say how to read a given y
            raise invalid("incy", incy, "1 when y is None (the result is a new contiguous vector; pass y "
                                        "to have it written with a spacing)")
        batch = a.shape[0] if a.dim() == 3 else x.batch if x.batched else None
        y = torch.empty(rows if batch is None else (batch, rows), dtype=a.dtype, device=a.device)
    return _vector("y", y, rows, incy)


def gemv(a: object, x: object, y: object | None = None, *, alpha: float = 1.0, beta: float = 0.0,
         trans: bool = False, incx: int = 1, incy: int = 1) -> torch.Tensor:
    """y ← α op(A)·x + β y, op(A) = A or Aᵀ; y is written in place (a new contiguous vector if None:
    β = 0, incy = 1).
    Batched: A 3-D and/or x 2-D, y 2-D. A repeat call replays the first's launches (``repeat``)."""
    key, done = repeat.replayed("gemv", (a, x, y), (trans, incx, incy), (alpha, beta))
    if done is not None:
        return done
    a = _matrix("a", a)
    check_bools(_LETTERS, trans=trans)
    alpha, beta = real_scalar("alpha", alpha), real_scalar("beta", beta)
    rows, cols = (a.shape[-1], a.shape[-2]) if trans else (a.shape[-2], a.shape[-1])
    x_vec = _vector("x", x, cols, incx)
    y_vec = _output(a, x_vec, y, rows, incy, beta)
    check_same_device({"a": a, "x": x_vec.tensor, "y": y_vec.tensor})
    batch, a_batch = _batch(a, x_vec, y_vec, written=y_vec)
    if rows == 0 or cols == 0 or batch == 0 or (alpha == 0.0 and beta == 1.0):
        return y_vec.tensor
    if alpha == 0.0:
        _scale_only(y_vec, beta)
        return y_vec.tensor
    sam, san = (a.stride(-1), a.stride(-2)) if trans else (a.stride(-2), a.stride(-1))
    with repeat.recording(key) as calls:
        views = _gemv(a, sam, san, rows, cols, x_vec, y_vec, alpha, beta, batch, a_batch)
    mark_written(y_vec.tensor)
    _remember(key, calls, a, x_vec, y_vec, y is None, (alpha, beta), views)
    return y_vec.tensor


def symv(a: object, x: object, y: object | None = None, *, alpha: float = 1.0, beta: float = 0.0,
         lower: bool = False, incx: int = 1, incy: int = 1) -> torch.Tensor:
    """y ← α A·x + β y for symmetric A, read only from its upper (or ``lower``) triangle; y is written
    in place (a new contiguous vector if None: β = 0, incy = 1). Batched: A 3-D and/or x 2-D, y 2-D.
    A repeat call replays the first's launches (``repeat``)."""
    key, done = repeat.replayed("symv", (a, x, y), (lower, incx, incy), (alpha, beta))
    if done is not None:
        return done
    a = _matrix("a", a)
    check_bools(_LETTERS, lower=lower)
    n = _square(a)
    alpha, beta = real_scalar("alpha", alpha), real_scalar("beta", beta)
    x_vec = _vector("x", x, n, incx)
    y_vec = _output(a, x_vec, y, n, incy, beta)
    check_same_device({"a": a, "x": x_vec.tensor, "y": y_vec.tensor})
    batch, a_batch = _batch(a, x_vec, y_vec, written=y_vec)
    if n == 0 or batch == 0 or (alpha == 0.0 and beta == 1.0):
        return y_vec.tensor
    if alpha == 0.0:
        _scale_only(y_vec, beta)
        return y_vec.tensor
    sam, san = (a.stride(-1), a.stride(-2)) if lower else (a.stride(-2), a.stride(-1))  # lower = upper of Aᵀ
    with repeat.recording(key) as calls:
        k.launch_symv(a, sam, san, n, x_vec.kernel_args(), y_vec.kernel_args(), alpha, beta,
                      fp64=_fp64(a, x_vec.tensor, y_vec.tensor), config=space.shape_of("symv", (n,), a),
                      batch=batch, a_batch=a_batch)
    mark_written(y_vec.tensor)
    _remember(key, calls, a, x_vec, y_vec, y is None, (alpha, beta))
    return y_vec.tensor


def ger(alpha: float, x: object, y: object, a: object, *, incx: int = 1, incy: int = 1) -> torch.Tensor:
    """A ← α x yᵀ + A (in place); returns A. Batched: A 3-D (x and y 2-D, or 1-D for every entry).
    A repeat call replays the first's launch (``repeat``)."""
    key, done = repeat.replayed("ger", (a, x, y), (incx, incy), (alpha,))
    if done is not None:
        return done
    a = _matrix("a", a)
    alpha = real_scalar("alpha", alpha)
    m, n = a.shape[-2:]
    x_vec, y_vec = _vector("x", x, m, incx), _vector("y", y, n, incy)
    check_same_device({"a": a, "x": x_vec.tensor, "y": y_vec.tensor})
    check_no_internal_overlap("a", a)
    check_untracked_write("a", a)
    check_apart("a", Footprint.of_tensor(a), {"x": x_vec.footprint(), "y": y_vec.footprint()})
    batch, _ = _batch(a, x_vec, y_vec)
    if (x_vec.batched or y_vec.batched) and a.dim() == 2:
        raise invalid("a.dim()", 2, f"3-D, one matrix an entry: the written matrix holds the batch "
                                    f"of {batch}")
    if m == 0 or n == 0 or batch == 0 or alpha == 0.0:
        return a
    with repeat.recording(key) as calls:
        k.launch_ger(a, x_vec.kernel_args(), y_vec.kernel_args(), alpha,
                     fp64=_fp64(a, x_vec.tensor, y_vec.tensor), config=space.shape_of("ger", (m, n), a))
    mark_written(a)
    repeat.remember(key, calls, (a, x_vec.tensor, y_vec.tensor), a, written=(0,), scalars=(alpha,))
    return a


def trsv(a: object, x: object, *, lower: bool = False, trans: bool = False, unit_diagonal: bool = False,
         incx: int = 1) -> torch.Tensor:
    """Solve op(A)·x = b for triangular A (``lower`` or upper; ``unit_diagonal``: A's diagonal is
    taken as ones and not read); x holds b on entry and the solution on exit. No singularity test
    (as BLAS): a zero on the diagonal gives inf/NaN. One launch: row blocks (64 rows unless the
    ``trsv`` logic says otherwise) solved in order through inverted diagonal blocks (accuracy of
    order cond(diagonal block)·u per block). Batched: x 2-D (A 3-D, or 2-D for every entry)."""
    a = _matrix("a", a)
    check_bools(_LETTERS, lower=lower, trans=trans, unit_diagonal=unit_diagonal)
    n = _square(a)
    x_vec = _vector("x", x, n, incx)
    check_same_device({"a": a, "x": x_vec.tensor})
    batch, a_batch = _batch(a, x_vec, written=x_vec)
    if n == 0 or batch == 0:
        return x_vec.tensor
    sam, san = (a.stride(-1), a.stride(-2)) if trans else (a.stride(-2), a.stride(-1))
    k.launch_trsv(a, sam, san, n, x_vec.kernel_args(), lower=lower != trans, unit_diagonal=unit_diagonal,
                  fp64=_fp64(a, x_vec.tensor), config=space.shape_of("trsv", (n,), a), batch=batch,
                  a_batch=a_batch)
    mark_written(x_vec.tensor)
    return x_vec.tensor
