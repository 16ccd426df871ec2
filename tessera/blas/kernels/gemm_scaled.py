"""Quantized-input GEMM: fp8 (e4m3, e5m2) or int8 operands, float32 scales, optional bias.

    D = (A @ B) · scale_a[:, None] · scale_b[None, :] + bias[None, :]

The product accumulates exactly in int32 for int8 and in fp32 for fp8 (tensor cores); a scale is
one value for the whole operand (per tensor) or one per row of A / column of B (stride 0 turns a
per-tensor scale into a broadcast vector). Without scales (int8 only) D is the exact int32 product.
Pointer loads with any strides, as the portable tile family.

Hopper's fp8 tensor cores add into a narrower accumulator than fp32 (measured: errors of ~2^-9 of
Σ|a·b| at K = 96). ``IMPRECISE_ACC`` bounds how many products are summed there before the partial
sum is added to the fp32 accumulator (Triton's ``max_num_imprecise_acc``): ``PRECISE_INTERVAL``
by default; with ``fast_accum`` it is left to Triton (no bound on sm_90: cuBLAS's fast mode).
8-bit tensor-core MMAs read shared-memory operands K-major only: on CUDA a large problem with a
row-major B (or column-major A) is given a K-major scratch copy first (see :func:`k_major`).

Three families: ``gemm_scaled`` (pointer loads, one program per tile, any strides, every backend),
``gemm_scaled_tma`` (Hopper: persistent programs, tensor-descriptor loads and stores, as
``gemm_tma``), which takes K-major operands with 16-byte aligned rows and a row-major D; any
other problem given a ``gemm_scaled_tma`` configuration runs the pointer family with its tiles;
and ``gemm_scaled_ws`` (sm_90, fp8 with fast accumulation: the warp-specialized Gluon kernel of
``gemm_ws``), which selection gives only the calls it takes (``MnkProblem.ws_ok``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from tessera._core.device import interpreter_enabled
from tessera._core.launch import PDL_OFF, Launcher, cdiv, nvidia_target, pdl_mode
from tessera._core.pdl import dependent_launch
from tessera.blas.kernels.gemm_tile import TileConfig, grouped_tile
from tessera.blas.kernels.gemm_tma import (
    TmaConfig,
    descriptor,
    fitting_stages,
    full_wave_shape,
    persistent_tile,
    store_tile,
    tile_counts,
    tma_supported,
)
from tessera.blas.kernels.gemm_ws import ScaledWsConfig, launch_gemm_ws


@dataclass(frozen=True)
class ScaledConfig(TileConfig):
    """Launch parameters of :func:`_gemm_scaled_kernel`: the tile family's fields (the tuner forks
    over these), its own family name in logic files."""

    kernel = "gemm_scaled"


@dataclass(frozen=True)
class ScaledTmaConfig(TmaConfig):
    """Launch parameters of :func:`_gemm_scaled_tma_kernel`: the TMA family's fields (the tuner
    forks over these), its own family name in logic files."""

    kernel = "gemm_scaled_tma"


@triton.jit
def scaled_epilogue(acc, sa_ptr, sb_ptr, bias_ptr, rm, rn, mask_m, mask_n, stride_sa, stride_sb,
                    out_dtype: tl.constexpr, SCALED: tl.constexpr, HAS_BIAS: tl.constexpr):
    """One output tile: ``acc · scale_a[rm] · scale_b[rn] + bias[rn]`` in ``out_dtype`` when
    SCALED, else the accumulator itself (exact int32)."""
    if SCALED:
        sa = tl.load(sa_ptr + rm * stride_sa, mask=mask_m, other=0)
        sb = tl.load(sb_ptr + rn * stride_sb, mask=mask_n, other=0)
        scaled = acc.to(tl.float32) * sa[:, None] * sb[None, :]
        if HAS_BIAS:
            scaled += tl.load(bias_ptr + rn, mask=mask_n, other=0).to(tl.float32)[None, :]
        out = scaled.to(out_dtype)
    else:
        out = acc
    return out


@triton.jit
def _gemm_scaled_kernel(
    a_ptr, b_ptr, sa_ptr, sb_ptr, bias_ptr, d_ptr,
    M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_sa, stride_sb, stride_dm, stride_dn,
    SCALED: tl.constexpr, HAS_BIAS: tl.constexpr, INTEGER: tl.constexpr, EVEN_K: tl.constexpr,
    IMPRECISE_ACC: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    PDL: tl.constexpr,
):
    dependent_launch(PDL)
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rm = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    mask_m = rm < M
    mask_n = rn < N
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32 if INTEGER else tl.float32)
    zero: tl.constexpr = 0 if INTEGER else 0.0  # fp8 takes a float zero (an int does not cast)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs, mask=mask_m[:, None], other=zero)
            b = tl.load(b_ptrs, mask=mask_n[None, :], other=zero)
        else:
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=mask_m[:, None] & (rk[None, :] < k_left), other=zero)
            b = tl.load(b_ptrs, mask=(rk[:, None] < k_left) & mask_n[None, :], other=zero)
        acc = tl.dot(a, b, acc, out_dtype=acc.dtype, max_num_imprecise_acc=IMPRECISE_ACC)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    out = scaled_epilogue(acc, sa_ptr, sb_ptr, bias_ptr, rm, rn, mask_m, mask_n, stride_sa, stride_sb,
                          d_ptr.dtype.element_ty, SCALED, HAS_BIAS)
    tl.store(d_ptr + rm[:, None] * stride_dm + rn[None, :] * stride_dn, out,
             mask=mask_m[:, None] & mask_n[None, :])


@triton.jit
def _gemm_scaled_tma_kernel(
    a_desc, b_desc, d_desc, sa_ptr, sb_ptr, bias_ptr,
    M, N, K, stride_sa, stride_sb, NUM_SMS,
    SCALED: tl.constexpr, HAS_BIAS: tl.constexpr, INTEGER: tl.constexpr, IMPRECISE_ACC: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr, EPILOGUE_SPLIT: tl.constexpr, FLATTEN: tl.constexpr,
    PDL: tl.constexpr,
):
    """Persistent: program i computes output tiles i, i + NUM_SMS, …; A (M, K) and B (as Bᵀ,
    (N, K)) come K-major through descriptors that zero-fill beyond the matrix, D is stored through
    its descriptor (clipped to the matrix) in EPILOGUE_SPLIT column slices."""
    dependent_launch(PDL)
    first_tile = tl.program_id(0)
    num_pid_m, num_pid_n, k_tiles = tile_counts(M, N, K, BLOCK_M, BLOCK_N, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    stored_tile = first_tile - NUM_SMS  # the epilogue's own count (FLATTEN: no value shared with the loads)

    for tile in tl.range(first_tile, num_tiles, NUM_SMS, flatten=FLATTEN, warp_specialize=WARP_SPECIALIZE):
        off_m, off_n = persistent_tile(tile, num_pid_m, num_pid_n, BLOCK_M, BLOCK_N, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32 if INTEGER else tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([off_m, ki * BLOCK_K])
            b = b_desc.load([off_n, ki * BLOCK_K]).T
            acc = tl.dot(a, b, acc, out_dtype=acc.dtype, max_num_imprecise_acc=IMPRECISE_ACC)

        if FLATTEN:
            stored_tile += NUM_SMS
            off_m, off_n = persistent_tile(stored_tile, num_pid_m, num_pid_n, BLOCK_M, BLOCK_N, GROUP_M)
        rm = off_m + tl.arange(0, BLOCK_M)
        rn = off_n + tl.arange(0, BLOCK_N)
        out = scaled_epilogue(acc, sa_ptr, sb_ptr, bias_ptr, rm, rn, rm < M, rn < N, stride_sa, stride_sb,
                              d_desc.dtype, SCALED, HAS_BIAS)
        store_tile(d_desc, off_m, off_n, out, BLOCK_M, BLOCK_N, EPILOGUE_SPLIT)


_launch = Launcher(_gemm_scaled_kernel)
_launch_tma = Launcher(_gemm_scaled_tma_kernel)

# fp8 products summed in the tensor cores' own accumulator before fp32 takes them: 128 leaves the
# error cuBLAS's default mode leaves (measured on the H200, docs/architecture.md)
PRECISE_INTERVAL = 128
K_MAJOR_MIN_ROWS = 128  # copy an operand K-major when the other side has at least this many rows


def k_major(a: torch.Tensor, b: torch.Tensor, *, materialize: bool = True
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """``a`` (M, K) and ``b`` (K, N) with K contiguous where the tensor cores need it: on CUDA an
    8-bit operand that is not K-major is copied K-major when the other operand's rows are many
    enough to amortize the copy (otherwise the kernel reads it as it is, with slower MMAs).
    ``materialize=False`` gives shape-and-stride stand-ins on the meta device instead of copies."""
    if not nvidia_target(a):
        return a, b
    m, k = a.shape
    n = b.shape[1]
    if b.stride(0) != 1 and k > 1 and m >= K_MAJOR_MIN_ROWS:
        b = b.t().contiguous().t() if materialize else torch.empty(n, k, dtype=b.dtype, device="meta").t()
    if a.stride(1) != 1 and k > 1 and n >= K_MAJOR_MIN_ROWS:
        a = a.contiguous() if materialize else torch.empty(m, k, dtype=a.dtype, device="meta")
    return a, b


def scaled_tma_supported(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor) -> bool:
    """Whether ``gemm_scaled_tma`` takes the layouts of ``a`` (M, K), ``b`` (K, N), ``d`` (M, N)
    (after :func:`k_major`): A row-major and B column-major (both K-major), D row-major, each
    meeting the descriptor rules (16-byte aligned base and rows, at least 16 along each side)."""
    return a.stride(1) == 1 and b.stride(0) == 1 and tma_supported(a, b, d)


def launch_gemm_scaled(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor | None,
                       scale_b: torch.Tensor | None, bias: torch.Tensor | None, d: torch.Tensor, *,
                       config: ScaledConfig | ScaledTmaConfig | ScaledWsConfig, fast_accum: bool = False,
                       num_sms: int = 0) -> None:
    """d (M, N) ← a (M, K) @ b (K, N), scaled when scales are given; a scale is a 1-element or
    per-row (per-column) 1-D float32 tensor. ``fast_accum`` (fp8) lets each K block accumulate in
    the tensor cores' narrower accumulator. A ``ScaledTmaConfig`` runs persistent on ``num_sms``
    programs when :func:`scaled_tma_supported`, else the pointer family with the same tiles; a
    ``ScaledWsConfig`` runs the warp-specialized kernel (selection gives it only calls it takes,
    ``gemm_ws.scaled_ws_supported`` on sm_90)."""
    a, b = k_major(a, b)
    if isinstance(config, ScaledWsConfig):
        launch_gemm_ws(a, b, d, num_sms=num_sms, config=config, scale_a=scale_a, scale_b=scale_b, bias=bias)
        return
    m, k = a.shape
    n = b.shape[1]
    integer = a.dtype == torch.int8
    imprecise = None if integer or fast_accum else min(PRECISE_INTERVAL, config.block_k)
    scaled = scale_a is not None
    sa = scale_a if scaled else d
    sb = scale_b if scaled else d
    stride_sa = 0 if not scaled or sa.numel() == 1 else sa.stride(0)
    stride_sb = 0 if not scaled or sb.numel() == 1 else sb.stride(0)
    bias_arg = bias if bias is not None else d
    if (isinstance(config, ScaledTmaConfig) and num_sms > 0 and (nvidia_target(a) or interpreter_enabled())
            and scaled_tma_supported(a, b, d)):
        tiles = cdiv(m, config.block_m) * cdiv(n, config.block_n)
        grid = (min(num_sms, tiles),)
        _launch_tma(
            grid,
            (descriptor(a, False, config.block_m, config.block_k),
             descriptor(b, True, config.block_k, config.block_n),
             descriptor(d, False, config.block_m, config.block_n // config.epilogue_split),
             sa, sb, bias_arg, m, n, k, stride_sa, stride_sb, grid[0]),
            dict(SCALED=scaled, HAS_BIAS=bias is not None, INTEGER=integer, IMPRECISE_ACC=imprecise,
                 BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k,
                 GROUP_M=config.group_m, WARP_SPECIALIZE=config.warp_specialize,
                 EPILOGUE_SPLIT=config.epilogue_split, FLATTEN=config.flatten, PDL=pdl_mode(d, PDL_OFF)),
            config.num_warps, fitting_stages(config, 1, d.element_size(), d))
        return
    _launch((cdiv(m, config.block_m) * cdiv(n, config.block_n),),
            (a, b, sa, sb, bias_arg, d, m, n, k, *a.stride(), *b.stride(),
             stride_sa, stride_sb, *d.stride()),
            dict(SCALED=scaled, HAS_BIAS=bias is not None, INTEGER=integer, EVEN_K=k % config.block_k == 0,
                 IMPRECISE_ACC=imprecise, BLOCK_M=config.block_m, BLOCK_N=config.block_n,
                 BLOCK_K=config.block_k, GROUP_M=config.group_m, PDL=pdl_mode(d, PDL_OFF)),
            config.num_warps, config.num_stages)


TORCH_DTYPES = {"int8": torch.int8, "fp8e4m3": torch.float8_e4m3fn, "fp8e5m2": torch.float8_e5m2}
FAST_SUFFIX = "_fast"  # a logic-file dtype key for fp8 with fast accumulation (e.g. fp8e4m3_fast)


def element_dtype(dtype: str) -> tuple[torch.dtype, bool]:
    """A logic-file dtype key (``fp8e4m3``, ``fp8e4m3_fast``, ``int8`` …) → (torch dtype, fast_accum)."""
    fast = dtype.endswith(FAST_SUFFIX)
    return TORCH_DTYPES[dtype.removesuffix(FAST_SUFFIX)], fast


def representative_sizes(config: ScaledConfig | ScaledTmaConfig | ScaledWsConfig,
                         num_sms: int) -> tuple[int, int, int]:
    """(M, N, K) of the aligned problem a pack compiles ``config`` for: 1024³, or for the persistent
    families at least one tile per multiprocessor (:func:`full_wave_shape`)."""
    if isinstance(config, (ScaledTmaConfig, ScaledWsConfig)):
        return (*full_wave_shape(config.block_m, config.block_n, num_sms), 1024)
    return 1024, 1024, 1024


def representative_launch(op: str, config: ScaledConfig | ScaledTmaConfig | ScaledWsConfig, dtype: str,
                          num_sms: int) -> None:
    """The launches ``gemm`` makes for the sizes of :func:`representative_sizes`, B column-major,
    M aligned and not (token counts; the warp-specialized family, whose sizes are specialized
    launch arguments, also N a multiple of 8 only): with per-tensor scales and a bf16 result, and
    for int8 also unscaled with the exact int32 result (run under ``tessera._core.launch.capture()``)."""
    rows, cols, k = representative_sizes(config, num_sms)
    elem, fast = element_dtype(dtype)
    scale = torch.empty(1, dtype=torch.float32)
    widths = (cols, cols - 8) if isinstance(config, ScaledWsConfig) else (cols,)
    for m, n in itertools.product((rows, rows - 24), widths):
        a, b = torch.empty(m, k, dtype=elem), torch.empty(n, k, dtype=elem).t()
        launch_gemm_scaled(a, b, scale, scale, None, torch.empty(m, n, dtype=torch.bfloat16),
                           config=config, fast_accum=fast, num_sms=num_sms)
        if elem == torch.int8:
            launch_gemm_scaled(a, b, None, None, None, torch.empty(m, n, dtype=torch.int32), config=config,
                               num_sms=num_sms)
