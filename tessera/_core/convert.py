"""Value conversion inside kernels: float arguments as tensors, and stores as torch converts.

A float kernel argument enters arithmetic as :func:`scalar`, a 1-element tensor of the arithmetic's
dtype: on a GPU the same as a cast, and in Triton's interpreter, whose cast of a float argument goes
through fp32, an fp64 kernel keeps fp64 scalars too (the GEMM epilogue's α / β and level 1/2's).

torch converts an fp64 value to fp16 or bf16 through fp32 (c10's Half and BFloat16 are built from a
float), so a value near a 16-bit tie may round differently than one direct conversion would; Triton
converts directly, and its interpreter's direct fp64 → bf16 conversion returns zeros (Triton 3.9).
Kernels that store a result in the caller's dtype convert with :func:`convert`, so that mixed-dtype
calls (copy, axpy and gemv into a 16-bit vector from fp64 data) give torch's values everywhere.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def scalar(value, dtype: tl.constexpr):
    """The float argument ``value`` as a 1-element tensor of ``dtype`` (exact in fp64 everywhere)."""
    return tl.full((1,), value, dtype)


@triton.jit
def convert(value, dtype: tl.constexpr):
    """``value`` in ``dtype``; fp64 bound for a 16-bit float dtype goes through fp32 (torch's rounding)."""
    if value.dtype == tl.float64:
        if dtype == tl.float16 or dtype == tl.bfloat16:
            return value.to(tl.float32).to(dtype)
    return value.to(dtype)
