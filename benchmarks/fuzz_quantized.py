"""Random calls of the quantized GEMMs against fp64 references, for as long as asked: a check
beyond the test suite's fixed examples, of the paths a repeat call takes in particular (three
calls per signature with fresh operands, so that the second and third replay the first's recipe).

    python benchmarks/fuzz_quantized.py [--device cuda] [--seconds 60] [--seed 1] [--op wq|scaled|all]

`gemm_wq`: 4 / 8 bits, groups 32–128, symmetric or not, weights fp32, bf16 or fp16 (their
scales stored in that dtype), centred on 0 or shifted (groups all of one sign: every weight must
dequantize within half a stored step), M 1–33, x row- or
column-major, into a contiguous ``out`` or not (a non-contiguous one must be refused with its
buffer untouched). The
scaled GEMM: int8 exact and scaled, fp8 e4m3 / e5m2, per-tensor or per-row / per-column scales,
bf16 / fp16 / fp32 results, bias, ``out``, transposes; an fp16 result beyond its range must be
the infinity of the reference's sign. On the CPU (Triton's interpreter) e5m2 operands are kept
off the subnormals, which the interpreter's fp8 dot gets wrong (docs/architecture.md). Exits
non-zero at the first mismatch, printing the case."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import torch
from fuzz_loop import run  # this folder is on sys.path when run as a script


def _out_view(buffer: torch.Tensor, layout: str, m: int, n: int) -> torch.Tensor:
    """The m × n ``out`` that ``layout`` takes from its buffer: all of it, transposed, or inside."""
    return {"row": buffer, "col": buffer.t(), "padded": buffer[1:m + 1, 1:n + 1]}[layout]


@dataclass
class WqSignature:
    """One weight-only problem: its quantized weight is made once, on the first call."""

    bits: int
    group: int
    symmetric: bool
    m: int
    n: int
    k: int
    out_layout: str | None  # None: no ``out``
    shift: float  # added to the weight: groups all of one sign where it is far from 0
    weight_dtype: torch.dtype  # the weight's, hence its scales'
    weight: tuple | None = field(default=None, repr=False)  # (quantized, its fp64 dequantization)


def _draw_wq(rng: random.Random, largest: int) -> WqSignature:
    group = rng.choice([32, 64, 128])
    return WqSignature(rng.choice([4, 8]), group, rng.random() < 0.5, rng.choice([1, 5, 16, 33]),
                       rng.choice([8, 16, 24, 40, 72, 130]), group * rng.randint(1, 3),
                       rng.choice([None, "row", "col", "padded"]), rng.choice([0.0, 0.0, 4.0, -2.5, 0.3]),
                       rng.choice([torch.float32, torch.bfloat16, torch.float16]))


def _call_wq(case: WqSignature, device: str, rng: random.Random) -> str | None:
    from tessera import TesseraError
    from tessera.blas import dequantize_weight, gemm_wq, quantize_weight

    m, n, k, layout = case.m, case.n, case.k, case.out_layout
    if case.weight is None:
        w = (torch.randn(k, n, device=device) + case.shift).to(case.weight_dtype)
        q = quantize_weight(w, bits=case.bits, group_size=case.group, symmetric=case.symmetric)
        case.weight = (q, dequantize_weight(q, torch.float64))
        step = q.scales.double().repeat_interleave(case.group, dim=0)
        slack = 2.0**-22 * w.double().abs()  # w / scale is rounded in fp32 before its code is
        if bool(((case.weight[1] - w.double()).abs() > 0.5 * step + slack).any()):
            return "quantize_weight left a weight more than half a step from its code"
    q, weight = case.weight
    x = (torch.randn(k, m).t() if rng.random() < 0.3 else torch.randn(m, k)).half().to(device)
    want = x.double() @ weight
    if layout is None:
        got = gemm_wq(x, q)
    else:
        shape = {"row": (m, n), "col": (n, m), "padded": (m + 2, n + 3)}[layout]
        buffer = torch.full(shape, 7.0, dtype=torch.float16, device=device)
        out = _out_view(buffer, layout, m, n)
        if not out.is_contiguous():
            try:
                gemm_wq(x, q, out=out)
            except TesseraError:
                return None if bool((buffer == 7.0).all()) else "gemm_wq wrote into a refused out"
            return "gemm_wq accepted a non-contiguous out"
        got = gemm_wq(x, q, out=out)
        expected = torch.full_like(buffer, 7.0)  # out's place holding the result, 7 around it
        _out_view(expected, layout, m, n).copy_(got)
        if got.data_ptr() != out.data_ptr() or not torch.equal(buffer, expected):
            return "gemm_wq's result is not out, or it wrote around out"
    error = float((got.double() - want).abs().max() / want.abs().max().clamp_min(1e-6))
    if error >= 2e-2:  # fp16 activations and result against the dequantized fp64 weight
        return f"gemm_wq off by {error:.3g} of the largest value"
    return None


def _operand(dtype: torch.dtype, rows: int, cols: int, device: str) -> torch.Tensor:
    if dtype == torch.int8:
        return torch.randint(-100, 100, (rows, cols), dtype=torch.int8).to(device)
    x = torch.randn(rows, cols)
    if device == "cpu":  # the interpreter's fp8 dot gets e5m2 subnormals wrong
        x = torch.where(x.abs() < 2.0**-13, 0.0, x)
    return x.to(dtype).to(device)


@dataclass
class ScaledSignature:
    """One fp8 / int8 problem: ``exact`` is int8 → int32 without scales."""

    dtype: torch.dtype
    m: int
    n: int
    k: int
    trans_a: bool
    trans_b: bool
    per_row: bool
    per_column: bool
    exact: bool
    out_dtype: torch.dtype
    with_bias: bool
    into: bool


def _draw_scaled(rng: random.Random, largest: int) -> ScaledSignature:
    dtype = rng.choice([torch.int8, torch.float8_e4m3fn, torch.float8_e5m2])
    m, n, k = rng.randint(1, 40), rng.randint(1, 40), rng.choice([16, 32, 48, 64, 80])
    trans_a, trans_b, per_row, per_column = (rng.random() < p for p in (0.3, 0.5, 0.5, 0.5))
    exact = dtype == torch.int8 and rng.random() < 0.4
    out_dtype = torch.int32 if exact else rng.choice([torch.bfloat16, torch.float16, torch.float32])
    with_bias, into = not exact and rng.random() < 0.5, rng.random() < 0.5
    return ScaledSignature(dtype, m, n, k, trans_a, trans_b, per_row, per_column, exact, out_dtype,
                           with_bias, into)


def _call_scaled(case: ScaledSignature, device: str, rng: random.Random) -> str | None:
    from tessera.blas import gemm
    from tessera.blas.accuracy import FP8_ACCUMULATION, UNIT_ROUNDOFF

    dtype, m, n, k, out_dtype = case.dtype, case.m, case.n, case.k, case.out_dtype
    a = _operand(dtype, k, m, device).t() if case.trans_a else _operand(dtype, m, k, device)
    b = _operand(dtype, n, k, device).t() if case.trans_b else _operand(dtype, k, n, device)
    sa = (torch.rand(m if case.per_row else 1) + 0.5).to(device)
    sb = (torch.rand(n if case.per_column else 1) + 0.5).to(device)
    bias = torch.randn(n).to(out_dtype).to(device) if case.with_bias else None
    extra = {} if case.exact else {"scale_a": sa, "scale_b": sb, "bias": bias}
    out = torch.full((m, n), 3, dtype=out_dtype, device=device) if case.into else None
    got = gemm(a, b, out_dtype=out_dtype, out=out, **extra)
    if (out is not None and got is not out) or got.dtype != out_dtype or got.shape != (m, n):
        return "scaled gemm returned the wrong tensor, dtype or shape"
    product = a.double() @ b.double()  # fp8 and int8 values are exact in fp64
    if case.exact:
        return None if torch.equal(got.double(), product) else "int8 → int32 not exact"
    want = product * sa.double()[:, None] * sb.double()[None, :]
    magnitude = (a.double().abs() @ b.double().abs()) * sa.double()[:, None] * sb.double()[None, :]
    unit = 2 * UNIT_ROUNDOFF[out_dtype]  # rounded to nearest, or (bf16) the interpreter's truncation
    accumulation = 1e-5 if device == "cpu" else FP8_ACCUMULATION
    slack = 1e-6 + accumulation * magnitude
    if bias is not None:
        want = want + bias.double()[None, :]
        slack = slack + unit * bias.double().abs()[None, :]
    ok = (got.double() - want).abs() <= unit * want.abs() + slack
    if out_dtype == torch.float16:  # beyond fp16's range: the infinity of want's sign
        ok = torch.where(want.abs() > 65520, got.double() == torch.sign(want) * float("inf"), ok)
    if not bool(ok.all()):
        return f"scaled gemm outside its bound at {(~ok).nonzero()[0].tolist()}"
    return None


if __name__ == "__main__":
    run(__doc__.split("\n\n")[0], {"wq": (_draw_wq, _call_wq), "scaled": (_draw_scaled, _call_scaled)},
        (0, 0))
