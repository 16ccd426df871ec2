"""GEMM kernel choice: the tuning space of each family and the heuristic that picks from it.

This is the one place a GEMM call's kernel and configuration are decided. Until tuned logic files
exist (the tuner issue), :func:`select` applies rules measured on the H200 (see BENCHMARKS.md and
docs/architecture.md); the tuner will replace the body of :func:`select` with a logic-file lookup and
keep this module's spaces as what it forks over.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import dataclass

from tessera._core.device import DeviceInfo
from tessera.blas.kernels.gemm_tile import TileConfig
from tessera.blas.kernels.gemm_tma import TmaConfig

Config = TileConfig | TmaConfig


@dataclass(frozen=True)
class GemmProblem:
    """What selection looks at: sizes, dtype key (``bf16``, ``tf32``, …) and layout facts."""

    m: int
    n: int
    k: int
    batch: int
    dtype: str
    tma_ok: bool  # operands meet the descriptor rules and the batch is 1


@dataclass(frozen=True)
class Choice:
    config: Config
    reason: str


# Tuning spaces: what the tuner (and the benchmark sweep) may fork over, per family.
TILE_SPACE: tuple[TileConfig, ...] = tuple(
    TileConfig(bm, bn, bk, 8, w, s)
    for bm, bn, bk in [(16, 64, 128), (16, 128, 128), (32, 64, 64), (32, 32, 32), (64, 64, 32),
                       (64, 64, 64), (64, 128, 32), (128, 64, 32), (128, 128, 32), (128, 128, 64),
                       (128, 256, 64), (64, 64, 16), (128, 64, 16), (64, 128, 16), (128, 128, 16)]
    for w in (4, 8)
    for s in (2, 3, 4)
)
TMA_SPACE: tuple[TmaConfig, ...] = tuple(
    TmaConfig(bm, bn, bk, 8, w, s, ws, split)
    for bm, bn, bk in [(128, 256, 64), (128, 128, 64), (256, 128, 64), (128, 256, 32),
                       (128, 128, 32), (64, 256, 64)]
    for w in (4, 8)
    for s in (3, 4, 5)
    for ws in (False, True)
    for split in (1, 2)
)

_override: Config | None = None


@contextlib.contextmanager
def forced(config: Config | None) -> Iterator[None]:
    """Force every GEMM in the block to use ``config`` (tests, the sweep, the future tuner)."""
    global _override
    previous, _override = _override, config
    try:
        yield
    finally:
        _override = previous


def select(problem: GemmProblem, device: DeviceInfo) -> Choice:
    """Pick the kernel family and configuration for ``problem`` on ``device``."""
    if _override is not None:
        if isinstance(_override, TmaConfig) and not problem.tma_ok:
            return Choice(TileConfig(64, 64, 32), "forced TMA config does not fit this layout")
        return Choice(_override, "forced")
    return _select_heuristic(problem, device.backend, device.arch)


def _sm_version(backend: str, arch: str) -> int:
    """``sm_90`` → 90; 0 for non-CUDA architectures."""
    if backend != "cuda" or not arch.startswith("sm_"):
        return 0
    digits = "".join(ch for ch in arch[3:] if ch.isdigit())
    return int(digits) if digits else 0


def tf32_wants_k_major(device: DeviceInfo) -> bool:
    """Hopper's tf32 wgmma reads only K-major operands; other layouts ran at 0.19x (round 2)."""
    return _sm_version(device.backend, device.arch) >= 90


# Rules measured on the H200 with triton 3.6 (benchmarks/results/sweep-h200-round{1,2}.json):
# 16-bit 8192³: 256x128x64 w8 s4 split-epilogue 782 TFLOP/s, 128x256x64 w8 s3 733;
# 4096³: 128x256x64 w8 s3 752; tf32 8192³ (K-major B): 128x256x32 w8 s3 split 386;
# fp64 4096³: tile 64x128x16 w4 s3 50.8; fp32 IEEE 4096³: tile 64x128x32 w8 s3 44.5;
# bf16 M=16: tile 16x128x64 w4 s5; 512x64³: tile 64x64x64 w4 s1.
@functools.lru_cache(maxsize=4096)
def _select_heuristic(problem: GemmProblem, backend: str, arch: str) -> Choice:
    if backend == "interpreter":
        return Choice(TileConfig(32, 32, 32, 4, 4, 1), "interpreter: small tiles keep the CPU fast")
    hopper = _sm_version(backend, arch) >= 90
    dt, m, n, k = problem.dtype, problem.m, problem.n, problem.k
    if hopper and problem.tma_ok and dt in ("fp16", "bf16", "tf32") and m >= 64 and n >= 64:
        if dt == "tf32":
            return Choice(TmaConfig(128, 256, 32, 8, 8, 3, False, 2), "sm_90 tf32: persistent TMA")
        if m * n >= 6144 * 6144:
            return Choice(TmaConfig(256, 128, 64, 8, 8, 4, False, 2), "sm_90 16-bit, large: 256x128")
        if m * n >= 3072 * 3072:
            return Choice(TmaConfig(128, 256, 64, 8, 8, 3), "sm_90 16-bit, medium: 128x256")
        return Choice(TmaConfig(128, 128, 64, 8, 4, 4), "sm_90 16-bit, small: 128x128 tiles")
    if dt == "fp64":
        return Choice(TileConfig(64, 128, 16, 8, 4, 3), "fp64: tile kernel, fp64 tensor cores")
    if dt == "fp32":
        return Choice(TileConfig(64, 128, 32, 8, 8, 3), "fp32 IEEE: tile kernel on FMA units")
    if m <= 16:
        return Choice(TileConfig(16, 128, 64, 8, 4, 5), "skinny M: 16-row tiles, deep pipeline")
    if m <= 64 and n <= 64:
        stages = 1 if k <= 64 else 3
        return Choice(TileConfig(64, 64, 64, 8, 4, stages), "small matrices: one 64x64 tile each")
    if m <= 64 or n <= 64:
        return Choice(TileConfig(64, 64, 64, 8, 4, 3), "small M or N: 64x64 tiles")
    return Choice(TileConfig(128, 128, 64, 8, 8, 3), "portable: 128x128 tiles")
