"""The one place tests get their reference results: fp64 torch on the CPU."""

from __future__ import annotations

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
