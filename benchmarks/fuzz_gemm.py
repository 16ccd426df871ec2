"""Random float GEMM calls against fp64, for as long as asked: a check beyond the test suite's
examples, of the families the logic files choose on a GPU in particular (their tiles, split-K and
stream-K rows are reached at sizes the suite's CPU runs never draw) and of the paths repeat calls
take (three calls a signature with fresh operands and fresh scalars, so that the second and third
replay the first's recipe — or must not, where α or β turned zero).

fp16 / bf16 (fp32 results or not), fp32 in every ``precision`` (ieee, tf32, tf32x3, bf16x9, bf16x6),
fp64; transposes; row- and column-major and strided operands; batches that broadcast; C full, a
row, a column, or ``out`` itself (in place); ``out`` row- or column-major or inside a bigger buffer,
whose other elements must not change. What must not be read is NaN: C when β = 0, A and B when
α = 0. The bound is ``accuracy.gemm_error_bound``'s, the one the suite's GEMM tests use. fp64
operands (and C) that require a gradient: the gradients of a random cotangent against torch's
autograd of the same expression (broadcast batches and C summed back, transposes undone).

    python benchmarks/fuzz_gemm.py [--device cuda] [--seconds 60] [--seed 1] [--max-size N]

Exits non-zero at the first mismatch, printing the case."""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

# this folder is on sys.path when run as a script
from fuzz_loop import gradients_differ, matrix, outside, run

KEYS = ("fp16", "bf16", "fp32", "tf32", "tf32x3", "bf16x9", "bf16x6", "fp64")


@dataclass(frozen=True)
class Signature:
    """What stays the same over a signature's three calls (so that they replay)."""

    key: str
    m: int
    n: int
    k: int
    trans_a: bool
    trans_b: bool
    layout_a: str  # "row", "col" or "strided"
    layout_b: str
    batch_a: int | None  # None: 2-D
    batch_b: int | None
    c: str  # "none", "full", "row", "column" or "in place" (out is C)
    out: str  # "none", "row", "col" or "padded" (2-D results only)
    out_fp32: bool  # 16-bit inputs with an fp32 result
    grad: bool  # fp64 operands (and C) that require a gradient: checked against torch's autograd


def _draw(rng: random.Random, max_size: int) -> Signature:
    def size() -> int:
        return rng.choice([rng.randint(1, 70), rng.randint(1, max_size), rng.choice([1, 8, 16, 64, 128])])

    batch = rng.choice([None, None, None, 1, 3])
    batch_a, batch_b = batch, rng.choice([batch, None, 1]) if batch else None
    c = rng.choice(["none", "full", "row", "column", "in place"])
    key = rng.choice(KEYS)
    out = "none" if batch or c == "in place" else rng.choice(["none", "row", "col", "padded"])
    grad = key == "fp64" and out == "none" and c != "in place" and rng.random() < 0.6
    return Signature(key, size(), size(), rng.choice([0, size(), size()]), rng.random() < 0.5,
                     rng.random() < 0.5, rng.choice(["row", "col", "strided"]),
                     rng.choice(["row", "col", "strided"]), batch_a, batch_b, c, out,
                     key in ("fp16", "bf16") and rng.random() < 0.3, grad)


def _call(s: Signature, device: str, rng: random.Random) -> str | None:
    """One call of ``s`` with fresh operands and scalars; what went wrong, or None."""
    from tessera._core.device import precision_of, torch_dtype
    from tessera.blas import gemm
    from tessera.blas.accuracy import gemm_reference

    dtype, precision = torch_dtype(s.key), precision_of(s.key)
    out_dtype = torch.float32 if s.out_fp32 else dtype
    a = matrix(*((s.k, s.m) if s.trans_a else (s.m, s.k)), s.batch_a, dtype, device, s.layout_a)[0]
    b = matrix(*((s.n, s.k) if s.trans_b else (s.k, s.n)), s.batch_b, dtype, device, s.layout_b)[0]
    op_a = (a.transpose(-1, -2) if s.trans_a else a).cpu()
    op_b = (b.transpose(-1, -2) if s.trans_b else b).cpu()
    alpha = rng.choice([1.0, -0.5, 2.0, rng.gauss(0, 1)] + ([] if s.grad else [0.0]))
    beta = 0.0 if s.c == "none" else rng.choice([0.0, 1.0, -0.5, rng.gauss(0, 1)])
    batch = next((x for x in (s.batch_a, s.batch_b) if x is not None and x != 1), s.batch_a or s.batch_b)
    entries = () if batch is None else (batch,)
    c_shape = {"full": (*entries, s.m, s.n), "in place": (*entries, s.m, s.n), "row": (1, s.n),
               "column": (s.m, 1)}.get(s.c)
    c = None if c_shape is None else torch.randn(c_shape, dtype=out_dtype, device=device)
    exact, bound = gemm_reference(op_a, op_b, None if c is None or beta == 0.0 else c.cpu(), alpha=alpha,
                                  beta=beta, out_dtype=out_dtype, precision=precision)
    if c is not None and beta == 0.0:
        c.fill_(float("nan"))  # β = 0: C is not read
    if alpha == 0.0:
        a.fill_(float("nan"))  # α = 0: A and B are not read
        b.fill_(float("nan"))
    out = buffer = before = None
    if s.c == "in place":
        out = c
    elif s.out != "none":
        shape = {"row": (s.m, s.n), "col": (s.n, s.m), "padded": (s.m + 3, s.n + 2)}[s.out]
        buffer = torch.full(shape, 7.0, dtype=out_dtype, device=device)
        before = buffer.clone()
        out = {"row": buffer, "col": buffer.t(), "padded": buffer[1:s.m + 1, 1:s.n + 1]}[s.out]
    if s.grad:  # leaves that share the operands' storage and strides
        a, b = a.detach().requires_grad_(), b.detach().requires_grad_()
        c = None if c is None else c.detach().requires_grad_()
    got = gemm(a, b, c, alpha=alpha, beta=beta, trans_a=s.trans_a, trans_b=s.trans_b, precision=precision,
               out_dtype=torch.float32 if s.out_fp32 else None, out=out)
    if out is not None and got is not out:
        return "the result is not out itself"
    if buffer is not None and s.out == "padded":
        kept = before.clone()
        kept[1:s.m + 1, 1:s.n + 1] = buffer[1:s.m + 1, 1:s.n + 1]
        if not torch.equal(kept, buffer):
            return "an element of out's buffer outside out changed"
    if tuple(got.shape) != tuple(exact.shape) or got.dtype != out_dtype:
        return f"result {tuple(got.shape)} {got.dtype}, expected {tuple(exact.shape)} {out_dtype}"
    error = (got.cpu().double() - exact).abs()
    if not bool(got.isfinite().all()):
        return "a NaN or an infinity in the result"
    problem = outside(error, bound)
    if problem is not None:
        return f"{problem} (α {alpha}, β {beta})"
    return _gradients_differ(s, got, a, b, c, alpha, beta) if s.grad else None


def _gradients_differ(s: Signature, got: torch.Tensor, a: torch.Tensor, b: torch.Tensor,
                      c: torch.Tensor | None, alpha: float, beta: float) -> str | None:
    """Whether the gradients of a random cotangent through ``got`` differ from torch's autograd of
    α·op(A)·op(B) + β·C on fp64 copies (β = 0: C is not read, its gradient zero)."""
    leaves = [t for t in (a, b, c) if t is not None]
    cotangent = torch.randn(got.shape, dtype=torch.float64, device=got.device)
    mine = torch.autograd.grad(got, leaves, cotangent)
    refs = [t.detach().cpu().requires_grad_() for t in leaves]
    op_a = refs[0].transpose(-1, -2) if s.trans_a else refs[0]
    op_b = refs[1].transpose(-1, -2) if s.trans_b else refs[1]
    expression = alpha * (op_a @ op_b)
    if c is not None and beta != 0.0:
        expression = expression + beta * refs[2]
    theirs = torch.autograd.grad(expression, refs, cotangent.cpu(), allow_unused=True)
    problem = gradients_differ("abc"[:len(refs)], mine, theirs, refs)
    return None if problem is None else f"{problem} (torch's autograd; α {alpha}, β {beta})"


def main() -> None:
    run(__doc__.split("\n\n")[0], {"gemm": (_draw, _call)}, (96, 3000))


if __name__ == "__main__":
    main()
