"""Triton GEMM kernel families; each module holds one kernel and its launcher."""
