"""IEEE float32 GEMM on the FMA units, written in Gluon (``gemm_fma``): explicit thread tiles.

Why: cuBLAS's SGEMM reaches 48.7–51.1 TFLOP/s on the H200 from 2048³, the portable tile family
(Triton's FMA dot) 0.87–0.89× of it. Its best tile's sm_90 SASS issues 1024 FFMA a K step against
96 shared-memory reads (a 4×8 thread tile: 2.7 FMAs a float read), and 128×128 tiles hold 188
registers (one program a multiprocessor). Here each program computes a 128×128 tile of D on 8
warps and each thread an 8×8 block of it (its rows together, its columns two runs of 4, 64
apart, so that each 8-thread phase of B's ``LDS.128`` reads 128 contiguous bytes: no bank
conflicts); A's tile is stored transposed in shared memory (M contiguous), so a K step is BK
outer products of a column of A and a row of B, a thread reading its 8 values of each with 2
``LDS.128`` (4 FMAs a float read) — 512 FFMA and 32 ``LDS.128`` a thread a BK-8 step (90 % of the
loop's instructions FFMA), 128 registers under its cap: two programs a multiprocessor (offline
SASS with Triton 3.6, no spills). A's tile is loaded a warp to a K group (:func:`a_load_layout`),
so its transposed stores are free of bank conflicts too. The next step's tiles are loaded from
global memory into registers while a step multiplies; with ``buffers`` 2 they are stored into a
second pair of shared buffers beside the ones being read (one barrier a step; two allocations,
not indices into one, else Triton's barrier analysis adds a second), with 1 after every thread
has read them (two barriers).

On 4 warps (``num_warps`` 4) a thread computes 8×16 of D instead, the thread tile of cuBLAS's
SGEMM: 128 FFMA for 6 ``LDS.128`` a K row, 191 registers offline; it ran 0.64–0.71× SGEMM on an
H100 (two programs of 4 warps a multiprocessor hide too little), so ``FMA_SPACE`` leaves it out.
cuBLAS's own sm_90 kernel (Nsight Compute, fifty-fourth session) is 256×128×8 on 8 warps, 254
registers, ``cp.async`` on 3 stages; that design written here (128×256, 8×16 a thread, cp.async
or registers) ran 0.77–0.83× where this kernel runs 0.90× (docs/architecture.md, "float32 on
the FMA units in Gluon").

Chosen through logic files (the tuner offers ``FMA_SPACE`` to fp32): the sm_90 fp32 squares from
2048³ take 128×128×8 in two buffers (r128) — 0.895–0.912× cuBLAS's SGEMM on the H200 through
calls, where the tile family ran 0.865–0.892× (``benchmarks/results/gpu-session-h200-eafe38c/``).
Before the bank-conflict fixes (a thread's 8 columns together: B's reads 2-way, 24 wavefronts a
warp a K step for 64 FFMA a thread, now 16; A's stores 2-way, now 0) it ran 0.75–0.82×.

Takes (:func:`fma_supported`): float32 with IEEE precision, one 2-D problem, A and B row-major
(the rows its loads coalesce: K-contiguous A, N-contiguous B), C and D of any strides, every
operand under 2³¹ elements (32-bit offsets); NVIDIA GPUs (the caller checks the device).

    D = alpha · A @ B + beta · C     (C read only when HAS_C)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from tessera._core.errors import InvalidArgumentError
from tessera._core.launch import Launcher, cdiv
from tessera._core.validate import needs_int64_index
from tessera.blas.kernels.gemm_tile import ODD_SIZE, REPRESENTATIVE_ROWS, representative_operands
from tessera.blas.kernels.gemm_ws import grouped_tile_origin
from tessera.blas.kernels.gluon_names import cta_barrier

BLOCK = 128  # the tile's rows and columns
TILE = gl.constexpr(BLOCK)  # the same, as the kernels see it
WARPS = (4, 8)  # 8×16 or 8×8 of D a thread
BLOCK_KS = (8, 16, 32)


@gluon.constexpr_function
def accumulator_layout(warps):
    """D's tile: 8 rows a thread (together) and its columns in runs of 4, 32 · warps / 4 apart (8
    warps: two runs, 8 columns a thread; 4 warps: four runs, 16 columns), 4 × 8 threads a warp, 4
    × warps / 4 warps. Each of a thread's LDS.128 of B has the 8 threads of a phase read 128
    contiguous bytes (8 contiguous columns a thread put two threads of a phase on one bank:
    Gluon's bank_conflicts 1 → 0, tests/test_gemm_fma.py)."""
    return gl.BlockedLayout([8, 4], [4, 8], [4, warps // 4], [1, 0])


@gluon.constexpr_function
def a_row_layout(warps):
    """A K row of A's transposed tile (1, 128), spread as the accumulator's rows are: a thread's 8."""
    return gl.BlockedLayout([1, 8], [8, 4], [warps // 4, 4], [0, 1])


@gluon.constexpr_function
def a_load_layout(block_k, warps):
    """How a step's A tile (128 × block_k, K-contiguous rows) is loaded from global memory: a
    warp's 32 threads on 32 rows, each with its row's block_k floats (4 warps) or half of them (8
    warps, 4 × 2). Stored transposed, a warp's stores then fill 32 consecutive floats of one K
    row of the buffer: no bank conflicts, where a warp spanning several K groups of 16 or 8 rows
    put them on the same banks (2-, 4-, 8-way at block_k 8, 16, 32: Gluon's ``bank_conflicts``
    1, 3, 7). On 8 warps at block_k 8 a warp's load reads half of each row's 32-byte sector, the
    other warp of its rows the other half."""
    return gl.BlockedLayout([1, block_k * 4 // warps], [32, 1], [4, warps // 4], [1, 0])


@dataclass(frozen=True)
class FmaConfig:
    """Launch parameters of :func:`_gemm_fma_kernel`: ``block_k`` outer products a K step, the
    tiles of a step in ``buffers`` shared-memory buffers (2: the next stored beside the current,
    one barrier a step), ``group_m`` tile rows sharing B's columns in L2, ``max_registers`` a
    thread (ptxas's ``maxnreg``; offline, sm_90: BK 8 in two buffers takes 123–138 by launch, all
    within 128 under that cap, without spills: two programs a multiprocessor; BK 16 in two buffers
    spilled where ptxas chose 128 itself, and takes 142–153 under a cap of 168). The tile is
    128×128 on ``num_warps`` 8 (8×8 of D a thread) or 4 (8×16 a thread, cuBLAS's SGEMM thread
    tile: ~190 registers, two programs a multiprocessor; measured slower, see the module)."""

    block_k: int = 8
    buffers: int = 2
    group_m: int = 8
    max_registers: int = 0  # a thread's register cap (0: ptxas's choice); 128 keeps two programs an SM
    num_warps: int = 8

    kernel = "gemm_fma"
    block_m = BLOCK
    block_n = BLOCK

    def __post_init__(self) -> None:
        if self.block_k not in BLOCK_KS or self.buffers not in (1, 2) or self.group_m < 1 \
                or not (self.max_registers == 0 or 64 <= self.max_registers <= 255) \
                or self.num_warps not in WARPS:
            raise InvalidArgumentError(
                f"gemm_fma takes block_k in {BLOCK_KS}, 1 or 2 buffers, group_m ≥ 1, max_registers 0 "
                f"or 64…255 and num_warps in {WARPS} (actual: {self.short()}): a step's tiles are loaded "
                f"a row of 4 floats or more a thread, the tiles are stored once or beside the last, a "
                f"thread has at most 255 registers, and the layouts are written for 8×8 or 8×16 of D a "
                f"thread")

    def short(self) -> str:
        cap = f" r{self.max_registers}" if self.max_registers else ""
        return f"{self.kernel} 128x128x{self.block_k} g{self.group_m} w{self.num_warps} x{self.buffers}{cap}"


@gluon.jit
def _outer_products(a_buf, b_buf, acc, a_row: gl.constexpr, acc_layout: gl.constexpr, BK: gl.constexpr):
    """acc + the step's BK outer products: a column of A (a thread's 8 rows) times a row of B (its 8
    columns), each read with 2 ``LDS.128`` shared by the threads of its row (column) group."""
    for kk in gl.static_range(BK):
        a = gl.permute(a_buf.slice(kk, 1, dim=0).load(a_row), (1, 0))
        b = b_buf.slice(kk, 1, dim=0).load(acc_layout)
        acc = acc + gl.convert_layout(a, acc_layout) * b
    return acc


@gluon.jit
def _step_beside(a_cur, b_cur, a_other, b_other, a_ptrs, b_ptrs, acc, k_next, M, N, K, rm, ka, kb, rn,
                 stride_ak, stride_bk, a_row: gl.constexpr, acc_layout: gl.constexpr, BK: gl.constexpr):
    """One step on the buffers ``a_cur``/``b_cur`` while the step at ``k_next`` is loaded (zeros
    past K) and stored into the other pair, which every thread finished reading before the
    barrier that ended the previous step; then the barrier that ends this one."""
    a_next = gl.load(a_ptrs + k_next * stride_ak, mask=(rm[:, None] < M) & (k_next + ka[None, :] < K),
                     other=0.0)
    b_next = gl.load(b_ptrs + k_next * stride_bk, mask=(k_next + kb[:, None] < K) & (rn[None, :] < N),
                     other=0.0)
    acc = _outer_products(a_cur, b_cur, acc, a_row, acc_layout, BK)
    a_other.store(gl.permute(a_next, (1, 0)))
    b_other.store(b_next)
    cta_barrier()
    return acc


@gluon.jit
def _gemm_fma_kernel(a_ptr, b_ptr, c_ptr, d_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                     stride_cm, stride_cn, stride_dm, stride_dn, alpha, beta,
                     HAS_C: gl.constexpr, SCALE_ALPHA: gl.constexpr, BK: gl.constexpr,
                     BUFFERS: gl.constexpr, GROUP_M: gl.constexpr, MAXNREG: gl.constexpr):
    """D = alpha · A @ B (+ beta · C) on one 128×128 tile (MAXNREG: a compile option, not read)."""
    warps: gl.constexpr = gl.num_warps()
    acc_layout: gl.constexpr = accumulator_layout(warps)
    a_row: gl.constexpr = a_row_layout(warps)
    # global loads: A's rows K-contiguous, B's N-contiguous (4 floats a thread, a warp a row)
    a_load: gl.constexpr = a_load_layout(BK, warps)
    b_load: gl.constexpr = gl.BlockedLayout([1, 4], [1, 32], [warps, 1], [1, 0])
    unswizzled: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])
    # separate allocations, not indices into one: Triton's barrier analysis cannot tell a dynamic
    # index's buffer from another's and would add a barrier between reading one and filling the other
    a0 = gl.allocate_shared_memory(gl.float32, [BK, TILE], unswizzled)
    b0 = gl.allocate_shared_memory(gl.float32, [BK, TILE], unswizzled)

    off_m, off_n = grouped_tile_origin(gl.program_id(0), gl.cdiv(M, TILE), gl.cdiv(N, TILE), TILE, TILE,
                                       GROUP_M)
    rm = off_m + gl.arange(0, TILE, layout=gl.SliceLayout(1, a_load))
    ka = gl.arange(0, BK, layout=gl.SliceLayout(0, a_load))
    kb = gl.arange(0, BK, layout=gl.SliceLayout(1, b_load))
    rn = off_n + gl.arange(0, TILE, layout=gl.SliceLayout(0, b_load))
    a_ptrs = a_ptr + rm[:, None] * stride_am + ka[None, :] * stride_ak
    b_ptrs = b_ptr + kb[:, None] * stride_bk + rn[None, :] * stride_bn

    acc = gl.zeros([TILE, TILE], gl.float32, acc_layout)
    a_next = gl.load(a_ptrs, mask=(rm[:, None] < M) & (ka[None, :] < K), other=0.0)
    b_next = gl.load(b_ptrs, mask=(kb[:, None] < K) & (rn[None, :] < N), other=0.0)
    if BUFFERS == 1:  # two barriers a step: the store waits for every read of the last step
        for k0 in range(0, K, BK):
            cta_barrier()
            a0.store(gl.permute(a_next, (1, 0)))
            b0.store(b_next)
            cta_barrier()
            k1 = k0 + BK  # the next step's loads in flight while this one multiplies (zeros past K)
            a_next = gl.load(a_ptrs + k1 * stride_ak, mask=(rm[:, None] < M) & (k1 + ka[None, :] < K),
                             other=0.0)
            b_next = gl.load(b_ptrs + k1 * stride_bk, mask=(k1 + kb[:, None] < K) & (rn[None, :] < N),
                             other=0.0)
            acc = _outer_products(a0, b0, acc, a_row, acc_layout, BK)
    else:  # two steps a turn, each stored beside the one being read: one barrier a step
        a1 = gl.allocate_shared_memory(gl.float32, [BK, TILE], unswizzled)
        b1 = gl.allocate_shared_memory(gl.float32, [BK, TILE], unswizzled)
        a0.store(gl.permute(a_next, (1, 0)))
        b0.store(b_next)
        cta_barrier()
        for k0 in range(0, K, 2 * BK):  # an odd step count ends with a step of zeros (loads past K)
            acc = _step_beside(a0, b0, a1, b1, a_ptrs, b_ptrs, acc, k0 + BK, M, N, K, rm, ka, kb, rn,
                               stride_ak, stride_bk, a_row, acc_layout, BK)
            acc = _step_beside(a1, b1, a0, b0, a_ptrs, b_ptrs, acc, k0 + 2 * BK, M, N, K, rm, ka, kb, rn,
                               stride_ak, stride_bk, a_row, acc_layout, BK)

    dm = off_m + gl.arange(0, TILE, layout=gl.SliceLayout(1, acc_layout))
    dn = off_n + gl.arange(0, TILE, layout=gl.SliceLayout(0, acc_layout))
    mask = (dm[:, None] < M) & (dn[None, :] < N)
    if SCALE_ALPHA:
        acc = acc * alpha
    if HAS_C:
        c = gl.load(c_ptr + dm[:, None] * stride_cm + dn[None, :] * stride_cn, mask=mask, other=0.0)
        acc = acc + beta * c
    gl.store(d_ptr + dm[:, None] * stride_dm + dn[None, :] * stride_dn, acc, mask=mask)


def fma_supported(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None, d: torch.Tensor,
                  precision: str) -> bool:
    """Whether 2-D views ``a`` (M,K), ``b`` (K,N), ``c``/``d`` (M,N) fit the family: float32 with
    IEEE precision throughout, A and B row-major, every operand under 2³¹ elements (the caller
    checks the device and the batch)."""
    operands = (a, b, d) if c is None else (a, b, c, d)
    return (precision == "ieee" and all(t.dtype == torch.float32 and t.dim() == 2 for t in operands)
            and a.stride(-1) == 1 and b.stride(-1) == 1 and not needs_int64_index(*operands))


_launch = Launcher(_gemm_fma_kernel)


def launch_gemm_fma(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None, d: torch.Tensor, alpha: float,
                    beta: float, *, config: FmaConfig) -> None:
    """Launch on 2-D views that pass :func:`fma_supported`: one program a 128×128 tile of D."""
    m, k = a.shape
    n = b.shape[1]
    c_arg = c if c is not None else d
    _launch((cdiv(m, BLOCK) * cdiv(n, BLOCK),),
            (a, b, c_arg, d, m, n, k, *a.stride(), *b.stride(), *c_arg.stride(), *d.stride(), float(alpha),
             float(beta)),
            dict(HAS_C=c is not None, SCALE_ALPHA=alpha != 1.0, BK=config.block_k, BUFFERS=config.buffers,
                 GROUP_M=config.group_m, MAXNREG=config.max_registers),
            config.num_warps, 1)


def representative_launch(op: str, config: FmaConfig, dtype: str, num_sms: int) -> None:
    """The launches ``gemm`` makes with ``config`` (run under ``launch.capture()``): M aligned, a
    token count or one row, each with N and K multiples of 16 or both not; then M aligned with N
    alone not (a vocabulary's LM head), with a C operand, and with alpha ≠ 1 (B row-major always:
    the family takes no other). Sizes and strides specialize only on divisibility by 16 (and 1)."""
    shapes = [(m, nk, False, 1.0) for m in REPRESENTATIVE_ROWS for nk in ((1024, 1024), (ODD_SIZE, ODD_SIZE))]
    shapes += [(1024, (ODD_SIZE, 1024), False, 1.0), (1024, (1024, 1024), True, 1.0),
               (1024, (1024, 1024), False, 0.5)]
    for m, (n, k), with_c, alpha in shapes:
        a, b, d = representative_operands(dtype, m, n, k)
        launch_gemm_fma(a, b, torch.empty_like(d) if with_c else None, d, alpha, 1.0 if with_c else 0.0,
                        config=config)
