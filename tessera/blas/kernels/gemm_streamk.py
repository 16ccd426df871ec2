"""Stream-K GEMM: full waves of whole tiles, then the remaining tiles' MAC loops shared evenly.

The problem's work is T output tiles × I K-iterations each (BLOCK_K deep), on P persistent
programs. The first ``dp_tiles`` = P·⌊T / P⌋ tiles go whole, P at a time in grouped order (a
data-parallel wave: every program at the same K step, so A's and B's slabs are shared in L2).
The iterations of the other tiles are shared: program p takes [S + p·L, S + (p + 1)·L), S =
dp_tiles·I, L = max(⌈(T − dp_tiles)·I / P⌉, ⌈I / 8⌉) (at most about 8 pieces per tile), walking
them tile by tile: a tile it covers whole is stored at once; a piece of a tile (the program's
first or last segment) goes to a workspace slot (p, 0) or (p, 1), and the program then adds one
to that tile's counter. The program that brings the counter to the tile's number of contributors —
the last one, whoever that is — adds the pieces in contributor order (fixed: bit-reproducible run
to run, no waiting on anyone), stores the tile and zeroes the counter again. The pieces and the
counters are scratch buffers kept per stream and thread (``launch.scratch``): every launch leaves the
counters zeroed, so none is filled before a launch, and a repeat ``gemm`` call replays its launch.
Unlike a data-parallel grid of T tiles, the last wave leaves no multiprocessor idle; unlike sharing
all of T·I (the first version, 0.61–0.99× on the H200), the programs' K positions stay aligned in
the full waves.
With ``tma`` (Hopper; operands meeting ``gemm_tma``'s descriptor rules) the K-iterations load
through tensor descriptors as ``gemm_tma`` does; pieces, counters and the fixup are the same.

    D = alpha · A @ B + beta · C     (C read only when HAS_C; 2-D operands, any strides)
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from tessera._core.device import TF32_KEYS, precision_of
from tessera._core.launch import PDL_OFF, Launcher, cdiv, pdl_mode, scratch
from tessera._core.pdl import dependent_launch
from tessera.blas.kernels.copy import representative_operand_copies
from tessera.blas.kernels.gemm_tile import REPRESENTATIVE_ROWS, epilogue, representative_operands
from tessera.blas.kernels.gemm_tma import descriptor, is_col_major, mac_steps, persistent_tile


@dataclass(frozen=True)
class StreamKConfig:
    """Launch parameters of :func:`_gemm_streamk_kernel`; ``programs`` = 0 means one per SM."""

    block_m: int
    block_n: int
    block_k: int
    programs: int = 0
    num_warps: int = 4
    num_stages: int = 3
    tma: bool = False  # load through tensor descriptors (CUDA sm_90+, descriptor-legal layouts)

    kernel = "gemm_streamk"

    def short(self) -> str:
        grid = self.programs or "SMs"
        return (f"{self.kernel} {self.block_m}x{self.block_n}x{self.block_k} p{grid} "
                f"w{self.num_warps} s{self.num_stages}{' tma' if self.tma else ''}")


@triton.jit
def _mac(a_ptr, b_ptr, rm, rn, rk, mask_m, mask_n, K, k_first, k_last, stride_am, stride_ak, stride_bk,
         stride_bn, acc, UPCAST: tl.constexpr, INPUT_PRECISION: tl.constexpr, BLOCK_K: tl.constexpr):
    """acc + A[rm, k] @ B[k, rn] over K-iterations k_first … k_last − 1 of one tile."""
    for kk in range(k_first, k_last):
        ks = kk * BLOCK_K + rk
        a = tl.load(a_ptr + rm[:, None] * stride_am + ks[None, :] * stride_ak,
                    mask=mask_m[:, None] & (ks[None, :] < K), other=0.0)
        b = tl.load(b_ptr + ks[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=(ks[:, None] < K) & mask_n[None, :], other=0.0)
        if UPCAST:  # the interpreter's bf16 dot is wrong; fp32 is exact for bf16 products
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION, out_dtype=acc.dtype)
    return acc


@triton.jit
def _tile_mac(a_ptr, b_ptr, off_m, off_n, rm, rn, rk, M, N, K, k_first, k_last, stride_am, stride_ak,
              stride_bk, stride_bn, acc, UPCAST: tl.constexpr, INPUT_PRECISION: tl.constexpr,
              BLOCK_K: tl.constexpr, TMA: tl.constexpr, A_COL_MAJOR: tl.constexpr, B_COL_MAJOR: tl.constexpr):
    """K-iterations k_first … k_last − 1 of the tile at (off_m, off_n): descriptors or pointers."""
    if TMA:
        acc = mac_steps(a_ptr, b_ptr, off_m, off_n, k_first, k_last, acc, INPUT_PRECISION, A_COL_MAJOR,
                        B_COL_MAJOR, BLOCK_K)
    else:
        acc = _mac(a_ptr, b_ptr, rm, rn, rk, rm < M, rn < N, K, k_first, k_last, stride_am, stride_ak,
                   stride_bk, stride_bn, acc, UPCAST, INPUT_PRECISION, BLOCK_K)
    return acc


@triton.jit
def _gemm_streamk_kernel(
    a_ptr, b_ptr, c_ptr, d_ptr, ws_ptr, count_ptr,
    M, N, K, dp_tiles, per_program,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn, stride_dm, stride_dn,
    alpha: tl.float64, beta: tl.float64,
    HAS_C: tl.constexpr, SCALE_ALPHA: tl.constexpr, ACC_FP64: tl.constexpr, UPCAST: tl.constexpr,
    INPUT_PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, TMA: tl.constexpr, A_COL_MAJOR: tl.constexpr, B_COL_MAJOR: tl.constexpr,
    PDL: tl.constexpr,
):
    """``a_ptr``/``b_ptr`` are tensor descriptors when TMA (A_COL_MAJOR/B_COL_MAJOR: their layouts)."""
    dependent_launch(PDL)
    p = tl.program_id(0)
    programs = tl.num_programs(0)
    iters = tl.cdiv(K, BLOCK_K)  # K-iterations per tile
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc_type = tl.float64 if ACC_FP64 else tl.float32
    for tile in range(p, dp_tiles, programs):  # the full waves: whole tiles
        off_m, off_n = persistent_tile(tile, tiles_m, tiles_n, BLOCK_M, BLOCK_N, GROUP_M)
        rm = off_m.to(tl.int64) + tl.arange(0, BLOCK_M)
        rn = off_n.to(tl.int64) + tl.arange(0, BLOCK_N)
        acc = _tile_mac(a_ptr, b_ptr, off_m, off_n, rm, rn, rk, M, N, K, 0, iters, stride_am, stride_ak,
                        stride_bk, stride_bn, tl.zeros((BLOCK_M, BLOCK_N), dtype=acc_type), UPCAST,
                        INPUT_PRECISION, BLOCK_K, TMA, A_COL_MAJOR, B_COL_MAJOR)
        epilogue(acc, c_ptr, d_ptr, rm, rn, rm < M, rn < N, stride_cm, stride_cn, stride_dm, stride_dn,
                 alpha, beta, HAS_C, SCALE_ALPHA)

    shared = dp_tiles * iters  # the first iteration of the shared part
    total = tiles_m * tiles_n * iters
    start = shared + p * per_program
    end = tl.minimum(start + per_program, total)
    tile_elems = BLOCK_M * BLOCK_N
    local = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    it = start
    while it < end:
        tile = it // iters
        k_first = it % iters
        k_last = tl.minimum(iters, k_first + (end - it))
        off_m, off_n = persistent_tile(tile, tiles_m, tiles_n, BLOCK_M, BLOCK_N, GROUP_M)
        rm = off_m.to(tl.int64) + tl.arange(0, BLOCK_M)
        rn = off_n.to(tl.int64) + tl.arange(0, BLOCK_N)
        mask_m = rm < M
        mask_n = rn < N
        acc = _tile_mac(a_ptr, b_ptr, off_m, off_n, rm, rn, rk, M, N, K, k_first, k_last, stride_am,
                        stride_ak, stride_bk, stride_bn, tl.zeros((BLOCK_M, BLOCK_N), dtype=acc_type), UPCAST,
                        INPUT_PRECISION, BLOCK_K, TMA, A_COL_MAJOR, B_COL_MAJOR)
        if (k_first == 0) & (k_last == iters):  # the whole tile is ours
            epilogue(acc, c_ptr, d_ptr, rm, rn, mask_m, mask_n, stride_cm, stride_cn, stride_dm, stride_dn,
                     alpha, beta, HAS_C, SCALE_ALPHA)
        else:
            slot = 2 * p + tl.where(it == start, 0, 1)  # (p, 0): the program's first segment; (p, 1): last
            tl.store(ws_ptr + slot.to(tl.int64) * tile_elems + local, acc)
            first = (tile * iters - shared) // per_program  # contributors: the programs covering this tile
            last = (tile * iters + iters - 1 - shared) // per_program
            if last_to_arrive(count_ptr + tile, last - first + 1):  # add them all, in contributor order
                total_acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=acc.dtype)
                for q in range(first, last + 1):  # slot 1 unless this tile opens q's range
                    q_slot = 2 * q + tl.where(shared + q * per_program < tile * iters, 1, 0)
                    total_acc += tl.load(ws_ptr + q_slot.to(tl.int64) * tile_elems + local,
                                         cache_modifier=".cg")
                epilogue(total_acc, c_ptr, d_ptr, rm, rn, mask_m, mask_n, stride_cm, stride_cn, stride_dm,
                         stride_dn, alpha, beta, HAS_C, SCALE_ALPHA)
        it += k_last - k_first


@triton.jit
def last_to_arrive(counter_ptr, contributors):
    """Whether this program is the last of ``contributors`` to count itself in at ``counter_ptr``
    (an int32 left zeroed by the last launch): after a barrier (every thread's part stored), one
    acq_rel add — the last one in sees what the others stored before their adds — and the last
    one zeroes the counter again for the next launch. No program waits for another."""
    tl.debug_barrier()
    done = tl.atomic_add(counter_ptr, 1, sem="acq_rel")
    last = done == contributors - 1
    if last:
        tl.store(counter_ptr, 0)
    return last


_launch = Launcher(_gemm_streamk_kernel)
MAX_PIECES = 8  # a shared tile is cut into at most about this many pieces (the fixup reads them all)
GROUP_M = 8  # tile rows per group in the tile order (B's columns shared in L2)


def launch_gemm_streamk(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None, d: torch.Tensor,
                        alpha: float, beta: float, *, precision: str, upcast: bool, num_sms: int,
                        config: StreamKConfig) -> None:
    """d ← alpha · a @ b + beta · c for 2-D views (a (M, K), b (K, N), c/d (M, N)); with
    ``config.tma`` a and b must pass ``gemm_tma.tma_supported``."""
    m, k = a.shape
    n = b.shape[1]
    tiles = cdiv(m, config.block_m) * cdiv(n, config.block_n)
    iters = cdiv(k, config.block_k)
    programs = max(1, config.programs or num_sms)
    dp_tiles = tiles - tiles % programs  # full waves of whole tiles; the rest is shared
    shared = (tiles - dp_tiles) * iters
    per_program = max(cdiv(shared, programs), cdiv(iters, MAX_PIECES))
    programs = min(programs, max(tiles, 1)) if dp_tiles else max(1, cdiv(shared, per_program))
    wide = torch.float64 if a.dtype == torch.float64 else torch.float32
    pieces = 2 * programs * config.block_m * config.block_n
    workspace = scratch("streamk pieces", pieces, wide, a.device, False)
    counts = scratch("streamk counters", tiles, torch.int32, a.device, True)  # left zeroed by each launch
    c_arg = c if c is not None else d
    a_col, b_col = config.tma and is_col_major(a), config.tma and is_col_major(b)
    a_arg = descriptor(a, a_col, config.block_m, config.block_k) if config.tma else a
    b_arg = descriptor(b, b_col, config.block_k, config.block_n) if config.tma else b
    _launch((programs,),
            (a_arg, b_arg, c_arg, d, workspace, counts, m, n, k, dp_tiles, per_program, *a.stride(),
             *b.stride(), *c_arg.stride(), *d.stride(), float(alpha), float(beta)),
            dict(HAS_C=c is not None, SCALE_ALPHA=alpha != 1.0, ACC_FP64=a.dtype == torch.float64,
                 UPCAST=upcast, INPUT_PRECISION=precision,
                 BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k, GROUP_M=GROUP_M,
                 TMA=config.tma, A_COL_MAJOR=a_col, B_COL_MAJOR=b_col, PDL=pdl_mode(d, PDL_OFF)),
            config.num_warps, config.num_stages)


def representative_launch(op: str, config: StreamKConfig, dtype: str, num_sms: int) -> None:
    """The launches ``gemm`` makes for 2-D problems with no C and alpha 1, N and K aligned, M each
    of ``REPRESENTATIVE_ROWS``, B row-major and column-major (x @ W.t()) (with ``tma``: those
    descriptors take; tf32's B always column-major, as ``gemm`` copies it) (run under
    ``tessera._core.launch.capture()``)."""
    for m, b_col in itertools.product(REPRESENTATIVE_ROWS, (False, True)):
        if config.tma and m < 16:
            continue
        a, b, d = representative_operands(dtype, m, b_col_major=b_col or (config.tma and dtype in TF32_KEYS))
        launch_gemm_streamk(a, b, None, d, 1.0, 0.0, precision=precision_of(dtype),
                            upcast=False, num_sms=num_sms, config=config)
    representative_operand_copies(dtype)  # last: callers index the GEMM launches
