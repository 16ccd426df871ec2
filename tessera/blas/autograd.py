"""Gradients through ``gemm`` (so ``matmul``) and through ``gemm_wq``'s activations.

A call records a gradient when torch's grad mode is on and an operand requires one, as
``torch.matmul`` would; otherwise nothing here runs and the call keeps its repeat-call recipe. The
backward products are Tessera GEMMs too, in the operands' dtype and ``precision``:

    D = alpha · op(A) · op(B) + beta · C
    d op(A) = alpha · G · op(B)ᵀ,   d op(B) = alpha · op(A)ᵀ · G,   dC = beta · G

each summed back over what broadcast in the forward call (a 2-D or batch-1 operand against a
batch, a bias row as C). G is rounded to the operands' dtype first where ``out_dtype`` made D
wider (fp16/bf16 → fp32), as torch's autocast does. Not differentiable, and refused with a
message rather than silently cut from the graph: ``out=`` (torch refuses it too), the fp8 / int8
GEMM with scales, and a quantized weight's own tensors (``gemm_wq`` treats the weight as a
constant: the gradient goes to x only). Level-1 and level-2 routines record no gradients (BLAS
semantics: several update their operands in place; what is written in place must not require a
gradient, and autograd is told of the write: ``validate.mark_written``).
"""

from __future__ import annotations

from typing import Any

import torch

from tessera._core.errors import InvalidArgumentError, UnsupportedError
from tessera._core.validate import as_tensor


def wants_grad(a: object, b: object = None, c: object = None, d: object = None, e: object = None,
               f: object = None) -> bool:
    """Whether a call on these operands (None: absent) must record a gradient: one of them a tensor
    (or ``nn.Parameter``) that requires one, and grad mode on. Written out, not looped: every call
    asks, and this costs ~0.13 µs where a loop over the operands cost ~0.65."""
    return (getattr(a, "requires_grad", False) or getattr(b, "requires_grad", False)
            or (c is not None and getattr(c, "requires_grad", False))
            or (d is not None and getattr(d, "requires_grad", False))
            or (e is not None and getattr(e, "requires_grad", False))
            or (f is not None and getattr(f, "requires_grad", False))) and torch.is_grad_enabled()


def refuse_out(function: str, out: object) -> None:
    if out is not None:
        raise InvalidArgumentError(
            f"{function}: out= does not record gradients, but an operand requires one; call it without "
            f"out=, or under torch.no_grad() (or on detached operands) when no gradient is wanted")


def gemm(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None, *, alpha: float, beta: float,
         trans_a: bool, trans_b: bool, out_dtype: torch.dtype | None, out: torch.Tensor | None,
         precision: str, quantized: bool) -> torch.Tensor:
    """``tessera.blas.gemm`` recording its gradient (``quantized``: fp8/int8 operands or scales)."""
    if quantized:
        raise UnsupportedError(
            "gemm: the fp8 / int8 GEMM with scales has no gradient, but an operand requires one; call "
            "it under torch.no_grad() or on detached operands (gradients are implemented for fp16, "
            "bf16, fp32 and fp64 operands)")
    refuse_out("gemm", out)
    a, b = as_tensor("a", a), as_tensor("b", b)
    c = None if c is None else as_tensor("c", c)
    return _Gemm.apply(a, b, c, alpha, beta, trans_a, trans_b, out_dtype, precision)


def gemm_wq(x: torch.Tensor, qweight: Any, out: torch.Tensor | None) -> torch.Tensor:
    """``tessera.blas.gemm_wq`` recording x's gradient."""
    refuse_out("gemm_wq", out)
    if wants_grad(qweight.scales, qweight.zeros):
        raise UnsupportedError(
            "gemm_wq: the quantized weight's scales or zeros require a gradient, which gemm_wq does not "
            "give (the weight is a constant; the gradient goes to x only); detach them")
    return _GemmWq.apply(x, qweight)


class _Gemm(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None, alpha: float,
                beta: float, trans_a: bool, trans_b: bool, out_dtype: torch.dtype | None,
                precision: str) -> torch.Tensor:
        from tessera.blas.api import gemm as plain_gemm  # grad mode is off inside forward

        d = plain_gemm(a, b, c, alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b,
                       out_dtype=out_dtype, precision=precision)
        ctx.save_for_backward(a, b)
        ctx.options = (alpha, beta, trans_a, trans_b, precision)
        ctx.c_like = None if c is None else (c.shape, c.dtype)
        return d

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        from tessera.blas.api import gemm as plain_gemm

        a, b = ctx.saved_tensors
        alpha, beta, trans_a, trans_b, precision = ctx.options
        g = grad.to(a.dtype)
        grad_a = grad_b = grad_c = None
        if ctx.needs_input_grad[0]:  # A = op(A) or op(A)ᵀ
            da = (plain_gemm(b, g, alpha=alpha, trans_a=trans_b, trans_b=True, precision=precision) if trans_a
                  else plain_gemm(g, b, alpha=alpha, trans_b=not trans_b, precision=precision))
            grad_a = da.sum_to_size(a.shape)
        if ctx.needs_input_grad[1]:
            db = (plain_gemm(g, a, alpha=alpha, trans_a=True, trans_b=trans_a, precision=precision) if trans_b
                  else plain_gemm(a, g, alpha=alpha, trans_a=not trans_a, precision=precision))
            grad_b = db.sum_to_size(b.shape)
        if ctx.needs_input_grad[2]:  # beta = 0 never reads C: its gradient is 0, not 0 · G
            shape, dtype = ctx.c_like
            grad_c = (torch.zeros(shape, dtype=dtype, device=grad.device) if beta == 0
                      else (grad * beta).sum_to_size(shape).to(dtype))
        return grad_a, grad_b, grad_c, None, None, None, None, None, None


class _GemmWq(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, qweight: Any) -> torch.Tensor:
        from tessera.blas.quantized import gemm_wq as plain_gemm_wq

        ctx.qweight = qweight
        return plain_gemm_wq(x, qweight)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, None]:
        from tessera.blas.api import gemm as plain_gemm
        from tessera.blas.quantized import dequantize_weight

        weight = dequantize_weight(ctx.qweight, grad.dtype)  # (K, N): dx = G · Wᵀ
        k, n = weight.shape
        dx = plain_gemm(grad.reshape(-1, n), weight, trans_b=True)
        return dx.reshape(*grad.shape[:-1], k), None
