"""tessera.blas: GEMM (all float dtypes, batched) with BLAS names; more routines to come."""

from tessera.blas.api import explain, gemm, matmul

__all__ = ["explain", "gemm", "matmul"]
