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

Two uses, one kernel: ``gemm`` (``WsConfig``, op ``gemm``) on 16-bit A row-major and B either way,
or float32 with TF32 allowed (A row-major, B column-major: ``gemm`` copies it K-major, as wgmma reads
32-bit operands only so), D row-major of A's dtype, no C, alpha 1 (:func:`ws_supported`; a K step
of at most 128 bytes a row, :func:`row_fits`); and the scaled fp8 GEMM with fast
accumulation (``ScaledWsConfig``, op ``gemm_scaled``: A row-major, B column-major since wgmma reads
8-bit operands K-major only, D = A·B · scale_a · scale_b + bias in bf16, fp16 or fp32, the scales
per tensor or per row of A / column of B; :func:`scaled_ws_supported`). Both need CUDA sm_90
(wgmma) and 16-byte aligned rows. ``epilogue_split`` 2 stores D's tile in two column halves
through one half-sized buffer, which leaves room for one more operand stage.

Triton 3.6 and 3.9 name the TMA copies and the partition barrier differently: the aliases below
take whichever the running Triton has.
"""

from __future__ import annotations

import functools
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

from tessera._core.device import TF32_KEYS
from tessera._core.errors import InvalidArgumentError
from tessera._core.launch import Launcher, cdiv
from tessera.blas.kernels.copy import representative_k_major_copies
from tessera.blas.kernels.gemm_tile import representative_operands
from tessera.blas.kernels.gemm_tma import (
    fitting_stages,
    full_wave_shape,
    is_col_major,
    tma_supported,
)

_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared  # 3.9 / 3.6
_tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global
_partition_barrier = getattr(gl, "barrier", None) or gl.thread_barrier

_GL_DTYPES = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}
_FP8_DTYPES = {torch.float8_e4m3fn: gl.float8e4nv, torch.float8_e5m2: gl.float8e5}
_DESCRIPTOR_DTYPES = {**_GL_DTYPES, **_FP8_DTYPES, torch.float32: gl.float32, torch.uint8: gl.uint8}
LOADER_REGISTERS = gl.constexpr(24)  # the loader warp's registers after setmaxnreg (it holds addresses only)
PINGPONG_REGISTERS = gl.constexpr(232)  # the worker warp group's with pingpong (its 128×128 fp32 tile: 128)


@dataclass(frozen=True)
class WsConfig:
    """Launch parameters of :func:`_gemm_ws_kernel`: a (block_m × block_n) output tile a step of
    block_k, ``num_warps`` multiplying warps (4 or 8: one or two warp groups stacked along M),
    ``num_stages`` operand stages in shared memory (fewer where they and D's buffers would not fit
    the GPU's shared memory), D stored whole or in ``epilogue_split`` column halves; one loader
    warp besides. ``pingpong``: two warp groups of 4 warps, each multiplying whole tiles of its
    own, in turn, so that one stores its tile while the other's wgmma run (CUTLASS's ping-pong
    schedule; the cooperative default has both warp groups on one tile, the tensor cores idle
    while they store it)."""

    block_m: int = 128
    block_n: int = 256
    block_k: int = 64
    group_m: int = 8
    num_warps: int = 8
    num_stages: int = 3
    epilogue_split: int = 1
    pingpong: bool = False

    kernel = "gemm_ws"
    b_k_major = False  # whether B always comes column-major (then block_k may equal block_n)

    def __post_init__(self) -> None:
        sizes = (self.block_m, self.block_n, self.block_k)
        deep_enough = self.block_k <= self.block_n if self.b_k_major else self.block_k < self.block_n
        if self.num_warps not in (4, 8) or any(s & (s - 1) or s < 16 for s in sizes) \
                or not (deep_enough and self.block_n <= 256) or self.block_m % (16 * self.num_warps) \
                or self.num_stages < 2 or self.group_m < 1 or self.epilogue_split not in (1, 2) \
                or (self.pingpong and self.num_warps != 4):
            raise InvalidArgumentError(
                f"{self.kernel} takes 4 or 8 warps (4 with pingpong: one warp group a tile), "
                f"power-of-two blocks of at least 16 with block_k < block_n ≤ 256 (fp8: block_k ≤ "
                f"block_n) and block_m a multiple of 16 rows a warp, 2 or more stages, group_m ≥ 1 "
                f"and epilogue_split 1 or 2 (actual: {self.short()}): wgmma's accumulator is 16 rows a "
                f"warp and at most 256 columns, and a 16-bit B's descriptor block tells its layout by "
                f"block_k ≠ block_n")

    @property
    def store_buffers(self) -> int:
        """D's tile buffers in shared memory: one for each warp group with a tile of its own."""
        return 2 if self.pingpong else 1

    def short(self) -> str:
        split = f" split{self.epilogue_split}" if self.epilogue_split > 1 else ""
        return (f"{self.kernel} {self.block_m}x{self.block_n}x{self.block_k} g{self.group_m} "
                f"w{self.num_warps} s{self.num_stages}{split}{' pingpong' if self.pingpong else ''}")


@dataclass(frozen=True)
class ScaledWsConfig(WsConfig):
    """:class:`WsConfig` for op ``gemm_scaled`` (fp8 with fast accumulation), its own family name
    in logic files; 128-deep K steps by default (32 bytes a row and wgmma instruction). B is
    always K-major, so block_k may equal block_n."""

    block_k: int = 128

    kernel = "gemm_scaled_ws"
    b_k_major = True


@gluon.constexpr_function
def _accumulator_layout(block_m, block_n, num_warps, operand_dtype):
    """wgmma's accumulator layout: the warps stacked along M (16 rows each an instruction, 4 a
    warp group), one instruction as wide as the tile and 32 bytes of K deep."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                     instr_shape=[16, block_n, 256 // operand_dtype.primitive_bitwidth])


@gluon.constexpr_function
def _b_col_major(b_desc, block_k):
    """Whether B comes column-major: always with 8- and 32-bit operands (wgmma reads them K-major
    only), else when its descriptor's block is (BN, BK) rows of K, not (BK, BN) (block_n > block_k
    keeps the two apart, ``WsConfig``)."""
    return b_desc.dtype.primitive_bitwidth != 16 or b_desc.block_type.shape[1] == block_k


@gluon.constexpr_function
def _block_n(b_desc, block_k):
    """The tile's columns, from B's descriptor block ((BN, BK) column-major, (BK, BN) row-major):
    D's block may be a column half of it."""
    return b_desc.block_type.shape[0] if _b_col_major(b_desc, block_k) else b_desc.block_type.shape[1]


@gluon.jit
def _tile_origin(tile, num_m, num_n, BM: gl.constexpr, BN: gl.constexpr, GROUP_M):
    """(row, column) of output tile ``tile`` in grouped order, as ``gemm_tma.persistent_tile``
    (a Gluon function cannot call a ``triton.jit`` one)."""
    per_group = GROUP_M * num_n
    first_m = (tile // per_group) * GROUP_M
    rows = gl.minimum(num_m - first_m, GROUP_M)
    return (first_m + (tile % per_group) % rows) * BM, ((tile % per_group) // rows) * BN


@gluon.jit
def _loader(a_desc, b_desc, d_desc, a_bufs, b_bufs, ready, empty, M, N, K, GROUP_M, STAGES):
    """The loader warp: for every K step of every tile of this program, in order, wait until the
    stage is free (``empty``), then copy A's and B's tiles into it, completing on ``ready``."""
    BM: gl.constexpr = d_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = _block_n(b_desc, BK)
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
def _scaled(acc, off_m, off_n, M, N, epilogue, layout: gl.constexpr, BM: gl.constexpr, BN: gl.constexpr):
    """fp8: ``acc · scale_a[rows] · scale_b[columns] + bias[columns]`` (a stride 0 broadcasts a
    per-tensor scale; ``epilogue`` is (scale_a, scale_b, bias or None, stride_a, stride_b))."""
    sa_ptr, sb_ptr, bias_ptr, stride_sa, stride_sb = epilogue
    rows = off_m + gl.arange(0, BM, layout=gl.SliceLayout(1, layout))
    cols = off_n + gl.arange(0, BN, layout=gl.SliceLayout(0, layout))
    sa = gl.load(sa_ptr + rows * stride_sa, mask=rows < M, other=0.0)
    sb = gl.load(sb_ptr + cols * stride_sb, mask=cols < N, other=0.0)
    acc = acc * gl.expand_dims(sa, 1) * gl.expand_dims(sb, 0)
    if bias_ptr is not None:
        acc = acc + gl.expand_dims(gl.load(bias_ptr + cols, mask=cols < N, other=0.0).to(gl.float32), 0)
    return acc


@gluon.jit
def _store(d_desc, d_smem, out, off_m, off_n, BM: gl.constexpr, BN: gl.constexpr):
    """The tile into D through its descriptor (clipped to the matrix): whole, or, where D's block
    is half the tile, its left and right halves one after the other through the one buffer. Each
    waits for the buffer's previous store to have left it; the last store overlaps what follows."""
    if d_desc.block_type.shape[1] == BN:
        tma.store_wait(pendings=0)
        d_smem.store(out)
        fence_async_shared()
        _tma_store(d_desc, [off_m, off_n], d_smem)
    else:
        left, right = gl.reshape(out, [BM, 2, BN // 2]).permute(0, 2, 1).split()
        tma.store_wait(pendings=0)
        d_smem.store(left)
        fence_async_shared()
        _tma_store(d_desc, [off_m, off_n], d_smem)
        tma.store_wait(pendings=0)
        d_smem.store(right)
        fence_async_shared()
        _tma_store(d_desc, [off_m, off_n + BN // 2], d_smem)


@gluon.jit
def _multiplier(a_desc, b_desc, d_desc, a_bufs, b_bufs, ready, empty, turns, epilogue, M, N, K, GROUP_M,
                STAGES, group, groups):
    """A multiplying partition, ``group`` of ``groups`` (1, or 2 taking the program's tiles in
    turn): each stage's wgmma queued behind the last, then a wait for the last only (one in
    flight), its stage handed back; the tile (fp8 operands: scaled, :func:`_scaled`) stored
    through D's descriptor, the store overlapping the next tile's first steps — or, in turn, the
    other group's wgmma. A group starts a tile once the one before it has seen its last stage
    arrive (``turns``): the stages come in the program's tile order, and a wait on a stage's
    ``ready`` phase two ahead of it would pass at once."""
    BM: gl.constexpr = d_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = _block_n(b_desc, BK)
    B_COL_MAJOR: gl.constexpr = _b_col_major(b_desc, BK)
    layout: gl.constexpr = _accumulator_layout(BM, BN, gl.num_warps(), a_desc.dtype)
    SCALED: gl.constexpr = a_desc.dtype.primitive_bitwidth == 8
    d_smem = gl.allocate_shared_memory(d_desc.dtype, d_desc.block_type.shape, d_desc.layout)
    num_m = gl.cdiv(M, BM)
    num_n = gl.cdiv(N, BN)
    k_steps = gl.cdiv(K, BK)
    step = group * k_steps  # the stages of the tiles before this group's first
    turn = group - 1  # the arrivals on turns[group] this group's next tile waits for, less one
    for tile in range(gl.program_id(0) + group * gl.num_programs(0), num_m * num_n,
                      groups * gl.num_programs(0)):
        off_m, off_n = _tile_origin(tile, num_m, num_n, BM, BN, GROUP_M)
        if groups > 1 and turn >= 0:  # alone, a group never waits
            mbarrier.wait(turns.index(group), turn & 1)
        turn += 1
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
        if groups > 1:
            mbarrier.arrive(turns.index((group + 1) % groups), count=1)  # its stages have all come
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        _hand_back(empty, step % STAGES, STAGES)  # the tile's last stage
        step += (groups - 1) * k_steps
        if SCALED:
            acc = _scaled(acc, off_m, off_n, M, N, epilogue, layout, BM, BN)
        _store(d_desc, d_smem, acc.to(d_desc.dtype), off_m, off_n, BM, BN)
    tma.store_wait(pendings=0)


@gluon.jit
def stage_barriers(STAGES: gl.constexpr):
    """A ring of ``STAGES`` shared-memory stages' mbarriers, initialized for one arrival each:
    ``ready`` (the loader's copies have landed) and ``empty`` (the consumers are done with it)."""
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    return ready, empty


@gluon.jit
def _gemm_ws_kernel(a_desc, b_desc, d_desc, sa_ptr, sb_ptr, bias_ptr, stride_sa, stride_sb, M, N, K,
                    GROUP_M: gl.constexpr, STAGES: gl.constexpr, PINGPONG: gl.constexpr):
    """D = A·B (fp8: scaled, plus a bias unless ``bias_ptr`` is None): the stage ring and its
    barriers, then the loader warp beside the multiplying warps (``PINGPONG``: beside two warp
    groups of the kernel's 4 warps, taking tiles in turn). Constants passed to the
    partitions arrive there as runtime values (an ``if`` on one compiles both branches), so B's
    layout and the tile's width are read from the descriptors' blocks (:func:`_b_col_major`,
    :func:`_block_n`) and the scaling from A's dtype; None stays None."""
    dtype: gl.constexpr = a_desc.dtype
    a_bufs = gl.allocate_shared_memory(dtype, [STAGES] + a_desc.block_type.shape, a_desc.layout)  # noqa: RUF005
    b_bufs = gl.allocate_shared_memory(dtype, [STAGES] + b_desc.block_type.shape, b_desc.layout)  # noqa: RUF005
    ready, empty = stage_barriers(STAGES)
    turns = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(turns.index(i), count=1)
    epilogue = (sa_ptr, sb_ptr, bias_ptr, stride_sa, stride_sb)
    loads = (a_desc, b_desc, d_desc, a_bufs, b_bufs, ready, empty, M, N, K, GROUP_M, STAGES)
    GROUPS: gl.constexpr = 2 if PINGPONG else 1
    first = (a_desc, b_desc, d_desc, a_bufs, b_bufs, ready, empty, turns, epilogue, M, N, K, GROUP_M, STAGES,
             0, GROUPS)
    if PINGPONG:
        second = (a_desc, b_desc, d_desc, a_bufs, b_bufs, ready, empty, turns, epilogue, M, N, K, GROUP_M,
                  STAGES, 1, GROUPS)
        gl.warp_specialize([(_multiplier, first), (_multiplier, second), (_loader, loads)], [4, 1],
                           [PINGPONG_REGISTERS, LOADER_REGISTERS])
    else:
        gl.warp_specialize([(_multiplier, first), (_loader, loads)], [1], [LOADER_REGISTERS])


def ws_supported(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None, d: torch.Tensor,
                 alpha: float, precision: str = "ieee") -> bool:
    """Whether 2-D views ``a`` (M,K), ``b`` (K,N), ``d`` (M,N) fit the ``gemm`` use: A and B of one
    dtype, D of it too, A and D row-major, 16-byte aligned rows, no C, alpha 1, and either 16-bit
    with B either way or float32 with ``precision`` "tf32" and B column-major (the caller checks the
    device and the batch)."""
    tf32 = a.dtype == torch.float32 and precision == "tf32" and b.stride(-2) == 1
    return (
        (a.dtype in _GL_DTYPES or tf32) and b.dtype == a.dtype and d.dtype == a.dtype
        and c is None and alpha == 1.0 and a.stride(-1) == 1
        and tma_supported(a, b, d)  # the descriptor family's rules: sizes, 16-byte rows, D row-major
    )


def row_fits(config: WsConfig, element_bytes: int) -> bool:
    """Whether a K step's row of an operand tile, ``block_k`` elements, fits the 128-byte swizzle
    that TMA boxes and wgmma's shared-memory operands use here (float32: block_k ≤ 32)."""
    return config.block_k * element_bytes <= 128


def scaled_ws_supported(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, fast_accum: bool) -> bool:
    """Whether the scaled fp8 use takes ``a`` (M, K), ``b`` (K, N), ``d`` (M, N) as they are (after
    ``gemm_scaled.k_major``): fp8 with fast accumulation (the kernel adds each wgmma into the
    accumulator as the tensor cores do; the precise mode's fp32 partial sums are the other
    families'), A row-major and B column-major (K-major), D row-major bf16, fp16 or fp32, and the
    descriptor rules (the caller checks the device)."""
    return (fast_accum and a.dtype in _FP8_DTYPES and b.dtype == a.dtype
            and d.dtype in (*_GL_DTYPES, torch.float32) and a.stride(1) == 1 and b.stride(0) == 1
            and tma_supported(a, b, d))


@functools.lru_cache(maxsize=64)
def _shared_layout(block: tuple[int, int], dtype: torch.dtype) -> gl.NVMMASharedLayout:
    """The swizzled shared-memory layout of a descriptor block (built once: its constructor costs
    microseconds a call)."""
    return gl.NVMMASharedLayout.get_default_for(list(block), _DESCRIPTOR_DTYPES[dtype])


def block_descriptor(t: torch.Tensor, block: list[int]) -> TensorDescriptor:
    """A Gluon TMA descriptor over the 2-D view ``t`` in its storage order, boxes of ``block``,
    the box's swizzled shared-memory layout (what wgmma reads)."""
    return TensorDescriptor(t, list(t.shape), list(t.stride()), block, _shared_layout(tuple(block), t.dtype))


_launch = Launcher(_gemm_ws_kernel)


def launch_gemm_ws(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, *, num_sms: int, config: WsConfig,
                   scale_a: torch.Tensor | None = None, scale_b: torch.Tensor | None = None,
                   bias: torch.Tensor | None = None) -> None:
    """D = A·B on 2-D views that pass :func:`ws_supported`, or, with fp8 operands that pass
    :func:`scaled_ws_supported`, D = A·B · scale_a · scale_b (+ bias), a scale being a one-element
    or a per-row (per-column) float32 tensor. One program a multiprocessor at most; the stages cut
    to what fits beside D's buffer (``gemm_tma.fitting_stages``)."""
    m, k = a.shape
    n = b.shape[1]
    b_col = is_col_major(b)
    b_desc = (block_descriptor(b.t(), [config.block_n, config.block_k]) if b_col
              else block_descriptor(b, [config.block_k, config.block_n]))
    tiles = cdiv(m, config.block_m) * cdiv(n, config.block_n)
    scaled = scale_a is not None
    sa, sb = (scale_a, scale_b) if scaled else (d, d)
    strides = [0 if t.numel() == 1 else t.stride(0) for t in (sa, sb)] if scaled else [0, 0]
    stages = fitting_stages(config, a.element_size(), d.element_size(), d)
    _launch((min(num_sms, tiles),),
            (block_descriptor(a, [config.block_m, config.block_k]), b_desc,
             block_descriptor(d, [config.block_m, config.block_n // config.epilogue_split]), sa, sb, bias,
             *strides, m, n, k),
            dict(GROUP_M=config.group_m, STAGES=stages, PINGPONG=config.pingpong), config.num_warps, 1)


def representative_launch(op: str, config: WsConfig, dtype: str, num_sms: int) -> None:
    """The launches ``gemm`` makes with ``config`` for problems of a full wave or more (the grid,
    the SM count, is a launch argument): B row-major and column-major (x @ W.t(); tf32: only
    column-major, after the K-major copies), each of M, N and K a multiple of 16 or only of 8 —
    every specialization a 16-byte-row call can have (run under ``launch.capture()``). The scaled
    use's launches are ``gemm_scaled``'s."""
    rows, cols = full_wave_shape(config.block_m, config.block_n, num_sms)
    layouts = (True,) if dtype in TF32_KEYS else (False, True)  # tf32: gemm copies B column-major
    for b_col, m, n, k in itertools.product(layouts, (rows, rows - 8), (cols, cols - 8), (1024, 1000)):
        a, b, d = representative_operands(dtype, m, n, k, b_col_major=b_col)
        launch_gemm_ws(a, b, d, num_sms=num_sms, config=config)
    representative_k_major_copies(dtype)  # last, as the other families
