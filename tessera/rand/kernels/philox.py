"""Philox4x32-10 (Salmon et al., SC'11; Random123): the bijection and cuRAND-compatible streams.

Stream layout (cuRAND's device API, ``curand_init(seed, subsequence, offset)`` then ``curand()``):
word ``p`` of a stream is lane ``p % 4`` of ``philox(counter, key)`` with
``counter = (lo(p // 4), hi(p // 4), lo(subsequence), hi(subsequence))`` and
``key = (lo(seed), hi(seed))``. Outputs therefore depend only on (seed, subsequence, offset),
never on the launch configuration.

Output kinds (``KIND``), each consuming a fixed number of words per value:
  0 raw 32-bit words (1 word)          1 uniform fp32 in (0, 1], cuRAND's x·2⁻³² + 2⁻³³ (1 word)
  2 normal fp32, Box–Muller on word pairs as curand_normal: z₀ = s·sin v, z₁ = s·cos v (2 words → 2)
  3 uniform fp64 in (0, 1], cuRAND's 53-bit x ^ (y << 21) (2 words → 1)
  4 normal fp64, Box–Muller on two 53-bit uniforms (4 words → 2)
  5 normal bf16, Box–Muller on one word (1 word → 2): u = (r + ½)·2⁻²⁰ from the top 20 bits,
    angle 2π·(a + ½)·2⁻¹² from the low 12 (``_box_muller_word``)
The block kernel computes whole Philox blocks (4 words) and handles any start lane for kinds 0/1/5
and the aligned starts of the pair kinds; the generic kernel serves misaligned pair kinds.

Why bf16 normals spend one word per pair, not two: ten Philox rounds per block were ~98 % of
the time that "3× torch" allows at two words per pair (benchmarks/rand_floor.py), and bf16's
8-bit significand does not need more: a 12-bit angle puts pairs on 4096 rays, 1.5e-3 rad apart,
finer than bf16's own spacing (3.9e-3 relative); a 20-bit radius uniform ends the tails at
√(2·21·ln 2) = 5.40 (a normal exceeds that with probability 7e-8; fp32 normals end at 6.66).
fp16 (11 bits) keeps the two-word pairs of fp32.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import libdevice as cuda_math

from tessera._core.device import interpreter_enabled
from tessera._core.launch import Launcher, cdiv, words
from tessera.rand.space import TORCH_DTYPES, PhiloxConfig

PHILOX_M0 = tl.constexpr(0xD2511F53)
PHILOX_M1 = tl.constexpr(0xCD9E8D57)
PHILOX_W0 = tl.constexpr(0x9E3779B9)
PHILOX_W1 = tl.constexpr(0xBB67AE85)
FP16_TINY = tl.constexpr(5.9604645e-08)  # 2⁻²⁴: fp16 uniforms stay in (0, 1]
WORDS_PER_GROUP = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 1}  # words a kind consumes together
VALUES_PER_GROUP = {0: 1, 1: 1, 2: 2, 3: 1, 4: 2, 5: 2}


@triton.jit
def _philox(c0, c1, c2, c3, k0, k1):
    """Ten Philox rounds on uint32 tensors (the key is bumped between rounds).

    Each 32×32-bit product is taken whole in 64 bits, which compiles to one wide multiply giving
    both halves (a high and a low multiply were 1.3× the integer instructions on sm_90)."""
    m0 = tl.full(c0.shape, PHILOX_M0, tl.uint64)
    m1 = tl.full(c0.shape, PHILOX_M1, tl.uint64)
    for _ in tl.static_range(10):
        p0 = m0 * c0.to(tl.uint64)
        p1 = m1 * c2.to(tl.uint64)
        hi0, lo0 = (p0 >> 32).to(tl.uint32), p0.to(tl.uint32)
        hi1, lo1 = (p1 >> 32).to(tl.uint32), p1.to(tl.uint32)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        k0 = k0 + PHILOX_W0
        k1 = k1 + PHILOX_W1
    return c0, c1, c2, c3


@triton.jit
def _uniform32(x):
    return x.to(tl.float32) * 2.3283064e-10 + 1.1641532e-10


@triton.jit
def _uniform64(x, y):
    z = x.to(tl.uint64) ^ (y.to(tl.uint64) << 21)
    return z.to(tl.float64) * 1.1102230246251565e-16 + 5.551115123125783e-17


@triton.jit
def _sincos_turns(y):
    """sin and cos of 2π·(y + ½)·2⁻³² for uint32 ``y`` (the angle curand_normal uses), in fp32.

    The quadrant comes from the top two bits of the rounded word, so the reduction to [−π/4, π/4]
    is exact integer arithmetic; Taylor polynomials there are within 1 ulp (no slow path, no
    special-function unit, the same code on every backend)."""
    q = (y + 0x20000000) >> 30  # nearest quarter turn, 0…3 (the add wraps at one full turn)
    f = (y - (q << 30)).to(tl.int32, bitcast=True)  # the rest, in [−2²⁹, 2²⁹)
    x = (f.to(tl.float32) + 0.5) * 1.4629180792671596e-09  # 2π·2⁻³²
    x2 = x * x
    s = x + x * x2 * (-1.6666667e-01 + x2 * (8.3333333e-03 + x2 * (-1.9841270e-04 + x2 * 2.7557319e-06)))
    c = 1.0 + x2 * (-0.5 + x2 * (4.1666668e-02 + x2 * (-1.3888889e-03 + x2 * 2.4801587e-05)))
    odd = (q & 1) != 0
    sin_abs, cos_abs = tl.where(odd, c, s), tl.where(odd, s, c)
    return tl.where((q & 2) != 0, -sin_abs, sin_abs), tl.where(((q + 1) & 2) != 0, -cos_abs, cos_abs)


@triton.jit
def _minus_two_log(x, MATH: tl.constexpr):
    """−2·ln u for u = (x + ½)·2⁻³², x a uint32 word, in fp32.

    MATH = 1 (CUDA): the hardware log2 (relative error < 2⁻²²), except near u = 1 where its
    absolute error would dominate: there −ln(1 − t) is a series in t = 1 − u, which comes exact
    from the word (t = (~x + ½)·2⁻³²). MATH = 0: the portable libm log."""
    if MATH == 0:
        return -2.0 * tl.log(_uniform32(x))
    near_one = x >= 0xF0000000  # t < 1/16
    f = _uniform32(tl.where(near_one, ~x, x))  # t there, u elsewhere: one conversion
    series = f * (1.0 + f * (0.5 + f * (0.33333334 + f * (0.25 + f * (0.2 + f * 0.16666667)))))
    return 2.0 * tl.where(near_one, series, -0.6931472 * cuda_math.fast_log2f(f))


@triton.jit
def _approx(x, INSTRUCTION: tl.constexpr):
    """One PTX special-function instruction on fp32 (``lg2/sqrt/sin/cos.approx.ftz.f32``): a
    single SFU operation, without the denormal fix-ups the non-ftz forms add (CUDA only)."""
    return tl.inline_asm_elementwise(INSTRUCTION + ".approx.ftz.f32 $0, $1;", "=f,f", [x],
                                     dtype=tl.float32, is_pure=True, pack=1)


@triton.jit
def _radius_sincos(u, angle):
    """(s·sin, s·cos) of ``angle`` with s = √(−2·ln u), in ftz special-function instructions
    (CUDA only). ``|·|`` keeps a log rounded above 0 from giving NaN."""
    s = _approx(tl.abs(_approx(u, "lg2") * -1.3862944), "sqrt")  # −2·ln u = −2·ln 2 · log2 u
    return s * _approx(angle, "sin"), s * _approx(angle, "cos")


@triton.jit
def _box_muller_half(x, y):
    """The pair of ``_box_muller32`` for fp16/bf16 outputs, in the fewest instructions (CUDA only).

    The radius takes the hardware log2 all the way to u = 1 (no series): near u = 1 its absolute
    error (< 2.2e-7 in −2·ln u) is twice the spacing of the fp32 uniform there, which curand_normal
    itself has, and invisible in 8 or 11 significant bits elsewhere. Rounded, they equal the
    rounded fp32 normals in all but ~1e-4 of values (a GPU test bounds the fraction and the
    difference)."""
    angle = (y.to(tl.int32, bitcast=True).to(tl.float32) + 0.5) * 1.4629180792671596e-09  # as fp32's
    return _radius_sincos(_uniform32(x), angle)


@triton.jit
def _box_muller_word(w, MATH: tl.constexpr):
    """A bf16 pair from one word: u = (r + ½)·2⁻²⁰ (r: the top 20 bits) and the angle
    2π·(a + ½)·2⁻¹² taken in [−π, π) (a: the low 12 bits as a signed number); z₀ = s·sin,
    z₁ = s·cos with s = √(−2·ln u). The uniform and the angle each cost one FMA.
    MATH = 1 (CUDA): the special-function instructions of ``_radius_sincos``; 0: libm."""
    u = (w >> 12).to(tl.float32) * 9.5367431640625e-07 + 4.76837158203125e-07  # 2⁻²⁰, 2⁻²¹
    a = (w & 0xFFF).to(tl.int32) - ((w & 0x800) << 1).to(tl.int32)  # [−2¹¹, 2¹¹)
    angle = a.to(tl.float32) * 1.5339807878856412e-03 + 7.669903939428206e-04  # 2π·2⁻¹², π·2⁻¹²
    if MATH == 1:
        return _radius_sincos(u, angle)
    s = tl.sqrt(-2.0 * tl.log(u))
    return s * tl.sin(angle), s * tl.cos(angle)


@triton.jit
def _box_muller32(x, y, MATH: tl.constexpr, HALF: tl.constexpr):
    """curand_normal's pair from words (x, y): radius from the uniform of x, angle 2π·(y + ½)·2⁻³².

    MATH = 1 (CUDA): the hardware sin/cos, as curand_normal's __sincosf, but on the angle taken
    as a signed word, i.e. reduced exactly to [−π, π) where their absolute error is below 10⁻⁶.
    MATH = 0: polynomials after an exact reduction to [−π/4, π/4], within 1 ulp, any backend.
    HALF (the output is fp16/bf16) with MATH = 1: ``_box_muller_half``."""
    if MATH == 1 and HALF:
        return _box_muller_half(x, y)
    s = tl.sqrt(_minus_two_log(x, MATH))
    if MATH == 1:
        angle = (y.to(tl.int32, bitcast=True).to(tl.float32) + 0.5) * 1.4629180792671596e-09
        return s * cuda_math.fast_sinf(angle), s * cuda_math.fast_cosf(angle)
    sin_v, cos_v = _sincos_turns(y)
    return s * sin_v, s * cos_v


def math_mode(out: torch.Tensor) -> int:
    """MATH for the normal kernels: 1 on CUDA (hardware special functions), else 0 (portable)."""
    return int(out.device.type == "cuda" and torch.version.hip is None and not interpreter_enabled())


@triton.jit
def _box_muller64(u, v_uniform):
    v = v_uniform * tl.full(u.shape, 6.283185307179586, tl.float64)  # a bare literal would be fp32
    s = tl.sqrt(-2.0 * tl.log(u))
    return s * tl.sin(v), s * tl.cos(v)


@triton.jit
def _finish(z, mean, std, KIND: tl.constexpr, AFFINE: tl.constexpr, out_ptr):
    """A value as stored: normals scaled (unless AFFINE is off: mean 0, std 1), fp16 uniforms
    kept above 0, then converted to the output dtype."""
    if KIND == 0:
        return z
    if (KIND == 2 or KIND == 4 or KIND == 5) and AFFINE:
        z = z * tl.cast(std, z.dtype) + tl.cast(mean, z.dtype)
    if KIND == 1 and out_ptr.dtype.element_ty == tl.float16:
        z = tl.maximum(z, FP16_TINY)
    return z.to(out_ptr.dtype.element_ty)


@triton.jit
def _u32(zero, value):
    """A 32-bit word passed as an int32 argument (``launch.word``) as a uint32 tensor."""
    return (zero + value).to(tl.uint32)


@triton.jit
def _u64(lo, hi):
    """The int64 whose 32-bit halves were passed as int32 arguments (``launch.words``)."""
    return (hi.to(tl.int64) << 32) | lo.to(tl.uint32, bitcast=True).to(tl.int64)


# Never specialized. ``shift`` (0…3; 0, 2, 4 or 6 for kind 5) is: the compiler must see that 0
# keeps the stores 16-byte aligned (unspecialized, it stored scalars and Philox uniforms fell from
# 3.97 to 3.58 TB/s).
_STREAM_WORDS = ["first_lo", "first_hi", "lead", "sub_lo", "sub_hi", "key0", "key1"]


@triton.jit
def _philox_bijection_kernel(ctr_ptr, key_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = i < n
    c0 = tl.load(ctr_ptr + 4 * i, mask=mask, other=0).to(tl.uint32, bitcast=True)
    c1 = tl.load(ctr_ptr + 4 * i + 1, mask=mask, other=0).to(tl.uint32, bitcast=True)
    c2 = tl.load(ctr_ptr + 4 * i + 2, mask=mask, other=0).to(tl.uint32, bitcast=True)
    c3 = tl.load(ctr_ptr + 4 * i + 3, mask=mask, other=0).to(tl.uint32, bitcast=True)
    k0 = tl.load(key_ptr + 2 * i, mask=mask, other=0).to(tl.uint32, bitcast=True)
    k1 = tl.load(key_ptr + 2 * i + 1, mask=mask, other=0).to(tl.uint32, bitcast=True)
    r0, r1, r2, r3 = _philox(c0, c1, c2, c3, k0, k1)
    tl.store(out_ptr + 4 * i, r0.to(tl.int32, bitcast=True), mask=mask)
    tl.store(out_ptr + 4 * i + 1, r1.to(tl.int32, bitcast=True), mask=mask)
    tl.store(out_ptr + 4 * i + 2, r2.to(tl.int32, bitcast=True), mask=mask)
    tl.store(out_ptr + 4 * i + 3, r3.to(tl.int32, bitcast=True), mask=mask)


@triton.jit(do_not_specialize=_STREAM_WORDS)
def _philox_block_kernel(out_ptr, n, first_lo, first_hi, lead, shift, sub_lo, sub_hi, key0, key1,
                         mean: tl.float64, std: tl.float64,
                         KIND: tl.constexpr, BLOCK: tl.constexpr, MATH: tl.constexpr,
                         AFFINE: tl.constexpr):
    """Values of Philox blocks first + [pid·BLOCK, (pid+1)·BLOCK), where ``first`` is a multiple
    of BLOCK and the stream starts ``lead`` blocks after it: block b's values go to output indices
    VALUES·(b − first − lead) − shift + [0, VALUES), masked to [0, n).

    A program's block counters share their high word (no carry: BLOCK divides 2³²), so the first
    two Philox rounds are partly the same for all its blocks and computed once. The values of a
    block are adjacent in a (BLOCK, VALUES) tile, so each thread stores a short vector; with
    shift = 0 (the usual case) the stores are 16-byte aligned."""
    VALUES: tl.constexpr = 8 if KIND == 5 else (2 if KIND >= 3 else 4)  # values per block
    pid = tl.program_id(0).to(tl.int64)
    base = _u64(first_lo, first_hi) + pid * BLOCK
    zero = tl.zeros((BLOCK,), tl.uint32)
    c0 = (base & 0xFFFFFFFF).to(tl.uint32) + tl.arange(0, BLOCK).to(tl.uint32)  # never wraps
    c1 = zero + (base >> 32).to(tl.uint32)
    w0, w1, w2, w3 = _philox(c0, c1, _u32(zero, sub_lo), _u32(zero, sub_hi), _u32(zero, key0),
                             _u32(zero, key1))
    if KIND == 0:
        v0, v1 = w0.to(tl.int32, bitcast=True), w1.to(tl.int32, bitcast=True)
        v2, v3 = w2.to(tl.int32, bitcast=True), w3.to(tl.int32, bitcast=True)
    elif KIND == 1:
        v0, v1, v2, v3 = _uniform32(w0), _uniform32(w1), _uniform32(w2), _uniform32(w3)
    elif KIND == 2:
        half = out_ptr.dtype.element_ty != tl.float32
        v0, v1 = _box_muller32(w0, w1, MATH, half)
        v2, v3 = _box_muller32(w2, w3, MATH, half)
    elif KIND == 3:  # two fp64 uniforms per block
        v0, v1 = _uniform64(w0, w1), _uniform64(w2, w3)
        v2, v3 = v0, v1  # unused
    elif KIND == 4:  # one fp64 normal pair per block
        v0, v1 = _box_muller64(_uniform64(w0, w1), _uniform64(w2, w3))
        v2, v3 = v0, v1  # unused
    else:  # KIND == 5: a bf16 pair per word
        v0, v1 = _box_muller_word(w0, MATH)
        v2, v3 = _box_muller_word(w1, MATH)
        v4, v5 = _box_muller_word(w2, MATH)
        v6, v7 = _box_muller_word(w3, MATH)
    if VALUES == 8:  # nested joins keep a block's values in one thread; the outermost join
        # makes the fastest axis, so this flattens to v0 v1 … v7
        values = tl.reshape(tl.join(tl.join(tl.join(v0, v4), tl.join(v2, v6)),
                                    tl.join(tl.join(v1, v5), tl.join(v3, v7))), (BLOCK, VALUES))
    elif VALUES == 4:
        values = tl.reshape(tl.join(tl.join(v0, v2), tl.join(v1, v3)), (BLOCK, VALUES))  # v0 v1 v2 v3
    else:
        values = tl.join(v0, v1)
    # converted after the join: adjacent values pack two per instruction, with no byte permutes
    values = _finish(values, mean, std, KIND, AFFINE, out_ptr)
    start = (pid * BLOCK - lead) * VALUES - shift  # output index of this program's first value
    local = tl.arange(0, BLOCK)[:, None] * VALUES + tl.arange(0, VALUES)[None, :]
    if (start >= 0) & (start + BLOCK * VALUES <= n):  # a whole tile: no per-value bounds checks
        tl.store(out_ptr + start + local, values)  # one base address, constant offsets
    else:
        index = start + local
        tl.store(out_ptr + index, values, mask=(index >= 0) & (index < n))


@triton.jit
def _word_at(p, sub_lo, sub_hi, key0, key1):
    """Word ``p`` (int64 tensor) of the stream: one Philox block per element."""
    b = p >> 2
    lane = p & 3
    zero = tl.zeros(p.shape, tl.uint32)
    w0, w1, w2, w3 = _philox((b & 0xFFFFFFFF).to(tl.uint32), (b >> 32).to(tl.uint32),
                             _u32(zero, sub_lo), _u32(zero, sub_hi), _u32(zero, key0), _u32(zero, key1))
    return tl.where(lane == 0, w0, tl.where(lane == 1, w1, tl.where(lane == 2, w2, w3)))


@triton.jit(do_not_specialize=_STREAM_WORDS)
def _philox_group_kernel(out_ptr, n, first_lo, first_hi, lead, shift, sub_lo, sub_hi, key0, key1,
                         mean: tl.float64, std: tl.float64,
                         KIND: tl.constexpr, BLOCK: tl.constexpr, MATH: tl.constexpr,
                         AFFINE: tl.constexpr):
    """Pair kinds from any start word: group g uses words offset + W·g + [0, W), where offset is
    the 64-bit first word (``lead`` and ``shift`` are unused: the block kernel's signature, one
    launcher)."""
    offset = _u64(first_lo, first_hi)
    g = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    if KIND == 2:
        p = offset + 2 * g
        z0, z1 = _box_muller32(_word_at(p, sub_lo, sub_hi, key0, key1),
                               _word_at(p + 1, sub_lo, sub_hi, key0, key1), MATH,
                               out_ptr.dtype.element_ty != tl.float32)
        z0 = _finish(z0, mean, std, KIND, AFFINE, out_ptr)
        z1 = _finish(z1, mean, std, KIND, AFFINE, out_ptr)
        tl.store(out_ptr + 2 * g, z0, mask=2 * g < n)
        tl.store(out_ptr + 2 * g + 1, z1, mask=2 * g + 1 < n)
    elif KIND == 3:
        p = offset + 2 * g
        u = _uniform64(_word_at(p, sub_lo, sub_hi, key0, key1), _word_at(p + 1, sub_lo, sub_hi, key0, key1))
        tl.store(out_ptr + g, _finish(u, mean, std, KIND, AFFINE, out_ptr), mask=g < n)
    else:  # KIND == 4
        p = offset + 4 * g
        u = _uniform64(_word_at(p, sub_lo, sub_hi, key0, key1), _word_at(p + 1, sub_lo, sub_hi, key0, key1))
        v = _uniform64(_word_at(p + 2, sub_lo, sub_hi, key0, key1),
                       _word_at(p + 3, sub_lo, sub_hi, key0, key1))
        z0, z1 = _box_muller64(u, v)
        tl.store(out_ptr + 2 * g, _finish(z0, mean, std, KIND, AFFINE, out_ptr), mask=2 * g < n)
        tl.store(out_ptr + 2 * g + 1, _finish(z1, mean, std, KIND, AFFINE, out_ptr), mask=2 * g + 1 < n)


def launch_bijection(counter, key, out, block: int = 256) -> None:
    n = counter.shape[0]
    _philox_bijection_kernel[(cdiv(n, block),)](counter, key, out, n, BLOCK=block)


_block_launch = Launcher(_philox_block_kernel)
_group_launch = Launcher(_philox_group_kernel)


def launch_stream(out, kind: int, seed: int, subsequence: int, offset: int, mean: float, std: float,
                  config: PhiloxConfig) -> None:
    """Fill contiguous 1-D ``out`` (n values) from stream word ``offset``."""
    n = out.numel()
    words_per_group, values = WORDS_PER_GROUP[kind], VALUES_PER_GROUP[kind]
    aligned = kind in (0, 1, 5) or (kind in (2, 3) and offset % 2 == 0) or (kind == 4 and offset % 4 == 0)
    if aligned:  # whole Philox blocks from block offset // 4, the first `shift` values dropped
        shift = offset % 4 // words_per_group * values
        blocks = cdiv(n + shift, 4 // words_per_group * values)
        lead = offset // 4 % config.block  # programs start at multiples of config.block
        launch, start = _block_launch, offset // 4 - lead
        programs = cdiv(lead + blocks, config.block)
    else:
        shift = lead = 0
        launch, start = _group_launch, offset
        programs = cdiv(cdiv(n, values), config.block)
    launch((programs,), (out, n, *words(start), lead, shift, *words(subsequence), *words(seed),
                         float(mean), float(std)),
           {"KIND": kind, "BLOCK": config.block, "MATH": math_mode(out), "AFFINE": (mean, std) != (0.0, 1.0)},
           config.num_warps, 3)


def stream_kind(distribution: str, dtype: torch.dtype) -> int:
    """The KIND of a draw (see the module docstring)."""
    if distribution == "normal":
        return {torch.float64: 4, torch.bfloat16: 5}.get(dtype, 2)
    return {"bits": 0, "uniform": 3 if dtype == torch.float64 else 1}[distribution]


def representative_launch(op: str, config: PhiloxConfig, dtype: str, num_sms: int) -> None:
    """The launch a draw of 2^20 values from offset 0 makes (for pack builds, under capture())."""
    out = torch.empty(1 << 20, dtype=TORCH_DTYPES[dtype])
    launch_stream(out, stream_kind(op.split("_", 1)[1], out.dtype), 0, 0, 0, 0.0, 1.0, config)


# Poisson: a fixed word budget per value keeps offsets predictable (counter-based, any order).
POISSON_SMALL_LAMBDA = 16.0  # below: inversion, one word; at or above: PTRS, two words an attempt
POISSON_ATTEMPTS = 8  # PTRS accepts > 90 % of attempts for λ ≥ 10: all eight fail with p < 1e-8
def poisson_search_terms(lam: float) -> int:
    """Inversion terms to scan: a power of two ≥ λ + 12√λ + 12, beyond which P(k) < 1e-30 for λ < 16."""
    need = lam + 12 * lam**0.5 + 12
    return 32 if need <= 32 else (64 if need <= 64 else 128)


@triton.jit
def _log_factorial(k):
    """log k! for a non-negative float tensor: exact table below 10, Stirling's series above."""
    table = tl.where(k < 1.5, 0.0, tl.where(k < 2.5, 0.6931471805599453, tl.where(
        k < 3.5, 1.791759469228055, tl.where(k < 4.5, 3.1780538303479458, tl.where(
            k < 5.5, 4.787491742782046, tl.where(k < 6.5, 6.579251212010101, tl.where(
                k < 7.5, 8.525161361065415, tl.where(k < 8.5, 10.60460290274525, 12.801827480081469))))))))
    x = k + 1.0
    stirling = ((x - 0.5) * tl.log(x) - x + 0.9189385332046728 + 1.0 / (12.0 * x)
                - 1.0 / (360.0 * x * x * x) + 1.0 / (1260.0 * x * x * x * x * x))
    return tl.where(k < 9.5, table, stirling)


@triton.jit(do_not_specialize=["first_lo", "first_hi", "sub_lo", "sub_hi", "key0", "key1"])
def _philox_poisson_kernel(out_ptr, n, first_lo, first_hi, sub_lo, sub_hi, key0, key1, lam: tl.float64,
                           LARGE: tl.constexpr, ATTEMPTS: tl.constexpr, SEARCH: tl.constexpr,
                           BLOCK: tl.constexpr):
    offset = _u64(first_lo, first_hi)
    j = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    two32 = tl.full((BLOCK,), 2.3283064365386963e-10, tl.float64)  # 2⁻³²
    lam_v = tl.zeros((BLOCK,), tl.float64) + lam
    if LARGE:
        base = offset + j * (2 * ATTEMPTS)
        slam = tl.sqrt(lam_v)
        loglam = tl.log(lam_v)
        b = 0.931 + 2.53 * slam
        a = -0.059 + 0.02483 * b
        inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
        vr = 0.9277 - 3.6224 / (b - 2.0)
        result = tl.floor(lam_v + 0.5)  # used only if every attempt is rejected (p < 1e-8)
        done = tl.zeros((BLOCK,), tl.int1)
        for t in range(ATTEMPTS):
            u = (_word_at(base + 2 * t, sub_lo, sub_hi, key0, key1).to(tl.float64) + 0.5) * two32 - 0.5
            v = (_word_at(base + 2 * t + 1, sub_lo, sub_hi, key0, key1).to(tl.float64) + 0.5) * two32
            us = 0.5 - tl.abs(u)
            k = tl.floor((2.0 * a / us + b) * u + lam_v + 0.43)
            quick = (us >= 0.07) & (v <= vr)
            possible = (k >= 0) & ~((us < 0.013) & (v > us))
            log_accept = tl.log(v) + tl.log(inv_alpha) - tl.log(a / (us * us) + b)
            log_pmf = -lam_v + k * loglam - _log_factorial(tl.maximum(k, 0.0))
            accept = quick | (possible & (log_accept <= log_pmf))
            take = accept & ~done
            result = tl.where(take, k, result)
            done = done | accept
        value = result
    else:
        u = (_word_at(offset + j, sub_lo, sub_hi, key0, key1).to(tl.float64) + 0.5) * two32
        p = tl.exp(-lam_v)
        cdf = p
        k = tl.zeros((BLOCK,), tl.float64)
        for i in range(1, SEARCH):
            k = tl.where(u > cdf, i * 1.0, k)
            p = p * lam_v / i
            cdf = cdf + p
        value = k
    tl.store(out_ptr + j, value.to(out_ptr.dtype.element_ty), mask=j < n)


_poisson_launch = Launcher(_philox_poisson_kernel)


def launch_poisson(out, lam: float, seed: int, subsequence: int, offset: int, block: int = 1024) -> int:
    """Fill contiguous 1-D ``out`` with Poisson(λ) values; returns the words consumed."""
    n = out.numel()
    large = lam >= POISSON_SMALL_LAMBDA
    _poisson_launch((cdiv(n, block),),
                    (out, n, *words(offset), *words(subsequence), *words(seed), float(lam)),
                    {"LARGE": large, "ATTEMPTS": POISSON_ATTEMPTS, "SEARCH": poisson_search_terms(lam),
                     "BLOCK": block}, 8, 3)
    return n * (2 * POISSON_ATTEMPTS if large else 1)
