"""Random calls of the quantized GEMMs against fp64 references, for as long as asked: a check
beyond the test suite's fixed examples, of the paths a repeat call takes in particular (three
calls per signature with fresh operands, so that the second and third replay the first's recipe).

    python benchmarks/fuzz_quantized.py [--device cuda] [--seconds 60] [--seed 1] [--op wq|scaled|both]

`gemm_wq`: 4 / 8 bits, groups 32–128, symmetric or not, M 1–33, x row- or column-major, into a
contiguous ``out`` or not (a non-contiguous one must be refused with its buffer untouched). The
scaled GEMM: int8 exact and scaled, fp8 e4m3 / e5m2, per-tensor or per-row / per-column scales,
bf16 / fp16 / fp32 results, bias, ``out``, transposes; an fp16 result beyond its range must be
the infinity of the reference's sign. On the CPU (Triton's interpreter) e5m2 operands are kept
off the subnormals, which the interpreter's fp8 dot gets wrong (docs/architecture.md). Exits
non-zero at the first mismatch, printing the case."""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

import torch


def _out_view(buffer: torch.Tensor, layout: str, m: int, n: int) -> torch.Tensor:
    """The m × n ``out`` that ``layout`` takes from its buffer: all of it, transposed, or inside."""
    return {"row": buffer, "col": buffer.t(), "padded": buffer[1:m + 1, 1:n + 1]}[layout]


def fuzz_wq(rng: random.Random, device: str, deadline: float) -> int:
    """Weight-only calls until the deadline; returns how many were checked."""
    from tessera import TesseraError
    from tessera.blas import dequantize_weight, gemm_wq, quantize_weight

    checked = 0
    while time.time() < deadline:
        bits, group, symmetric = rng.choice([4, 8]), rng.choice([32, 64, 128]), rng.random() < 0.5
        k, n, m = group * rng.randint(1, 3), rng.choice([8, 16, 24, 40, 72, 130]), rng.choice([1, 5, 16, 33])
        w = torch.randn(k, n, device=device)
        q = quantize_weight(w, bits=bits, group_size=group, symmetric=symmetric)
        weight = dequantize_weight(q, torch.float64)
        into, layout = rng.random() < 0.5, rng.choice(["row", "col", "padded"])
        for call in range(3):
            x = (torch.randn(k, m).t() if rng.random() < 0.3 else torch.randn(m, k)).half().to(device)
            want = x.double() @ weight
            case = (bits, group, symmetric, m, n, k, into and layout, call)
            if not into:
                got = gemm_wq(x, q)
            else:
                shape = {"row": (m, n), "col": (n, m), "padded": (m + 2, n + 3)}[layout]
                buffer = torch.full(shape, 7.0, dtype=torch.float16, device=device)
                out = _out_view(buffer, layout, m, n)
                if not out.is_contiguous():
                    try:
                        gemm_wq(x, q, out=out)
                    except TesseraError:
                        if not bool((buffer == 7.0).all()):
                            sys.exit(f"gemm_wq wrote into a refused out: {case}")
                        checked += 1
                        continue
                    sys.exit(f"gemm_wq accepted a non-contiguous out: {case}")
                got = gemm_wq(x, q, out=out)
                expected = torch.full_like(buffer, 7.0)  # out's place holding the result, 7 around it
                _out_view(expected, layout, m, n).copy_(got)
                if got.data_ptr() != out.data_ptr() or not torch.equal(buffer, expected):
                    sys.exit(f"gemm_wq's result is not out, or it wrote around out: {case}")
            error = float((got.double() - want).abs().max() / want.abs().max().clamp_min(1e-6))
            if error >= 2e-2:  # fp16 activations and result against the dequantized fp64 weight
                sys.exit(f"gemm_wq off by {error:.3g} of the largest value: {case}")
            checked += 1
    return checked


def _operand(rng: random.Random, dtype: torch.dtype, rows: int, cols: int, device: str) -> torch.Tensor:
    if dtype == torch.int8:
        return torch.randint(-100, 100, (rows, cols), dtype=torch.int8).to(device)
    x = torch.randn(rows, cols)
    if device == "cpu":  # the interpreter's fp8 dot gets e5m2 subnormals wrong
        x = torch.where(x.abs() < 2.0**-13, 0.0, x)
    return x.to(dtype).to(device)


def fuzz_scaled(rng: random.Random, device: str, deadline: float) -> int:
    """fp8 / int8 calls until the deadline; returns how many were checked."""
    from tessera.blas import gemm
    from tessera.blas.accuracy import FP8_ACCUMULATION, UNIT_ROUNDOFF

    accumulation = 1e-5 if device == "cpu" else FP8_ACCUMULATION
    checked = 0
    while time.time() < deadline:
        dtype = rng.choice([torch.int8, torch.float8_e4m3fn, torch.float8_e5m2])
        m, n, k = rng.randint(1, 40), rng.randint(1, 40), rng.choice([16, 32, 48, 64, 80])
        trans_a, trans_b, per_row, per_column = (rng.random() < p for p in (0.3, 0.5, 0.5, 0.5))
        exact = dtype == torch.int8 and rng.random() < 0.4
        out_dtype = torch.int32 if exact else rng.choice([torch.bfloat16, torch.float16, torch.float32])
        with_bias, into = not exact and rng.random() < 0.5, rng.random() < 0.5
        for call in range(3):
            a = _operand(rng, dtype, k, m, device).t() if trans_a else _operand(rng, dtype, m, k, device)
            b = _operand(rng, dtype, n, k, device).t() if trans_b else _operand(rng, dtype, k, n, device)
            sa = (torch.rand(m if per_row else 1) + 0.5).to(device)
            sb = (torch.rand(n if per_column else 1) + 0.5).to(device)
            bias = torch.randn(n).to(out_dtype).to(device) if with_bias else None
            extra = {} if exact else {"scale_a": sa, "scale_b": sb, "bias": bias}
            out = torch.full((m, n), 3, dtype=out_dtype, device=device) if into else None
            got = gemm(a, b, out_dtype=out_dtype, out=out, **extra)
            case = (dtype, m, n, k, trans_a, trans_b, per_row, per_column, out_dtype, with_bias, into, call)
            if (out is not None and got is not out) or got.dtype != out_dtype or got.shape != (m, n):
                sys.exit(f"scaled gemm returned the wrong tensor, dtype or shape: {case}")
            product = a.double() @ b.double()  # fp8 and int8 values are exact in fp64
            if exact:
                if not torch.equal(got.double(), product):
                    sys.exit(f"int8 → int32 not exact: {case}")
                checked += 1
                continue
            want = product * sa.double()[:, None] * sb.double()[None, :]
            magnitude = (a.double().abs() @ b.double().abs()) * sa.double()[:, None] * sb.double()[None, :]
            unit = 2 * UNIT_ROUNDOFF[out_dtype]  # rounded to nearest, or (bf16) the interpreter's truncation
            slack = 1e-6 + accumulation * magnitude
            if bias is not None:
                want = want + bias.double()[None, :]
                slack = slack + unit * bias.double().abs()[None, :]
            ok = (got.double() - want).abs() <= unit * want.abs() + slack
            if out_dtype == torch.float16:  # beyond fp16's range: the infinity of want's sign
                ok = torch.where(want.abs() > 65520, got.double() == torch.sign(want) * float("inf"), ok)
            if not bool(ok.all()):
                sys.exit(f"scaled gemm outside its bound at {(~ok).nonzero()[0].tolist()}: {case}")
            checked += 1
    return checked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu (Triton's interpreter) or cuda")
    parser.add_argument("--seconds", type=float, default=60.0, help="time per op")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--op", choices=["wq", "scaled", "both"], default="both")
    args = parser.parse_args()
    if args.device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"  # before tessera imports triton
    rng = random.Random(args.seed)
    torch.manual_seed(args.seed)
    for op, fuzz in (("wq", fuzz_wq), ("scaled", fuzz_scaled)):
        if args.op in (op, "both"):
            print(f"{op}: {fuzz(rng, args.device, time.time() + args.seconds)} calls right")


if __name__ == "__main__":
    main()
