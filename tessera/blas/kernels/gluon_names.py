"""Gluon names that differ between the Triton versions Tessera runs on (3.6 on the H200 image, 3.9
in CI): each alias (or wrapper) takes whichever the running Triton has, so a kernel reads the same
on both."""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import tma

tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared  # 3.9 / 3.6
tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global
cta_barrier = getattr(gl, "barrier", None) or gl.thread_barrier  # every warp of the program (or partition)

if hasattr(gl.shared_memory_descriptor, "reinterpret"):  # Triton 3.9

    @gluon.jit
    def reinterpret(buf, dtype: gl.constexpr, shape: gl.constexpr, layout: gl.constexpr):
        """``buf``'s bytes seen as ``shape`` elements of ``dtype`` in ``layout``."""
        return buf.reinterpret(dtype, shape, layout)
else:  # Triton 3.6 names it _reinterpret

    @gluon.jit
    def reinterpret(buf, dtype: gl.constexpr, shape: gl.constexpr, layout: gl.constexpr):
        """``buf``'s bytes seen as ``shape`` elements of ``dtype`` in ``layout``."""
        return buf._reinterpret(dtype, shape, layout)
