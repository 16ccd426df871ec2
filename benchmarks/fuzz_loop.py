"""What the signature fuzzers share (``fuzz_gemm.py``, ``fuzz_level1.py``, ``fuzz_level2.py``,
``fuzz_matmul.py``, ``fuzz_quantized.py``): their operand matrices, BLAS's element order, their
options, and the loop — three calls a drawn signature with fresh operands, so that the second
and third replay the first's recipe; the first mismatch, or a refusal of a call the reference
takes, ends the run non-zero."""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch


def matrix(rows: int, cols: int, batch: int | None, dtype: torch.dtype, device: str,
           layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(A, the buffer it is a view of): a (rows, cols) matrix, 3-D for a batch, row- or
    column-major, or (``strided``) every other column of a bigger matrix, rows offset."""
    entries = 1 if batch is None else batch
    if layout == "strided":
        buffer = torch.randn(entries, rows + 5, 2 * cols + 7, dtype=dtype, device=device)
        a = buffer[:, 3:3 + rows, 5:5 + 2 * cols:2]
    elif layout == "col":
        buffer = torch.randn(entries, cols, rows, dtype=dtype, device=device)
        a = buffer.transpose(1, 2)
    else:
        buffer = a = torch.randn(entries, rows, cols, dtype=dtype, device=device)
    return (a[0] if batch is None else a), buffer


def positions(n: int, inc: int) -> torch.Tensor:
    """The reference BLAS's element order: from the start, or from the far end for inc < 0."""
    first = 0 if inc > 0 else (n - 1) * -inc
    return first + inc * torch.arange(n)


def same(before: torch.Tensor, after: torch.Tensor) -> bool:
    """Equal element for element, a NaN equal to a NaN."""
    return bool(torch.equal(before.isnan(), after.isnan())
                and torch.equal(before.nan_to_num(), after.nan_to_num()))


def units(dtype: torch.dtype) -> tuple[float, float]:
    """(the unit roundoff of data in ``dtype``, of its accumulation: fp32, or fp64 for 64-bit data);
    a complex dtype's are its parts'."""
    from tessera.blas.accuracy import UNIT_ROUNDOFF

    real = torch.empty(0, dtype=dtype).real.dtype
    return UNIT_ROUNDOFF[real], UNIT_ROUNDOFF[torch.float64 if real == torch.float64 else torch.float32]


def outside(error: torch.Tensor, bound: torch.Tensor) -> str | None:
    """The first element whose error passes its bound, as the run's message; None when none does."""
    over = error > bound
    if not bool(over.any()):
        return None
    at = tuple(over.nonzero()[0].tolist())
    return f"outside its bound at {list(at)}: error {error[at]:.3e}, bound {bound[at]:.3e}"


def gradients_differ(names: str, mine: Sequence[torch.Tensor | None], theirs: Sequence[torch.Tensor | None],
                     like: Sequence[torch.Tensor]) -> str | None:
    """Which gradient (of ``like``'s leaves, named by ``names``) differs from the reference's beyond
    10⁻¹⁰ of its largest value (fp64 throughout); None, unused, counts as zeros on either side."""
    for name, g, t, leaf in zip(names, mine, theirs, like, strict=True):
        g = torch.zeros_like(leaf) if g is None else g
        t = torch.zeros_like(leaf) if t is None else t
        scale = 1e-10 * (1 + float(t.abs().max())) if t.numel() else 0.0
        if g.shape != t.shape or not torch.allclose(g.cpu(), t.cpu(), rtol=1e-10, atol=scale):
            return f"the gradient of {name} differs from the reference's"
    return None


def run(description: str, ops: dict[str, tuple[Callable[[random.Random, int], Any],
                                                 Callable[[Any, str, random.Random], str | None]]],
        max_size: tuple[int, int]) -> None:
    """Parse the options, then, for each op chosen (``--op``, where there are several), call
    ``call(draw(rng, max size), device, rng)`` three times a signature until its time is up.
    ``call`` returns what went wrong, or None; ``max_size``: the default largest dimension on the
    CPU (Triton's interpreter) and on a GPU."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--device", default="cpu", help="cpu (Triton's interpreter) or cuda")
    parser.add_argument("--seconds", type=float, default=60.0, help="time per op")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-size", type=int, default=None,
                        help=f"largest dimension (default {max_size[0]} on the CPU, {max_size[1]} on a GPU)")
    if len(ops) > 1:
        parser.add_argument("--op", choices=[*ops, "all"], default="all")
    args = parser.parse_args()
    if args.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # before tessera imports triton
    from tessera import TesseraError

    rng = random.Random(args.seed)
    torch.manual_seed(args.seed)
    largest = args.max_size or max_size[args.device != "cpu"]
    for name, (draw, call) in ops.items():
        if getattr(args, "op", "all") not in (name, "all"):
            continue
        deadline, checked = time.time() + args.seconds, 0
        while time.time() < deadline:
            signature = draw(rng, largest)
            for index in range(3):
                try:
                    problem = call(signature, args.device, rng)
                except TesseraError as error:  # a call the reference takes must not be refused
                    problem = f"refused ({error})"
                if problem is not None:
                    sys.exit(f"{name}: {problem}: {signature}, call {index + 1}")
                checked += 1
        print(f"{name}: {checked} calls right")
