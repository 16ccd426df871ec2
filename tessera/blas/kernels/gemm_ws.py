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

Two uses, one kernel: ``gemm`` (``WsConfig``, op ``gemm``) on A row-major and B either way, 16-bit
or float32 with TF32 allowed (wgmma reads 32-bit operands from shared memory only K-major, so a
row-major float32 B is multiplied swapped, Dᵀ = Bᵀ·Aᵀ with Bᵀ's tiles in registers, :func:`_swapped`;
``gemm_tma`` has B copied K-major instead), D row-major of A's dtype, no C, alpha 1
(:func:`ws_supported`; a K step of at most 128 bytes a row, :func:`row_fits`); and the scaled fp8
GEMM with fast accumulation (``ScaledWsConfig``, op ``gemm_scaled``: A row-major, B column-major
since wgmma reads 8-bit operands K-major only, D = A·B · scale_a · scale_b + bias in bf16, fp16 or
fp32, the scales per tensor or per row of A / column of B; :func:`scaled_ws_supported`). Both need CUDA sm_90
(wgmma) and 16-byte aligned rows. ``epilogue_split`` 2 stores D's tile in two column halves (row
halves when swapped) through one half-sized buffer, which leaves room for one more operand stage.

Triton 3.6 and 3.9 name the TMA copies and the partition barrier differently: ``gluon_names``
has the aliases.
"""

from __future__ import annotations

import dataclasses
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
from tessera._core.launch import PDL_EARLY, PDL_OFF, Launcher, cdiv, pdl_mode
from tessera._core.pdl import gluon_dependent_launch
from tessera.blas.kernels.copy import representative_operand_copies
from tessera.blas.kernels.gemm_tile import representative_operands
from tessera.blas.kernels.gemm_tma import (
    fitting_stages,
    full_wave_shape,
    is_col_major,
    tma_supported,
)
from tessera.blas.kernels.gluon_names import cta_barrier, reinterpret, tma_load, tma_store

_GL_DTYPES = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}
_FP8_DTYPES = {torch.float8_e4m3fn: gl.float8e4nv, torch.float8_e5m2: gl.float8e5}
_DESCRIPTOR_DTYPES = {**_GL_DTYPES, **_FP8_DTYPES, torch.float32: gl.float32, torch.uint8: gl.uint8}
LOADER_REGISTERS = gl.constexpr(24)  # the loader warp's registers after setmaxnreg (it holds addresses only)
PINGPONG_REGISTERS = gl.constexpr(232)  # the worker warp group's with pingpong (its 128×128 fp32 tile: 128)
# or with halves (its half of a 128×256 tile: 128)


@dataclass(frozen=True)
class WsConfig:
    """Launch parameters of :func:`_gemm_ws_kernel`: a (block_m × block_n) output tile a step of
    block_k, ``num_warps`` multiplying warps (4 or 8: one or two warp groups stacked along M),
    ``num_stages`` operand stages in shared memory (fewer where they and D's buffers would not fit
    the GPU's shared memory), D stored whole or in ``epilogue_split`` halves; one loader
    warp besides. ``pingpong``: two warp groups of 4 warps, each multiplying whole tiles of its
    own, in turn, so that one stores its tile while the other's wgmma run (CUTLASS's ping-pong
    schedule; the cooperative default has both warp groups on one tile, the tensor cores idle
    while they store it). ``halves``: the cooperative tile's two warp groups as partitions of
    their own, each multiplying and storing one half of every tile's rows and handing each stage
    back itself (``empty`` counts two arrivals, CUTLASS's cooperative kernels' way): no barrier
    between the groups a K step, where the default's one partition of 8 warps has two
    (``_hand_back``'s and the one Triton puts before each ``mbarrier.wait``); never for a swapped
    tf32 tile (:func:`swap_fits`). Measured on an H100 without a consistent gain (no logic row
    takes it; docs/architecture.md, "Halves")."""

    block_m: int = 128
    block_n: int = 256
    block_k: int = 64
    group_m: int = 8
    num_warps: int = 8
    num_stages: int = 3
    epilogue_split: int = 1
    pingpong: bool = False
    halves: bool = False

    kernel = "gemm_ws"
    b_k_major = False  # whether B always comes column-major (then block_k may equal block_n)

    def __post_init__(self) -> None:
        sizes = (self.block_m, self.block_n, self.block_k)
        deep_enough = self.block_k <= self.block_n if self.b_k_major else self.block_k < self.block_n
        if self.num_warps not in (4, 8) or any(s & (s - 1) or s < 16 for s in sizes) \
                or not (deep_enough and self.block_n <= 256) or self.block_m % (16 * self.num_warps) \
                or self.num_stages < 2 or self.group_m < 1 or self.epilogue_split not in (1, 2) \
                or (self.pingpong and self.num_warps != 4) or (self.halves and self.num_warps != 8):
            raise InvalidArgumentError(
                f"{self.kernel} takes 4 or 8 warps (4 with pingpong: one warp group a tile; 8 with "
                f"halves: two warp groups, one a half), "
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
        schedule = " pingpong" if self.pingpong else " halves" if self.halves else ""
        return (f"{self.kernel} {self.block_m}x{self.block_n}x{self.block_k} g{self.group_m} "
                f"w{self.num_warps} s{self.num_stages}{split}{schedule}")


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
    """Whether B comes column-major: always with 8-bit operands (wgmma reads them K-major only, and
    block_k may equal block_n), else when its descriptor's block is (BN, BK) rows of K, not (BK, BN)
    (block_n > block_k keeps the two apart, ``WsConfig``)."""
    return b_desc.dtype.primitive_bitwidth == 8 or b_desc.block_type.shape[1] == block_k


@gluon.constexpr_function
def _swapped(b_desc, block_k):
    """Whether the tile is multiplied as Dᵀ = Bᵀ·Aᵀ: float32 (tf32) with B row-major. wgmma reads
    32-bit operands from shared memory only K-major, which a row-major B is not, but its A operand
    may come from registers in any layout: so B's tile (loaded as it lies) goes through registers
    as the A operand, A's tile (K-major) is the shared-memory B operand, and the accumulator holds
    the tile transposed. The alternative, copying B K-major before the call (``gemm_tma``'s way),
    moves K·N·8 more bytes in a launch of its own."""
    return b_desc.dtype.primitive_bitwidth == 32 and not _b_col_major(b_desc, block_k)


@gluon.constexpr_function
def _b_pieces(b_desc, block_k):
    """B's boxes a K step: swapped, one a wgmma instruction's K (8 rows of B's tile, each its own
    swizzled tile, which the register reads see in the accumulator's row order: shared-memory
    views of another layout cannot be sliced, so the pieces are copied apart); else one."""
    return block_k // b_desc.block_type.shape[0] if _swapped(b_desc, block_k) else 1


@gluon.constexpr_function
def _swizzled_bases(rows, cols):
    """The offset bases of a (rows, cols) float32 tile in the 128-byte swizzle TMA writes
    (NVMMASharedLayout, not transposed; cols a multiple of 32): offset bit i → the (row, column)
    it adds. Bits 0–4 walk a 128-byte row; row bits 0–2 also flip the 16-byte chunk (the XOR
    swizzle); then the rows, then the 32-column blocks. What ``gl.to_linear_layout`` gives for
    that layout (a CPU test checks it with Triton 3.9; 3.6 cannot convert shared layouts)."""
    bases = [[0, 1 << i] for i in range(5)]
    bases += [[1 << i, 4 << i if i < 3 else 0] for i in range(rows.bit_length() - 1)]
    bases += [[0, 32 << i] for i in range((cols // 32).bit_length() - 1)]
    return bases


@gluon.constexpr_function
def _row_order_layout(layout, rows, cols):
    """The float32 tile of ``layout`` (TMA's 128-byte swizzle) seen with its columns in the swapped
    accumulator's row order: column n of each 32 is logical column r with n's bits 2, 3, 4 from
    r's bits 3, 4, 2. A warp's wgmma fragment reads 8 consecutive rows × 4 K (Bᵀ's columns × rows
    of B's tile): in the plain order they fall on 16 of the 32 banks under the swizzle (2-way
    conflicts on every read), in this order on all 32 (Gluon's ``bank_conflicts``: 1 → 0). The
    accumulator's rows are then in that order too, so D's tile is written through the same view
    (2-way there, conflict-free in the plain order: a tile's one epilogue against its 16–32
    reads a thread every K step). ``layout`` must be the 128-byte swizzle (float32, cols a
    multiple of 32)."""
    assert layout.swizzle_byte_width == 128 and layout.element_bitwidth == 32 and not layout.transposed

    def reorder(base):
        n = base[1]
        r = (n & ~0b11100) | ((n >> 2 & 1) << 3) | ((n >> 3 & 1) << 4) | ((n >> 4 & 1) << 2)
        return [base[0], r]

    return gl.SharedLinearLayout([reorder(b) for b in _swizzled_bases(rows, cols)], [], 1024)


@gluon.constexpr_function
def _block_n(b_desc, block_k):
    """The tile's columns, from B's descriptor block ((BN, BK) column-major, (BK, BN) row-major):
    D's block may be a column half of it."""
    return b_desc.block_type.shape[0] if _b_col_major(b_desc, block_k) else b_desc.block_type.shape[1]


@gluon.jit
def grouped_tile_origin(tile, num_m, num_n, BM: gl.constexpr, BN: gl.constexpr, GROUP_M):
    """(row, column) of output tile ``tile`` in grouped order, as ``gemm_tma.persistent_tile``
    (a Gluon function cannot call a ``triton.jit`` one; ``gemm_fma`` calls this one too)."""
    per_group = GROUP_M * num_n
    first_m = (tile // per_group) * GROUP_M
    rows = gl.minimum(num_m - first_m, GROUP_M)
    return (first_m + (tile % per_group) % rows) * BM, ((tile % per_group) // rows) * BN


@gluon.jit
def _loader(a_desc, b_desc, d_desc, a_bufs, b_bufs, ready, empty, M, N, K, GROUP_M, STAGES, PDL):
    """The loader warp: for every K step of every tile of this program, in order, wait until the
    stage is free (``empty``), then copy A's and B's tiles into it, completing on ``ready`` (after
    the stream's previous kernel, with a ``PDL`` mode: its writes may be A and B)."""
    gluon_dependent_launch(PDL)
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = _block_n(b_desc, BK)
    B_COL_MAJOR: gl.constexpr = _b_col_major(b_desc, BK)
    B_PIECES: gl.constexpr = _b_pieces(b_desc, BK)
    num_m = gl.cdiv(M, BM)
    num_n = gl.cdiv(N, BN)
    step = 0
    for tile in range(gl.program_id(0), num_m * num_n, gl.num_programs(0)):
        off_m, off_n = grouped_tile_origin(tile, num_m, num_n, BM, BN, GROUP_M)
        for k in range(0, K, BK):
            s = step % STAGES
            mbarrier.wait(empty.index(s), ((step // STAGES) & 1) ^ 1)  # a fresh stage passes at once
            mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + B_PIECES * b_desc.block_type.nbytes)
            tma_load(a_desc, [off_m, k], ready.index(s), a_bufs.index(s))
            if B_COL_MAJOR:
                tma_load(b_desc, [off_n, k], ready.index(s), b_bufs.index(s))
            else:  # swapped, in pieces of the box's rows
                for j in gl.static_range(B_PIECES):
                    tma_load(b_desc, [k + j * b_desc.block_type.shape[0], off_n], ready.index(s),
                              b_bufs.index(s * B_PIECES + j))
            step += 1


@gluon.jit
def _hand_back(empty, s, STAGES, HALVES: gl.constexpr = False):
    """Give the previous step's stage back to the loader once every warp group's wgmma on it is
    done. The caller has waited for its own; in one partition of two warp groups a barrier waits
    for the other's, with ``HALVES`` (a partition a warp group, ``empty`` counting two arrivals)
    each arrives itself: one thread of a warp group, after its ``warpgroup_mma_wait``, as
    CUTLASS's consumers do (a wgmma is the whole warp group's one operation)."""
    if not HALVES:
        cta_barrier()
    mbarrier.arrive(empty.index((s + STAGES - 1) % STAGES), count=1)


@gluon.jit
def _mac_step(a_bufs, b_bufs, ready, empty, acc, step, k, STAGES, SWAPPED: gl.constexpr,
              B_COL_MAJOR: gl.constexpr, b_registers: gl.constexpr, HALF: gl.constexpr = 0,
              HALVES: gl.constexpr = False):
    """One K step (the program's ``step``-th stage, ``k`` deep into its tile): wait for the stage,
    queue its wgmma behind the last, wait for the last only (one in flight) and hand the previous
    stage back (none before a tile's first step). With ``HALVES``, only half ``HALF`` of A's
    tile's rows (never swapped: :func:`swap_fits`).

    Swapped (:func:`_swapped`), Bᵀ's tile is read into registers as the A operand. PTX leaves it
    undefined to write those registers again before the wgmma reading them is done, and the next
    step writes them while this one runs. So the step goes in pieces of one tf32 instruction's K
    (8), each read into registers of its own, queued, and followed by a wait for all but the last
    BK / 8 − 1 pieces: a piece's registers are written again only once the same piece of the step
    before is done (what Triton's pipeliner does for register operands, splitting the dot by
    instruction K; a whole step held twice in registers would need 64 more a thread than the
    168 a 12-warp program has, and ptxas then serializes every wgmma)."""
    s = step % STAGES
    mbarrier.wait(ready.index(s), (step // STAGES) & 1)
    if SWAPPED:
        PIECES: gl.constexpr = a_bufs.type.shape[2] // 8
        BN: gl.constexpr = b_bufs.type.shape[2]
        ordered: gl.constexpr = _row_order_layout(b_bufs.type.layout, 8, BN)
        for j in gl.static_range(PIECES):
            b_piece = reinterpret(b_bufs.index(s * PIECES + j), gl.float32, [8, BN], ordered)
            b_piece = b_piece.permute((1, 0)).load(b_registers)
            a_piece = a_bufs.index(s).slice(j * 8, 8, dim=1).permute((1, 0))
            acc = warpgroup_mma(b_piece, a_piece, acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=PIECES - 1, deps=(acc,))
    else:
        a_tile = a_bufs.index(s)
        if HALVES:
            a_tile = a_tile.slice(HALF * (a_bufs.type.shape[1] // 2), a_bufs.type.shape[1] // 2, dim=0)
        if B_COL_MAJOR:
            acc = warpgroup_mma(a_tile, b_bufs.index(s).permute((1, 0)), acc, is_async=True)
        else:
            acc = warpgroup_mma(a_tile, b_bufs.index(s), acc, is_async=True)
        acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
    if k > 0:
        _hand_back(empty, s, STAGES, HALVES)
    return warpgroup_mma_init(acc)  # the loop carries the accumulator's type


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
def _store_halves(d_desc, d_smem, d_view, first, second, off_m, off_n, d_m: gl.constexpr, d_n: gl.constexpr):
    """Two halves of the tile through the one half-sized buffer (written through ``d_view``), the
    second ``d_m`` rows and ``d_n`` columns after the first; each waits for the buffer's previous
    store to have left it."""
    tma.store_wait(pendings=0)
    d_view.store(first)
    fence_async_shared()
    tma_store(d_desc, [off_m, off_n], d_smem)
    tma.store_wait(pendings=0)
    d_view.store(second)
    fence_async_shared()
    tma_store(d_desc, [off_m + d_m, off_n + d_n], d_smem)


@gluon.jit
def _store(d_desc, d_smem, d_view, out, off_m, off_n, BM: gl.constexpr, BN: gl.constexpr):
    """The tile into D through its descriptor (clipped to the matrix), written into the buffer
    ``d_smem`` through ``d_view`` (itself, or a swapped tile's column order): whole, or, where D's
    block is half the tile, in two halves through the one buffer: left and right (block (BM,
    BN / 2)), or top and bottom (block (BM / 2, BN): a swapped tile, whose transposed accumulator
    holds D's rows in registers, and splits only there). Each store waits for the buffer's
    previous one to have left it; the last overlaps what follows."""
    if d_desc.block_type.shape[0] == BM and d_desc.block_type.shape[1] == BN:
        tma.store_wait(pendings=0)
        d_view.store(out)
        fence_async_shared()
        tma_store(d_desc, [off_m, off_n], d_smem)
    elif d_desc.block_type.shape[1] == BN:
        top, bottom = gl.reshape(out, [2, BM // 2, BN]).permute(1, 2, 0).split()
        _store_halves(d_desc, d_smem, d_view, top, bottom, off_m, off_n, BM // 2, 0)
    else:
        left, right = gl.reshape(out, [BM, 2, BN // 2]).permute(0, 2, 1).split()
        _store_halves(d_desc, d_smem, d_view, left, right, off_m, off_n, 0, BN // 2)


@gluon.jit
def _multiplier(ring, group, groups, HALF: gl.constexpr, HALVES: gl.constexpr, PDL):
    """A multiplying partition, ``group`` of ``groups`` (1, or 2 taking the program's tiles in
    turn): each stage's wgmma queued behind the last, then a wait for the last only (one in
    flight), its stage handed back; the tile (fp8 operands: scaled, :func:`_scaled`) stored
    through D's descriptor, the store overlapping the next tile's first steps — or, in turn, the
    other group's wgmma. A group starts a tile once the one before it has seen its last stage
    arrive (``turns``): the stages come in the program's tile order, and a wait on a stage's
    ``ready`` phase two ahead of it would pass at once. With ``HALVES``, the partition multiplies
    and stores half ``HALF`` of every tile's rows beside the other half's partition. With a
    ``PDL`` mode, it first waits for the stream's previous kernel (which may read D, or write the
    scales and bias). ``ring``: the descriptors, the stage ring and its barriers, the scaling
    epilogue, the sizes, GROUP_M and STAGES (:func:`_gemm_ws_kernel`)."""
    a_desc, b_desc, d_desc, a_bufs, b_bufs, ready, empty, turns, epilogue, M, N, K, GROUP_M, STAGES = ring
    gluon_dependent_launch(PDL)
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = _block_n(b_desc, BK)
    B_COL_MAJOR: gl.constexpr = _b_col_major(b_desc, BK)
    SWAPPED: gl.constexpr = _swapped(b_desc, BK)
    gl.static_assert(not (SWAPPED and HALVES), "halves never multiply swapped (swap_fits)")
    PART_M: gl.constexpr = BM // 2 if HALVES else BM  # the tile's rows this partition multiplies
    ACC_M: gl.constexpr = BN if SWAPPED else PART_M  # swapped, the accumulator is Dᵀ's tile
    ACC_N: gl.constexpr = PART_M if SWAPPED else BN
    layout: gl.constexpr = _accumulator_layout(ACC_M, ACC_N, gl.num_warps(), a_desc.dtype)
    b_registers: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=layout, k_width=1)
    SCALED: gl.constexpr = a_desc.dtype.primitive_bitwidth == 8
    d_smem = gl.allocate_shared_memory(d_desc.dtype, d_desc.block_type.shape, d_desc.layout)
    num_m = gl.cdiv(M, BM)
    num_n = gl.cdiv(N, BN)
    k_steps = gl.cdiv(K, BK)
    step = group * k_steps  # the stages of the tiles before this group's first
    turn = group - 1  # the arrivals on turns[group] this group's next tile waits for, less one
    for tile in range(gl.program_id(0) + group * gl.num_programs(0), num_m * num_n,
                      groups * gl.num_programs(0)):
        off_m, off_n = grouped_tile_origin(tile, num_m, num_n, BM, BN, GROUP_M)
        off_m += HALF * PART_M  # the half's first row (HALF is 0 without halves)
        if groups > 1 and turn >= 0:  # alone, a group never waits
            mbarrier.wait(turns.index(group), turn & 1)
        turn += 1
        acc = warpgroup_mma_init(gl.zeros((ACC_M, ACC_N), gl.float32, layout))
        for k in range(0, K, BK):
            acc = _mac_step(a_bufs, b_bufs, ready, empty, acc, step, k, STAGES, SWAPPED, B_COL_MAJOR,
                            b_registers, HALF, HALVES)
            step += 1
        if groups > 1:
            mbarrier.arrive(turns.index((group + 1) % groups), count=1)  # its stages have all come
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        _hand_back(empty, step % STAGES, STAGES, HALVES)  # the tile's last stage
        step += (groups - 1) * k_steps
        if SCALED:
            acc = _scaled(acc, off_m, off_n, M, N, epilogue, layout, PART_M, BN)
        if SWAPPED:  # the accumulator's rows in the reordered column order of Bᵀ's reads
            D_M: gl.constexpr = d_desc.block_type.shape[0]
            D_N: gl.constexpr = d_desc.block_type.shape[1]
            d_view = reinterpret(d_smem, gl.float32, [D_M, D_N], _row_order_layout(d_desc.layout, D_M, D_N))
            _store(d_desc, d_smem, d_view, acc.permute((1, 0)).to(d_desc.dtype), off_m, off_n, BM, BN)
        else:
            _store(d_desc, d_smem, d_smem, acc.to(d_desc.dtype), off_m, off_n, PART_M, BN)
    tma.store_wait(pendings=0)


@gluon.jit
def stage_barriers(STAGES: gl.constexpr, CONSUMERS: gl.constexpr = 1):
    """A ring of ``STAGES`` shared-memory stages' mbarriers: ``ready`` (the loader's copies have
    landed; one arrival) and ``empty`` (the consumers are done with it; one arrival each of
    ``CONSUMERS``)."""
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=CONSUMERS)
    return ready, empty


@gluon.jit
def _gemm_ws_kernel(a_desc, b_desc, d_desc, sa_ptr, sb_ptr, bias_ptr, stride_sa, stride_sb, M, N, K,
                    GROUP_M: gl.constexpr, STAGES: gl.constexpr, PINGPONG: gl.constexpr, HALVES: gl.constexpr,
                    PDL: gl.constexpr):
    """D = A·B (fp8: scaled, plus a bias unless ``bias_ptr`` is None): the stage ring and its
    barriers, then the loader warp beside the multiplying warps (``PINGPONG``: beside two warp
    groups of the kernel's 4 warps, taking tiles in turn; ``HALVES``: two of 4 warps, each
    multiplying half of every tile). Constants passed to the
    partitions through a tuple variable arrive there as runtime values (see below), so B's
    layout and the tile's width are read from the descriptors' blocks (:func:`_b_col_major`,
    :func:`_block_n`) and the scaling from A's dtype; None stays None. ``PDL``: a
    ``launch.PDL_*`` mode (:func:`ws_pdl`), each partition waiting for the previous kernel."""
    dtype: gl.constexpr = a_desc.dtype
    a_bufs = gl.allocate_shared_memory(dtype, [STAGES] + a_desc.block_type.shape, a_desc.layout)  # noqa: RUF005
    B_PIECES: gl.constexpr = _b_pieces(b_desc, a_desc.block_type.shape[1])
    b_bufs = gl.allocate_shared_memory(dtype, [STAGES * B_PIECES] + b_desc.block_type.shape,  # noqa: RUF005
                                       b_desc.layout)
    ready, empty = stage_barriers(STAGES, 2 if HALVES else 1)
    turns = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(turns.index(i), count=1)
    epilogue = (sa_ptr, sb_ptr, bias_ptr, stride_sa, stride_sb)
    loads = (a_desc, b_desc, d_desc, a_bufs, b_bufs, ready, empty, M, N, K, GROUP_M, STAGES, PDL)
    # The multipliers take the tile walk's constants as runtime values, as the shipped binaries were
    # built and timed: a variable assigned a constant (or a tuple of them) holds a runtime value,
    # while a constant passed inline stays one — as HALF and HALVES must, which shape the accumulator.
    ring = (a_desc, b_desc, d_desc, a_bufs, b_bufs, ready, empty, turns, epilogue, M, N, K, GROUP_M, STAGES)
    pdl, first, second, groups = PDL, 0, 1 if PINGPONG else 0, 2 if PINGPONG else 1
    if PINGPONG or HALVES:  # the second warp group: the next tile in turn, or the tile's second half
        gl.warp_specialize([(_multiplier, (ring, first, groups, 0, HALVES, pdl)),
                            (_multiplier, (ring, second, groups, 1 if HALVES else 0, HALVES, pdl)),
                            (_loader, loads)], [4, 1], [PINGPONG_REGISTERS, LOADER_REGISTERS])
    else:
        gl.warp_specialize([(_multiplier, (ring, first, groups, 0, False, pdl)), (_loader, loads)], [1],
                           [LOADER_REGISTERS])


def ws_supported(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None, d: torch.Tensor,
                 alpha: float, precision: str = "ieee") -> bool:
    """Whether 2-D views ``a`` (M,K), ``b`` (K,N), ``d`` (M,N) fit the ``gemm`` use: A and B of one
    dtype, D of it too, A and D row-major, 16-byte aligned rows, no C, alpha 1, and either 16-bit
    or float32 with ``precision`` "tf32", B either way (tf32 row-major: multiplied swapped, which
    not every configuration can, :func:`swap_fits`; the caller checks the device and the batch)."""
    tf32 = a.dtype == torch.float32 and precision == "tf32"
    return (
        (a.dtype in _GL_DTYPES or tf32) and b.dtype == a.dtype and d.dtype == a.dtype
        and c is None and alpha == 1.0 and a.stride(-1) == 1
        and tma_supported(a, b, d)  # the descriptor family's rules: sizes, 16-byte rows, D row-major
    )


def swaps(b: torch.Tensor) -> bool:
    """Whether the kernel multiplies with ``b`` (K, N) swapped (:func:`_swapped`): float32, row-major."""
    return b.dtype == torch.float32 and not is_col_major(b)


def swap_fits(config: WsConfig) -> bool:
    """Whether ``config`` can multiply swapped (a tf32 row-major B): the accumulator, Dᵀ's tile, has
    block_n rows, 16 a warp (``block_n`` a multiple of 16 × num_warps), and one multiplying
    partition: with two (ping-pong, halves) ptxas serializes every wgmma whose A operand comes
    from registers ("C7512 … insufficient register resources", offline with Triton 3.6's ptxas,
    even for halves of a 128×128 tile with 64-register accumulators), so those copy B K-major."""
    return not (config.pingpong or config.halves) and config.block_n % (16 * config.num_warps) == 0


def unswapped(config: WsConfig) -> WsConfig:
    """The tile a tf32 call with B column-major (x @ W.t(), multiplied as it is) runs for a logic
    row tuned on the swapped product (the tuner's A @ B, B row-major): block_m and block_n
    exchanged, which keeps the accumulator's shape — swapped, a (block_m × block_n) tile holds Dᵀ's
    (block_n × block_m). Measured on the H200 (``gpu-session-h200-c08cc10/tf32.txt``): 256×128×32
    swapped and 128×256×32 on a K-major B were each the best of its layout at 2048³–8192³, and
    each 4–16 % slower in the other. ``config`` itself where the exchanged tile is not valid."""
    if config.pingpong or config.block_m == config.block_n:
        return config
    try:
        return dataclasses.replace(config, block_m=config.block_n, block_n=config.block_m)
    except InvalidArgumentError:
        return config


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


def ws_pdl(tiles: int, num_sms: int) -> int:
    """The programmatic-dependent-launch mode of a launch of ``tiles`` output tiles: early while
    the grid is less than a full wave (its launch and barrier setup overlap the previous kernel's
    tail: bf16 / fp16 1024³ 6.4 → 5.4 µs in graphs, 0.86 → 1.02 / 1.03× cuBLAS, at exit 0.95×;
    ``benchmarks/results/gpu-session-h200-ed859bb/pdlws/``), off from a full wave on (untimed
    here; ``gemm_tma``'s measured tied or slower there). A full wave or more shares one binary,
    the one a pack's representative launch compiles."""
    return PDL_EARLY if tiles < num_sms else PDL_OFF


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
    if swaps(b) and not swap_fits(config):
        raise InvalidArgumentError(
            f"{config.short()} cannot multiply a row-major float32 B: the kernel takes it as Dᵀ = Bᵀ·Aᵀ, "
            f"which needs block_n a multiple of 16 rows a warp and one multiplying partition (no pingpong "
            f"or halves); pick such a configuration or pass B column-major")
    b_desc = (block_descriptor(b.t(), [config.block_n, config.block_k]) if b_col
              else block_descriptor(b, [8 if swaps(b) else config.block_k, config.block_n]))
    tiles = cdiv(m, config.block_m) * cdiv(n, config.block_n)
    scaled = scale_a is not None
    sa, sb = (scale_a, scale_b) if scaled else (d, d)
    strides = [0 if t.numel() == 1 else t.stride(0) for t in (sa, sb)] if scaled else [0, 0]
    stages = fitting_stages(config, a.element_size(), d.element_size(), d)
    split = config.epilogue_split  # swapped, D's tile in row halves (:func:`_store`)
    rows = config.block_m // 2 if config.halves else config.block_m  # halves: each stores its own
    d_block = ([config.block_m // split, config.block_n] if swaps(b)
               else [rows, config.block_n // split])
    _launch((min(num_sms, tiles),),
            (block_descriptor(a, [config.block_m, config.block_k]), b_desc, block_descriptor(d, d_block),
             sa, sb, bias,
             *strides, m, n, k),
            dict(GROUP_M=config.group_m, STAGES=stages, PINGPONG=config.pingpong, HALVES=config.halves,
                 PDL=pdl_mode(d, ws_pdl(tiles, num_sms))),
            4 if config.halves else config.num_warps, 1)  # halves: the first group's, the second beside


def representative_launch(op: str, config: WsConfig, dtype: str, num_sms: int) -> None:
    """The launches ``gemm`` makes with ``config`` for problems of a full wave or more (the grid,
    the SM count, is a launch argument): B row-major and column-major (x @ W.t(); tf32 row-major
    only where the configuration multiplies swapped, :func:`swap_fits`, else gemm copies B
    K-major; tf32 column-major also with the tile exchanged, :func:`unswapped`, as selection runs
    a swapped row there), each of M, N and K a multiple of 16 or only of 8 — every specialization
    a 16-byte-row call can have (run under ``launch.capture()``). The scaled use's launches are
    ``gemm_scaled``'s."""
    rows, cols = full_wave_shape(config.block_m, config.block_n, num_sms)
    tf32 = dtype in TF32_KEYS
    layouts = (True,) if tf32 and not swap_fits(config) else (False, True)
    for b_col, m, n, k in itertools.product(layouts, (rows, rows - 8), (cols, cols - 8), (1024, 1000)):
        a, b, d = representative_operands(dtype, m, n, k, b_col_major=b_col)
        # a column-major tf32 B: the tile as selection runs it (exchanged) and as forced (as it is)
        tiles = {config, unswapped(config)} if tf32 and b_col and swap_fits(config) else {config}
        for tile in sorted(tiles, key=lambda c: c.block_m):
            launch_gemm_ws(a, b, d, num_sms=num_sms, config=tile)
    representative_operand_copies(dtype)  # last, as the other families
