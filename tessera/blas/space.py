"""GEMM kernel choice: the tuning space of each family, and the one place a call's kernel is chosen.

Order (each fall-through is recorded in the choice's reason, which ``TESSERA_LOG=trace`` prints):
the installed pack's logic file for this arch and dtype → the logic shipped in the wheel → a
heuristic from the arch's properties (rules measured on the H200 for sm_90; tiles shrunk to the
device's shared memory elsewhere) → a safe default when nothing is known. An arch nobody has seen
gets the heuristic or the default, never an error.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch

from tessera._core.device import TF32_KEYS, DeviceInfo, device_info, dtype_key, torch_dtype
from tessera._core.launch import cdiv
from tessera.blas.kernels.gemm_fma import FmaConfig
from tessera.blas.kernels.gemm_scaled import ScaledConfig, ScaledTmaConfig
from tessera.blas.kernels.gemm_splitk import SplitKConfig
from tessera.blas.kernels.gemm_streamk import StreamKConfig
from tessera.blas.kernels.gemm_tile import TileConfig
from tessera.blas.kernels.gemm_tma import TmaConfig
from tessera.blas.kernels.gemm_wq import WqConfig, WqDequantConfig, WqGemvConfig
from tessera.blas.kernels.gemm_wq_ws import WqWsConfig
from tessera.blas.kernels.gemm_ws import ScaledWsConfig, WsConfig, row_fits, swap_fits, unswapped
from tessera.blas.kernels.level1 import VectorConfig
from tessera.blas.kernels.level2 import GemvConfig, GemvGemmConfig, GerConfig, SymvConfig, TrsvConfig
from tessera.tuning import logic

Config = (TileConfig | TmaConfig | SplitKConfig | StreamKConfig | WsConfig | FmaConfig | WqConfig
          | WqGemvConfig | WqDequantConfig | WqWsConfig | ScaledConfig | GemvConfig | GemvGemmConfig
          | GerConfig | SymvConfig | TrsvConfig | VectorConfig)
SIZE_KEYS = ("m", "n", "k", "batch")

# Runs on any GPU Triton supports: 32x32x32 tiles, one stage (≤ 16 KiB of shared memory in fp64).
SAFE_DEFAULT = TileConfig(32, 32, 32, 8, 4, 1)


@dataclass(frozen=True)
class GemmProblem:
    """What selection looks at: sizes, dtype key (``bf16``, ``tf32``, …) and layout facts."""

    m: int
    n: int
    k: int
    batch: int
    dtype: str
    tma_ok: bool  # operands meet the descriptor rules and the batch is 1
    ws_ok: bool = False  # and the warp-specialized family takes them (``gemm_ws.ws_supported``, sm_90)
    ws_swapped: bool = False  # with a row-major tf32 B, which it multiplies swapped (``gemm_ws.swap_fits``)
    fma_ok: bool = False  # the Gluon FMA family takes them (``gemm_fma.fma_supported``, NVIDIA)
    layout: str | None = None  # op(A) then op(B), N row-major, T column-major: a layout logic file's key


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
# no warp specialization: triton 3.6 fails to compile it for this kernel (H200, 2e48e78)
TMA_SPACE: tuple[TmaConfig, ...] = tuple(
    TmaConfig(bm, bn, bk, 8, w, s, False, split)
    for bm, bn, bk in [(128, 256, 64), (128, 128, 64), (256, 128, 64), (128, 256, 32),
                       (128, 128, 32), (64, 256, 64), (128, 64, 64), (64, 128, 64)]
    for w in (4, 8)
    for s in (3, 4, 5)
    for split in (1, 2)
)

# Split-K for small M·N and long K: chosen through logic files once tuned (not by the heuristic,
# which has no GPU measurement of it yet).
SPLITK_SPACE: tuple[SplitKConfig, ...] = tuple(
    SplitKConfig(bm, bn, bk, split, w, s)
    for bm, bn, bk in [(16, 64, 128), (16, 128, 64), (32, 64, 64), (64, 64, 64)]
    for split in (2, 4, 8, 16)
    for w in (4,)
    for s in (3, 4)
)

# Stream-K (persistent, the K-iteration space shared evenly): for wave-quantized grids (tiles a
# little over a multiple of the SM count). Like split-K, chosen through logic files once tuned.
STREAMK_SPACE: tuple[StreamKConfig, ...] = tuple(
    StreamKConfig(bm, bn, bk, 0, w, s, tma)
    for bm, bn, bk in [(128, 128, 64), (128, 256, 64), (64, 128, 64)]
    for w in (4, 8)
    for s in (3, 4)
    for tma in (False, True)
)

# The warp-specialized Gluon family (sm_90, 16-bit, no C, alpha 1): chosen through logic files. Around
# the configurations timed by benchmarks/gemm_gluon_probe.py (128×256×64 3 stages best at 8192³).
WS_SPACE: tuple[WsConfig, ...] = (
    WsConfig(128, 256, 64, 8, 8, 3), WsConfig(128, 256, 64, 16, 8, 3), WsConfig(128, 256, 64, 4, 8, 3),
    WsConfig(128, 256, 32, 8, 8, 6), WsConfig(256, 128, 64, 8, 8, 3), WsConfig(256, 128, 32, 8, 8, 6),
    WsConfig(128, 128, 64, 8, 4, 4), WsConfig(128, 128, 64, 8, 4, 5),
    WsConfig(128, 128, 64, 8, 4, 5, pingpong=True),  # probes: 0.986× torch at 8192³, 1.028× at 8192²×1024
    WsConfig(64, 128, 64, 8, 4, 6),  # 128 tiles: 1024³ 0.91× torch (gemm_tma's 64x128 0.88×; shipped there)
)
# ... for tf32 (float32 rows of 32 elements: 128 bytes a K step; gemm_tma's tf32 tile, 128×256×32
# with 3 stages and D in halves, and what fits beside it). All but the ping-pong pair multiply a
# row-major B swapped, without gemm's K-major copy (``gemm_ws.swap_fits``): 256×128×32 1.014× torch
# at 2048³ (shipped there), 0.97–0.99× at 4096³–8192³ (gpu-session-h200-c08cc10/)
WS_TF32_SPACE: tuple[WsConfig, ...] = (
    WsConfig(128, 256, 32, 8, 8, 3, 2), WsConfig(256, 128, 32, 8, 8, 3, 2), WsConfig(128, 128, 32, 8, 8, 5),
    WsConfig(128, 128, 32, 8, 4, 5), WsConfig(128, 128, 32, 8, 4, 4, 2, pingpong=True),
    WsConfig(64, 128, 32, 8, 4, 6),  # 128 tiles at 1024³, one launch: 0.84× (the copy path 1.13×)
)

# The Gluon FMA family (IEEE float32, A and B row-major, NVIDIA): chosen through logic files. Offline
# (sm_90, Triton 3.6, the 9 launches of a pack): BK 8 in two buffers 123–138 registers, 126–128 under
# a 128 cap without spills (two programs a multiprocessor); in one buffer 127–130 (the cap spills);
# BK 16 in two buffers 142–153 under a 168 cap (ptxas spilled at its own 128). With its shared-memory
# accesses free of bank conflicts (fifty-second and -third sessions) BK 8 in two buffers (r128) ran
# 0.895–0.912× SGEMM from 2048³ on the H200 against the tile family's 0.865–0.892×: the sm_90 fp32
# squares take it (gpu-session-h200-eafe38c/). 8×8 of D a thread; on 4 warps (8×16 a thread) it ran
# 0.64–0.71× on an H100 where these ran 0.86–0.91× (gpu-session-h100-c9e3695/fp32/): not offered.
FMA_SPACE: tuple[FmaConfig, ...] = (FmaConfig(8, 2, 8, 128), FmaConfig(8, 1), FmaConfig(8, 2, 16, 128),
                                    FmaConfig(16, 2, 8, 168))

# ``with forced(config):`` makes every GEMM of config's op in the block use ``config`` (tests,
# sweeps, the tuner); a quantized op's config leaves float GEMMs (gemm_wq's own included) alone.
forced = logic.Override()
GEMM_CONFIGS = (TileConfig, TmaConfig, SplitKConfig, StreamKConfig, WsConfig, FmaConfig)


def uses_tma(config: object) -> bool:
    """Whether ``config`` loads through tensor descriptors (a problem must be ``tma_ok`` for it)."""
    return isinstance(config, (TmaConfig, WsConfig)) or getattr(config, "tma", False)


def _misfit(problem: GemmProblem, config: object) -> str | None:
    """Why a float GEMM configuration (forced, or a logic file's) cannot run ``problem``; None
    when it can."""
    if uses_tma(config) and not problem.tma_ok:
        return "TMA config does not fit this layout"
    if isinstance(config, WsConfig) and not problem.ws_ok:
        return "warp-specialized config does not fit this call"
    if isinstance(config, WsConfig) and not row_fits(config, torch_dtype(problem.dtype).itemsize):
        return f"warp-specialized config's K step is over 128 bytes a row for {problem.dtype}"
    if isinstance(config, WsConfig) and problem.ws_swapped and not swap_fits(config):
        return "warp-specialized config cannot multiply a row-major tf32 B swapped"
    if isinstance(config, FmaConfig) and not problem.fma_ok:
        return "FMA config does not fit this call (IEEE float32, 2-D, A and B row-major, NVIDIA)"
    if isinstance(config, StreamKConfig) and problem.batch != 1:
        return "stream-K config takes no batch"
    return None


def select(problem: GemmProblem, device: DeviceInfo) -> Choice:
    """Pick the kernel family and configuration for ``problem`` on ``device``."""
    if type(forced.config) in GEMM_CONFIGS:
        why = _misfit(problem, forced.config)
        if why is not None:
            return Choice(TileConfig(64, 64, 32), f"forced {why}")
        return Choice(forced.config, "forced")
    return _select_cached(problem, device.backend, device.arch, device.shared_memory_per_block,
                          device.multiprocessors, logic.generation())


@functools.lru_cache(maxsize=4096)
def _select_cached(problem: GemmProblem, backend: str, arch: str, shared_memory: int | None,
                   multiprocessors: int | None, _logic_generation: int) -> Choice:
    match, reasons = logic.lookup(arch, "blas", "gemm", problem.dtype,
                                  (problem.m, problem.n, problem.k, problem.batch),
                                  usable=lambda cfg: _misfit(problem, cfg) is None, layout=problem.layout,
                                  multiprocessors=multiprocessors)
    if match is not None:
        config = match.config
        tuned_swapped = match.logic.problem.get("layout", "NN")[1] == "N"  # the tuner's B: row-major
        if (problem.dtype == "tf32" and isinstance(config, WsConfig) and problem.ws_ok and tuned_swapped
                and not problem.ws_swapped and swap_fits(config)):  # a row tuned swapped, B column-major
            exchanged = unswapped(config)
            if exchanged != config and _misfit(problem, exchanged) is None:
                return Choice(exchanged, f"{match.describe()}; block_m and block_n exchanged: tuned on "
                                         f"a row-major B (multiplied swapped), this B is column-major")
        return Choice(config, match.describe())
    choice = _select_heuristic(problem, backend, arch, shared_memory)
    return Choice(choice.config, "; ".join([*reasons, choice.reason]))


def heuristic(problem: GemmProblem, device: DeviceInfo) -> Choice:
    """What the untuned heuristic picks for ``problem`` on ``device``, logic files ignored: the
    baseline a tuned choice is compared against (the tuner's candidates, the bench's gain column)."""
    return _select_heuristic(problem, device.backend, device.arch, device.shared_memory_per_block)


def _shared_memory_bytes(config: TileConfig, dtype: str) -> int:
    """Operand tiles staged in shared memory by the software pipeline (a close upper estimate:
    Triton keeps stages − 1 of them; tf32x3 one more for its split halves, measured offline for
    sm_90: 128x128x64 on 3 stages 192 KiB against fp32's 128)."""
    stages = max(config.num_stages, 1)
    tile = config.block_m * config.block_k + config.block_k * config.block_n
    return stages * tile * torch_dtype(dtype).itemsize


def _fit_to_shared_memory(config: TileConfig, dtype: str, limit: int) -> TileConfig:
    """Fewer stages, then a shorter K block, then smaller M/N blocks, until the tiles fit."""
    while _shared_memory_bytes(config, dtype) > limit:
        if config.num_stages > 1:
            config = dataclasses.replace(config, num_stages=config.num_stages - 1)
        elif config.block_k > 16:
            config = dataclasses.replace(config, block_k=config.block_k // 2)
        elif max(config.block_m, config.block_n) > 16:
            wider_m = config.block_m >= config.block_n
            config = dataclasses.replace(
                config, block_m=config.block_m // 2 if wider_m else config.block_m,
                block_n=config.block_n if wider_m else config.block_n // 2)
        else:
            break
    return config


def _sm_version(backend: str, arch: str) -> int:
    """``sm_90`` → 90; 0 for non-CUDA architectures."""
    if backend != "cuda" or not arch.startswith("sm_"):
        return 0
    digits = "".join(ch for ch in arch[3:] if ch.isdigit())
    return int(digits) if digits else 0


def tma_capable(device: DeviceInfo) -> bool:
    """The TMA family can run here (CUDA sm_90 or newer)."""
    return _sm_version(device.backend, device.arch) >= 90


def ws_capable(device: DeviceInfo) -> bool:
    """The warp-specialized family can run here: CUDA sm_90 exactly (wgmma is Hopper's)."""
    return _sm_version(device.backend, device.arch) == 90


def descriptors_run(device: DeviceInfo) -> bool:
    """Tensor-descriptor kernels can run here: CUDA sm_90+, or Triton's interpreter (which
    emulates them, so CI covers those families)."""
    return tma_capable(device) or device.backend == "interpreter"


def tf32_wants_k_major(device: DeviceInfo) -> bool:
    """Hopper's tf32 wgmma reads only K-major operands; other layouts ran at 0.19x (round 2). tf32x3,
    which splits the operands in registers, still ran 2.2–2.4x slower from a row-major B than
    from the K-major copy (``tf32x3-h200-*/``)."""
    return _sm_version(device.backend, device.arch) >= 90


# Rules measured on the H200 with triton 3.6 (benchmarks/results/sweep-h200-round{1,2}.json):
# 16-bit 8192³: 256x128x64 w8 s4 split-epilogue 782 TFLOP/s, 128x256x64 w8 s3 733;
# 4096³: 128x256x64 w8 s3 752; tf32 8192³ (K-major B): 128x256x32 w8 s3 split 386;
# fp64 4096³: tile 64x128x16 w4 s3 50.8; fp32 IEEE 4096³: tile 64x128x32 w8 s3 44.5; tf32x3
# (K-major B; tf32x3-h200-*/): 128x128x32 w8 s3 77–83 from 2048³ up; 1024³ 128x64x32 w4 s4 48.0,
# 128x128 38.1 (SGEMM 34.5 there, 48.7–51.1 from 2048³);
# 512x64³: tile 64x64x64 w4 s1. bf16 M = 1 and 16, N = K = 8192 (sweep-skinny-h200-2b7e350.json,
# CUDA-graph timed): tile 16x64x128 w4 s4 at 96 / 95 % of copy bandwidth (twice the programs of the
# earlier 16x128x64 s5: 85 / 84 %); split-K (2…8) lost at both.
def _select_heuristic(problem: GemmProblem, backend: str, arch: str, shared_memory: int | None) -> Choice:
    if backend == "interpreter":
        return Choice(TileConfig(32, 32, 32, 4, 4, 1), "interpreter: small tiles keep the CPU fast")
    hopper = _sm_version(backend, arch) >= 90
    if shared_memory is None and not hopper:
        return Choice(SAFE_DEFAULT, f"no properties known for {backend} {arch}: safe default")
    choice = _portable_rules(problem, hopper)
    if isinstance(choice.config, TileConfig) and shared_memory is not None:
        fitted = _fit_to_shared_memory(choice.config, problem.dtype, shared_memory)
        if fitted != choice.config:
            return Choice(fitted, f"{choice.reason}, shrunk to {shared_memory} B of shared memory")
    return choice


def _portable_rules(problem: GemmProblem, hopper: bool) -> Choice:
    dt, m, n, k = problem.dtype, problem.m, problem.n, problem.k
    if hopper and problem.tma_ok and dt in ("fp16", "bf16", *TF32_KEYS) and m >= 64 and n >= 64:
        if dt == "tf32":
            return Choice(TmaConfig(128, 256, 32, 8, 8, 3, False, 2), "sm_90 tf32: persistent TMA")
        if dt == "tf32x3":  # three products a step keep a second accumulator: 128-row tiles
            if m * n <= 1536 * 1536:  # 128x128 tiles would leave half the SMs idle at 1024²
                return Choice(TmaConfig(128, 64, 32, 8, 4, 4), "sm_90 tf32x3, small: 128x64")
            return Choice(TmaConfig(128, 128, 32, 8, 8, 3), "sm_90 tf32x3: persistent TMA, 128x128")
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
        return Choice(TileConfig(16, 64, 128, 8, 4, 4), "skinny M: 16-row tiles, 64 columns, deep K")
    if m <= 64 and n <= 64:
        stages = 1 if k <= 64 else 3
        return Choice(TileConfig(64, 64, 64, 8, 4, stages), "small matrices: one 64x64 tile each")
    if m <= 64 or n <= 64:
        return Choice(TileConfig(64, 64, 64, 8, 4, 3), "small M or N: 64x64 tiles")
    return Choice(TileConfig(128, 128, 64, 8, 8, 3), "portable: 128x128 tiles")


# Sizes heuristic logic covers: squares, skinny LLM-like shapes, small batches.
_HEURISTIC_GRID = (
    [(s, s, s, 1) for s in (256, 512, 1024, 2048, 4096, 8192, 16384)]
    + [(m, n, k, 1) for m in (1, 16, 64, 256) for n, k in ((4096, 4096), (8192, 8192), (14336, 4096))]
    + [(64, 64, 64, 512), (128, 128, 128, 256)]
)
DTYPES = ("fp16", "bf16", "tf32", "tf32x3", "fp32", "fp64")


def heuristic_logic(device: DeviceInfo) -> list[dict]:
    """Logic documents (one per dtype) holding what the heuristic picks on ``device`` over a grid of
    sizes: what a pack ships for an architecture nobody has tuned (``origin: heuristic``)."""
    docs = []
    for dtype in DTYPES:
        if dtype in TF32_KEYS and device.backend == "hip":
            continue  # no tf32 on AMD: gemm computes such calls as fp32
        rows = []
        for m, n, k, batch in _HEURISTIC_GRID:
            tma_ok = batch == 1 and min(m, n, k) >= 16 and dtype != "fp64"
            choice = heuristic(GemmProblem(m, n, k, batch, dtype, tma_ok), device)
            rows.append(({"m": m, "n": n, "k": k, "batch": batch}, choice.config))
        docs.append(logic.heuristic_document(device.arch, device.backend, "blas", "gemm", dtype, rows))
    return docs


WAVE_MIN_K = 2048
"""The K (a split-K slice's share) a tile's main loop needs before its waves, not its fixed costs,
set its time: below it :func:`wave_efficiency` does not judge (sixty-first session, through calls
on an H100: rows weighed without this limit lost up to 26 % at K 256–1024; docs/architecture.md,
"Wave-weighed rows"). The same K for every tile, so that at one size all data-parallel rows are
judged or none."""
WAVE_MIN_SIDE = 256
"""Nor where M or N is under this: a skinny product streams the other operand, its bytes and not
its waves set its time (and no such shape was timed weighed)."""


def wave_efficiency(config: object, sizes: tuple[int, ...], multiprocessors: int) -> float | None:
    """The share of ``multiprocessors`` a GEMM configuration keeps busy at (m, n, k, batch): its
    output tiles over whole waves of one tile a multiprocessor, times the share of each tile
    inside the matrix; split-K's slices are tiles of their own (a logic file's ``wave_slack``
    weighs rows so). None where tile counts do not predict the time: stream-K, which shares K
    over every multiprocessor (its cost is its fix-up's: 1024²×32768 bf16 on an H100 ran
    192–211 TFLOP/s spread over all 132, where 128 data-parallel tiles of 64×128 ran 578); a
    main loop over K under :data:`WAVE_MIN_K` (its prologue and epilogue then weigh as much as
    its waves); a skinny product (a side under :data:`WAVE_MIN_SIDE`)."""
    if isinstance(config, StreamKConfig):
        return None
    m, n, k, batch = sizes
    block_m, block_n = getattr(config, "block_m", 0), getattr(config, "block_n", 0)
    if not (block_m and block_n and m and n):
        return 1.0
    if min(m, n) < WAVE_MIN_SIDE:
        return None
    split_k = getattr(config, "split_k", 1)
    if k < WAVE_MIN_K * split_k:
        return None
    rows, cols = cdiv(m, block_m), cdiv(n, block_n)
    inside = m * n / (rows * block_m * cols * block_n)
    tiles = rows * cols * max(batch, 1) * split_k
    return inside * tiles / (cdiv(tiles, multiprocessors) * multiprocessors)


def split_depth(config: object, sizes: tuple[int, ...]) -> float | None:
    """The K each slice of a split-K configuration multiplies at (m, n, k, batch); None for the
    configurations that do not split K (a logic file's ``min_split_depth`` limits these)."""
    split_k = getattr(config, "split_k", 1)
    return sizes[2] / split_k if split_k > 1 else None


logic.register_op("blas", "gemm", SIZE_KEYS,
                  {"gemm_tile": TileConfig, "gemm_tma": TmaConfig, "gemm_splitk": SplitKConfig,
                   "gemm_streamk": StreamKConfig, "gemm_ws": WsConfig, "gemm_fma": FmaConfig},
                  heuristic=heuristic_logic, efficiency=wave_efficiency, split_depth=split_depth)


# Weight-only quantized GEMM (``gemm_wq``): op ``gemm_wq``, dtype ``int{bits}_{activation}`` (e.g.
# ``int4_bf16``), sizes (m, n, k). BLOCK_K is capped at the quantization group when launched.
WQ_SIZE_KEYS = ("m", "n", "k")
WQ_DTYPES = ("int4_bf16", "int4_fp16", "int8_bf16", "int8_fp16")
WQ_SPACE: tuple[WqConfig | WqGemvConfig | WqDequantConfig | WqWsConfig, ...] = (
    # BLOCK_K: K rows per step (4-bit: half as many code rows); 512 columns a warp keep each thread's
    # sums in its registers, 256 on one warp split a row over two lanes (twice the programs); 5-6
    # stages keep as many bytes in flight with half the slices (1024×8 K/32 on 5 stages won the
    # int8_bf16 M = 1 re-tune at ceac80c, before unit codes took 512×16 K/64 on 2)
    *(WqGemvConfig(bn, bk, split, w, s) for bn, w in ((256, 1), (512, 1), (1024, 2), (2048, 4))
      for bk in (8, 16) for split in (32, 64, 128) for s in (2, 3, 4, 5, 6)),
    *(WqConfig(bm, bn, bk, split, 8, w, s, warp_mma=halves)
      for bm, bn, bk in [(8, 128, 128), (8, 256, 128), (16, 64, 128), (16, 128, 64), (16, 128, 128),
                         (16, 256, 128), (32, 128, 64), (64, 128, 64), (128, 128, 64), (256, 64, 64),
                         (256, 128, 64)]
      for split in (1, 2, 4, 8)
      for w in (4, 8)
      for s in (3, 4)
      for halves in ((False, True) if bm == 16 else (False,))  # warp_mma: two 8-row halves
      if bm <= 32 or split == 1),
    WqDequantConfig(32, 128, 4), WqDequantConfig(16, 256, 4),
    # sm_90, symmetric codes, up to 32 rows: the warp-specialized Gluon decode kernel (W4A16 8192²,
    # interleaved codes: 3 warp groups 13.0 / 13.5 µs at M = 1 / 16 on 6 stages, 4 groups 12.8 / 13.6
    # on 8; wq-runs-h200-c35f0f3/; the decode and 16-row tiles 14.7 / 19.0). Stages a multiple of
    # the groups (gemm_wq_ws's docstring: 8 stages of 3 groups faulted)
    *(WqWsConfig(s, c) for s, c in ((8, 4), (9, 3), (6, 3), (12, 3), (4, 4), (8, 2))),
    # … with K split in 2 or 4 (N = 4096: 2 slices 17.9 → 13.7 µs at W4A16 M = 1, K = 14336;
    # wq-split-h200-cb33338/)
    *(WqWsConfig(s, 3, split) for s in (9, 6) for split in (2, 4)),
    # … with each programmatic-dependent-launch mode named (the default takes the code width's
    # measured one): the best mode differs by GPU (early cost W8A16 2.7 µs on the H200 and
    # nothing on an H100; gpu-session-h200-7ff31f8/pdlwq/), and the tuner's graph replays of
    # consecutive calls time it as a serving loop sees it
    *(WqWsConfig(s, 3, pdl=mode) for s in (9, 6) for mode in ("off", "early", "exit")),
)


# gemm_wq's tensor-core family for decode-sized problems whose codes gemv_wq cannot read as words
WQ_FALLBACK = WqConfig(16, 64, 64, 1, 8, 4, 3)


# the configuration types of each op that select_mnk serves (any of its families may be forced)
MNK_CONFIGS: dict[str, tuple[type, ...]] = {
    "gemm_wq": (WqConfig, WqGemvConfig, WqDequantConfig, WqWsConfig),
    "gemm_scaled": (ScaledConfig, ScaledTmaConfig, ScaledWsConfig)}


# the warp-specialized families, which take a call only where MnkProblem.ws_ok says so
WS_MNK_CONFIGS = (ScaledWsConfig, WqWsConfig)


@dataclass(frozen=True)
class MnkProblem:
    """A quantized GEMM as selection sees it (ops ``gemm_wq`` and ``gemm_scaled``)."""

    m: int
    n: int
    k: int
    dtype: str  # int4_bf16 … for gemm_wq; fp8e4m3, fp8e5m2, int8 for gemm_scaled
    tma_ok: bool = False  # gemm_scaled: the operands' layouts and the device take gemm_scaled_tma
    # and the warp-specialized family takes them: gemm_scaled_ws (sm_90, fp8 with fast
    # accumulation, scaled), gemm_wq_ws (sm_90, the weight and x as ``gemm_wq_ws.wq_ws_supported``)
    ws_ok: bool = False


def select_mnk(op: str, problem: MnkProblem, device: DeviceInfo) -> Choice:
    """The configuration of a quantized GEMM (``op`` gemm_wq or gemm_scaled): a forced config of
    that family (unless it is a warp-specialized one the call does not fit), else the logic files
    (their rows the call fits), else the op's heuristic."""
    if forced.config is not None and isinstance(forced.config, MNK_CONFIGS[op]):
        if problem.ws_ok or not isinstance(forced.config, WS_MNK_CONFIGS):
            return Choice(forced.config, "forced")
    return _select_mnk_cached(op, problem, device.backend, device.arch, device.multiprocessors or 0,
                              logic.generation())


@functools.lru_cache(maxsize=1024)
def _select_mnk_cached(op: str, problem: MnkProblem, backend: str, arch: str, sms: int,
                       _generation: int) -> Choice:
    match, reasons = logic.lookup(arch, "blas", op, problem.dtype, (problem.m, problem.n, problem.k),
                                  usable=lambda cfg: (problem.tma_ok or not uses_tma(cfg))
                                  and (problem.ws_ok or not isinstance(cfg, WS_MNK_CONFIGS)))
    if match is not None:
        return Choice(match.config, match.describe())
    choice = MNK_HEURISTICS[op](problem, backend, sms)
    return Choice(choice.config, "; ".join([*reasons, choice.reason]))


def _wq_heuristic(problem: MnkProblem, backend: str, sms: int) -> Choice:
    """Until tuned logic exists, the families benchmarks/quantized.py, wq_tc.py, wq_ws_probe.py and
    the gemv_wq sweeps measured best on the H200 (N = K = 8192): on sm_90, symmetric 4- and 8-bit
    weights up to 32 rows the warp-specialized Gluon kernel (``ws_ok``); elsewhere 4-bit weights up to 16
    rows on tensor cores (256 weight rows by 8 tokens, or 128 by 16 as two halves of 8; K split
    until about 512 threads per multiprocessor), 8-bit ones on CUDA cores for one row (512
    columns on one warp, K split in slices of at least 128 rows until about eight programs per
    multiprocessor; unit codes with bf16 activations), with bf16 activations up to 16 rows on
    tensor cores as byte planes (128 weight rows by 16 tokens, the scales a step ahead); fused
    tensor-core tiles (64 weight rows by 16 tokens, K split until about two programs per
    multiprocessor) up to 32 rows, larger fused tiles up to 512, dequantize-then-GEMM beyond (0.97×
    bf16 torch.matmul at M = 4096, 0.77× at 1024, where fused tiles reach 0.4–0.6×)."""
    m, n, k = problem.m, problem.n, problem.k
    if backend == "interpreter":
        if m <= 2:
            return Choice(WqGemvConfig(32, 32, 2 if k >= 128 else 1, 4),
                          "interpreter: CUDA-core path, split K")
        return Choice(WqConfig(16, 32, 32, 2 if k >= 128 else 1, 4, 4, 1),
                      "interpreter: small tiles, split K to cover the reduction path")

    def split_for(programs: int, per_sm: int, min_slice: int, most: int) -> int:
        """K split in powers of two until about ``per_sm`` programs per multiprocessor exist, each
        slice keeping at least ``min_slice`` rows of K, at most ``most`` slices."""
        split = 1
        while programs * split < per_sm * max(sms, 1) and k // (split * 2) >= min_slice and split < most:
            split *= 2
        return split

    four_bit = problem.dtype.startswith("int4")
    if problem.ws_ok:
        # 6 stages of 3 warp groups (a multiple of the groups: gemm_wq_ws's docstring). W4A16 8192²:
        # 13.0 / 13.5 µs at M = 1 / 16 against the tiles' 14.7 / 19.0 (wq-runs-h200-c35f0f3/); W8A16
        # 19.5 / 20.1 µs against 20.7 / 24.0 (tune-wq8ws-h200-c446b77/)
        stages = 6
        # K split while the (column block, slice) programs still fit one wave: N = 4096 takes 2
        # (W4A16 K = 14336 17.9 → 13.7 µs at M = 1, 19.3 → 14.6 at 16; K = 4096 6.8 → 6.6 / 7.4 → 6.8;
        # W8A16 K = 14336 20.8 → 19.3 / 22.4 → 20.3); 4 slices there (two waves) lost, and so did
        # 2 where the blocks fill the GPU alone (N = 8192, 14336; wq-split-h200-cb33338/)
        programs, split = -(-n // 64), 1
        while split < 4 and programs * split * 2 <= max(sms, 1) and k % (256 * split * 2) == 0:
            split *= 2
        return Choice(WqWsConfig(stages, 3, split), f"sm_90, symmetric {4 if four_bit else 8}-bit codes, up "
                      f"to 32 rows: warp-specialized Gluon kernel, 3 warp groups, {stages} stages, "
                      f"K split {split}")
    if four_bit and m <= 16:  # 2.25× / 1.73× torch (quantized-h200-77dda0e.json; 16 rows in 8-row halves)
        config = (WqConfig(8, 256, 128, 1, 8, 8, 3) if m <= 8
                  else WqConfig(16, 128, 64, 1, 8, 4, 3, warp_mma=True))  # tune-wq16-h200-46ae292
        programs, target = -(-n // config.block_n), 512 // (32 * config.num_warps) * max(sms, 1)
        split = 1
        while 2 * programs * split <= target and k // (split * 2) >= 4 * config.block_k:
            split *= 2
        return Choice(dataclasses.replace(config, split_k=split),
                      f"{m} row(s) of 4-bit weights: tensor cores on exact integer codes, K split {split}")
    if m == 1:  # bf16 activations: unit codes, 1.63–1.64× torch (tune-wq8u-h200-3f5302b)
        unit = problem.dtype == "int8_bf16"
        config = WqGemvConfig(512, 16, 1, 1, 2, unit_codes=True) if unit else WqGemvConfig(512, 8, 1, 1, 3)
        split = split_for(-(-n // config.block_n), 8, 128, 64)
        return Choice(dataclasses.replace(config, split_k=split),
                      f"one row: CUDA cores{', unit codes' if unit else ''}, K split {split}")
    if m <= 16 and problem.dtype == "int8_bf16":  # 1.33–1.34× torch at M = 16 (tune-wq8-h200-ceac80c)
        config = WqConfig(16, 128, 128, 1, 8, 4, 3, byte_planes=True, early_scales=True)
        split = split_for(-(-n // config.block_n), 1, 4 * config.block_k, 16)  # K/8 lost: 27.4 µs
        return Choice(dataclasses.replace(config, split_k=split),
                      f"small M, 8-bit codes: tensor cores on byte planes, K split {split}")
    if m <= 32:
        config = WqConfig(16 if m <= 16 else 32, 64, 128, 1, 8, 4, 3)
        split = split_for(-(-m // config.block_m) * -(-n // config.block_n), 2, 4 * config.block_k, 16)
        return Choice(dataclasses.replace(config, split_k=split),
                      f"small M: tensor cores on transposed 64-row weight tiles, K split {split}")
    if m <= 512:
        return Choice(WqConfig(128, 128, 64, 1, 8, 8, 3), "medium M: fused 128x128 tiles")
    return Choice(WqDequantConfig(), "large M: dequantize once, then the float GEMM")


_WQ_GRID = [(m, n, k) for m in (1, 16, 64, 256, 1024, 4096) for n, k in ((4096, 4096), (8192, 8192),
                                                                          (14336, 4096))]


def _mnk_heuristic_docs(device: DeviceInfo, op: str, dtypes: tuple[str, ...],
                        grid: list[tuple[int, int, int]]) -> list[dict]:
    """Logic documents (one per dtype) of what ``op``'s heuristic chooses over an (m, n, k) grid:
    what a pack ships for an op nobody has tuned on ``device`` (``origin: heuristic``)."""
    heuristic, sms = MNK_HEURISTICS[op], device.multiprocessors or 0
    docs = []
    for dtype in dtypes:
        rows = [({"m": m, "n": n, "k": k}, heuristic(MnkProblem(m, n, k, dtype), device.backend, sms).config)
                for m, n, k in grid]
        docs.append(logic.heuristic_document(device.arch, device.backend, "blas", op, dtype, rows))
    return docs


def heuristic_wq_logic(device: DeviceInfo) -> list[dict]:
    """What the weight-only heuristic picks on ``device`` over a grid, as logic documents."""
    return _mnk_heuristic_docs(device, "gemm_wq", WQ_DTYPES, _WQ_GRID)


logic.register_op("blas", "gemm_wq", WQ_SIZE_KEYS,
                  {"gemm_wq": WqConfig, "gemv_wq": WqGemvConfig, "gemm_wq_dequant": WqDequantConfig,
                   "gemm_wq_ws": WqWsConfig},
                  heuristic=heuristic_wq_logic)


# fp8/int8 operands with scales (``gemm_scaled``): op ``gemm_scaled``, dtype ``fp8e4m3``,
# ``fp8e5m2`` or ``int8``, with ``_fast`` appended for fp8 with fast accumulation (a different
# kernel: its best tiles differ), sizes (m, n, k).
SCALED_DTYPES = ("fp8e4m3", "fp8e5m2", "fp8e4m3_fast", "fp8e5m2_fast", "int8")
SCALED_SPACE: tuple[ScaledConfig | ScaledTmaConfig, ...] = tuple(
    ScaledConfig(bm, bn, bk, 8, w, s)
    for bm, bn, bk in [(64, 64, 64), (64, 128, 128), (128, 128, 64), (128, 128, 128), (128, 256, 64),
                       (128, 256, 128), (256, 128, 128)]
    for w in (4, 8)
    for s in (3, 4)
) + tuple(  # Hopper: persistent, descriptor loads; wide tiles store D in two slices to fit 4
    # stages with a 16-bit D, in four with an int32 or fp32 one (fitting_stages cuts what does not fit)
    ScaledTmaConfig(bm, bn, 128, 8, 8, s, False, split, flat)
    for bm, bn in [(128, 256), (256, 128), (128, 128)]
    for split in ((1,) if bm == bn else (2, 4))
    for s in (3, 4)
    for flat in (False, True)
) + (  # sm_90, fp8 with fast accumulation: the warp-specialized Gluon kernel (D in halves: a 4th stage)
    *(ScaledWsConfig(128, 256, 128, g, 8, 3) for g in (4, 8, 16, 32)),
    ScaledWsConfig(128, 256, 128, 8, 8, 4, 2), ScaledWsConfig(128, 256, 64, 8, 8, 6),
    ScaledWsConfig(256, 128, 64, 8, 8, 6), ScaledWsConfig(128, 128, 64, 8, 4, 8),
    # ping-pong: 0.974–0.990× _scaled_mm at 8192³ against the cooperative 1.032×, 1.037× against
    # 0.967× at 8192²×1024 (gluon-probe-h200-d6b93bc/, -bd6198f/)
    ScaledWsConfig(128, 128, 128, 8, 4, 6, 2, pingpong=True),
)


def _scaled_heuristic(problem: MnkProblem, backend: str, sms: int) -> Choice:
    """Large problems take the tiles measured best at 8192³ on the H200: fp8 with fast accumulation
    on sm_90 the warp-specialized Gluon kernel, 128x256x128 on 3 stages, where it takes the call
    (1.024–1.038× torch._scaled_mm fast in four graph-timed probes where gemm_scaled_tma took
    1.001–1.008×, gluon-probe-h200-77d697b/ … -8d97fd4/); fp8 on
    the persistent descriptor family where the layouts allow (fast accumulation 128x256x128
    flattened, 1.02× torch._scaled_mm; default 256x128x128, 0.83× against the pointer family's 0.70×;
    persistent-sweep-h200-20c50f1.json), else the pointer family (fp8 fast 128x256x128, default
    256x128x128, 4 stages; benchmarks/quantized.py); int8 the descriptor family's 128x256x128
    with D stored in quarters, so 4 stages fit beside an int32 D (1.34× / 1.32× torch._int_mm in
    two passes against 1.29× / 1.29× with halves and 3 stages, persistent-sweep-h200-11667c3.json),
    else the pointer family's 128x128x128 (3 stages), 8 warps."""
    if backend == "interpreter":
        return Choice(ScaledConfig(32, 32, 32, 4, 4, 1), "interpreter: small tiles keep the CPU fast")
    if problem.m <= 64 or problem.n <= 64:
        return Choice(ScaledConfig(64, 64, 128, 8, 4, 3), "small M or N: 64x64 tiles")
    fast = problem.dtype.endswith("_fast")
    if problem.ws_ok:
        return Choice(ScaledWsConfig(128, 256, 128, 8, 8, 3),
                      "fp8, fast accumulation, sm_90: warp-specialized Gluon kernel, 128x256 tiles")
    if problem.dtype.startswith("fp8") and problem.tma_ok:
        if fast:
            return Choice(ScaledTmaConfig(128, 256, 128, 8, 8, 4, False, 2, True),
                          "fp8, fast accumulation: persistent descriptor family, 128x256 tiles, flattened")
        return Choice(ScaledTmaConfig(256, 128, 128, 8, 8, 4, False, 2),
                      "fp8: persistent descriptor family, 256x128 tiles (fp32 every 128 products)")
    if problem.dtype == "int8" and problem.tma_ok:
        return Choice(ScaledTmaConfig(128, 256, 128, 8, 8, 4, False, 4, True),
                      "int8: persistent descriptor family, 128x256 tiles, D in quarters (4 stages fit)")
    if fast:
        return Choice(ScaledConfig(128, 256, 128, 8, 8, 4), "fp8, fast accumulation: 128x256 tiles")
    if problem.dtype.startswith("fp8"):
        return Choice(ScaledConfig(256, 128, 128, 8, 8, 4), "fp8: 256x128 tiles (fp32 every 128 products)")
    return Choice(ScaledConfig(128, 128, 128, 8, 8, 3), "int8: 128x128 tiles, K blocks of 128")


def _scaled_dtypes(device: DeviceInfo) -> tuple[str, ...]:
    """Input dtypes whose tensor-core dot Triton lowers for ``device``: fp8 on CUDA sm_89+ only."""
    fp8 = device.backend == "cuda" and _sm_version(device.backend, device.arch) >= 89
    return SCALED_DTYPES if fp8 else ("int8",)


def heuristic_scaled_logic(device: DeviceInfo) -> list[dict]:
    """What the fp8/int8 heuristic picks on ``device`` over a grid, as logic documents."""
    grid = [(s, s, s) for s in (1024, 4096, 8192)] + [(m, 8192, 8192) for m in (16, 64, 256)]
    return _mnk_heuristic_docs(device, "gemm_scaled", _scaled_dtypes(device), grid)


logic.register_op("blas", "gemm_scaled", WQ_SIZE_KEYS,
                  {"gemm_scaled": ScaledConfig, "gemm_scaled_tma": ScaledTmaConfig,
                   "gemm_scaled_ws": ScaledWsConfig},
                  heuristic=heuristic_scaled_logic)
MNK_HEURISTICS = {"gemm_wq": _wq_heuristic, "gemm_scaled": _scaled_heuristic}


# BLAS level 1 and 2 launch shapes: one selection path (forced → logic files → heuristic) for the
# ops below, each keyed by its sizes and a dtype name.
#
# ``gemv``: sizes (m, n) of op(A); dtype ``bf16`` … when op(A)'s rows are contiguous in memory (A
# row-major, no transpose), ``bf16_t`` … when its columns are (gemv with trans=True on a row-major A).
GEMV_DTYPES = tuple(f"{d}{layout}" for d in ("fp16", "bf16", "fp32", "fp64") for layout in ("", "_t"))
GEMV_SPACE: tuple[GemvConfig, ...] = tuple(
    GemvConfig(bm, bn, w, per_sm)
    for bm, bn in [(16, 256), (16, 512), (32, 256), (32, 512), (64, 128), (64, 256), (128, 64), (256, 64),
                   (512, 16), (1024, 8)]  # long runs of op(A)'s columns: 3709 / 3528 GB/s vs 3723 (ee71c40)
    for w in (4, 8) for per_sm in (2, 4, 8))
# The best of H200 sweeps at 8192² bf16 (the gemv sweep of benchmarks/blas_level12.py, in its
# results JSON): rows contiguous 16×512 w4 with 2 programs per multiprocessor (512 programs, no
# column split and no finishing launch: 4041 GB/s in a CUDA graph against 3801 with 4 per
# multiprocessor, blas-l12-h200-b493768.json), columns contiguous 64×128 w4 with 8 programs per
# multiprocessor. A hand-written prefetch of the next tile and num_stages did not help (a62b8e2);
# for columns contiguous, neither did 512×16 / 1024×8 tiles (1–2 KiB runs of each row, ee71c40).
GEMV_HEURISTIC = {False: GemvConfig(16, 512, 4, 2), True: GemvConfig(64, 128, 4, 8)}
# With op(A)'s columns contiguous (``…_t``) the tuner also times gemv as a one-row GEMM
# (GemvGemmConfig: 0.99× torch.mv at 8192² bf16 against the gemv kernel's 0.91×, 1c4f49b); the
# heuristic keeps the kernel until tuned logic, which has measured both, chooses.
GEMV_GEMM_SPACE: tuple[GemvGemmConfig, ...] = (GemvGemmConfig(),)
# A batch of small matrices (each entry its own programs): 64×128 on 4 warps, 16 KiB a program, was
# within 1 % of the best tile on four batched shapes on an H100 (256² × 1024 N / T, 128² × 4096,
# 512² × 256; gpu-session-h100-d6bc69d/gemv-batched.json) where the 8192² tile cut to 16 rows
# ran 0.93× torch.bmm at T and 0.99× at 128². Not yet timed on an H200 (where the cut tile ran
# 0.87× torch.bmm at 256² × 1024 N): `gpu_session.sh gemvb` there.
GEMV_BATCHED = GemvConfig(64, 128, 4, 2)
GEMV_INTERPRETER = GemvConfig(16, 32, 4, 4)  # small tiles keep the CPU fast and cover several programs

# Level 1: ``level1_map`` (axpy, scal, copy, rot), ``level1_swap``, ``level1_reduce`` (dot, dotc, asum,
# nrm2), ``level1_extreme`` (iamax, iamin); size (n,), the vector's dtype (complex ones by name). One
# shape serves an op's routines; `tessera tune level1` times axpy, swap, dot + nrm2, and iamax. swap
# has a shape of its own: on the H200 at 2^26 fp32 the shapes with four elements a thread (512 × 4,
# 1024 × 8 warps) gained 0.5–1 % on axpy / scal / copy / rot and lost 6–8 % on swap
# (l1-map-shapes-h200-78f6da4.json); swap, two loads and two stores an element, tuned to 64 elements
# a thread (4096 on 2 warps) from 2^24 on an H100 (+3.9 %; gpu-session-h100-68d9857/) and on the
# H200 (+0.9–2.2 %; gpu-session-h200-7ff31f8/).
LEVEL1_DTYPES = ("fp16", "bf16", "fp32", "fp64", "complex64", "complex128")
LEVEL1_SPACE: tuple[VectorConfig, ...] = tuple(
    VectorConfig(block, iters, w) for block in (512, 1024, 2048, 4096) for iters in (1, 2, 4, 8, 16)
    for w in (2, 4, 8) if block // (32 * w) >= 4)
# The launch shape every level-1 routine used before it was selectable: on the H200 (graph-timed,
# 2^26 fp32, blas-l12-h200-5a0e020.json) axpy/dot/asum reach 98–102 % of copy with it, nrm2 79 %,
# iamax 82 %.
LEVEL1_HEURISTIC = VectorConfig(1024, 8, 4)
# ger, symv, trsv: the shapes measured on the H200 (bench 5a0e020: ger 82 % of copy; symv reads the
# stored triangle once; trsv's 64-row blocks bound its rounding too); the interpreter takes small symv
# tiles so that tests of a few dozen rows still cover several programs per block row.
SYMV_INTERPRETER = SymvConfig(16, 2, 4)
# bf16 8192² on the H200: 64-edge tiles, 16 a program, longest programs first 27.6 µs (8 a program
# 29.4, planned order 31.9; symv-floor-h200-ceac80c.json); the finish in programs of 16 rows won
# the 8192 and 16384 re-tune with A's eviction hints (tune-symv-h200-cd43be6-evict/)
SYMV_HEURISTIC = SymvConfig(64, 16, 4, longest_first=True, finish_rows=16)
REAL_DTYPES = ("fp16", "bf16", "fp32", "fp64")
GER_SPACE = tuple(GerConfig(bm, bn, w) for bm in (16, 32, 64) for bn in (64, 128, 256) for w in (4, 8))
# longest_first won at 8192² (27.6 against 31.9 µs, symv-floor-h200-ceac80c.json); num_stages 2–4
# (the tiles through shared memory) won at 16384 (tune-symv-h200-3f5302b) until the register
# prefetch's loads took eviction hints (tune-symv-h200-cd43be6-evict/)
# finish_rows (thirtieth session): the finish in programs of 16 or 8 rows, for the 4-warp 64-edge
# tiles only (every re-tune since the twenty-seventh session chose those; at 8192² finish 8 24.2
# against 24.5 µs, symv-floor-h200-3ced280.json)
# overlap_finish (forty-fourth session, not yet timed): the finish's programs start during the walk
# and wait on their row block's count, for the tiles every re-tune chose
SYMV_SPACE = (*(SymvConfig(t, p, w, order, stages) for t in (32, 64, 128) for p in (4, 8, 16)
                for w in (4, 8) for order in (False, True) for stages in (0, 2, 3, 4)),
              *(SymvConfig(64, p, 4, order, stages, rows) for p in (4, 8, 16) for order in (False, True)
                for stages in (0, 2, 3, 4) for rows in (16, 8)),
              *(SymvConfig(64, p, 4, True, stages, rows, True) for p in (8, 16) for stages in (0, 3)
                for rows in (16, 8)))
TRSV_SPACE = tuple(TrsvConfig(b, w) for b in (32, 64, 128) for w in (4, 8))


@dataclass(frozen=True)
class ShapeOp:
    """A level-1/2 op whose launch shape comes from logic files: a config of one of its families."""

    families: tuple[type, ...]
    size_keys: tuple[str, ...]
    dtypes: tuple[str, ...]
    documented_size: tuple[int, ...]  # the size heuristic logic documents name
    heuristic: Callable[[str, str], Choice]  # (dtype, backend) → the pick without logic


def _gemv_heuristic(dtype: str, backend: str) -> Choice:
    if backend == "interpreter":
        return Choice(GEMV_INTERPRETER, "interpreter: small tiles")
    return Choice(GEMV_HEURISTIC[dtype.endswith("_t")],
                  "heuristic: the H200 sweeps' best tile for this layout")


def _fixed(config: object, interpreter: object | None = None) -> Callable[[str, str], Choice]:
    """A heuristic that picks ``config`` whatever the dtype (``interpreter`` in the interpreter)."""
    def pick(dtype: str, backend: str) -> Choice:
        if backend == "interpreter" and interpreter is not None:
            return Choice(interpreter, "interpreter: small tiles")
        return Choice(config, "heuristic: the launch shape measured on the H200")
    return pick


SHAPE_OPS: dict[str, ShapeOp] = {
    "gemv": ShapeOp((GemvConfig, GemvGemmConfig), ("m", "n"), GEMV_DTYPES, (8192, 8192), _gemv_heuristic),
    "ger": ShapeOp((GerConfig,), ("m", "n"), REAL_DTYPES, (8192, 8192), _fixed(GerConfig())),
    "symv": ShapeOp((SymvConfig,), ("n",), REAL_DTYPES, (8192,), _fixed(SYMV_HEURISTIC, SYMV_INTERPRETER)),
    "trsv": ShapeOp((TrsvConfig,), ("n",), REAL_DTYPES, (8192,), _fixed(TrsvConfig())),
    "level1_map": ShapeOp((VectorConfig,), ("n",), REAL_DTYPES, (1 << 26,), _fixed(LEVEL1_HEURISTIC)),
    "level1_swap": ShapeOp((VectorConfig,), ("n",), REAL_DTYPES, (1 << 26,), _fixed(LEVEL1_HEURISTIC)),
    "level1_reduce": ShapeOp((VectorConfig,), ("n",), LEVEL1_DTYPES, (1 << 26,), _fixed(LEVEL1_HEURISTIC)),
    "level1_extreme": ShapeOp((VectorConfig,), ("n",), LEVEL1_DTYPES, (1 << 26,), _fixed(LEVEL1_HEURISTIC)),
}


def gemv_dtype(dtype: torch.dtype, columns_contiguous: bool) -> str:
    """The logic-file dtype key of a gemv (see GEMV_DTYPES)."""
    return dtype_key(dtype) + ("_t" if columns_contiguous else "")


def shape_of(op: str, sizes: tuple[int, ...], t: torch.Tensor) -> Config:
    """The launch shape of level-1/2 ``op`` (not gemv: its dtype key names a layout) on tensor
    ``t``'s dtype (complex ones by name) and device: :func:`select_shape`'s config."""
    return select_shape(op, sizes, dtype_key(t.dtype), device_info(t.device)).config


def select_shape(op: str, sizes: tuple[int, ...], dtype: str, device: DeviceInfo) -> Choice:
    """The launch shape of level-1/2 ``op``: a forced config of its family, else the logic files,
    else the heuristic."""
    if isinstance(forced.config, SHAPE_OPS[op].families):
        return Choice(forced.config, "forced")
    return _select_shape_cached(op, sizes, dtype, device.backend, device.arch, logic.generation())


@functools.lru_cache(maxsize=1024)
def _select_shape_cached(op: str, sizes: tuple[int, ...], dtype: str, backend: str, arch: str,
                         _generation: int) -> Choice:
    match, reasons = logic.lookup(arch, "blas", op, dtype, sizes)
    if match is not None:
        return Choice(match.config, match.describe())
    choice = SHAPE_OPS[op].heuristic(dtype, backend)
    return Choice(choice.config, "; ".join([*reasons, choice.reason]))


def shape_heuristic_logic(op: str) -> Callable[[DeviceInfo], list[dict]]:
    """The builder of ``op``'s heuristic logic documents (one per dtype): what a pack ships for an
    architecture nobody has tuned."""
    spec = SHAPE_OPS[op]

    def documents(device: DeviceInfo) -> list[dict]:
        size = dict(zip(spec.size_keys, spec.documented_size, strict=True))
        return [logic.heuristic_document(device.arch, device.backend, "blas", op, dtype,
                                         [(size, spec.heuristic(dtype, device.backend).config)])
                for dtype in spec.dtypes]
    return documents


for _op, _spec in SHAPE_OPS.items():
    logic.register_op("blas", _op, _spec.size_keys, {family.kernel: family for family in _spec.families},
                      heuristic=shape_heuristic_logic(_op))
