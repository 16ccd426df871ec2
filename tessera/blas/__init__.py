"""tessera.blas: GEMM (all float dtypes, batched) and BLAS levels 1 and 2 with BLAS names."""

from tessera.blas.api import explain, gemm, matmul
from tessera.blas.level1 import asum, axpy, copy, dot, dotc, iamax, iamin, nrm2, rot, scal, swap
from tessera.blas.level2 import gemv, ger, symv, trsv

__all__ = ["asum", "axpy", "copy", "dot", "dotc", "explain", "gemm", "gemv", "ger", "iamax", "iamin",
           "matmul", "nrm2", "rot", "scal", "swap", "symv", "trsv"]
