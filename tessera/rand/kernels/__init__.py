"""Triton kernels of tessera.rand; one generator family a file."""
