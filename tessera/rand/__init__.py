"""tessera.rand: cuRAND-model generators on torch tensors (Philox4x32-10 today)."""

from tessera.rand.api import Generator, philox4x32_10

__all__ = ["Generator", "philox4x32_10"]
