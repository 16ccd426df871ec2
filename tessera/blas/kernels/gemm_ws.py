"""Hopper GEMM with warp-specialized partitions, written in Gluon (``triton.experimental.gluon``).

One loader warp issues every TMA copy of A and B into a ring of ``num_stages`` shared-memory stages
(a ``ready`` and an ``empty`` mbarrier a stage); the multiplying warps (one or two warp groups, the
registers the loader gives up moved to them by ``setmaxnreg``) run the asynchronous wgmma on each
stage as it arrives, one left in flight, hand each stage back once its wgmma has read it, and store
their tile through D's descriptor. So the loads of a program's next tile run while it finishes
and stores this one — what cuBLAS's warp-specialized kernels do and Triton's own pipeliner (one
instruction stream for loads and MMAs) does not. Persistent programs, one a multiprocessor, walk the
output tiles in grouped order (GROUP_M tile rows share B's columns in L2).

Triton's automatic warp specialization of ``tl.range`` loops measured no gain on the H200 and wrong
results with pointer stores (``benchmarks/gemm_ws_probe.py``); these explicit partitions were first
timed by ``benchmarks/gemm_gluon_probe.py`` (docs/architecture.md).

Needs: CUDA sm_90 (wgmma), 2-D 16-bit A row-major and B either way, D row-major of A's dtype, no C,
alpha 1, 16-byte aligned rows (:func:`ws_supported`). Triton 3.6 and 3.9 name the TMA copies and the
partition barrier differently: the aliases below take whichever the running Triton has.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_init,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from tessera._core.errors import InvalidArgumentError
from tessera._core.launch import Launcher, cdiv
from tessera.blas.kernels.gemm_tile import representative_operands
from tessera.blas.kernels.gemm_tma import full_wave_shape, is_col_major, tma_supported

_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared  # 3.9 / 3.6
_tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global
_partition_barrier = getattr(gl, "barrier", None) or gl.thread_barrier

_GL_DTYPES = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}
_DESCRIPTOR_DTYPES = {**_GL_DTYPES, torch.float8_e4m3fn: gl.float8e4nv, torch.float8_e5m2: gl.float8e5}
LOADER_REGISTERS = gl.constexpr(24)  # the loader warp's registers after setmaxnreg (it holds addresses only)


@dataclass(frozen=True)
class WsConfig:
    """Launch parameters of :func:`_gemm_ws_kernel`: a (block_m × block_n) output tile a step of
    block_k, ``num_warps`` multiplying warps (4 or 8: one or two warp groups stacked along M),
    ``num_stages`` operand stages in shared memory; one loader warp besides."""

    block_m: int = 128
    block_n: int = 256
    block_k: int = 64
    group_m: int = 8
    num_warps: int = 8
    num_stages: int = 3

    kernel = "gemm_ws"

    def __post_init__(self) -> None:
        sizes = (self.block_m, self.block_n, self.block_k)
        if self.num_warps not in (4, 8) or any(s & (s - 1) or s < 16 for s in sizes) \
                or not self.block_k < self.block_n <= 256 or self.block_m % (16 * self.num_warps) \
                or self.num_stages < 2 or self.group_m < 1:
            raise InvalidArgumentError(
                f"gemm_ws takes 4 or 8 warps, power-of-two blocks of at least 16 with block_k < block_n "
                f"≤ 256 and block_m a multiple of 16 rows a warp, 2 or more stages and group_m ≥ 1 "
                f"(actual: {self.short()}): wgmma's accumulator is 16 rows a warp and at most 256 "
                f"columns, and B's descriptor block tells its layout by block_k ≠ block_n")

    def short(self) -> str:
        return (f"{self.kernel} {self.block_m}x{self.block_n}x{self.block_k} g{self.group_m} "
                f"w{self.num_warps} s{self.num_stages}")


@gluon.constexpr_function
def _accumulator_layout(block_m, block_n, num_warps, operand_dtype):
    """wgmma's accumulator layout: the warps stacked along M (16 rows each an instruction, 4 a
    warp group), one instruction as wide as the tile and 32 bytes of K deep."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                     instr_shape=[16, block_n, 256 // operand_dtype.primitive_bitwidth])


@gluon.constexpr_function
def _b_col_major(b_desc, block_k):
    """Whether B comes column-major: its descriptor's block is (BN, BK) rows of K, not (BK, BN)
    (block_n > block_k keeps the two apart, ``WsConfig``)."""
    return b_desc.block_type.shape[1] == block_k


@gluon.jit
def _tile_origin(tile, num_m, num_n, BM: gl.constexpr, BN: gl.constexpr, GROUP_M):
    """(row, column) of output tile ``tile`` in grouped order, as ``gemm_tma.persistent_tile``
    (a Gluon function cannot call a ``triton.jit`` one)."""
    per_group = GROUP_M * num_n
    first_m = (tile // per_group) * GROUP_M
    rows = gl.minimum(num_m - first_m, GROUP_M)
    return (first_m + (tile % per_group) % rows) * BM, ((tile % per_group) // rows) * BN


@gluon.jit
def _loader(a_desc, b_desc, d_desc, a_bufs, b_bufs, ready, empty, scale_ptr, M, N, K, GROUP_M, STAGES):
    """The loader warp: for every K step of every tile of this program, wait until the stage is
    free (``empty``), then copy A's and B's tiles into it, completing on ``ready``."""
    BM: gl.constexpr = d_desc.block_type.shape[0]
    BN: gl.constexpr = d_desc.block_type.shape[1]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    B_COL_MAJOR: gl.constexpr = _b_col_major(b_desc, BK)
    num_m = gl.cdiv(M, BM)
    num_n = gl.cdiv(N, BN)
    step = 0
    for tile in range(gl.program_id(0), num_m * num_n, gl.num_programs(0)):
        off_m, off_n = _tile_origin(tile, num_m, num_n, BM, BN, GROUP_M)
        for k in range(0, K, BK):
            s = step % STAGES
            mbarrier.wait(empty.index(s), ((step // STAGES) & 1) ^ 1)  # a fresh stage passes at once
            mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            _tma_load(a_desc, [off_m, k], ready.index(s), a_bufs.index(s))
            if B_COL_MAJOR:
                _tma_load(b_desc, [off_n, k], ready.index(s), b_bufs.index(s))
            else:
                _tma_load(b_desc, [k, off_n], ready.index(s), b_bufs.index(s))
            step += 1


@gluon.jit
def _hand_back(empty, s, STAGES):
    """Give the previous step's stage back to the loader once every warp group's wgmma on it is
    done (the caller has waited for its own; the barrier waits for the other group's)."""
    _partition_barrier()
    mbarrier.arrive(empty.index((s + STAGES - 1) % STAGES), count=1)


@gluon.jit
def _multiplier(a_desc, b_desc, d_desc, a_bufs, b_bufs, ready, empty, scale_ptr, M, N, K, GROUP_M, STAGES):
    """The default partition: each stage's wgmma queued behind the last, then a wait for the last
    only (one in flight), its stage handed back; the tile (fp8 operands: times the scale at
    ``scale_ptr``) stored through D's descriptor, the store overlapping the next tile's first steps."""
    BM: gl.constexpr = d_desc.block_type.shape[0]
    BN: gl.constexpr = d_desc.block_type.shape[1]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    B_COL_MAJOR: gl.constexpr = _b_col_major(b_desc, BK)
    layout: gl.constexpr = _accumulator_layout(BM, BN, gl.num_warps(), a_desc.dtype)
    SCALED: gl.constexpr = a_desc.dtype.primitive_bitwidth == 8
    d_smem = gl.allocate_shared_memory(d_desc.dtype, d_desc.block_type.shape, d_desc.layout)
    num_m = gl.cdiv(M, BM)
    num_n = gl.cdiv(N, BN)
    step = 0
    for tile in range(gl.program_id(0), num_m * num_n, gl.num_programs(0)):
        off_m, off_n = _tile_origin(tile, num_m, num_n, BM, BN, GROUP_M)
        acc = warpgroup_mma_init(gl.zeros((BM, BN), gl.float32, layout))
        for k in range(0, K, BK):
            s = step % STAGES
            mbarrier.wait(ready.index(s), (step // STAGES) & 1)
            if B_COL_MAJOR:
                acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s).permute((1, 0)), acc, is_async=True)
            else:
                acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s), acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
            if k > 0:
                _hand_back(empty, s, STAGES)
            acc = warpgroup_mma_init(acc)  # the loop carries the accumulator's type
            step += 1
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        _hand_back(empty, step % STAGES, STAGES)  # the tile's last stage
        if SCALED:
            acc = acc * gl.load(scale_ptr)
        tma.store_wait(pendings=0)  # the previous tile's store has left d_smem
        d_smem.store(acc.to(d_desc.dtype))
        fence_async_shared()
        _tma_store(d_desc, [off_m, off_n], d_smem)
    tma.store_wait(pendings=0)


@gluon.jit
def _gemm_ws_kernel(a_desc, b_desc, d_desc, scale_ptr, M, N, K, GROUP_M: gl.constexpr, STAGES: gl.constexpr):
    """D = A·B: the stage ring and its barriers, then the loader warp beside the multiplying warps
    (the partitions take GROUP_M and STAGES as values: constants do not reach them as such, which
    is why B's layout is read from its descriptor's block, :func:`_b_col_major`)."""
    dtype: gl.constexpr = a_desc.dtype
    a_bufs = gl.allocate_shared_memory(dtype, [STAGES] + a_desc.block_type.shape, a_desc.layout)  # noqa: RUF005
    b_bufs = gl.allocate_shared_memory(dtype, [STAGES] + b_desc.block_type.shape, b_desc.layout)  # noqa: RUF005
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    args = (a_desc, b_desc, d_desc, a_bufs, b_bufs, ready, empty, scale_ptr, M, N, K, GROUP_M, STAGES)
    gl.warp_specialize([(_multiplier, args), (_loader, args)], [1], [LOADER_REGISTERS])


def ws_supported(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None, d: torch.Tensor,
                 alpha: float) -> bool:
    """Whether 2-D views ``a`` (M,K), ``b`` (K,N), ``d`` (M,N) fit this family: 16-bit A and B of
    one dtype, D of it too, A and D row-major, B either way, 16-byte aligned rows, no C, alpha 1
    (the caller checks the device and the batch)."""
    return (
        a.dtype in _GL_DTYPES and b.dtype == a.dtype and d.dtype == a.dtype
        and c is None and alpha == 1.0 and a.stride(-1) == 1
        and tma_supported(a, b, d)  # the descriptor family's rules: sizes, 16-byte rows, D row-major
    )


def ws_shared_memory(config: WsConfig, element_bytes: int = 2) -> int:
    """Shared memory of a launch: the operand stages and D's tile (the barriers aside)."""
    stages = config.num_stages * (config.block_m + config.block_n) * config.block_k
    return (stages + config.block_m * config.block_n) * element_bytes


def _descriptor(t: torch.Tensor, block: list[int]) -> TensorDescriptor:
    layout = gl.NVMMASharedLayout.get_default_for(block, _DESCRIPTOR_DTYPES[t.dtype])
    return TensorDescriptor(t, list(t.shape), list(t.stride()), block, layout)


_launch = Launcher(_gemm_ws_kernel)


def launch_gemm_ws(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, *, num_sms: int, config: WsConfig,
                   scale: torch.Tensor | None = None) -> None:
    """D = A·B on 2-D views that pass :func:`ws_supported`: one program a multiprocessor at most.
    Also fp8 A (row-major) and B (column-major: wgmma takes 8-bit operands K-major only) with D =
    ``scale``·A·B (a one-element fp32 tensor, the per-tensor scales' product), the form
    ``benchmarks/gemm_gluon_probe.py --fp8`` times; ``gemm`` does not route fp8 here (yet)."""
    m, k = a.shape
    n = b.shape[1]
    b_col = is_col_major(b)
    b_desc = (_descriptor(b.t(), [config.block_n, config.block_k]) if b_col
              else _descriptor(b, [config.block_k, config.block_n]))
    tiles = cdiv(m, config.block_m) * cdiv(n, config.block_n)
    _launch((min(num_sms, tiles),),
            (_descriptor(a, [config.block_m, config.block_k]), b_desc,
             _descriptor(d, [config.block_m, config.block_n]), d if scale is None else scale, m, n, k),
            dict(GROUP_M=config.group_m, STAGES=config.num_stages), config.num_warps, 1)


def representative_launch(op: str, config: WsConfig, dtype: str, num_sms: int) -> None:
    """The launches ``gemm`` makes with ``config`` for problems of a full wave or more (the grid,
    the SM count, is a launch argument): B row-major and column-major (x @ W.t()), each of M, N
    and K a multiple of 16 or only of 8 — every specialization a 16-byte-row call can have (run
    under ``launch.capture()``)."""
    rows, cols = full_wave_shape(config.block_m, config.block_n, num_sms)
    for b_col, m, n, k in itertools.product((False, True), (rows, rows - 8), (cols, cols - 8), (1024, 1000)):
        a, b, d = representative_operands(dtype, m, n, k, b_col_major=b_col)
        launch_gemm_ws(a, b, d, num_sms=num_sms, config=config)
