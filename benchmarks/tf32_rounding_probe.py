"""How TF32 GEMMs round their float32 operands on this GPU: Tessera's ``precision="tf32"`` beside
torch.matmul with TF32 allowed (cuBLAS), against two fp64 models of the operands' conversion —
truncation (the low 13 bits dropped, what tensor cores do with raw float32 bits) and round to
nearest (``cvt.rna.tf32.f32``).

1. An outer product (K = 32 with only the first column of A and row of B non-zero, so that both
   libraries take a tensor-core kernel): every element is one product, exact in float32 after
   either model, so it equals one model's.
2. The bias that follows over a long K: uniform [0, 1) operands (every product positive), the
   mean signed error against fp64 relative to the exact value. Truncation shortens every operand,
   so its errors add up instead of cancelling.

Writes JSON (argv[1]); run on a GPU: ``python benchmarks/tf32_rounding_probe.py out.json``.
"""

from __future__ import annotations

import json
import sys

import torch

from tessera import blas


def truncated(x: torch.Tensor) -> torch.Tensor:
    """x with its low 13 mantissa bits dropped (TF32's 10 fraction bits, toward zero)."""
    return (x.view(torch.int32) & ~0x1FFF).view(torch.float32)


def nearest(x: torch.Tensor) -> torch.Tensor:
    """x rounded to TF32's 10 fraction bits, ties away from zero (``cvt.rna``; finite x)."""
    bits = x.view(torch.int32).long()
    return ((bits + 0x1000) & ~0x1FFF).to(torch.int32).view(torch.float32)


def torch_tf32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        return torch.matmul(a, b)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def tessera_tf32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return blas.gemm(a, b, precision="tf32")


def outer_product(size: int, generator: torch.Generator) -> dict[str, dict[str, float]]:
    a = torch.zeros(size, 32, device="cuda")
    b = torch.zeros(32, size, device="cuda")
    a[:, 0] = torch.randn(size, device="cuda", generator=generator)
    b[0] = torch.randn(size, device="cuda", generator=generator)
    models = {name: (f(a).double() @ f(b).double()).float() for name, f in
              (("truncated", truncated), ("nearest", nearest))}
    result = {}
    for name, gemm in (("torch", torch_tf32), ("tessera", tessera_tf32)):
        d = gemm(a, b)
        result[name] = {model: float((d == m).double().mean()) for model, m in models.items()}
    return result


def bias(size: int, generator: torch.Generator) -> dict[str, float]:
    a = torch.rand(size, size, device="cuda", generator=generator)
    b = torch.rand(size, size, device="cuda", generator=generator)
    exact = a.double() @ b.double()

    def mean_relative(d: torch.Tensor) -> float:
        return float(((d.double() - exact) / exact).mean())

    return {"torch": mean_relative(torch_tf32(a, b)), "tessera": mean_relative(tessera_tf32(a, b)),
            "model truncated": mean_relative(truncated(a).double() @ truncated(b).double()),
            "model nearest": mean_relative(nearest(a).double() @ nearest(b).double()),
            "float32 IEEE (torch)": mean_relative(torch.matmul(a, b))}


def main() -> None:
    generator = torch.Generator(device="cuda").manual_seed(7)
    report = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "outer product 1024 x 32 x 1024 (one non-zero product), fraction equal to each model":
                  outer_product(1024, generator),
              "mean signed relative error, uniform [0, 1), 2048^3": bias(2048, generator)}
    print(json.dumps(report, indent=1))
    with open(sys.argv[1], "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
