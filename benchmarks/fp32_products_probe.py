"""float32 GEMM accuracy by method against an fp64 reference, one run: cuBLAS SGEMM and TF32,
Tessera's IEEE kernels, tf32x3 and the bf16-product precisions (``bf16x9``, ``bf16x6``).

For each operand distribution (``randn``; ``uniform`` on [0, 1), whose sums only grow; ``wide``,
randn scaled by 2^U(−20, 20) per element; ``integers`` in [−2048, 2048], products of up to 22
bits), the columns are max |D − D64| / (|A|·|B|) elementwise and the
norm-wise ‖D − D64‖ / ‖D64‖. A non-finite check compares where ±inf and NaN land with SGEMM's.
Timing is `tessera bench gemm --preset fp32`'s (graphs and flushed, vendor in the same run).

Usage: python benchmarks/fp32_products_probe.py OUT.json [--sizes 1024,4096] [--device cuda]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch

from tessera._core.device import torch_matmul_tf32_as
from tessera._core.timing import run_record, write_result
from tessera.blas import gemm

METHODS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "sgemm": lambda a, b: torch.matmul(a, b),
    "ieee": lambda a, b: gemm(a, b),
    "tf32x3": lambda a, b: gemm(a, b, precision="tf32x3"),
    "bf16x9": lambda a, b: gemm(a, b, precision="bf16x9"),
    "bf16x6": lambda a, b: gemm(a, b, precision="bf16x6"),
}


def operands(kind: str, n: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator(device=device).manual_seed(n)
    def one() -> torch.Tensor:
        if kind == "randn":
            return torch.randn(n, n, device=device, generator=g)
        if kind == "uniform":
            return torch.rand(n, n, device=device, generator=g)
        if kind == "wide":
            exponent = torch.randint(-20, 21, (n, n), device=device, generator=g).float()
            return torch.randn(n, n, device=device, generator=g) * torch.exp2(exponent)
        return torch.randint(-2048, 2049, (n, n), device=device, generator=g).float()
    return one(), one()


def errors(d: torch.Tensor, exact: torch.Tensor, scale: torch.Tensor) -> dict[str, float]:
    diff = d.double() - exact
    return {"max_rel_elementwise": float((diff.abs() / scale.clamp_min(1e-300)).max()),
            "norm_rel": float(diff.norm() / exact.norm().clamp_min(1e-300)),
            "exact_elements": float((diff == 0).double().mean())}


def non_finite(device: str) -> dict:
    """Where ±inf and NaN land with each precision against SGEMM, for A holding an inf, a −inf, a
    NaN and a value above bf16's largest (3.39e38), B a zero under the inf's row (inf · 0 = NaN)."""
    a = torch.randn(256, 256, device=device)
    b = torch.randn(256, 256, device=device)
    a[3, 5], a[7, 9], a[11, 13] = float("inf"), float("-inf"), float("nan")
    b[9, 2] = 0.0
    a[20, 0] = 3.4e38
    b[0] *= 1e-10
    ref = torch.matmul(a, b)
    result = {}
    for name in ("bf16x9", "bf16x6", "tf32x3"):
        d = METHODS[name](a, b)
        same = {kind: bool(torch.equal(test(d), test(ref))) for kind, test in
                (("posinf", torch.isposinf), ("neginf", torch.isneginf), ("nan", torch.isnan))}
        finite = torch.isfinite(ref) & torch.isfinite(d)
        result[name] = {"same_as_sgemm": same,
                        "finite_max_rel_diff": float(((d[finite] - ref[finite]).abs()
                                                      / ref[finite].abs().clamp_min(1e-30)).max())}
        print("non-finite", name, result[name], flush=True)
    return {"case": "non_finite", **result}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--sizes", default="1024,4096")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    rows = []
    for n in (int(v) for v in args.sizes.split(",")):
        for kind in ("randn", "uniform", "wide", "integers"):
            a, b = operands(kind, n, args.device)
            exact = a.double() @ b.double()
            scale = a.double().abs() @ b.double().abs()
            with torch_matmul_tf32_as(True):
                tf32 = torch.matmul(a, b)
            row = {"n": n, "operands": kind, "cublas_tf32": errors(tf32, exact, scale)}
            with torch_matmul_tf32_as(False):
                for name, method in METHODS.items():
                    row[name] = errors(method(a, b), exact, scale)
            rows.append(row)
            print(n, kind, " ".join(f"{name} {row[name]['max_rel_elementwise']:.2e}/"
                                    f"{row[name]['norm_rel']:.2e}" for name in ("cublas_tf32", *METHODS)),
                  flush=True)
    rows.append(non_finite(args.device))
    record = run_record("benchmarks/fp32_products_probe.py "
                        + " ".join(f"{k}={v}" for k, v in vars(args).items()))
    record["rows"] = rows
    write_result(args.out, record)


if __name__ == "__main__":
    main()
