"""How far a Tessera GEMM may be from the exact result, and why.

The bound is the classical one for a dot product of length K accumulated in precision u_acc
(Higham, *Accuracy and Stability of Numerical Algorithms*, §3.1), elementwise:

    |D − D_exact| ≤ (ε_in + c·(K + 2)·u_acc) · |alpha|·|op(A)|·|op(B)| + 2·u_acc·|beta|·|C| + u_out·|D_exact|

* ε_in: rounding of the operands before the multiply: 2·2⁻¹⁰ + 2⁻²⁰ for tf32 — tensor cores
  given float32 bits drop the low 13 (truncation: |x − tf32(x)| < 2⁻¹⁰·|x|, twice the error of
  rounding to nearest; Triton's tf32 ``tl.dot`` converts nothing before them, and a K = 1 product
  on the GPU measured 2.08·2⁻¹¹ off); 6·2⁻²² for tf32x3 (x = hi + lo with hi rounded to nearest by
  ``cvt.rna`` and lo = x − hi exact, |lo| ≤ 2⁻¹¹·|x|, which the tensor cores truncate in turn:
  |x − hi − tf32(lo)| ≤ 2⁻²¹·|x| for each operand, the dropped lo·lo ≤ 2⁻²²·|a·b|, 5·2⁻²² in all;
  one more 2⁻²² of margin); 0 otherwise (16-bit products are exact in fp32; fp32 IEEE and fp64 use FMA).
  bf16x6 drops the products of the bf16 pieces whose sum is at most 2⁻²²·|a·b| (ε_in = 2⁻²²); bf16x9
  keeps them all (ε_in = 0: the pieces sum to each operand exactly).
* c = 2: tensor-core accumulators are not guaranteed round-to-nearest; the factor covers that.
* The bf16-product precisions also accumulate the small products apart, (products − 1)·K terms
  each under 2⁻⁶·|a·b| (|x₁| ≤ 2⁻⁸·|x|): K + 2 becomes K + 2 + ((products − 1)·K + 2)·2⁻⁶.
* u_out: rounding of the result to the output dtype. Triton's CPU interpreter (3.9) converts
  fp32 → bf16 by truncation whatever ``fp_downcast_rounding`` says (measured: 1.9·2⁻⁸ relative
  error), so there the bf16 output term is 2·u; GPUs round to nearest.

fp8 on a GPU is different: Hopper's fp8 tensor cores sum products in an accumulator narrower than
fp32 (measured on the H200: ~2^-13 of Σ|a·b| for K ≤ 128). The default mode moves partial sums
into fp32 every 128 products (max 1.0e-5 of Σ|a·b| at K = 8192, what torch._scaled_mm's default
leaves); ``fast_accum`` never does (max 4.5e-4 at K = 8192; torch's fast mode 1.4e-4). The bounds
below, on |error| / Σ|a·b|, hold with margin for K up to 8192.

Tests compare against an fp64 reference with this bound: a bug (wrong tile, wrong stride, a lost
K-slice) breaks it by orders of magnitude, rounding never does.
"""

from __future__ import annotations

import torch

from tessera._core.device import interpreter_enabled
from tessera.blas.emulated import SMALL_PRODUCTS

UNIT_ROUNDOFF: dict[torch.dtype, float] = {
    torch.float16: 2.0**-11,
    torch.bfloat16: 2.0**-8,
    torch.float32: 2.0**-24,
    torch.float64: 2.0**-53,
}


FP8_ACCUMULATION = 2.0**-12  # default mode
FP8_FAST_ACCUMULATION = 2.0**-10  # fast_accum=True


def gemm_error_bound(
    op_a: torch.Tensor, op_b: torch.Tensor, c: torch.Tensor | None, *, alpha: float, beta: float,
    out_dtype: torch.dtype, precision: str = "ieee",
) -> torch.Tensor:
    """Elementwise bound (fp64) for ``alpha·op_a@op_b + beta·c`` computed by :func:`tessera.blas.gemm`."""
    return gemm_reference(op_a, op_b, c, alpha=alpha, beta=beta, out_dtype=out_dtype, precision=precision)[1]


def gemm_reference(
    op_a: torch.Tensor, op_b: torch.Tensor, c: torch.Tensor | None, *, alpha: float, beta: float,
    out_dtype: torch.dtype, precision: str = "ieee",
) -> tuple[torch.Tensor, torch.Tensor]:
    """(the fp64 value of ``alpha·op_a@op_b + beta·c``, :func:`gemm_error_bound`'s bound), computed
    together: the bound scales with the exact value."""
    k = op_a.shape[-1]
    u_acc = UNIT_ROUNDOFF[torch.float64 if op_a.dtype == torch.float64 else torch.float32]
    fp32 = op_a.dtype == torch.float32
    operand_error = {"tf32": 2 * 2.0**-10 + 2.0**-20, "tf32x3": 6 * 2.0**-22, "bf16x6": 2.0**-22}
    eps_in = operand_error.get(precision, 0.0) if fp32 else 0.0
    terms = k + 2.0
    if fp32 and precision in SMALL_PRODUCTS:
        terms += (len(SMALL_PRODUCTS[precision]) * k + 2) * 2.0**-6
    magnitude = abs(alpha) * (op_a.double().abs() @ op_b.double().abs())
    exact = alpha * (op_a.double() @ op_b.double())
    bound = (eps_in + 2 * terms * u_acc) * magnitude
    if c is not None and beta != 0.0:
        exact = exact + beta * c.double()
        bound = bound + 2 * u_acc * abs(beta) * c.double().abs()
    u_out = UNIT_ROUNDOFF[out_dtype]
    if out_dtype == torch.bfloat16 and interpreter_enabled():
        u_out *= 2  # the interpreter truncates instead of rounding (see the module docstring)
    return exact, bound + u_out * exact.abs() + torch.finfo(out_dtype).tiny
