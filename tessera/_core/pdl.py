"""Programmatic dependent launch (PDL, CUDA sm_90+) inside kernels.

A kernel launched with ``launch_pdl`` may be started by the GPU while the previous kernel on the
stream is still finishing (if that kernel allowed it), so its launch latency and prologue overlap
that kernel's tail, as cuBLAS's kernels do with each other. The kernel must not touch memory
before the previous kernel is done: :func:`dependent_launch` is its first statement. The host
side (``launch.pdl_mode``, ``launch.launch_options``) decides and compiles it.
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.experimental import gluon
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait


@triton.jit
def dependent_launch(PDL: tl.constexpr):
    """The first statement of a kernel that takes a PDL mode (``launch.PDL_*``). Not off: wait
    until the stream's previous kernel has finished and its writes are visible (before any load
    or store of this kernel: its inputs may be that kernel's outputs, and its outputs that
    kernel's inputs). Early (1): then let the next kernel launch; it starts once every program of
    this grid has passed here, so no program of this grid waits for room behind it, but the next
    kernel's programs may wait beside this grid's running ones. At exit (2): the next kernel
    launches as this grid's programs exit. Off (0; the interpreter, AMD, older NVIDIA): nothing."""
    if PDL != 0:
        gdc_wait()
        if PDL == 1:
            gdc_launch_dependents()


@triton.jit
def dependents_may_launch(PDL: tl.constexpr):
    """In a kernel launched at exit (2): let the next kernel launch now, once every program of
    this grid has passed here, instead of as they exit — for a kernel whose programs have only
    their last few loads and stores left. Safe anywhere: the next kernel's ``dependent_launch``
    still waits for this grid to finish and its writes to be visible. Other modes: nothing (early
    has let it already, off has no next launch to start)."""
    if PDL == 2:
        gdc_launch_dependents()


@gluon.jit
def gluon_dependent_launch(PDL):
    """:func:`dependent_launch` for Gluon kernels, which cannot call ``triton.jit`` functions but
    can call Triton's builtins: in every partition of a warp-specialized kernel that touches
    global memory. ``PDL`` may arrive there as a runtime value (partitions' arguments do); off,
    the compiled code has no ``griddepcontrol`` (offline PTX, Triton 3.6 and 3.9)."""
    if PDL != 0:
        gdc_wait()
        if PDL == 1:
            gdc_launch_dependents()


@triton.jit
def release_fence():
    """``fence.acq_rel.gpu``: this thread's earlier memory operations (and those a barrier
    ordered before them) become visible GPU-wide before its later ones — with relaxed atomics
    after it, one release for several counts. CUDA only: for kernels that take a PDL mode,
    under a check that it is on (PDL is CUDA's; off, the kernel boundary orders everything)."""
    tl.inline_asm_elementwise("fence.acq_rel.gpu;\n\tmov.u32 $0, 0;", "=r", [], dtype=tl.int32, is_pure=False,
                              pack=1)
