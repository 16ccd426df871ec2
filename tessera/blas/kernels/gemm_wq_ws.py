"""W4A16 decode on Hopper, warp-specialized, written in Gluon: Yᵀ = Qᵀ · Xᵀ for M ≤ 64 rows.

One program per 64 output columns walks the whole of K (no K split, so no second launch to add
slices). A loader warp streams the program's 4-bit codes (column-major, each column's bytes
contiguous: one (64 columns × 64 bytes) TMA box a step of 128 K rows) and the step's
activations (two (M_PAD × 64) boxes) into a ring of ``num_stages`` shared-memory stages. Two
warp groups take the steps in turn: each loads its step's code bytes into registers in the layout
of wgmma's first operand (byte j of a column holds K rows 2j and 2j + 1, the pair one register of
that operand holds), turns each nibble into the exact bf16 (or fp16) integer code − 8 by bit
operations, and multiplies on the tensor cores with the activations as the second operand, M_PAD
(8 … 64) wide. Each group's fp32 sum is scaled once by its per-column scale. At the end the second
warp group adds its sums into the first's through shared memory.

Symmetric 4-bit codes with group 64 or 128, N a multiple of 64, K of 256 only
(:func:`wq_ws_supported`); other weights take ``gemm_wq``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from tessera._core.errors import InvalidArgumentError
from tessera._core.launch import Launcher, cdiv

_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared  # 3.9 / 3.6
_partition_barrier = getattr(gl, "barrier", None) or gl.thread_barrier

_ACTIVATIONS = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}
BLOCK_N = 64  # one warp group's wgmma rows: the output columns of a program
STEP_BYTES = 128  # code bytes of a column a step (256 K rows, one TMA box; four wgmma of 64 K rows)
LOADER_REGISTERS = gl.constexpr(24)
WORKER_REGISTERS = gl.constexpr(160)
WORKER_REGISTERS_3 = gl.constexpr(120)
WORKER_REGISTERS_4 = gl.constexpr(96)


@dataclass(frozen=True)
class WqWsConfig:
    """Launch parameters of :func:`_gemm_wq_ws_kernel`: ``num_stages`` steps of codes and
    activations in flight through shared memory."""

    num_stages: int = 8
    consumers: int = 2  # multiplying warp groups, taking the steps in turn
    dry: int = 0  # diagnosis only: 1 streams the stages, skipping the arithmetic (wrong results); 2 too,
    # from a contiguous 8 KiB of codes a step

    kernel = "gemm_wq_ws"

    def __post_init__(self) -> None:
        if not 2 <= self.num_stages <= 32 or self.consumers not in (2, 3, 4):
            raise InvalidArgumentError(f"{self.kernel} takes 2 to 32 stages and 2 to 4 consumer warp groups "
                                       f"(actual: {self.num_stages}, {self.consumers})")

    def short(self) -> str:
        return f"{self.kernel} s{self.num_stages} c{self.consumers}{f' dry{self.dry}' if self.dry else ''}"


@gluon.constexpr_function
def _acc_layout(m_pad):
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, m_pad, 16])


@gluon.constexpr_function
def _byte_layout():
    """Where a (64 × 32) tile of code bytes sits so that its nibbles, joined, are wgmma's first
    operand as it is (``DotOperandLayout(0, …, k_width=2)`` of the (64 × 64) K rows): a thread
    holds bytes q and q + 4 of each 8 (K rows 2q, 2q + 1, 2q + 8, 2q + 9 of each 16) of rows r and
    r + 8, lanes 4r + q, warps 16 rows apart."""
    return gl.DistributedLinearLayout(reg_bases=[[8, 0], [0, 4], [0, 8], [0, 16]],
                                      lane_bases=[[0, 1], [0, 2], [1, 0], [2, 0], [4, 0]],
                                      warp_bases=[[16, 0], [32, 0]], block_bases=[], shape=[64, 32])


@gluon.jit
def _loader(c_desc, x_desc, c_bufs, x_bufs, ready, empty, k_steps, STAGES: gl.constexpr, CONTIG):
    """The loader warp: each step's codes and its two activation boxes into the next free stage."""
    off_n = gl.program_id(0) * c_desc.block_type.shape[0]
    base = gl.program_id(0) * 64 * k_steps
    for i in range(k_steps):
        s = i % STAGES
        mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1)  # a fresh stage passes at once
        mbarrier.expect(ready.index(s), c_desc.block_type.nbytes + 4 * x_desc.block_type.nbytes)
        if CONTIG:
            _tma_load(c_desc, [base + 64 * i, 0], ready.index(s), c_bufs.index(s))
        else:
            _tma_load(c_desc, [off_n, i * 128], ready.index(s), c_bufs.index(s))
        for h in gl.static_range(4):
            _tma_load(x_desc, [0, i * 256 + h * 64], ready.index(s), x_bufs.index(4 * s + h))


def _nibble_pair_asm(bias: int) -> str:
    """PTX: a code byte (zero-extended in $2) as two 16-bit floats, its low nibble in $0 and its
    high one in $1, each minus the zero point 8: byte · 0x1001 puts the high nibble at bits 16–19,
    one LOP3 keeps both nibbles under the bits of ``bias`` (128 in bf16, 1024 in fp16: the float
    bias + nibble, exact) and one packed subtraction takes bias + 8 off both."""
    kind = "bf16x2" if bias == 0x4300 else "f16x2"
    minus = 0x4308 if bias == 0x4300 else 0x6408  # bias + 8
    sub = f"sub.rn.{kind}" if kind == "bf16x2" else "sub.f16x2"
    return ("{ .reg .b32 t, c; mul.lo.u32 t, $2, 4097; "
            f"lop3.b32 t, t, 0x000F000F, 0x{bias:04X}{bias:04X}, 0xEA; mov.b32 c, 0x{minus:04X}{minus:04X}; "
            f"{sub} t, t, c; mov.b32 {{$0, $1}}, t; }}")


_ASM_BF16 = gl.constexpr(_nibble_pair_asm(0x4300))
_ASM_FP16 = gl.constexpr(_nibble_pair_asm(0x6400))


@gluon.jit
def _operand(c_half, a_layout: gl.constexpr, byte_layout: gl.constexpr, dtype: gl.constexpr):
    """(64 columns × 32 bytes) of codes from shared memory as wgmma's (64 × 64) first operand:
    byte j's low nibble is K row 2j, its high nibble 2j + 1, each the exact 16-bit integer
    code − 8 (:func:`_nibble_pair_asm`), the pair one register of the operand."""
    b = c_half.load(byte_layout).to(gl.int32)
    if dtype == gl.bfloat16:
        lo, hi = gl.inline_asm_elementwise(_ASM_BF16, "=h,=h,r", [b], dtype=(gl.bfloat16, gl.bfloat16),
                                           is_pure=True, pack=1)
    else:
        lo, hi = gl.inline_asm_elementwise(_ASM_FP16, "=h,=h,r", [b], dtype=(gl.float16, gl.float16),
                                           is_pure=True, pack=1)
    w = gl.reshape(gl.join(lo, hi), [c_half.shape[0], 2 * c_half.shape[1]])
    return gl.convert_layout(w, a_layout, assert_trivial=True)


@gluon.jit
def _half(c_bufs, x_bufs, s, h: gl.constexpr, zero, a_layout: gl.constexpr, byte_layout: gl.constexpr,
          dtype: gl.constexpr):
    """Quarter ``h`` (64 K rows) of stage ``s``: its codes as wgmma's first operand, the wgmma
    with the quarter's activations issued (asynchronous)."""
    a = _operand(c_bufs.index(s).slice(32 * h, 32, dim=1), a_layout, byte_layout, dtype)
    return warpgroup_mma(a, x_bufs.index(4 * s + h).permute((1, 0)), zero, use_acc=False, is_async=True)


@gluon.jit
def _scale(s_ptr, i, h: gl.constexpr, cols, stride_sg, GROUP):
    """The fp32 scales of quarter ``h`` (64 K rows) of step ``i``."""
    return gl.load(s_ptr + ((i * 256 + h * 64) // GROUP) * stride_sg + cols).to(gl.float32)


@gluon.jit
def _multiplier(c_bufs, x_bufs, ready, empty, done, red, s_ptr, y_ptr, M, N, k_steps, stride_sg, stride_ym,
                GROUP, STAGES, DRY, group, groups):
    """A multiplying warp group (``group`` of ``groups``): steps group, group + groups, …; a step's
    four quarters' wgmma issued as their codes become operands, then waited for together, each
    quarter's sum scaled by its columns' scales (loaded a step ahead). The other groups' sums are
    added through shared memory into group 0's, which stores the tile. ``DRY`` (a diagnosis)
    skips the arithmetic."""
    M_PAD: gl.constexpr = x_bufs.shape[1]
    DTYPE: gl.constexpr = x_bufs.dtype
    acc_layout: gl.constexpr = _acc_layout(M_PAD)
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=2)
    byte_layout: gl.constexpr = _byte_layout()
    col_layout: gl.constexpr = gl.SliceLayout(1, acc_layout)
    off_n = gl.program_id(0) * 64
    cols = off_n + gl.arange(0, 64, layout=col_layout)
    acc = gl.zeros([64, M_PAD], gl.float32, acc_layout)
    zero = gl.zeros([64, M_PAD], gl.float32, acc_layout)
    if DRY:
        for i in range(group, k_steps, groups):
            s = i % STAGES
            mbarrier.wait(ready.index(s), (i // STAGES) & 1)
            _partition_barrier()
            mbarrier.arrive(empty.index(s), count=1)
    else:
        first = gl.minimum(group, k_steps - 1)  # a group with no step loads a real row, unused
        s0 = _scale(s_ptr, first, 0, cols, stride_sg, GROUP)
        s1 = _scale(s_ptr, first, 1, cols, stride_sg, GROUP)
        s2 = _scale(s_ptr, first, 2, cols, stride_sg, GROUP)
        s3 = _scale(s_ptr, first, 3, cols, stride_sg, GROUP)
        for i in range(group, k_steps, groups):
            s = i % STAGES
            i_next = gl.minimum(i + groups, k_steps - 1)  # the last step reloads its own
            n0 = _scale(s_ptr, i_next, 0, cols, stride_sg, GROUP)
            n1 = _scale(s_ptr, i_next, 1, cols, stride_sg, GROUP)
            n2 = _scale(s_ptr, i_next, 2, cols, stride_sg, GROUP)
            n3 = _scale(s_ptr, i_next, 3, cols, stride_sg, GROUP)
            mbarrier.wait(ready.index(s), (i // STAGES) & 1)
            t0 = _half(c_bufs, x_bufs, s, 0, zero, a_layout, byte_layout, DTYPE)
            t1 = _half(c_bufs, x_bufs, s, 1, zero, a_layout, byte_layout, DTYPE)
            t2 = _half(c_bufs, x_bufs, s, 2, zero, a_layout, byte_layout, DTYPE)
            t3 = _half(c_bufs, x_bufs, s, 3, zero, a_layout, byte_layout, DTYPE)
            p0, p1, p2, p3 = warpgroup_mma_wait(num_outstanding=0, deps=(t0, t1, t2, t3))
            _partition_barrier()  # every warp of the group is done with the stage
            mbarrier.arrive(empty.index(s), count=1)
            acc = acc + p0 * gl.expand_dims(s0, 1) + p1 * gl.expand_dims(s1, 1)
            acc = acc + p2 * gl.expand_dims(s2, 1) + p3 * gl.expand_dims(s3, 1)
            s0, s1, s2, s3 = n0, n1, n2, n3
    if group > 0:
        red.index(group - 1).store(acc)
        _partition_barrier()
        mbarrier.arrive(done.index(0), count=1)
    else:
        if groups > 1:
            mbarrier.wait(done.index(0), 0)
            for g in range(groups - 1):
                acc = acc + red.index(g).load(acc_layout)
        rows = gl.arange(0, M_PAD, layout=gl.SliceLayout(0, acc_layout))
        out_cols = off_n + gl.arange(0, 64, layout=col_layout)
        out = y_ptr + gl.expand_dims(rows, 0) * stride_ym + gl.expand_dims(out_cols, 1)
        gl.store(out, acc.to(y_ptr.dtype.element_ty), mask=gl.expand_dims(rows < M, 0))


@gluon.jit
def _gemm_wq_ws_kernel(c_desc, x_desc, s_ptr, y_ptr, M, N, K, stride_sg, stride_ym, GROUP: gl.constexpr,
                       STAGES: gl.constexpr, CONSUMERS: gl.constexpr, DRY: gl.constexpr):
    """Y = X · dequant(Q) for one 64-column block (see the module docstring)."""
    M_PAD: gl.constexpr = x_desc.block_type.shape[0]
    c_bufs = gl.allocate_shared_memory(gl.uint8, [STAGES] + c_desc.block_type.shape, c_desc.layout)  # noqa: RUF005
    x_bufs = gl.allocate_shared_memory(x_desc.dtype, [4 * STAGES] + x_desc.block_type.shape,  # noqa: RUF005
                                       x_desc.layout)
    red = gl.allocate_shared_memory(gl.float32, [CONSUMERS - 1, 64, M_PAD],
                                    gl.SwizzledSharedLayout(vec=1, per_phase=1, max_phase=1, order=[1, 0]))
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    done = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    mbarrier.init(done.index(0), count=CONSUMERS - 1)
    k_steps = K // 256
    loads = (c_desc, x_desc, c_bufs, x_bufs, ready, empty, k_steps, STAGES, DRY == 2)
    g0 = (c_bufs, x_bufs, ready, empty, done, red, s_ptr, y_ptr, M, N, k_steps, stride_sg, stride_ym, GROUP,
          STAGES, DRY, 0, CONSUMERS)
    g1 = (c_bufs, x_bufs, ready, empty, done, red, s_ptr, y_ptr, M, N, k_steps, stride_sg, stride_ym, GROUP,
          STAGES, DRY, 1, CONSUMERS)
    if CONSUMERS == 2:
        gl.warp_specialize([(_multiplier, g0), (_multiplier, g1), (_loader, loads)],
                           [4, 1], [WORKER_REGISTERS, LOADER_REGISTERS])
    elif CONSUMERS == 3:
        g2 = (c_bufs, x_bufs, ready, empty, done, red, s_ptr, y_ptr, M, N, k_steps, stride_sg, stride_ym, GROUP,
              STAGES, DRY, 2, CONSUMERS)
        gl.warp_specialize([(_multiplier, g0), (_multiplier, g1), (_multiplier, g2), (_loader, loads)],
                           [4, 4, 1], [WORKER_REGISTERS_3, WORKER_REGISTERS_3, LOADER_REGISTERS])
    else:
        g2 = (c_bufs, x_bufs, ready, empty, done, red, s_ptr, y_ptr, M, N, k_steps, stride_sg, stride_ym, GROUP,
              STAGES, DRY, 2, CONSUMERS)
        g3 = (c_bufs, x_bufs, ready, empty, done, red, s_ptr, y_ptr, M, N, k_steps, stride_sg, stride_ym, GROUP,
              STAGES, DRY, 3, CONSUMERS)
        gl.warp_specialize([(_multiplier, g0), (_multiplier, g1), (_multiplier, g2), (_multiplier, g3),
                            (_loader, loads)],
                           [4, 4, 4, 1], [WORKER_REGISTERS_4, WORKER_REGISTERS_4, WORKER_REGISTERS_4,
                                          LOADER_REGISTERS])


def wq_ws_supported(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor | None,
                    bits: int, group: int) -> bool:
    """Whether this kernel takes the 2-D call as it is: 4-bit symmetric codes stored column-major,
    group 64 or 128, 1 … 64 activation rows (row-major, 16-byte aligned), N a multiple of 64, K
    of 128, scales row-major (the caller checks the device: sm_90)."""
    m, k = x.shape
    n = codes.shape[1]
    return (bits == 4 and zeros is None and group in (64, 128) and 1 <= m <= 64 and x.dtype in _ACTIVATIONS
            and x.stride(1) == 1 and (x.stride(0) * 2) % 16 == 0 and x.data_ptr() % 16 == 0
            and codes.stride(0) == 1 and codes.stride(1) == k // 2 and codes.data_ptr() % 16 == 0
            and n % 64 == 0 and k % 256 == 0 and scales.stride(1) == 1 and scales.dtype == x.dtype)


def _m_pad(m: int) -> int:
    return max(8, 1 << (m - 1).bit_length())


def _descriptor(t: torch.Tensor, block: list[int], dtype) -> TensorDescriptor:
    layout = gl.NVMMASharedLayout.get_default_for(block, dtype)
    return TensorDescriptor(t, list(t.shape), list(t.stride()), block, layout)


_launch = Launcher(_gemm_wq_ws_kernel)


def launch_gemm_wq_ws(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor, group: int, y: torch.Tensor,
                      config: WqWsConfig) -> None:
    """y = x · dequant(codes, scales) for a call that passes :func:`wq_ws_supported`."""
    m, k = x.shape
    n = codes.shape[1]
    m_pad = _m_pad(m)
    c_desc = _descriptor(codes.t() if config.dry != 2 else codes.t().reshape(-1, STEP_BYTES),
                         [BLOCK_N, STEP_BYTES], gl.uint8)
    x_desc = _descriptor(x, [m_pad, 64], _ACTIVATIONS[x.dtype])
    _launch((cdiv(n, BLOCK_N),), (c_desc, x_desc, scales, y, m, n, k, scales.stride(0), y.stride(0)),
            dict(GROUP=group, STAGES=config.num_stages, CONSUMERS=config.consumers, DRY=config.dry), 4, 1)


def representative_launch(op: str, config: WqWsConfig, dtype: str, num_sms: int) -> None:
    """The launches a 16-bit decode call makes with ``config`` (1, 16 and 64 rows)."""
    act = torch.bfloat16 if dtype.endswith("bf16") else torch.float16
    k, n = 1024, 256
    for m in (1, 16, 64):
        x = torch.zeros(m, k, dtype=act)
        codes = torch.zeros(n, k // 2, dtype=torch.uint8).t()
        scales = torch.zeros(k // 128, n, dtype=act)
        launch_gemm_wq_ws(x, codes, scales, 128, torch.zeros(m, n, dtype=act), config)
