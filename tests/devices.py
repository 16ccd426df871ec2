"""Device descriptions tests select kernels for without having that GPU (nothing launches)."""

from __future__ import annotations

from tessera._core.device import DeviceInfo

# the GPU the warp-specialized and FMA families are written and measured on
H200 = DeviceInfo(arch="sm_90", backend="cuda", name="NVIDIA H200", multiprocessors=132, warp_size=32,
                  shared_memory_per_block=232448, peak_tflops={}, memory_bandwidth_tbs=None)
