"""Programmatic dependent launch (PDL, CUDA sm_90+) inside kernels.

A kernel launched with ``launch_pdl`` may be started by the GPU while the previous kernel on the
stream is still finishing (if that kernel allowed it), so its launch latency and prologue overlap
that kernel's tail, as cuBLAS's kernels do with each other. The kernel must not touch memory
before the previous kernel is done: :func:`dependent_launch` is its first statement. The host
side (``launch.pdl_enabled``, ``launch.launch_options``) decides and compiles it.
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait


@triton.jit
def dependent_launch(PDL: tl.constexpr):
    """With ``PDL``: wait until the stream's previous kernel has finished and its writes are
    visible (before any load or store of this kernel: its inputs may be that kernel's outputs, and
    its outputs that kernel's inputs), then allow the next kernel to launch. That next kernel only
    starts once every program of this grid has passed here, so programs of this grid never wait
    for room behind it. Without ``PDL`` (the interpreter, AMD, older NVIDIA): nothing."""
    if PDL:
        gdc_wait()
        gdc_launch_dependents()
