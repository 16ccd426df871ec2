"""tessera.blas: GEMM (all float dtypes, batched), weight-only quantized GEMM (W4A16, W8A16) and
BLAS levels 1 and 2 with BLAS names."""

from tessera.blas.api import explain, gemm, matmul
from tessera.blas.level1 import asum, axpy, copy, dot, dotc, iamax, iamin, nrm2, rot, scal, swap
from tessera.blas.level2 import gemv, ger, symv, trsv
from tessera.blas.quantized import QuantizedWeight, dequantize_weight, gemm_wq, quantize_weight

__all__ = ["QuantizedWeight", "asum", "axpy", "copy", "dequantize_weight", "dot", "dotc", "explain", "gemm",
           "gemm_wq", "gemv", "ger", "iamax", "iamin", "matmul", "nrm2", "quantize_weight", "rot", "scal",
           "swap", "symv", "trsv"]
