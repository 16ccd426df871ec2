"""BLAS level 2 on torch tensors: gemv, ger, symv, trsv.

Matrices are 2-D tensors with any strides (BLAS's leading dimension is the stride; a transposed or
sliced view needs no copy); vectors follow ``tessera.blas.level1`` (1-D tensor, ``incx``/``incy``
in elements, negative increments from the far end). As the reference BLAS: a zero increment is an
error, an empty matrix returns at once (y untouched), α = 0 does not read A, β = 0 does not read y
(NaN there does not propagate). Arithmetic is fp32 for 16-bit and fp32 data, fp64 for fp64.
"""

from __future__ import annotations

import torch

from tessera._core.device import device_info
from tessera._core.errors import invalid
from tessera._core.validate import (
    as_tensor,
    check_dtype,
    check_no_internal_overlap,
    check_same_device,
    real_scalar,
)
from tessera.blas import space
from tessera.blas.api import gemm
from tessera.blas.kernels import level2 as k
from tessera.blas.level1 import REAL, Vector


def _matrix(name: str, a: object) -> torch.Tensor:
    a = as_tensor(name, a)
    if a.dim() != 2:
        raise invalid(f"{name}.dim()", f"{a.dim()} (shape {tuple(a.shape)})", "2-D")
    check_dtype(name, a, REAL)
    return a


def _vector(name: str, v: object, n: int, inc: int) -> Vector:
    if inc == 0:
        raise invalid(f"inc{name}", 0, "non-zero (the reference BLAS rejects 0 for level 2)")
    return Vector(name, v, n, inc)


def _fp64(*tensors: torch.Tensor) -> bool:
    return any(t.dtype == torch.float64 for t in tensors)


def _gemv(a: torch.Tensor, sam: int, san: int, m: int, n: int, x: Vector, y: Vector, alpha: float,
          beta: float) -> None:
    """y ← α op(A)·x + β y for op(A) of m × n elements at a + i·sam + j·san; the launch shape comes
    from ``space.select_shape`` (forced, logic files, heuristic): a tile of the gemv kernel, or the
    GEMM with one row where x and y allow it."""
    info = device_info(a.device)
    dtype = space.gemv_dtype(a.dtype, sam == 1)
    config = space.select_shape("gemv", (m, n), dtype, info).config
    if isinstance(config, k.GemvGemmConfig):
        if x.step == 1 and y.step == 1 and x.tensor.dtype == y.tensor.dtype == a.dtype:
            # yᵀ (1 × m) = xᵀ (1 × n) · op(A)ᵀ, op(A)ᵀ an (n × m) view of A: no copy
            op_a_t = a.as_strided((n, m), (san, sam), a.storage_offset())
            y_row = y.elements()[None, :]
            gemm(x.elements()[None, :], op_a_t, y_row if beta != 0.0 else None, alpha=alpha, beta=beta,
                 out=y_row)
            return
        config = space.SHAPE_OPS["gemv"].heuristic(dtype, info.backend).config  # the gemv kernel's tile
    k.launch_gemv(a, sam, san, m, n, x.kernel_args(), y.kernel_args(), alpha, beta,
                  fp64=_fp64(a, x.tensor, y.tensor), config=config, num_sms=info.multiprocessors or 8,
                  max_split=2 if info.backend == "interpreter" else 64)  # the CPU runs programs one by one


def _scale_only(y: Vector, beta: float) -> None:
    """y ← β y (α = 0: A is not read); β = 0 writes zeros, as the reference."""
    if beta == 0.0:
        y.elements().zero_()
    elif beta != 1.0:
        y.elements().mul_(beta)


def _output(a: torch.Tensor, y: object | None, rows: int, incy: int, beta: float) -> Vector:
    if y is None:
        if beta != 0.0:
            raise invalid("y", None, "a vector when beta ≠ 0")
        y = torch.empty(rows, dtype=a.dtype, device=a.device)
    return _vector("y", y, rows, incy)


def gemv(a: object, x: object, y: object | None = None, *, alpha: float = 1.0, beta: float = 0.0,
         trans: bool = False, incx: int = 1, incy: int = 1) -> torch.Tensor:
    """y ← α op(A)·x + β y, op(A) = A or Aᵀ; y is written in place (a new vector if None, β = 0)."""
    a = _matrix("a", a)
    alpha, beta = real_scalar("alpha", alpha), real_scalar("beta", beta)
    rows, cols = (a.shape[1], a.shape[0]) if trans else (a.shape[0], a.shape[1])
    x_vec = _vector("x", x, cols, incx)
    y_vec = _output(a, y, rows, incy, beta)
    check_same_device({"a": a, "x": x_vec.tensor, "y": y_vec.tensor})
    if rows == 0 or cols == 0 or (alpha == 0.0 and beta == 1.0):
        return y_vec.tensor
    if alpha == 0.0:
        _scale_only(y_vec, beta)
        return y_vec.tensor
    sam, san = (a.stride(1), a.stride(0)) if trans else (a.stride(0), a.stride(1))
    _gemv(a, sam, san, rows, cols, x_vec, y_vec, alpha, beta)
    return y_vec.tensor


def symv(a: object, x: object, y: object | None = None, *, alpha: float = 1.0, beta: float = 0.0,
         lower: bool = False, incx: int = 1, incy: int = 1) -> torch.Tensor:
    """y ← α A·x + β y for symmetric A, read only from its upper (or ``lower``) triangle."""
    a = _matrix("a", a)
    if a.shape[0] != a.shape[1]:
        raise invalid("a.shape", tuple(a.shape), "square (n, n)")
    alpha, beta = real_scalar("alpha", alpha), real_scalar("beta", beta)
    n = a.shape[0]
    x_vec = _vector("x", x, n, incx)
    y_vec = _output(a, y, n, incy, beta)
    check_same_device({"a": a, "x": x_vec.tensor, "y": y_vec.tensor})
    if n == 0 or (alpha == 0.0 and beta == 1.0):
        return y_vec.tensor
    if alpha == 0.0:
        _scale_only(y_vec, beta)
        return y_vec.tensor
    sam, san = (a.stride(1), a.stride(0)) if lower else (a.stride(0), a.stride(1))  # lower = upper of Aᵀ
    k.launch_symv(a, sam, san, n, x_vec.kernel_args(), y_vec.kernel_args(), alpha, beta,
                  fp64=_fp64(a, x_vec.tensor, y_vec.tensor), config=space.shape_of("symv", (n,), a))
    return y_vec.tensor


def ger(alpha: float, x: object, y: object, a: object, *, incx: int = 1, incy: int = 1) -> torch.Tensor:
    """A ← α x yᵀ + A (in place); returns A."""
    a = _matrix("a", a)
    alpha = real_scalar("alpha", alpha)
    m, n = a.shape
    x_vec, y_vec = _vector("x", x, m, incx), _vector("y", y, n, incy)
    check_same_device({"a": a, "x": x_vec.tensor, "y": y_vec.tensor})
    check_no_internal_overlap("a", a)
    if m == 0 or n == 0 or alpha == 0.0:
        return a
    k.launch_ger(a, x_vec.kernel_args(), y_vec.kernel_args(), alpha,
                 fp64=_fp64(a, x_vec.tensor, y_vec.tensor), config=space.shape_of("ger", (m, n), a))
    return a


def trsv(a: object, x: object, *, lower: bool = False, trans: bool = False, unit_diagonal: bool = False,
         incx: int = 1) -> torch.Tensor:
    """Solve op(A)·x = b for triangular A (``lower`` or upper; ``unit_diagonal``: A's diagonal is
    taken as ones and not read); x holds b on entry and the solution on exit. No singularity test
    (as BLAS): a zero on the diagonal gives inf/NaN. One launch: row blocks (64 rows unless the
    ``trsv`` logic says otherwise) solved in order through inverted diagonal blocks (accuracy of
    order cond(diagonal block)·u per block)."""
    a = _matrix("a", a)
    if a.shape[0] != a.shape[1]:
        raise invalid("a.shape", tuple(a.shape), "square (n, n)")
    n = a.shape[0]
    x_vec = _vector("x", x, n, incx)
    check_same_device({"a": a, "x": x_vec.tensor})
    if n == 0:
        return x_vec.tensor
    sam, san = (a.stride(1), a.stride(0)) if trans else (a.stride(0), a.stride(1))
    k.launch_trsv(a, sam, san, n, x_vec.kernel_args(), lower=lower != trans, unit_diagonal=unit_diagonal,
                  fp64=_fp64(a, x_vec.tensor), config=space.shape_of("trsv", (n,), a))
    return x_vec.tensor
