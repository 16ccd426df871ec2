"""Weight-only decode on Hopper (W4A16, W8A16), warp-specialized, written in Gluon: Yᵀ = Qᵀ · Xᵀ
for 1 … 32 rows.

One program per 64 output columns walks the whole of K, or with ``split_k`` one program per
(64 columns, K slice) walks its slice, the slices' fp32 sums added by a second launch
(``gemm_wq.sum_slices``) — for N too narrow to fill the GPU otherwise (N = 4096: 64 blocks for
132 multiprocessors; ``wq-split-h200-cb33338/``). A loader warp streams the program's codes and
the step's activations (four (M_PAD × 64) boxes; rows past M read as zeros) into a ring of
shared-memory stages, a step being 256 K rows:
4-bit codes column-major, each column's bytes contiguous (one (64 columns × 128 bytes) TMA box a
step); 8-bit codes row-major as ``quantize_weight`` stores them (one (256 rows × 64 columns) box).
``consumers`` warp groups take the steps in turn: each loads a quarter's code bytes (64 K rows)
into registers in the layout of wgmma's first operand, turns them into exact 16-bit floats
code − zero point and multiplies on the tensor cores with the activations as the second operand,
M_PAD (8, 16 or 32) wide:

- 4 bits: the codes interleave in runs of 32 K rows (``quantized.pack_nibbles``) so that a
  thread's eight codes of a column's run are one 32-bit word, nibbles s and s + 4 the two halves
  of one operand register (a shift, a LOP3 and a packed subtraction a register:
  :func:`_nibble_word_asm`);
- 8 bits: a thread's operand rows r and r + 8 are made two adjacent columns (the wgmma rows are
  the output columns, in any order: :func:`_column_of_row`), so each K row's two bytes are one
  16-bit load; two LOP3 and a packed subtraction a pair of codes (:func:`_byte_pairs_asm`).

Each quantization group's fp32 sum is scaled once by its columns' scales. At the end the other
warp groups add their sums through shared memory into the first's, which stores the tile. A group
reads a stage's codes with plain shared loads (the generic proxy) and the loader's next TMA copy
writes the stage through the async proxy: the group fences (``fence_async_shared``) before it
releases the stage, as Gluon's warp-specialization tutorial asks (forty-ninth session; no cost
measured).

A stage belongs to one warp group: the stage count is a multiple of ``consumers`` (step i takes
stage i mod stages and group i mod consumers, so stage s only ever serves group s mod consumers).
A wait on an mbarrier names a phase by its parity only, and passes at once when the stage is still
a phase behind: with 8 stages and 3 groups, the group of step i + 8 (which has just finished step
i + 5) could wait on the stage before step i's copy had landed there — TMA copies do not complete
in order — and read it, release it, and leave copies in flight at the program's exit. That was the
``unspecified launch failure`` of W4A16 decode (8 stages, 3 groups) in eager L2-flushed calls:
4 stages and 3 groups failed every process, 6 / 3, 8 / 2, 8 / 4 none
(``benchmarks/results/wq-fault-h100-737601/faultab/``, fiftieth session).

Symmetric codes, group 64 or 128, N a multiple of 64, K of 256, 1 … 32 activation rows
(:func:`wq_ws_supported`); other weights take ``gemm_wq``. Designed and measured on the H200
(``benchmarks/wq_ws_probe.py``; ``benchmarks/results/wq-ws-h200-dc4f9e3/`` has the design
steps, among them the stream alone — the arithmetic skipped — at 10.8 µs of the 14.5–15.8 µs a
call took at 8192² before the codes were interleaved; 12.4–13.4 µs since,
``wq-runs-h200-c35f0f3/``). ptxas serializes register-operand wgmma when registers run short (C7511):
with 4 warp groups (96 registers a thread) it does, with 3 (128) only where a group's quarters
do not chain into one sum.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from tessera._core.errors import InvalidArgumentError
from tessera._core.launch import PDL_AT_EXIT, PDL_EARLY, PDL_MODES, Launcher, cdiv, pdl_mode, scratch
from tessera._core.pdl import gluon_dependent_launch
from tessera.blas.kernels.gemm_tma import shared_memory_limit
from tessera.blas.kernels.gemm_wq import sum_slices
from tessera.blas.kernels.gemm_ws import block_descriptor, stage_barriers
from tessera.blas.kernels.gluon_names import cta_barrier, reinterpret, tma_load

_ACTIVATIONS = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}
BLOCK_N = 64  # one warp group's wgmma rows: the output columns of a program
STEP_K = 256  # K rows a step (one TMA box of codes; four wgmma of 64 K rows)
LOADER_REGISTERS = gl.constexpr(24)  # the loader warp holds addresses only


# The main launch's programmatic-dependent-launch mode by code width, timed against the other
# modes (``benchmarks/pdl_modes.sh`` with DECODE=1, two alternating rounds of off / early / exit).
# 4-bit codes: early. On the H200 (forty-seventh session, ``gpu-session-h200-7ff31f8/pdlwq/``)
# W4A16 M = 1 / 16 12.4 / 13.2–13.4 µs off, 11.5 / 12.1–12.2 early, 12.3 / 12.8 at exit; on an H100
# (``gpu-session-h100-bf37654/``) early won every decode row too. 8-bit codes: at exit. On the H200
# early costs W8A16 2.7 µs (M = 1 / 16: 19.1–19.3 / 19.5–19.8 µs at exit, 19.2 / 19.7–19.9 off,
# 21.9 / 22.0–22.1 early; why was not measured — an early program holds its shared memory, twice
# a 4-bit stage's bytes a stage, while it waits for the previous call); on the H100 the three modes
# were within 0.3 µs (early 25.4, off 25.7). A configuration may name its own (``WqWsConfig.pdl``,
# tuned per GPU). Its slice sum, a second launch, runs at exit as ``gemm_wq``'s does.
WQ_WS_PDL = {4: PDL_EARLY, 8: PDL_AT_EXIT}


@dataclass(frozen=True)
class WqWsConfig:
    """Launch parameters of :func:`_gemm_wq_ws_kernel`: ``num_stages`` steps of codes and
    activations in flight through shared memory (fewer where they would not fit,
    :func:`fitting_stages`), ``consumers`` multiplying warp groups (2 to 4) taking the steps in
    turn, the stages a multiple of the groups (each stage serves one group: see the module
    docstring). W4A16 8192² with interleaved codes, 8 stages: 3 groups 12.7 µs at M = 1 and 13.4
    at M = 16 (a configuration that could fault, no longer allowed), 4 groups 12.8 / 13.6, 2
    groups 14.6 / 15.3; 6 stages, 3 groups 13.0 / 13.5 (the Triton tiles: 14.7 / 19.0;
    ``wq-runs-h200-c35f0f3/``). Re-tuned over the allowed counts (fiftieth session): 9 / 3 won
    W4A16 8192² on the H200 by 0.8–1.3 % over 6 / 3 (``gpu-session-h200-9f60d21/``), 6 / 3 every
    decode row on an H100 (``wq-fault-h100-737601/fix-cc9d1cd/``)."""

    num_stages: int = 6
    consumers: int = 3
    # K cut into this many slices, one program a (column block, slice), their fp32 sums added by
    # a second launch (``gemm_wq.sum_slices``, fixed order): for N too narrow to fill the GPU
    # with one program a 64-column block (N = 4096: 64 programs on 132 multiprocessors)
    split_k: int = 1
    # The main launch's programmatic-dependent-launch mode: "off", "early" or "exit", or "" for the
    # one measured best for the code width (``WQ_WS_PDL``). A tuning parameter because the best
    # mode differs by GPU: early cost W8A16 2.7 µs on the H200 and nothing on an H100.
    pdl: str = ""

    kernel = "gemm_wq_ws"

    def __post_init__(self) -> None:
        if not 2 <= self.num_stages <= 32 or self.consumers not in (2, 3, 4) or self.split_k not in (1, 2, 4):
            raise InvalidArgumentError(f"{self.kernel} takes 2 to 32 stages, 2 to 4 multiplying warp groups "
                                       f"and K split 1, 2 or 4 (actual: {self.num_stages}, {self.consumers}, "
                                       f"{self.split_k})")
        if self.num_stages % self.consumers:
            fewer = self.num_stages // self.consumers * self.consumers
            more = fewer + self.consumers
            raise InvalidArgumentError(
                f"{self.kernel}'s stages must be a multiple of its warp groups, so that each stage serves "
                f"one group (actual: {self.num_stages} stages, {self.consumers} groups); a group sharing a "
                f"stage with another can pass its barrier a phase early and fault. Use "
                + (f"{fewer} or {more}" if fewer else f"{more}") + " stages")
        if self.pdl != "" and not (isinstance(self.pdl, str) and self.pdl in PDL_MODES):
            raise InvalidArgumentError(f"{self.kernel}'s pdl must be '' (the code width's measured mode), "
                                       f"'off', 'early' or 'exit' (actual: {self.pdl!r})")

    def short(self) -> str:
        split = f" k/{self.split_k}" if self.split_k > 1 else ""
        pdl = f" pdl {self.pdl}" if self.pdl else ""
        return f"{self.kernel} s{self.num_stages} c{self.consumers}{split}{pdl}"

    def pdl_mode(self, bits: int) -> int:
        """The main launch's ``launch.PDL_*`` mode before :func:`launch.pdl_mode`'s device check."""
        return PDL_MODES[self.pdl] if self.pdl else WQ_WS_PDL[bits]


@gluon.constexpr_function
def _acc_layout(m_pad):
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, m_pad, 16])


@gluon.constexpr_function
def _word_layout4():
    """Where a quarter's (64 columns × 8 words) of 4-bit codes sit so that their conversion
    (:func:`_operand4`) is wgmma's first operand as it is: a thread holds words q and q + 4 (its
    eight codes of each 32-row run) of columns r and r + 8, lanes 4r + q, warps 16 columns apart."""
    return gl.DistributedLinearLayout(reg_bases=[[0, 4], [8, 0]],
                                      lane_bases=[[0, 1], [0, 2], [1, 0], [2, 0], [4, 0]],
                                      warp_bases=[[16, 0], [32, 0]], block_bases=[], shape=[64, 8])


@gluon.constexpr_function
def _word_view4():
    """A stage's 4-bit codes read as 32-bit words: the (64 × 128)-byte box's swizzle (128 bytes)
    over the same bytes."""
    return gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)


@gluon.constexpr_function
def _pair_layout8():
    """Where a (64 K rows × 32 column pairs) tile of 8-bit codes, read as 16-bit words (two
    adjacent columns of a K row), sits so that its conversion (:func:`_operand8`) is wgmma's
    first operand: a thread holds pair r (columns 2r and 2r + 1: its operand rows r and r + 8) of
    K rows 2q, 2q + 1, 2q + 8, 2q + 9 of each 16, lanes 4r + q, warps 8 pairs apart."""
    return gl.DistributedLinearLayout(reg_bases=[[1, 0], [8, 0], [16, 0], [32, 0]],
                                      lane_bases=[[2, 0], [4, 0], [0, 1], [0, 2], [0, 4]],
                                      warp_bases=[[0, 8], [0, 16]], block_bases=[], shape=[64, 32])


@gluon.constexpr_function
def _pair_view8():
    """The shared layout of a quarter's codes read as 16-bit words: the 8-bit box's swizzle (64
    bytes) over the same bytes."""
    return gl.NVMMASharedLayout(swizzle_byte_width=64, element_bitwidth=16, rank=2)


@gluon.constexpr_function
def _code_bits(code_box):
    """4 or 8: the code width a stage's box shape stands for ((64 columns × 128 bytes) of 4-bit
    codes, column-major; (256 K rows × 64 columns) of 8-bit ones, row-major)."""
    return 8 if list(code_box)[-1] == 64 else 4


@gluon.jit
def _loader(c_desc, x_desc, c_bufs, x_bufs, ready, empty, k_first, k_steps, STAGES: gl.constexpr, PDL):
    """The loader warp: each step's codes and its four activation boxes into the next free stage
    (the program's steps k_first … k_first + k_steps − 1), after the stream's previous kernel with
    a ``PDL`` mode (it may have written the activations)."""
    gluon_dependent_launch(PDL)
    off_n = gl.program_id(0) * 64
    for i in range(k_steps):
        s = i % STAGES
        k = k_first + i
        mbarrier.wait(empty.index(s), ((i // STAGES) & 1) ^ 1)  # a fresh stage passes at once
        mbarrier.expect(ready.index(s), c_desc.block_type.nbytes + 4 * x_desc.block_type.nbytes)
        if _code_bits(c_desc.block_type.shape) == 8:
            tma_load(c_desc, [k * 256, off_n], ready.index(s), c_bufs.index(s))
        else:
            tma_load(c_desc, [off_n, k * 128], ready.index(s), c_bufs.index(s))
        for h in gl.static_range(4):
            tma_load(x_desc, [0, k * 256 + h * 64], ready.index(s), x_bufs.index(4 * s + h))


def _nibble_word_asm(bf16: bool) -> str:
    """PTX: a 32-bit word of eight 4-bit codes (in $8) as four registers of two 16-bit floats, each
    the exact code − 8: register s ($2s its low half, $2s + 1 its high one) takes nibbles s and
    s + 4. bf16 (7 fraction bits): the word shifted right by 4s, one LOP3 keeping both nibbles
    under the bits of 128 (128 + nibble, exact) and a packed subtraction of 136 — eleven
    instructions for eight weights (a byte load, a multiply, a LOP3 and a subtraction per byte
    before the codes were interleaved). fp16 (10 fraction bits) also takes the nibbles at bits
    4–7 as they are: 1024 + 16·nibble, times 1/16 minus 72 in one packed FMA (exact) — one shift
    a word, nine instructions. Taking the bias off by a second wgmma with a constant operand
    instead cost more instructions and made ptxas serialize the wgmma (step 8 of
    ``wq-ws-h200-dc4f9e3/``)."""
    if bf16:
        body = "{ .reg .b32 t, u, c; mov.b32 c, 0x43084308; "  # 136 = 128 + 8
        for s in range(4):
            src = "$8"
            if s:
                body += f"shr.b32 u, $8, {4 * s}; "
                src = "u"
            body += (f"lop3.b32 t, {src}, 0x000F000F, 0x43004300, 0xEA; sub.rn.bf16x2 t, t, c; "
                     f"mov.b32 {{${2 * s}, ${2 * s + 1}}}, t; ")
        return body + "}"
    # 1032 = 1024 + 8; 1/16; −72 = −(1024 / 16 + 8)
    body = "{ .reg .b32 t, u, c, d, e; mov.b32 c, 0x64086408; mov.b32 d, 0x2C002C00; mov.b32 e, 0xD480D480; "
    for s in range(4):
        src = "$8" if s < 2 else "u"
        if s == 2:
            body += "shr.b32 u, $8, 8; "
        if s % 2 == 0:  # nibbles at bits 0–3 and 16–19
            body += f"lop3.b32 t, {src}, 0x000F000F, 0x64006400, 0xEA; sub.f16x2 t, t, c; "
        else:  # nibbles at bits 4–7 and 20–23: 1024 + 16·nibble
            body += f"lop3.b32 t, {src}, 0x00F000F0, 0x64006400, 0xEA; fma.rn.f16x2 t, t, d, e; "
        body += f"mov.b32 {{${2 * s}, ${2 * s + 1}}}, t; "
    return body + "}"


_ASMW_BF16 = gl.constexpr(_nibble_word_asm(True))
_ASMW_FP16 = gl.constexpr(_nibble_word_asm(False))


def _byte_pairs_asm(bf16: bool) -> str:
    """PTX: two 16-bit words of 8-bit codes in $2, K row k (low half) and k + 1 of columns c (low
    byte) and c + 1 — bytes b0 … b3: row k of c, c + 1, row k + 1 of c, c + 1 — as two registers
    of two 16-bit floats code − 128, one column's two K rows apiece: $0 column c, $1 column c + 1.
    fp16: one PRMT puts a column's pair under the bits of 1024 and a packed subtraction takes 1152
    off. bf16 (7 fraction bits) cannot hold 256 + code: a LOP3 puts the low 7 bits under 128
    (128 + low, exact), another makes 256 − 128·(top bit), and the packed subtraction of the two
    is code − 128, exact."""
    if not bf16:
        return ("{ .reg .b32 c; mov.b32 c, 0x64806480; prmt.b32 $0, $2, 0x64, 0x4240; "
                "sub.f16x2 $0, $0, c; prmt.b32 $1, $2, 0x64, 0x4341; sub.f16x2 $1, $1, c; }")
    pair = ("lop3.b32 v, {0}, 0x007F007F, 0x43004300, 0xEA; lop3.b32 c, {0}, 0x00800080, 0x43804380, 0x6A; "
            "sub.rn.bf16x2 {1}, v, c; ")
    high = "shr.b32 t, $2, 8; "  # b1 and b3 to bits 0 and 16
    return "{ .reg .b32 t, v, c; " + pair.format("$2", "$0") + high + pair.format("t", "$1") + "}"


_ASM8_BF16 = gl.constexpr(_byte_pairs_asm(True))
_ASM8_FP16 = gl.constexpr(_byte_pairs_asm(False))


@gluon.jit
def _operand4(c_words, a_layout: gl.constexpr, word_layout: gl.constexpr, dtype: gl.constexpr):
    """A quarter's (64 columns × 8 words) of interleaved 4-bit codes (``quantized.pack_nibbles``:
    word q of a column's 32-row run holds rows 16t + 2q + h at nibble 4h + 2t and that + 8 at
    nibble 4h + 2t + 1) as wgmma's (64 × 64) first operand, each the exact 16-bit code − 8
    (:func:`_nibble_word_asm`); a relabelling of the registers, no data moved."""
    asm: gl.constexpr = _ASMW_BF16 if dtype == gl.bfloat16 else _ASMW_FP16
    o0, o1, o2, o3, o4, o5, o6, o7 = gl.inline_asm_elementwise(
        asm, "=h,=h,=h,=h,=h,=h,=h,=h,r", [c_words.load(word_layout)], dtype=(dtype.value,) * 8,
        is_pure=True, pack=1)
    low = gl.join(gl.join(o0, o1), gl.join(o2, o3))  # (column, word, h, s0) for s1 = 0: o[2s + h]
    high = gl.join(gl.join(o4, o5), gl.join(o6, o7))
    w = gl.reshape(gl.join(low, high), [64, 2, 2, 2, 2, 2, 2])  # (column, run, q1, q0, h, s0, s1)
    w = gl.reshape(gl.permute(w, (0, 1, 6, 5, 2, 3, 4)), [64, 64])  # K = 32 run + 16 s1 + 8 s0 + 2q + h
    return gl.convert_layout(w, a_layout, assert_trivial=True)


@gluon.jit
def _as_words4(c_step):
    """A stage's (64 × 128) bytes of 4-bit codes as (64 × 32) 32-bit words (:func:`_word_view4`)."""
    return reinterpret(c_step, gl.uint32, [64, 32], _word_view4())


@gluon.jit
def _as_words8(c_quarter):
    """A quarter's (64 × 64) codes as (64 × 32) 16-bit words, the same bytes (:func:`_pair_view8`)."""
    return reinterpret(c_quarter, gl.uint16, [64, 32], _pair_view8())


@gluon.jit
def _operand8(c_quarter, a_layout: gl.constexpr, pair_layout: gl.constexpr, dtype: gl.constexpr):
    """(64 K rows × 64 columns) of 8-bit codes from shared memory as wgmma's (64 × 64) first
    operand, each the exact 16-bit float code − 128 (:func:`_byte_pairs_asm`); operand row m is
    column :func:`_column_of_row` (m)."""
    asm: gl.constexpr = _ASM8_BF16 if dtype == gl.bfloat16 else _ASM8_FP16
    # K rows k and k + 1 (the layout's first register step) packed in $2
    even, odd = gl.inline_asm_elementwise(asm, "=r,=r,r", [_as_words8(c_quarter).load(pair_layout)],
                                          dtype=(dtype.value, dtype.value), is_pure=True, pack=2)
    w = gl.reshape(gl.join(even, odd), [64, 64])  # (K, column)
    w = gl.reshape(w.permute((1, 0)), [4, 8, 2, 64])  # (column = 16 w + 2 r + j, K)
    w = gl.reshape(gl.permute(w, (0, 2, 1, 3)), [64, 64])  # (operand row 16 w + 8 j + r, K)
    return gl.convert_layout(w, a_layout, assert_trivial=True)


@gluon.jit
def _column_of_row(m, BITS: gl.constexpr):
    """The output column (of a program's 64) that wgmma row ``m`` computes: itself for 4-bit codes;
    for 8-bit ones 16 w + 2 r + j for row 16 w + 8 j + r (see :func:`_operand8`)."""
    if BITS == 8:
        return (m // 16) * 16 + (m % 8) * 2 + (m // 8) % 2
    else:
        return m


@gluon.jit
def _quarter(c_bufs, x_bufs, s, h: gl.constexpr, acc, a_layout: gl.constexpr, code_layout: gl.constexpr,
             dtype: gl.constexpr, ADD: gl.constexpr):
    """Quarter ``h`` (64 K rows) of stage ``s``: its codes as wgmma's first operand, the wgmma
    with the quarter's activations issued (asynchronous)."""
    if _code_bits(c_bufs.shape) == 8:
        a = _operand8(c_bufs.index(s).slice(64 * h, 64, dim=0), a_layout, code_layout, dtype)
    else:
        a = _operand4(_as_words4(c_bufs.index(s)).slice(8 * h, 8, dim=1), a_layout, code_layout, dtype)
    x = x_bufs.index(4 * s + h).permute((1, 0))
    return warpgroup_mma(a, x, acc, use_acc=ADD, is_async=True)


@gluon.jit
def _scale(s_ptr, i, h: gl.constexpr, cols, stride_sg, GROUP: gl.constexpr):
    """The fp32 scales of quarter ``h`` (64 K rows) of step ``i``."""
    return gl.load(s_ptr + ((i * 256 + h * 64) // GROUP) * stride_sg + cols).to(gl.float32)


@gluon.jit
def _multiplier(c_bufs, x_bufs, ready, empty, done, red, consts, s_ptr, y_ptr, M, k_first, k_steps,
                stride_sg, stride_ym, stride_ys, STAGES, group, groups, PDL):
    """A multiplying warp group (``group`` of ``groups``): steps group, group + groups, …; a step's
    four quarters' wgmma issued as their codes become operands, then waited for together, each
    group's sum scaled by its columns' scales (loaded a step ahead; with groups of 128 rows two
    quarters chain into one sum, which keeps ptxas's wgmma pipelined with 3 warp groups at 16
    rows). The other warp groups' sums are added through shared memory into group 0's, which
    stores the tile. The quantization group comes as ``consts``'s shape: a constant passed to a
    partition arrives as a runtime value, a shape as a constant. With a ``PDL`` mode it first
    waits for the stream's previous kernel (which may write the scales or read y)."""
    gluon_dependent_launch(PDL)
    M_PAD: gl.constexpr = x_bufs.shape[1]
    DTYPE: gl.constexpr = x_bufs.dtype
    GROUP: gl.constexpr = 64 * consts.shape[1]
    BITS: gl.constexpr = _code_bits(c_bufs.shape)
    acc_layout: gl.constexpr = _acc_layout(M_PAD)
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=2)
    code_layout: gl.constexpr = _pair_layout8() if BITS == 8 else _word_layout4()
    col_layout: gl.constexpr = gl.SliceLayout(1, acc_layout)
    cols = gl.program_id(0) * 64 + _column_of_row(gl.arange(0, 64, layout=col_layout), BITS)
    acc = gl.zeros([64, M_PAD], gl.float32, acc_layout)
    zero = gl.zeros([64, M_PAD], gl.float32, acc_layout)
    first = k_first + gl.minimum(group, k_steps - 1)  # a group with no step loads a real row, unused
    s0 = _scale(s_ptr, first, 0, cols, stride_sg, GROUP)
    s1 = _scale(s_ptr, first, 1, cols, stride_sg, GROUP)
    s2 = _scale(s_ptr, first, 2, cols, stride_sg, GROUP)
    s3 = _scale(s_ptr, first, 3, cols, stride_sg, GROUP)
    for i in range(group, k_steps, groups):
        s = i % STAGES
        i_next = k_first + gl.minimum(i + groups, k_steps - 1)  # the last step reloads its own
        n0 = _scale(s_ptr, i_next, 0, cols, stride_sg, GROUP)
        n1 = _scale(s_ptr, i_next, 1, cols, stride_sg, GROUP)
        n2 = _scale(s_ptr, i_next, 2, cols, stride_sg, GROUP)
        n3 = _scale(s_ptr, i_next, 3, cols, stride_sg, GROUP)
        mbarrier.wait(ready.index(s), (i // STAGES) & 1)
        if GROUP == 128:  # a group's two quarters into one sum
            t0 = _quarter(c_bufs, x_bufs, s, 0, zero, a_layout, code_layout, DTYPE, False)
            t0 = _quarter(c_bufs, x_bufs, s, 1, t0, a_layout, code_layout, DTYPE, True)
            t2 = _quarter(c_bufs, x_bufs, s, 2, zero, a_layout, code_layout, DTYPE, False)
            t2 = _quarter(c_bufs, x_bufs, s, 3, t2, a_layout, code_layout, DTYPE, True)
            p0, p2 = warpgroup_mma_wait(num_outstanding=0, deps=(t0, t2))
            fence_async_shared()  # its reads of the codes ordered before the loader's next copy there
            cta_barrier()  # every warp of the group is done with the stage
            mbarrier.arrive(empty.index(s), count=1)
            acc = acc + p0 * gl.expand_dims(s0, 1) + p2 * gl.expand_dims(s2, 1)
        else:
            t0 = _quarter(c_bufs, x_bufs, s, 0, zero, a_layout, code_layout, DTYPE, False)
            t1 = _quarter(c_bufs, x_bufs, s, 1, zero, a_layout, code_layout, DTYPE, False)
            t2 = _quarter(c_bufs, x_bufs, s, 2, zero, a_layout, code_layout, DTYPE, False)
            t3 = _quarter(c_bufs, x_bufs, s, 3, zero, a_layout, code_layout, DTYPE, False)
            p0, p1, p2, p3 = warpgroup_mma_wait(num_outstanding=0, deps=(t0, t1, t2, t3))
            fence_async_shared()  # its reads of the codes ordered before the loader's next copy there
            cta_barrier()  # every warp of the group is done with the stage
            mbarrier.arrive(empty.index(s), count=1)
            acc = acc + p0 * gl.expand_dims(s0, 1) + p1 * gl.expand_dims(s1, 1)
            acc = acc + p2 * gl.expand_dims(s2, 1) + p3 * gl.expand_dims(s3, 1)
        s0, s1, s2, s3 = n0, n1, n2, n3
    if group > 0:
        red.index(group - 1).store(acc)
        cta_barrier()
        mbarrier.arrive(done.index(0), count=1)
    else:
        if groups > 1:
            mbarrier.wait(done.index(0), 0)
            for g in range(groups - 1):
                acc = acc + red.index(g).load(acc_layout)
        rows = gl.arange(0, M_PAD, layout=gl.SliceLayout(0, acc_layout))
        out = (y_ptr + gl.program_id(1) * stride_ys + gl.expand_dims(rows, 0) * stride_ym
               + gl.expand_dims(cols, 1))
        gl.store(out, acc.to(y_ptr.dtype.element_ty), mask=gl.expand_dims(rows < M, 0))


@gluon.jit
def _gemm_wq_ws_kernel(c_desc, x_desc, s_ptr, y_ptr, M, K, stride_sg, stride_ym, stride_ys,
                       GROUP: gl.constexpr, STAGES: gl.constexpr, CONSUMERS: gl.constexpr, PDL: gl.constexpr):
    """Y = X · dequant(Q) for one 64-column block and one of ``num_programs(1)`` K slices (see the
    module docstring; a slice's sum goes to slice ``program_id(1)`` of y, ``stride_ys`` apart): the
    stage ring and its barriers, the loader warp and the multiplying warp groups (``PDL``: a
    ``launch.PDL_*`` mode, every partition waiting for the previous kernel)."""
    gl.static_assert(STAGES % CONSUMERS == 0, "each stage serves one warp group (see the module docstring)")
    M_PAD: gl.constexpr = x_desc.block_type.shape[0]
    c_bufs = gl.allocate_shared_memory(gl.uint8, [STAGES] + c_desc.block_type.shape, c_desc.layout)  # noqa: RUF005
    x_bufs = gl.allocate_shared_memory(x_desc.dtype, [4 * STAGES] + x_desc.block_type.shape,  # noqa: RUF005
                                       x_desc.layout)
    red = gl.allocate_shared_memory(gl.float32, [CONSUMERS - 1, 64, M_PAD],
                                    gl.SwizzledSharedLayout(vec=1, per_phase=1, max_phase=1, order=[1, 0]))
    consts = gl.allocate_shared_memory(gl.int8, [1, GROUP // 64],
                                       gl.SwizzledSharedLayout(vec=1, per_phase=1, max_phase=1, order=[1, 0]))
    ready, empty = stage_barriers(STAGES)
    done = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
    mbarrier.init(done.index(0), count=CONSUMERS - 1)
    fence_async_shared()  # the initialized barriers before the copies (async proxy) complete on them
    k_steps = K // 256 // gl.num_programs(1)
    k_first = gl.program_id(1) * k_steps
    loads = (c_desc, x_desc, c_bufs, x_bufs, ready, empty, k_first, k_steps, STAGES, PDL)
    regs: gl.constexpr = _worker_registers(CONSUMERS)
    # the multiplying groups' arguments: all alike but the group's index (Triton takes no starred tuples)
    shared = (c_bufs, x_bufs, ready, empty, done, red, consts, s_ptr, y_ptr, M, k_first, k_steps, stride_sg,
              stride_ym, stride_ys, STAGES)
    g0 = shared + (0, CONSUMERS, PDL)  # noqa: RUF005
    g1 = shared + (1, CONSUMERS, PDL)  # noqa: RUF005
    g2 = shared + (2, CONSUMERS, PDL)  # noqa: RUF005
    g3 = shared + (3, CONSUMERS, PDL)  # noqa: RUF005
    if CONSUMERS == 2:
        gl.warp_specialize([(_multiplier, g0), (_multiplier, g1), (_loader, loads)], [4, 1],
                           [regs, LOADER_REGISTERS])
    elif CONSUMERS == 3:
        gl.warp_specialize([(_multiplier, g0), (_multiplier, g1), (_multiplier, g2), (_loader, loads)],
                           [4, 4, 1], [regs, regs, LOADER_REGISTERS])
    else:
        gl.warp_specialize([(_multiplier, g0), (_multiplier, g1), (_multiplier, g2), (_multiplier, g3),
                            (_loader, loads)], [4, 4, 4, 1], [regs, regs, regs, LOADER_REGISTERS])


@gluon.constexpr_function
def _worker_registers(consumers):
    """A multiplying worker's registers after setmaxnreg: what 2, 3 or 4 warp groups and the
    loader's group leave each (the launch gives every warp of 3, 4 or 5 warp groups 168, 128 or
    96; the loader keeps 24)."""
    return {2: 160, 3: 120, 4: 96}[consumers]


MAX_ROWS = 32  # activation rows: wgmma N = 8, 16 or 32 (64 would not fit enough stages)


def wq_ws_supported(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor | None,
                    bits: int, group: int) -> bool:
    """Whether this kernel takes the 2-D call as it is: symmetric codes in ``quantize_weight``'s
    layout (4-bit column-major, 8-bit row-major), group 64 or 128, 1 … 32 activation rows
    (row-major, 16-byte aligned rows), N a multiple of 64, K of 256, scales row-major in x's
    dtype (the caller checks the device: sm_90)."""
    m, k = x.shape
    n = codes.shape[1]
    if bits == 4:
        codes_ok = codes.stride(0) == 1 and codes.stride(1) == k // 2
    else:
        codes_ok = bits == 8 and codes.stride(1) == 1 and codes.stride(0) % 16 == 0
    return (codes_ok and zeros is None and group in (64, 128) and 1 <= m <= MAX_ROWS
            and x.dtype in _ACTIVATIONS and x.stride(1) == 1 and (x.stride(0) * 2) % 16 == 0
            and x.data_ptr() % 16 == 0 and codes.data_ptr() % 16 == 0 and n % 64 == 0 and k % STEP_K == 0
            and scales.stride(1) == 1 and scales.dtype == x.dtype)


def _m_pad(m: int) -> int:
    return max(8, 1 << (m - 1).bit_length())


def fitting_stages(config: WqWsConfig, m: int, shared_memory: int | None, bits: int = 4) -> int:
    """``config.num_stages``, or the most that fit ``shared_memory`` bytes a program beside the warp
    groups' sums, still a multiple of the groups (at least one stage each): a stage holds a step's
    codes (8 KiB of 4-bit ones, 16 KiB of 8-bit) and four (M_PAD × 64) activation boxes."""
    if not shared_memory:
        return config.num_stages
    m_pad = _m_pad(m)
    stage = BLOCK_N * STEP_K * bits // 8 + 4 * m_pad * 64 * 2
    sums = (config.consumers - 1) * BLOCK_N * m_pad * 4
    fitting = min(config.num_stages, (shared_memory - sums - 1024) // stage)
    return max(config.consumers, fitting // config.consumers * config.consumers)


_launch = Launcher(_gemm_wq_ws_kernel)


def launch_gemm_wq_ws(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor, bits: int, group: int,
                      y: torch.Tensor, config: WqWsConfig) -> None:
    """y = x · dequant(codes, scales) for a 2-D call that passes :func:`wq_ws_supported`, the
    stages fitted to the shared memory of y's device (or of the pack target a build compiles for)."""
    m, k = x.shape
    n = codes.shape[1]
    stages = fitting_stages(config, m, shared_memory_limit(y), bits)
    if bits == 8:
        codes_desc = block_descriptor(codes, [STEP_K, BLOCK_N])
    else:
        codes_desc = block_descriptor(codes.t(), [BLOCK_N, STEP_K // 2])
    x_desc = block_descriptor(x, [_m_pad(m), 64])
    split = config.split_k if k % (STEP_K * config.split_k) == 0 else 1
    if split == 1:
        target, strides = y, (y.stride(0), 0)
    else:  # fp32 slices, added by a second launch as they leave (programmatic dependent launch)
        target, strides = scratch("wq slices", split * m * n, torch.float32, y.device, False), (n, m * n)
    pdl = pdl_mode(y, config.pdl_mode(bits))
    constexprs = dict(GROUP=group, STAGES=stages, CONSUMERS=config.consumers, PDL=pdl)
    _launch((cdiv(n, BLOCK_N), split), (codes_desc, x_desc, scales, target, m, k, scales.stride(0), *strides),
            constexprs, 4, 1)
    if split > 1:
        sum_slices(target, split, y, pdl=pdl_mode(y, PDL_AT_EXIT))


def representative_launch(op: str, config: WqWsConfig, dtype: str, num_sms: int) -> None:
    """The launches ``gemm_wq`` makes with ``config`` (op ``gemm_wq``, dtype ``int4_bf16``,
    ``int4_fp16``, ``int8_bf16`` or ``int8_fp16``): each activation width M_PAD (8, 16, 32) with
    groups of 128 and 64, the stages fitted to the build target (run under ``launch.capture()``)."""
    act = torch.bfloat16 if dtype.endswith("bf16") else torch.float16
    bits = 8 if dtype.startswith("int8") else 4
    k, n = 1024, 256
    for m in (1, 16, 32):
        for group in (128, 64):
            x = torch.zeros(m, k, dtype=act)
            if bits == 8:
                codes = torch.zeros(k, n, dtype=torch.uint8)
            else:
                codes = torch.zeros(n, k // 2, dtype=torch.uint8).t()
            scales = torch.zeros(k // group, n, dtype=act)
            launch_gemm_wq_ws(x, codes, scales, bits, group, torch.zeros(m, n, dtype=act), config)
