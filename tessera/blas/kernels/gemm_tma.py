"""Hopper GEMM: persistent programs, grouped tile order, TMA (tensor descriptor) loads and stores.

One program per multiprocessor walks output tiles ``NUM_SMS`` apart, so the grid is launched once
and tiles of the same GROUP_M band reuse B from L2. Operands come through host-built tensor
descriptors: the copy engine fills shared memory and pads out-of-range rows with zeros, so the main
loop has no masks. A or B stored column-major (a transposed view) is loaded in its own layout and
transposed in shared memory (``A_COL_MAJOR``/``B_COL_MAJOR``), which wgmma reads for 16-bit types.

Needs: CUDA sm_90+, 2-D problems, operands with one unit stride and 16-byte aligned rows, D
row-major. Anything else goes to the portable tile family.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Protocol

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from tessera._core.device import TF32_KEYS, device_info, offline_device, precision_of
from tessera._core.errors import InvalidArgumentError
from tessera._core.launch import PDL_AT_EXIT, PDL_EARLY, PDL_OFF, Launcher, build_arch, cdiv, pdl_mode
from tessera._core.pdl import dependent_launch
from tessera.blas.kernels.copy import representative_operand_copies
from tessera.blas.kernels.gemm_tile import representative_operands

EPILOGUE_SPLITS = (1, 2, 4)


@dataclass(frozen=True)
class TmaConfig:
    """Launch parameters of :func:`_gemm_tma_kernel` (the tuner forks over these)."""

    block_m: int
    block_n: int
    block_k: int
    group_m: int = 8
    num_warps: int = 8
    num_stages: int = 3
    warp_specialize: bool = False
    epilogue_split: int = 1  # store the tile in 1, 2 or 4 column slices (less shared memory)
    flatten: bool = False  # pipeline tile and K loops as one: the next tile's loads overlap this epilogue

    kernel = "gemm_tma"
    store_buffers = 1  # D's tile buffers in shared memory (:func:`shared_memory_bytes`)

    def __post_init__(self) -> None:
        if self.epilogue_split not in EPILOGUE_SPLITS:
            raise InvalidArgumentError(f"epilogue_split must be one of {EPILOGUE_SPLITS} (actual: "
                                       f"{self.epilogue_split}): D is stored in that many column slices")

    def short(self) -> str:
        extras = (" ws" if self.warp_specialize else "") + (
            f" split{self.epilogue_split}" if self.epilogue_split > 1 else "") + (
            " flat" if self.flatten else "")
        return (f"{self.kernel} {self.block_m}x{self.block_n}x{self.block_k} g{self.group_m} "
                f"w{self.num_warps} s{self.num_stages}{extras}")


@triton.jit
def tile_counts(M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """Output tiles along M and N, and K steps per tile."""
    return tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N), tl.cdiv(K, BLOCK_K)


@triton.jit
def persistent_tile(tile, num_pid_m, num_pid_n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    GROUP_M: tl.constexpr):
    """(row, column) offsets of output tile ``tile`` in grouped order: GROUP_M rows of tiles share
    B's columns while they are in L2."""
    pids_per_group = GROUP_M * num_pid_n
    first_m = (tile // pids_per_group) * GROUP_M
    group_rows = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile % pids_per_group) % group_rows
    pid_n = (tile % pids_per_group) // group_rows
    return pid_m * BLOCK_M, pid_n * BLOCK_N


@triton.jit
def operand_tiles(a_desc, b_desc, off_m, off_n, off_k, A_COL_MAJOR: tl.constexpr, B_COL_MAJOR: tl.constexpr):
    """A[off_m:, off_k:] and B[off_k:, off_n:] tiles through their descriptors; an operand stored
    column-major is loaded in its own layout and transposed in shared memory."""
    if A_COL_MAJOR:
        a = a_desc.load([off_k, off_m]).T
    else:
        a = a_desc.load([off_m, off_k])
    if B_COL_MAJOR:
        b = b_desc.load([off_n, off_k]).T
    else:
        b = b_desc.load([off_k, off_n])
    return a, b


@triton.jit
def mac_steps(a_desc, b_desc, off_m, off_n, k_first, k_last, acc, INPUT_PRECISION: tl.constexpr,
              A_COL_MAJOR: tl.constexpr, B_COL_MAJOR: tl.constexpr, BLOCK_K: tl.constexpr,
              PROMOTE: tl.constexpr = False):
    """acc + the K steps k_first … k_last − 1 of the tile at (off_m, off_n), through descriptors
    (zero-filled beyond the matrix: no masks). ``PROMOTE``: see :func:`mac`."""
    for ki in range(k_first, k_last):
        a, b = operand_tiles(a_desc, b_desc, off_m, off_n, ki * BLOCK_K, A_COL_MAJOR, B_COL_MAJOR)
        acc = mac(a, b, acc, INPUT_PRECISION, BLOCK_K, PROMOTE)
    return acc


@triton.jit
def mac(a, b, acc, INPUT_PRECISION: tl.constexpr, BLOCK_K: tl.constexpr, PROMOTE: tl.constexpr):
    """acc + a·b. Tensor cores add each instruction's products into the accumulator truncated, not
    rounded to nearest: over a long K the float32 sum drifts (``accuracy.py``). ``PROMOTE`` sums
    the step's products from zero in their own accumulator and adds that to ``acc`` with a
    round-to-nearest float32 add, so the truncations stay within a step (the products of
    ``emulated``'s a₀·b₀ GEMM). A ``max_num_imprecise_acc`` other than zero keeps Triton from
    folding the add back into the dot (it promotes only fp8 dots itself)."""
    if PROMOTE:
        return acc + tl.dot(a, b, input_precision=INPUT_PRECISION, max_num_imprecise_acc=BLOCK_K)
    return tl.dot(a, b, acc, input_precision=INPUT_PRECISION)


@triton.jit
def _column_halves(t, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """(BLOCK_M, BLOCK_N) tile ``t`` as its left and right (BLOCK_M, BLOCK_N / 2) halves."""
    return tl.reshape(t, (BLOCK_M, 2, BLOCK_N // 2)).permute(0, 2, 1).split()


@triton.jit
def store_tile(d_desc, off_m, off_n, out, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               EPILOGUE_SPLIT: tl.constexpr):
    """Store output tile ``out`` at (off_m, off_n) through D's descriptor (clipped to the matrix),
    whole or in 2 or 4 column slices (1/EPILOGUE_SPLIT of the shared-memory buffer: an int32 or
    fp32 D leaves room for one more operand stage)."""
    if EPILOGUE_SPLIT == 1:
        d_desc.store([off_m, off_n], out)
    elif EPILOGUE_SPLIT == 2:
        left, right = _column_halves(out, BLOCK_M, BLOCK_N)
        d_desc.store([off_m, off_n], left)
        d_desc.store([off_m, off_n + BLOCK_N // 2], right)
    else:
        tl.static_assert(EPILOGUE_SPLIT == 4, "epilogue_split must be 1, 2 or 4")
        left, right = _column_halves(out, BLOCK_M, BLOCK_N)
        q0, q1 = _column_halves(left, BLOCK_M, BLOCK_N // 2)
        q2, q3 = _column_halves(right, BLOCK_M, BLOCK_N // 2)
        d_desc.store([off_m, off_n], q0)
        d_desc.store([off_m, off_n + BLOCK_N // 4], q1)
        d_desc.store([off_m, off_n + BLOCK_N // 2], q2)
        d_desc.store([off_m, off_n + 3 * (BLOCK_N // 4)], q3)


@triton.jit
def _gemm_tma_kernel(
    a_desc, b_desc, d_desc, c_ptr,
    M, N, K,
    stride_cm, stride_cn,
    NUM_SMS,
    alpha: tl.float64, beta: tl.float64,
    HAS_C: tl.constexpr, SCALE_ALPHA: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    A_COL_MAJOR: tl.constexpr, B_COL_MAJOR: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr, EPILOGUE_SPLIT: tl.constexpr, FLATTEN: tl.constexpr,
    PDL: tl.constexpr, PROMOTE: tl.constexpr, FINITE_C: tl.constexpr,
):
    dependent_launch(PDL)
    first_tile = tl.program_id(0)
    num_pid_m, num_pid_n, k_tiles = tile_counts(M, N, K, BLOCK_M, BLOCK_N, BLOCK_K)
    num_tiles = num_pid_m * num_pid_n
    stored_tile = first_tile - NUM_SMS  # the epilogue's own count (FLATTEN: no value shared with the loads)

    for tile in tl.range(first_tile, num_tiles, NUM_SMS, flatten=FLATTEN, warp_specialize=WARP_SPECIALIZE):
        off_m, off_n = persistent_tile(tile, num_pid_m, num_pid_n, BLOCK_M, BLOCK_N, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        acc = mac_steps(a_desc, b_desc, off_m, off_n, 0, k_tiles, acc, INPUT_PRECISION, A_COL_MAJOR,
                        B_COL_MAJOR, BLOCK_K, PROMOTE)

        if FLATTEN:
            stored_tile += NUM_SMS
            off_m, off_n = persistent_tile(stored_tile, num_pid_m, num_pid_n, BLOCK_M, BLOCK_N, GROUP_M)
        if SCALE_ALPHA:
            acc = acc * tl.cast(alpha, tl.float32)
        if HAS_C:
            rm = (off_m + tl.arange(0, BLOCK_M)).to(tl.int64)
            rn = (off_n + tl.arange(0, BLOCK_N)).to(tl.int64)
            mask = (rm[:, None] < M) & (rn[None, :] < N)
            c = tl.load(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, mask=mask, other=0.0)
            c = c.to(tl.float32)
            if FINITE_C:  # C's infinities and NaNs read as 0
                c = tl.where(tl.abs(c) < float("inf"), c, 0.0)
            acc += tl.cast(beta, tl.float32) * c
        store_tile(d_desc, off_m, off_n, acc.to(d_desc.dtype), BLOCK_M, BLOCK_N, EPILOGUE_SPLIT)


class StagedTiles(Protocol):
    """What :func:`fitting_stages` and :func:`shared_memory_bytes` read of a configuration (this
    family's and the warp-specialized one's)."""

    block_m: int
    block_n: int
    block_k: int
    num_stages: int
    epilogue_split: int
    store_buffers: int


def shared_memory_limit(t: torch.Tensor) -> int | None:
    """Shared memory a program may use for a launch on ``t``'s device, or on the pack target a
    build compiles for (None: unknown)."""
    arch = build_arch()
    return (offline_device(arch) if arch else device_info(t.device)).shared_memory_per_block


def fitting_stages(config: StagedTiles, in_bytes: int, out_bytes: int, d: torch.Tensor) -> int:
    """``config.num_stages``, or fewer when its operand stages and the epilogue's store buffer
    would not fit the shared memory of ``d``'s device: an output wider than the one a
    configuration was tuned with (fp32 D from 16- or 8-bit inputs: 128×256 tiles with 4 stages
    need 256 KiB of the H200's 227). A pack build uses its target's shared memory, so that its
    binaries have the stages a call on that GPU launches. At least 1."""
    limit = shared_memory_limit(d)
    if not limit:
        return config.num_stages
    stage = shared_memory_bytes(config, 1, in_bytes, 0)
    epilogue = shared_memory_bytes(config, 0, 0, out_bytes)
    return max(1, min(config.num_stages, (limit - epilogue - 1024) // stage))  # 1 KiB: barriers


def fit_for_c(config: TmaConfig, in_bytes: int, out_bytes: int, c_bytes: int, d: torch.Tensor) -> TmaConfig:
    """``config`` made to fit the shared memory of ``d``'s device beside C's tile. With C the
    epilogue converts C's tile (block_m × block_n of C's elements) through shared memory. The tile
    loop alone lets that buffer take the operand stages' place but not the store buffer's, so the
    epilogue split is raised (to 2, then 4) until C's tile and D's store buffer fit: compiled
    offline for sm_90 (Triton 3.6), 128×256×64 with an fp32 C and D took 262144 bytes on 2 stages
    unsplit (over the H200's 232448: the launch failed), 213016 on 3 stages in halves — what bf16
    GEMMs with an fp32 C and D need (``emulated``). A flattened loop keeps every buffer live at
    once: the same tile flattened took 344088 bytes with an fp32 C and D in halves (an H100
    refused it) and 245784 with a bf16 C and D whole, so where its stages, C's whole tile and the
    store buffer do not fit together the loop is not flattened. The rule counts C's whole tile, a
    margin for a 16-bit C, whose conversion took half of it (213016 bytes flattened in halves);
    no shipped row flattens."""
    limit = shared_memory_limit(d)
    if not limit:
        return config
    c_tile = config.block_m * config.block_n * c_bytes
    if config.flatten and (shared_memory_bytes(config, config.num_stages, in_bytes, out_bytes)
                           + c_tile + 1024 > limit):
        config = dataclasses.replace(config, flatten=False)
    while config.epilogue_split < 4 and c_tile + shared_memory_bytes(config, 0, 0, out_bytes) + 1024 > limit:
        config = dataclasses.replace(config, epilogue_split=2 * config.epilogue_split)
    return config


def shared_memory_bytes(config: StagedTiles, stages: int, in_bytes: int, out_bytes: int) -> int:
    """Shared memory of a descriptor-family launch: ``stages`` A and B tiles of ``in_bytes``
    elements, and the epilogue's store buffers (one column slice of D each) of ``out_bytes``."""
    pipeline = stages * (config.block_m + config.block_n) * config.block_k * in_bytes
    store = config.block_m * config.block_n // config.epilogue_split * out_bytes
    return pipeline + config.store_buffers * store


def descriptor(t: torch.Tensor, col_major: bool, block_rows: int, block_cols: int) -> TensorDescriptor:
    """A descriptor over a 2-D view in its storage order (rows contiguous in memory)."""
    if col_major:
        t = t.t()
        block_rows, block_cols = block_cols, block_rows
    return TensorDescriptor(t, list(t.shape), list(t.stride()), [block_rows, block_cols])


def is_col_major(t: torch.Tensor) -> bool:
    """A matrix (last two dimensions) stored column by column (a transposed row-major matrix)."""
    return t.stride(-1) != 1 and t.stride(-2) == 1


def descriptor_ok(t: torch.Tensor) -> bool:
    """One unit stride, 16-byte aligned base and leading dimension (TMA's requirements)."""
    strides = t.stride()
    row_stride, col_stride = strides[-2], strides[-1]
    if col_stride == 1:
        lead, inner = row_stride, t.shape[-1]
    elif row_stride == 1:
        lead, inner = col_stride, t.shape[-2]
    else:
        return False
    return t.data_ptr() % 16 == 0 and (lead * t.element_size()) % 16 == 0 and lead >= inner


def tma_supported(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor) -> bool:
    """True when the matrices of ``a`` (…,M,K), ``b`` (…,K,N), ``d`` (…,M,N) meet the descriptor
    rules (the caller checks the batch is 1)."""
    return (
        min(a.shape[-2], a.shape[-1], b.shape[-1]) >= 16
        and descriptor_ok(a) and descriptor_ok(b)
        and d.stride(-1) == 1 and descriptor_ok(d)
    )


_launch = Launcher(_gemm_tma_kernel)


def tma_pdl(precision: str, tiles: int, num_sms: int) -> int:
    """The measured programmatic-dependent-launch mode of a launch of ``tiles`` output tiles
    (docs/architecture.md, same-call A/Bs on the H200): tf32 at exit (1024³ behind its copy of
    B: early 1.00 → 0.77× cuBLAS in graphs, at exit 1.08×); 16-bit early while the grid is less
    than a full wave (1024³ 0.76 → 0.84× in graphs), off from a full wave on (bf16 4096³ and
    8192³, three rounds each: flushed eager 1–5 % and back to back 0.3–3 % faster off, graphs
    tied; ``pdl-modes-h200-53a5a6f/``). A full wave or more shares one binary (the grid is the
    SM count), so a pack's representative launch (``full_wave_shape``) has it."""
    if precision in TF32_KEYS:  # behind the copy of B to K-major
        return PDL_AT_EXIT
    return PDL_EARLY if tiles < num_sms else PDL_OFF


def launch_gemm_tma(
    a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None, d: torch.Tensor,
    alpha: float, beta: float, *, precision: str, num_sms: int, config: TmaConfig, promote: bool = False,
    finite_c: bool = False,
) -> None:
    """Launch on 2-D views ``a`` (M,K), ``b`` (K,N), ``c``/``d`` (M,N) that pass :func:`tma_supported`;
    ``promote``: each K step's products summed apart (:func:`mac`); ``finite_c``: C's infinities
    and NaNs read as 0 (the bf16 products' small sum, ``emulated``)."""
    m, k = a.shape
    n = b.shape[1]
    if c is not None:
        config = fit_for_c(config, a.element_size(), d.element_size(), c.element_size(), d)
    a_col, b_col = is_col_major(a), is_col_major(b)
    a_desc = descriptor(a, a_col, config.block_m, config.block_k)
    b_desc = descriptor(b, b_col, config.block_k, config.block_n)
    d_desc = descriptor(d, False, config.block_m, config.block_n // config.epilogue_split)
    c_arg = c if c is not None else d
    tiles = cdiv(m, config.block_m) * cdiv(n, config.block_n)
    grid = (min(num_sms, tiles),)
    pdl = pdl_mode(d, tma_pdl(precision, tiles, num_sms))
    _launch(
        grid,
        (a_desc, b_desc, d_desc, c_arg, m, n, k, c_arg.stride(0), c_arg.stride(1), grid[0],
         float(alpha), float(beta)),
        dict(HAS_C=c is not None, SCALE_ALPHA=alpha != 1.0,
             INPUT_PRECISION=precision,
             A_COL_MAJOR=a_col, B_COL_MAJOR=b_col, BLOCK_M=config.block_m, BLOCK_N=config.block_n,
             BLOCK_K=config.block_k, GROUP_M=config.group_m,
             WARP_SPECIALIZE=config.warp_specialize, EPILOGUE_SPLIT=config.epilogue_split,
             FLATTEN=config.flatten, PDL=pdl, PROMOTE=promote, FINITE_C=finite_c),
        config.num_warps, fitting_stages(config, a.element_size(), d.element_size(), d),
    )


def full_wave_shape(block_m: int, block_n: int, num_sms: int) -> tuple[int, int]:
    """(M, N) of a square grid of block_m × block_n tiles with at least one tile per
    multiprocessor: the persistent families' grid, min(tiles, multiprocessors), is a launch
    argument, so problems of at least one wave share the binary compiled for this shape."""
    side = math.isqrt(max(num_sms, 1) - 1) + 1  # tiles per side: side² ≥ num_sms
    return block_m * side, block_n * side


def representative_launch(op: str, config: TmaConfig, dtype: str, num_sms: int) -> None:
    """The launches ``gemm`` makes for 2-D problems with at least one tile per SM (the grid size is
    an argument, so smaller problems specialize differently): N and K multiples of 16 with no C and
    M aligned or not, or with a C operand (β ≠ 0), or with alpha ≠ 1; and N and K only multiples of 8
    (what TMA still takes: 16-byte rows); M aligned or not with B column-major (x @ W.t()); tf32
    and tf32x3 always with B column-major, as ``gemm`` copies it for wgmma (run under
    ``launch.capture()``)."""
    rows, cols = full_wave_shape(config.block_m, config.block_n, num_sms)
    precision = precision_of(dtype)
    # (M, N, K, with C, alpha, B column-major); rows − 8: a token count; cols − 8 and 1000: multiples
    # of 8, not of 16; B column-major: a linear layer's x @ W.t() (TF32 keys' B always: gemm copies it)
    for m, n, k, with_c, alpha, b_col in ((rows, cols, 1024, False, 1.0, False),
                                          (rows - 8, cols, 1024, False, 1.0, False),
                                          (rows, cols, 1024, True, 1.0, False),
                                          (rows, cols - 8, 1000, False, 1.0, False),
                                          (rows, cols, 1024, False, 0.5, False),
                                          (rows, cols, 1024, False, 1.0, True),
                                          (rows - 8, cols, 1024, False, 1.0, True)):
        a, b, d = representative_operands(dtype, m, n, k, b_col_major=b_col or dtype in TF32_KEYS)
        launch_gemm_tma(a, b, torch.empty_like(d) if with_c else None, d, alpha, 1.0 if with_c else 0.0,
                        precision=precision, num_sms=num_sms, config=config)
    representative_operand_copies(dtype)  # last: callers index the GEMM launches
