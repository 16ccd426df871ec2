"""The one place tests get their reference results: fp64 torch on the CPU, and the reference BLAS's
vector model in fp64 NumPy."""

from __future__ import annotations

import numpy as np
import torch

from tessera.blas.accuracy import gemm_error_bound


def op(x: torch.Tensor, trans: bool) -> torch.Tensor:
    return x.transpose(-1, -2) if trans else x


def assert_gemm_close(
    d: torch.Tensor, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None = None, *,
    alpha: float = 1.0, beta: float = 0.0, trans_a: bool = False, trans_b: bool = False,
    precision: str = "ieee",
) -> None:
    """``d`` equals ``alpha·op(a)@op(b) + beta·c`` (fp64, CPU) within the documented bound."""
    op_a, op_b = op(a, trans_a).cpu(), op(b, trans_b).cpu()
    ref = alpha * (op_a.double() @ op_b.double())
    if c is not None and beta != 0.0:
        ref = ref + beta * c.cpu().double()
    bound = gemm_error_bound(
        op_a, op_b, None if c is None else c.cpu(), alpha=alpha, beta=beta,
        out_dtype=d.dtype, precision=precision,
    )
    got = d.cpu().double()
    assert got.shape == ref.shape, f"shape {tuple(got.shape)} != reference {tuple(ref.shape)}"
    assert torch.isfinite(got).all(), "result has NaN/Inf"
    err = (got - ref).abs()
    worst = (err / bound).max().item() if err.numel() else 0.0
    assert worst <= 1.0, f"error exceeds bound by x{worst:.3g} (max abs error {err.max().item():.3g})"


# Unit roundoff of each real dtype: the BLAS tests' tolerances are multiples of it.
EPS = {torch.float16: 2**-10, torch.bfloat16: 2**-7, torch.float32: 2**-23, torch.float64: 2**-52}


def positions(n: int, inc: int) -> list[int]:
    """The reference BLAS's element order: from the start, or from the far end for inc < 0."""
    first = 0 if inc >= 0 else (n - 1) * -inc
    return [first + i * inc for i in range(n)]


def f64(t: torch.Tensor) -> np.ndarray:
    """A NumPy fp64 (complex128) copy: never a view of the tensor under test."""
    return t.detach().cpu().to(torch.complex128 if t.is_complex() else torch.float64).numpy().copy()


def close(got: torch.Tensor | float, want: float | np.ndarray, dtype: torch.dtype, scale: float) -> None:
    """``got`` within 8·EPS[dtype]·scale of the fp64 ``want``, elementwise."""
    got = f64(got) if isinstance(got, torch.Tensor) else got
    assert np.allclose(got, want, rtol=0, atol=8 * EPS[dtype] * scale + 1e-300), (got, want)
