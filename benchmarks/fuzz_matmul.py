"""Random ``tessera.blas.matmul`` calls against torch.matmul's semantics in fp64, for as long as
asked: a check beyond the test suite's fixed shape list. Operands of one to four dimensions (a
1-D one promoted and its dimension removed, batch dimensions that broadcast, sizes 0 and 1
among them), fp16 / bf16 / fp32 / fp64, each operand contiguous, transposed, every other column
of a bigger buffer, or expanded (stride 0 along a batch dimension or along its rows); ``out``
contiguous or a strided view, whose buffer must not change around it; for fp64 operands that
require a gradient, the gradients of a random cotangent against torch.matmul's. Three calls a
signature with fresh operands (repeat calls replay). The bound is ``accuracy.gemm_error_bound``'s
(IEEE float32: torch's default precision, which the run leaves as it is).

    python benchmarks/fuzz_matmul.py [--device cuda] [--seconds 60] [--seed 1] [--max-size N]

Exits non-zero at the first mismatch, printing the case."""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
from fuzz_loop import gradients_differ, outside, run  # this folder is on sys.path when run as a script

DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
LAYOUTS = ("contiguous", "transposed", "strided", "expanded")


@dataclass(frozen=True)
class Signature:
    """What stays the same over a signature's three calls (so that they replay)."""

    shape_a: tuple[int, ...]
    shape_b: tuple[int, ...]
    dtype: torch.dtype
    layout_a: str
    layout_b: str
    out: str  # "none", "contiguous" or "strided"
    grad: bool


def _draw(rng: random.Random, max_size: int) -> Signature:
    def size() -> int:
        return rng.choice([0, 1, rng.randint(1, 9), rng.randint(1, max_size), rng.randint(1, max_size)])

    m, k, n = size(), size(), size()
    batch = tuple(rng.choice([0, 1, 2, 3]) if rng.random() < 0.1 else rng.choice([1, 2, 3])
                  for _ in range(rng.randint(0, 2)))

    def shape(rank: int, matrix: tuple[int, int]) -> tuple[int, ...]:
        """An operand's shape: (K,) at rank 1, else batch dimensions (the trailing ones of the
        drawn batch, more in front where the rank asks, any of them 1 to broadcast) and ``matrix``."""
        if rank == 1:
            return (k,)
        extra = rank - 2 - len(batch)
        lead = tuple(rng.choice([1, 2]) for _ in range(extra)) + batch[max(0, -extra):]
        return (*(d if rng.random() < 0.7 else 1 for d in lead), *matrix)

    shape_a, shape_b = shape(rng.choice([1, 2, 2, 3, 4]), (m, k)), shape(rng.choice([1, 2, 2, 3, 4]), (k, n))
    dtype = rng.choice(DTYPES)
    grad = dtype == torch.float64 and rng.random() < 0.4
    return Signature(shape_a, shape_b, dtype, rng.choice(LAYOUTS), rng.choice(LAYOUTS),
                     "none" if grad else rng.choice(["none", "contiguous", "strided"]), grad)


def _operand(shape: tuple[int, ...], layout: str, dtype: torch.dtype, device: str,
             grad: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(the operand, the leaf tensor it is a view of: the one a gradient reaches)."""
    expandable = [i for i, d in enumerate(shape) if d > 1 and i != len(shape) - 1]
    if layout == "transposed" and len(shape) >= 2:
        base = torch.randn(*shape[:-2], shape[-1], shape[-2], dtype=torch.float64).to(dtype)
        view = lambda t: t.transpose(-1, -2)  # noqa: E731
    elif layout == "strided":
        base = torch.randn(*shape[:-1], 2 * shape[-1] + 1, dtype=torch.float64).to(dtype)
        view = lambda t: t[..., 1::2]  # noqa: E731
    elif layout == "expanded" and expandable:
        axis = expandable[-1]  # a batch dimension or the rows: stride 0
        base = torch.randn(*shape[:axis], 1, *shape[axis + 1:], dtype=torch.float64).to(dtype)
        view = lambda t: t.expand(shape)  # noqa: E731
    else:
        base = torch.randn(shape, dtype=torch.float64).to(dtype)
        view = lambda t: t  # noqa: E731
    base = base.to(device).requires_grad_(grad)
    operand = view(base)
    assert tuple(operand.shape) == shape, (operand.shape, shape, layout)
    return operand, base


def _call(s: Signature, device: str, rng: random.Random) -> str | None:
    """One call of ``s`` with fresh operands; what went wrong, or None."""
    from tessera.blas import matmul
    from tessera.blas.accuracy import gemm_reference

    a, leaf_a = _operand(s.shape_a, s.layout_a, s.dtype, device, s.grad)
    b, leaf_b = _operand(s.shape_b, s.layout_b, s.dtype, device, s.grad)
    ref_a, ref_b = a.detach().cpu(), b.detach().cpu()
    try:
        want_shape = torch.matmul(ref_a.double(), ref_b.double()).shape
    except RuntimeError:
        return None  # torch refuses these shapes: not a call to check here
    exact, bound = gemm_reference(ref_a, ref_b, None, alpha=1.0, beta=0.0, out_dtype=s.dtype)
    out = buffer = None
    if s.out != "none":
        cols = want_shape[-1] if want_shape else 1
        shape = (*want_shape[:-1], 2 * cols + 1) if s.out == "strided" and want_shape else want_shape
        buffer = torch.full(shape, 7.0, dtype=s.dtype, device=device)
        out = buffer[..., 1::2] if s.out == "strided" and want_shape else buffer
    got = matmul(a, b, out=out)
    if out is not None and got is not out:
        return "the result is not out itself"
    if buffer is not None and s.out == "strided" and want_shape:
        around = buffer.clone()
        around[..., 1::2] = 7.0
        if not bool((around == 7.0).all()):
            return "an element of out's buffer outside out changed"
    if tuple(got.shape) != tuple(want_shape) or got.dtype != s.dtype:
        return f"result {tuple(got.shape)} {got.dtype}, torch.matmul's {tuple(want_shape)} {s.dtype}"
    values = got.detach().cpu().double()
    if not bool(values.isfinite().all()):
        return "a NaN or an infinity in the result"
    error = (values - exact).abs()
    problem = outside(error, bound)
    if problem is not None:
        return problem
    if s.grad:
        cotangent = torch.randn(got.shape, dtype=torch.float64, device=device)
        mine = torch.autograd.grad(got, (leaf_a, leaf_b), cotangent, allow_unused=True)
        theirs = torch.autograd.grad(torch.matmul(a, b), (leaf_a, leaf_b), cotangent, allow_unused=True)
        problem = gradients_differ("ab", mine, theirs, (leaf_a, leaf_b))
        if problem is not None:
            return f"{problem} (torch.matmul's)"
    return None


def main() -> None:
    run(__doc__.split("\n\n")[0], {"matmul": (_draw, _call)}, (40, 1500))


if __name__ == "__main__":
    main()
