"""Weight-only quantization (W4A16, W8A16): quantize a weight once, multiply 16-bit activations by it.

``quantize_weight(w, bits=4, group_size=128, symmetric=True)`` takes the (K, N) weight of
``y = x @ w`` (an ``nn.Linear`` weight is ``w.t()``) and returns a :class:`QuantizedWeight`:

- ``codes``: uint8 (no sign: codes run 0 … 2^bits − 1). 8 bits: (K, N), code row k = weight
  row k. 4 bits: (K / 2, N), two codes a byte, interleaved in runs of 32 weight rows (16 code
  rows): byte 4q + 2h + t of a run (q = 0 … 3, h and t 0 or 1) holds, in its low nibble, weight
  row 16t + 2q + h of the run and, in its high nibble, row 16t + 2q + h + 8 (:func:`pack_nibbles`,
  :func:`unpack_nibbles`). That order puts the eight codes a Hopper warpgroup MMA lane needs from a
  column's 32 rows into one 32-bit word, whose nibbles s and s + 4 (s = 0 … 3) are one operand
  register's two rows: the Gluon decode kernel turns a word into four registers with three shifts,
  four LOP3 and four packed subtractions (8 weights), instead of a byte load, a multiply, a LOP3
  and a subtraction per byte (W4A16 8192² M = 16 14.8 → 13.1–13.4 µs on the H200,
  ``benchmarks/results/wq-runs-h200-c35f0f3/``). 4-bit codes saved before that layout (byte j:
  rows 2j and 2j + 1) must be re-packed: ``pack_nibbles`` of their unpacked (K, N) codes. 8-bit codes
  are stored row-major (columns contiguous, as the decode kernel reads them in words of four
  columns); 4-bit codes column-major (``codes.stride() == (1, K / 2)``: each column's bytes
  contiguous, as the tensor-core kernels read them). Every kernel takes either storage order;
  these are the fast ones.
- ``scales``: (K / group_size, N), in the weight's dtype (fp16/bf16; fp32 weights keep fp32).
- ``zeros``: None when symmetric (the zero point is 2^(bits − 1)), else (K / group_size, N) zero
  points in code units, same dtype as the scales.

``w[k, n] ≈ (code[k, n] − zero[k // g, n]) · scale[k // g, n]``; ``dequantize_weight`` computes
exactly that. Symmetric: scale = max|w| / (2^(bits − 1) − 1) over the group, codes round(w / scale)
+ 2^(bits − 1). Asymmetric, over the group's range widened to hold 0 (low = min(min w, 0), high
= max(max w, 0), as PyTorch's MinMaxObserver and GPTQ take it: the zero point is then a code):
scale = (high − low) / (2^bits − 1), zero = round(−low / scale). Either way the scale is rounded
up to the stored dtype first and the codes are taken against that stored scale, so every weight
is within half a step (scale / 2) of its dequantized value (codes taken against the unrounded
scale left bf16 8-bit weights up to 1.09 steps off, the scale's rounding times the code), and no
code clamps. A weight whose quantized form would dequantize past the dtype's largest value
(fp16 groups reaching 65504) is refused.
``gemm_wq(x, qweight)`` returns ``x @ dequantize_weight(qweight)`` in x's dtype, fp32 accumulation:
small and medium M on tensor cores, the codes turned into MMA operands in registers (``gemm_wq``;
4-bit codes as exact integers, every group's sum scaled once; on sm_90 symmetric 4- and 8-bit
weights and up to 32 rows also the warp-specialized Gluon kernel ``gemm_wq_ws``, codes as exact
integers), 8-bit decode on CUDA cores (``gemv_wq``), large M dequantizing the weight once into a
16-bit scratch for the float GEMM (``gemm_wq_dequant``); logic files choose, like every GEMM.
"""

from __future__ import annotations

import contextlib
import functools
import math
from dataclasses import dataclass

import torch

from tessera._core import launch
from tessera._core.device import DeviceInfo, device_info, interpreter_enabled
from tessera._core.errors import InvalidArgumentError, UnsupportedError, invalid
from tessera._core.recipes import RecipeTable
from tessera._core.validate import (
    as_tensor,
    check_bools,
    check_dtype,
    check_dtype_argument,
    check_ndim,
    check_no_internal_overlap,
    check_no_overlap,
    check_same_device,
    check_untracked_write,
    checked_out,
    extent_offsets,
    mark_written,
)
from tessera.blas import autograd, space
from tessera.blas.kernels.gemm_scaled import FAST_SUFFIX, k_major, scaled_tma_supported
from tessera.blas.kernels.gemm_wq import (
    WqDequantConfig,
    WqGemvConfig,
    code_words,
    launch_dequantize,
    launch_gemm_wq,
    reads_words,
)
from tessera.blas.kernels.gemm_wq_ws import WqWsConfig, launch_gemm_wq_ws, wq_ws_supported
from tessera.blas.kernels.gemm_ws import scaled_ws_supported
from tessera.tuning import logic

BITS = (4, 8)
GROUP_SIZES = (32, 64, 128)
ACTIVATIONS = {torch.float16: "fp16", torch.bfloat16: "bf16"}
SCALE_DTYPES = (torch.float16, torch.bfloat16, torch.float32)  # the weights quantize_weight takes


@dataclass(frozen=True)
class QuantizedWeight:
    """A (K, N) weight quantized group-wise along K (see the module docstring for the layout)."""

    codes: torch.Tensor
    scales: torch.Tensor
    zeros: torch.Tensor | None
    bits: int
    group_size: int
    shape: tuple[int, int]

    @functools.cached_property
    def words(self) -> torch.Tensor | None:
        """The codes as the decode kernel reads them (int32 words of four columns), or None when
        they cannot be viewed so; computed once per weight, not per call."""
        return code_words(self.codes)

    @property
    def symmetric(self) -> bool:
        return self.zeros is None


def quantize_weight(w: torch.Tensor, bits: int = 4, group_size: int = 128, symmetric: bool = True
                    ) -> QuantizedWeight:
    """Quantize the (K, N) weight ``w`` to ``bits`` (4 or 8) with one scale (and zero point when
    not ``symmetric``) per ``group_size`` (32, 64 or 128) rows of each column."""
    w = as_tensor("w", w)
    check_ndim("w", w, (2,))
    check_dtype("w", w, SCALE_DTYPES)
    if type(bits) is not int or bits not in BITS:
        raise UnsupportedError(f"bits={bits!r} is not supported; supported: the int 4 or 8")
    if type(group_size) is not int or group_size not in GROUP_SIZES:
        raise UnsupportedError(f"group_size={group_size!r} is not supported; "
                               "supported: the int 32, 64 or 128")
    check_bools(symmetric=symmetric)
    k, n = w.shape
    if k % group_size:
        raise invalid("w.shape[0] (K)", k, f"a multiple of group_size={group_size} (pad K with zero rows)")
    if w.device.type == "meta":
        raise UnsupportedError("w is on the meta device, which holds no values; quantize_weight needs them "
                               "(supported: a CPU or GPU tensor)")
    if not bool(torch.isfinite(w).all()):
        raise InvalidArgumentError("w holds inf or NaN; expected finite values (they have no quantized code)")
    groups = w.float().reshape(k // group_size, group_size, n)  # exact for every weight dtype
    top = 2 ** bits - 1
    if symmetric:
        half = 2 ** (bits - 1)
        scale = _stored_scale(groups.abs().amax(dim=1).double() / (half - 1), w.dtype)
        zero = torch.full_like(scale, half)
        codes = torch.clamp(torch.round(groups / scale[:, None, :]), -half, half - 1) + half
    else:
        # the range holds 0, so the zero point is a code: a group all of one sign (or constant)
        # keeps every weight within half a step (its own min … max gave codes clamped away)
        low, high = groups.amin(dim=1).clamp(max=0.0), groups.amax(dim=1).clamp(min=0.0)
        scale = _stored_scale((high.double() - low.double()) / top, w.dtype)
        zero = torch.clamp(torch.round(-low / scale), 0, top)
        codes = torch.clamp(torch.round(groups / scale[:, None, :]) + zero[:, None, :], 0, top)
    steps = (codes - zero[:, None, :]).abs().amax(dim=1)  # each group's largest |code − zero|
    if not bool(torch.isfinite((steps.double() * scale.double()).to(w.dtype)).all()):
        name = str(w.dtype).replace("torch.", "")
        raise InvalidArgumentError(
            f"w reaches too close to {name}'s largest value ({torch.finfo(w.dtype).max:g}): a code times "
            f"its group's scale rounded up to {name} would dequantize to inf; expected weights a step below "
            "it: scale w down (e.g. by 2) and the product back up")
    codes = codes.reshape(k, n).to(torch.uint8)
    if bits == 4:  # interleaved runs, stored column-major (see the module docstring)
        codes = pack_nibbles(codes).t().contiguous().t()
    else:
        codes = codes.contiguous()
    stored = w.dtype
    return QuantizedWeight(codes, scale.to(stored).contiguous(),
                           None if symmetric else zero.to(stored).contiguous(), bits, group_size, (k, n))


def _stored_scale(scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The float64 ``scale`` (0 for an all-zero group: 1 instead) rounded up to ``dtype``, as
    float32 (which holds it exactly): codes taken against it fit the code range unclamped and
    dequantize with the scale that is stored. The next value up is the bit pattern plus one (the
    scales are positive), not ``torch.nextafter``, whose CUDA kernel took fp16 only lately."""
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    rounded = scale.to(dtype)
    above = (rounded.view(torch.int16 if dtype.itemsize == 2 else torch.int32) + 1).view(dtype)
    return torch.where(rounded.double() < scale, above, rounded).float()


NIBBLE_RUN = 32  # weight rows a run of interleaved 4-bit codes holds (16 code rows)


def _run_order(device: torch.device) -> torch.Tensor:
    """The weight row (within a run) of each nibble of a run's 16 code rows, in nibble order
    (byte 4q + 2h + t: low nibble row 16t + 2q + h, high nibble that + 8)."""
    byte = torch.arange(NIBBLE_RUN // 2, device=device)
    q, h, t = byte // 4, (byte // 2) % 2, byte % 2
    low = 16 * t + 2 * q + h
    return torch.stack((low, low + 8), dim=1).reshape(-1)


def pack_nibbles(codes: torch.Tensor) -> torch.Tensor:
    """(K, N) 4-bit codes (uint8, values 0 … 15; K a multiple of 32) as (K / 2, N) bytes in the
    interleaved order of the module docstring (row-major; ``quantize_weight`` stores the transpose
    contiguous)."""
    k, n = codes.shape
    runs = codes.reshape(k // NIBBLE_RUN, NIBBLE_RUN, n)[:, _run_order(codes.device)]
    pairs = runs.reshape(k // 2, 2, n)
    return pairs[:, 0] | (pairs[:, 1] << 4)


def unpack_nibbles(packed: torch.Tensor) -> torch.Tensor:
    """The inverse of :func:`pack_nibbles`: (K / 2, N) bytes as (K, N) codes."""
    half, n = packed.shape
    nibbles = torch.stack((packed & 0xF, packed >> 4), dim=1).reshape(half // 16, NIBBLE_RUN, n)
    codes = torch.empty_like(nibbles)
    codes[:, _run_order(packed.device)] = nibbles
    return codes.reshape(2 * half, n)


def _codes(q: QuantizedWeight) -> torch.Tensor:
    """The (K, N) codes as float32."""
    if q.bits == 8:
        return q.codes.float()
    return unpack_nibbles(q.codes).float()


def dequantize_weight(q: QuantizedWeight, dtype: torch.dtype | None = None) -> torch.Tensor:
    """The (K, N) weight the quantized one stands for, (code − zero) · scale, rounded to ``dtype``
    (default: the scales' dtype; float32 or float64 hold it exactly)."""
    q = _check_quantized(q)
    if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise invalid("dtype", repr(dtype), "None or a floating-point torch.dtype")
    zero = q.zeros.float() if q.zeros is not None else torch.full_like(q.scales, 2 ** (q.bits - 1),
                                                                          dtype=torch.float32)
    per_row = torch.repeat_interleave
    w = (_codes(q) - per_row(zero, q.group_size, dim=0)) * per_row(q.scales.float(), q.group_size, dim=0)
    return w.to(dtype or q.scales.dtype)


def _check_quantized(q: object) -> QuantizedWeight:
    """``q`` as ``quantize_weight`` makes them (a weight built by hand, e.g. from a checkpoint,
    must match it): int bits 4 or 8, an int group size 32/64/128 dividing K, a (K, N) shape of
    ints, uint8 codes, float16/bfloat16/float32 scales and zero points of one dtype and strides,
    each tensor of its shape."""
    if not isinstance(q, QuantizedWeight):
        raise invalid("qweight", type(q).__name__, "a QuantizedWeight from tessera.blas.quantize_weight")
    shape_ok = (isinstance(q.shape, tuple) and len(q.shape) == 2
                and all(type(d) is int and d >= 0 for d in q.shape))
    if (type(q.bits) is not int or q.bits not in BITS or type(q.group_size) is not int
            or q.group_size not in GROUP_SIZES or not shape_ok or q.shape[0] % q.group_size):
        raise invalid("qweight", f"bits={q.bits!r}, group_size={q.group_size!r}, shape={q.shape!r}",
                      "int bits 4 or 8, an int group_size 32/64/128 dividing K, shape a (K, N) tuple of "
                      "ints (as quantize_weight makes them)")
    k, n = q.shape
    rows = k // 2 if q.bits == 4 else k
    expected = {"codes": (rows, n), "scales": (k // q.group_size, n)}
    if q.zeros is not None:
        expected["zeros"] = (k // q.group_size, n)
    for name, shape in expected.items():
        t = getattr(q, name)
        if not isinstance(t, torch.Tensor):
            raise invalid(f"qweight.{name}", type(t).__name__, "a torch.Tensor")
        if tuple(t.shape) != shape:
            raise invalid(f"qweight.{name}.shape", tuple(t.shape), f"{shape} for a {k}x{n} weight")
    if q.codes.dtype != torch.uint8:
        raise invalid("qweight.codes.dtype", q.codes.dtype, "torch.uint8")
    if q.scales.dtype not in SCALE_DTYPES:
        raise invalid("qweight.scales.dtype", q.scales.dtype, "float16, bfloat16 or float32")
    if q.zeros is not None and q.zeros.dtype != q.scales.dtype:
        raise invalid("qweight.zeros.dtype", q.zeros.dtype, f"the scales' {q.scales.dtype}")
    if q.zeros is not None and q.zeros.stride() != q.scales.stride():
        raise invalid("qweight.zeros.stride()", q.zeros.stride(), f"the scales' {q.scales.stride()}")
    return q


@dataclass(frozen=True)
class _WqRecipe:
    """A fused ``gemm_wq`` call's launches, replayable on new operands of the same signature (those
    of :func:`_main_operands`): the main launch, then the slice sum when K was split (its
    partials in a kept scratch buffer)."""

    out_shape: tuple[int, ...]
    m: int
    k: int
    n: int
    words: bool  # the main launch reads the codes as int32 words (the decode family, byte planes)
    replays: tuple[launch.Replay, ...]
    extents: tuple[tuple[int, int], ...] | None  # calls with out: out's and the read tensors' byte ranges

    def run(self, x: torch.Tensor, q: QuantizedWeight, out: torch.Tensor | None = None) -> torch.Tensor:
        """The call on new operands of its signature, into ``out`` (its layout in the signature:
        checked against autograd and what the call reads, its version bumped after) or a new
        tensor."""
        d = (torch.empty(self.out_shape, dtype=x.dtype, device=x.device) if out is None
             else checked_out(out, self.extents, _read_tensors(x, q)))
        operands = _main_operands(x.reshape(self.m, self.k), q, self.words, d.view(self.m, self.n))
        for replay in self.replays:
            replay(operands)
        if out is not None:
            mark_written(out)
        return d


# Repeat calls of a fused family (same shapes, strides, dtypes, devices and 16-byte alignment of x,
# of the weight's tensors and of ``out`` when given) skip validation and selection and replay the
# first call's launches, as repeat ``gemm`` calls do (api._RECIPES): a decode step is host-bound
# eagerly. A call with ``out`` still checks per call that out shares no element with what it reads
# (from data pointers and the first call's byte ranges) and that autograd does not track out.
_RECIPES: RecipeTable[_WqRecipe] = RecipeTable(512)


def _well_typed(q: object) -> bool:
    """Whether ``q`` is a QuantizedWeight whose fields have the types a recipe's key is made of
    (the rest is :func:`_check_quantized`'s, on a first call)."""
    return (type(q) is QuantizedWeight and type(q.shape) is tuple
            and all(type(t) is torch.Tensor for t in (q.codes, q.scales))
            and (q.zeros is None or type(q.zeros) is torch.Tensor))


def _signature(x: torch.Tensor, q: QuantizedWeight, out: torch.Tensor | None) -> tuple:
    tensors = (x, q.codes, q.scales) if q.zeros is None else (x, q.codes, q.scales, q.zeros)
    return (*map(launch.layout_key, tensors), q.zeros is None, q.bits, q.group_size, q.shape,
            space.forced.config, logic.generation(), launch.layout_key(out))


def _read_tensors(x: torch.Tensor, q: QuantizedWeight) -> dict[str, torch.Tensor]:
    """What a call reads, by the names its overlap check reports (the codes' int32 words are a
    view of the codes)."""
    reads = {"x": x, "qweight.codes": q.codes, "qweight.scales": q.scales}
    if q.zeros is not None:
        reads["qweight.zeros"] = q.zeros
    return reads


# fp8/int8 ``gemm`` calls without ``out`` keep a recipe too (api.gemm looks it up) when their
# launches replay (operands read as they are, no K-major copy): besides the operands' layouts,
# the scales' and the bias's, and which of those share memory (a launch argument maps to one
# operand only), are part of the signature.
@dataclass(frozen=True)
class _ScaledRecipe:
    """A quantized-input GEMM's output and launches, repeatable on new operands of its signature."""

    out_shape: tuple[int, ...]
    out_dtype: torch.dtype
    replays: tuple[launch.Replay, ...]
    extents: tuple[tuple[int, int], ...] | None  # calls with out: out's and the read tensors' byte ranges

    def run(self, a: torch.Tensor, b: torch.Tensor, trans_a: bool, trans_b: bool,
            extras: tuple[torch.Tensor | None, ...], out: torch.Tensor | None = None) -> torch.Tensor:
        """The call on new operands of its signature, into ``out`` (its layout in the signature:
        checked against autograd and what the call reads, its version bumped after) or a new
        tensor."""
        d = (torch.empty(self.out_shape, dtype=self.out_dtype, device=a.device) if out is None
             else checked_out(out, self.extents, scaled_reads(a, b, *extras)))
        operands = (a.t() if trans_a else a, b.t() if trans_b else b, d, *_distinct(extras))
        for replay in self.replays:
            replay(operands)
        if out is not None:
            mark_written(out)
        return d


SCALED_RECIPES: RecipeTable[_ScaledRecipe] = RecipeTable(512)


def _distinct(tensors: tuple[torch.Tensor | None, ...]) -> tuple[torch.Tensor, ...]:
    """The given tensors (None left out) without repeats of the same memory, in order."""
    kept: dict[int, torch.Tensor] = {}
    for t in tensors:
        if t is not None:
            kept.setdefault(t.data_ptr(), t)
    return tuple(kept.values())


def scaled_signature(a: torch.Tensor, b: torch.Tensor, trans_a: bool, trans_b: bool,
                     out_dtype: torch.dtype | None, scale_a: torch.Tensor | None,
                     scale_b: torch.Tensor | None, bias: torch.Tensor | None, fast_accum: bool,
                     out: torch.Tensor | None) -> tuple:
    """Everything a quantized-input ``gemm`` call's validation, selection and launches depend on
    (out last: None, or its layout)."""
    extras = (scale_a, scale_b, bias)
    shared = tuple(None if t is None else next(i for i, u in enumerate(extras) if u is not None
                                               and u.data_ptr() == t.data_ptr()) for t in extras)
    return (*map(launch.layout_key, (a, b, *extras)), trans_a, trans_b, out_dtype, fast_accum, shared,
            space.forced.config, logic.generation(), launch.layout_key(out))


def scaled_reads(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor | None, scale_b: torch.Tensor | None,
                 bias: torch.Tensor | None) -> dict[str, torch.Tensor]:
    """What a quantized-input GEMM reads, by the names its overlap check with ``out`` reports."""
    reads = {"a": a, "b": b}
    for name, t in (("scale_a", scale_a), ("scale_b", scale_b), ("bias", bias)):
        if t is not None:
            reads[name] = t
    return reads


def remember_scaled(signature: tuple, calls: list[launch.Call], a: torch.Tensor, b: torch.Tensor,
                    d: torch.Tensor, extras: tuple[torch.Tensor | None, ...], given_out: bool) -> None:
    """Store the recipe of a first call (``a``, ``b`` as launched, the scales and bias as passed
    to the launch, ``d`` the output: the caller's ``out`` when ``given_out``) whose recorded
    launches can all be replayed."""
    replays = launch.Replay.each_of(calls, (a, b, d, *_distinct(extras)))
    if replays is None:
        return
    extents = tuple(map(extent_offsets, (d, *scaled_reads(a, b, *extras).values()))) if given_out else None
    SCALED_RECIPES.put(signature, _ScaledRecipe(tuple(d.shape), d.dtype, replays, extents))


def _main_operands(x2: torch.Tensor, q: QuantizedWeight, words: bool, y: torch.Tensor) -> tuple:
    """The tensors a fused family's launches take: x, the codes (as int32 words for the decode
    family and byte planes), scales, zero points when asymmetric, and y."""
    zeros = () if q.zeros is None else (q.zeros,)
    return (x2, q.words if words else q.codes, q.scales, *zeros, y)


def _remember(signature: tuple, calls: list[launch.Call], x2: torch.Tensor, q: QuantizedWeight,
              y: torch.Tensor, words: bool, out_shape: tuple[int, ...],
              reads: dict[str, torch.Tensor] | None) -> None:
    """Store the recipe of a first call whose recorded launches can all be replayed (``reads``:
    what it read, for a call given ``out``; y is out's view)."""
    replays = launch.Replay.each_of(calls, _main_operands(x2, q, words, y))
    if replays is None:
        return
    m, n = y.shape
    extents = None if reads is None else tuple(map(extent_offsets, (y, *reads.values())))
    _RECIPES.put(signature, _WqRecipe(out_shape, m, x2.shape[1], n, words, replays, extents))


def wq_ws_ok(x2: torch.Tensor, q: QuantizedWeight, device: DeviceInfo) -> bool:
    """Whether the warp-specialized Gluon family (``gemm_wq_ws``) takes ``x2 @ q`` on ``device``:
    an sm_90 GPU (not the interpreter) and the operands as :func:`wq_ws_supported` wants them."""
    return (space.ws_capable(device) and not interpreter_enabled()
            and wq_ws_supported(x2, q.codes, q.scales, q.zeros, q.bits, q.group_size))


def scaled_fits(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, scaled: bool, fast_accum: bool,
                device: DeviceInfo) -> tuple[bool, bool]:
    """(``tma_ok``, ``ws_ok``) of a quantized-input GEMM's :class:`space.MnkProblem`: whether the
    descriptor family and the warp-specialized one (scaled fp8 with fast accumulation, sm_90)
    take ``a``, ``b`` (after ``k_major``) and ``d`` on ``device``."""
    tma_ok = space.descriptors_run(device) and scaled_tma_supported(a, b, d)
    return tma_ok, tma_ok and scaled and space.ws_capable(device) and scaled_ws_supported(a, b, d, fast_accum)


def gemm_wq(x: torch.Tensor, qweight: QuantizedWeight, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ dequantize_weight(qweight)`` for fp16/bf16 ``x`` of shape (…, K): (…, N) in x's dtype.
    8-bit weights with bf16 activations on the plain tensor-core tile (not as byte planes, not
    exact bytes, not ``gemm_wq_ws``), and the large-M path, round each dequantized weight to x's
    dtype (as ``dequantize_weight`` rounds to the scales' dtype); the other paths use the exact
    dequantized weight (the sum of x·(code − zero) exact, scaled once per group in fp32)."""
    if autograd.wants_grad(x):
        return autograd.gemm_wq(x, _check_quantized(qweight), out)
    signature = None
    if type(x) is torch.Tensor and _well_typed(qweight) and (out is None or type(out) is torch.Tensor):
        signature = _signature(x, qweight, out)
        recipe = _RECIPES.get(signature)
        if recipe is not None:  # validated and selected before for exactly this signature
            return recipe.run(x, qweight, out)
    x = as_tensor("x", x)
    q = _check_quantized(qweight)
    check_dtype("x", x, tuple(ACTIVATIONS))
    k, n = q.shape
    if x.dim() < 1 or x.shape[-1] != k:
        raise InvalidArgumentError(f"x has shape {tuple(x.shape)}; expected (…, {k}) for a {k}x{n} weight")
    lead = tuple(x.shape[:-1])
    m = math.prod(lead)
    x2 = x.reshape(m, k)
    given_out = out is not None
    if out is None:
        out = torch.empty((*lead, n), dtype=x.dtype, device=x.device)
    elif tuple(out.shape) != (*lead, n) or out.dtype != x.dtype:
        raise invalid("out", f"{tuple(out.shape)} {out.dtype}", f"{(*lead, n)} {x.dtype}")
    else:
        check_untracked_write("out", out)
    reads = _read_tensors(x, q)
    check_same_device({**reads, "out": out})
    if given_out:
        check_no_overlap("out", out, reads)
    if out.numel() == 0:
        return out
    if k == 0:
        return out.zero_()
    if not out.is_contiguous():
        raise invalid("out", f"strides {out.stride()}", "a contiguous tensor")
    y2 = out.view(m, n)
    info = device_info(x.device)
    dtype = f"int{q.bits}_{ACTIVATIONS[x.dtype]}"
    config = space.select_mnk("gemm_wq", space.MnkProblem(m, n, k, dtype, ws_ok=wq_ws_ok(x2, q, info)),
                              info).config
    if isinstance(config, WqGemvConfig) and q.words is None:  # N not a multiple of 4 …
        config = space.WQ_FALLBACK
    if isinstance(config, WqDequantConfig):
        from tessera.blas.api import gemm  # api imports this module

        weight = torch.empty((k, n), dtype=x.dtype, device=x.device)
        launch_dequantize(q.codes, q.scales, q.zeros, weight, q.bits, q.group_size, config)
        gemm(x2, weight, out=y2)
    else:
        with launch.recording() if signature is not None else contextlib.nullcontext([]) as calls:
            if isinstance(config, WqWsConfig):
                launch_gemm_wq_ws(x2, q.codes, q.scales, q.bits, q.group_size, y2, config)
            else:
                launch_gemm_wq(x2, q.codes, q.scales, q.zeros, y2, k, q.bits, q.group_size,
                               upcast=interpreter_enabled(), config=config, words=q.words)
        if signature is not None:
            words = reads_words(config, q.bits) and q.words is not None
            _remember(signature, calls, x2, q, y2, words, tuple(out.shape), reads if given_out else None)
    if given_out:
        mark_written(out)
    return out


# ---------------------------------------------------------------------------------------------
# fp8 / int8 operands with scales (reached through tessera.blas.gemm)

QUANTIZED_INPUTS = {torch.int8: "int8", torch.float8_e4m3fn: "fp8e4m3", torch.float8_e5m2: "fp8e5m2"}
_SCALED_OUT = (torch.bfloat16, torch.float16, torch.float32)


def _scale(name: str, scale: object, length: int, per: str, device: torch.device) -> torch.Tensor:
    """A float32 scale as a 1-D tensor: one element (per tensor) or ``length`` (per {per})."""
    t = as_tensor(name, scale)
    if t.dtype != torch.float32:
        raise invalid(f"{name}.dtype", t.dtype, "torch.float32")
    if t.numel() == 1 and t.dim() <= 2:
        return t.reshape(1)
    wanted = {(length,), (length, 1)} if per == "row" else {(length,), (1, length)}
    if tuple(t.shape) not in wanted:
        raise invalid(f"{name}.shape", tuple(t.shape),
                      f"one element (per tensor) or {' or '.join(map(str, sorted(wanted)))} (per {per})")
    if t.device != device:
        raise invalid(f"{name}.device", t.device, f"the operands' {device}")
    return t.reshape(length)


def plan_scaled(a: torch.Tensor, b: torch.Tensor, scale_a: object, scale_b: object, bias: object,
                out_dtype: torch.dtype | None, out: torch.Tensor | None, fast_accum: bool, allocate: bool
                ) -> tuple[torch.Tensor, tuple | None]:
    """Validate a quantized-input GEMM (2-D ``a`` (M, K) and ``b`` (K, N), already transposed as
    asked) and choose its kernel: (out, launch arguments or None when nothing must launch)."""
    key = QUANTIZED_INPUTS[a.dtype]
    check_dtype_argument("out_dtype", out_dtype, none_ok=True)
    if b.dtype != a.dtype:
        raise UnsupportedError(f"a is {a.dtype} but b is {b.dtype}; quantized GEMM takes two operands of "
                               "one dtype: int8, float8_e4m3fn or float8_e5m2")
    if a.dim() != 2 or b.dim() != 2:
        raise UnsupportedError("fp8/int8 GEMM takes 2-D operands (no batch yet); loop over the batch")
    m, k = a.shape
    n = b.shape[1]
    scaled = scale_a is not None or scale_b is not None
    if scaled and (scale_a is None or scale_b is None):
        raise invalid("scale_a/scale_b", "only one given", "both (float32; per tensor, per row of A, per "
                      "column of B) or, for int8, neither")
    if not scaled and key != "int8":
        raise invalid("scale_a/scale_b", None, "float32 scales for fp8 operands (1.0 for unscaled)")
    if not scaled:
        if out_dtype not in (None, torch.int32):
            raise UnsupportedError(f"out_dtype {out_dtype} for unscaled int8; supported: torch.int32 "
                                   "(exact), or pass scales for a float result")
        if bias is not None:
            raise invalid("bias", "a tensor", "None for the exact int32 product (pass scales to add a bias)")
        out_dtype = torch.int32
    else:
        out_dtype = out_dtype if out_dtype is not None else torch.bfloat16
        if out_dtype not in _SCALED_OUT:
            raise UnsupportedError(f"out_dtype {out_dtype} for scaled {key}; supported: bfloat16, float16, "
                                   "float32")
    device = check_same_device({"a": a, "b": b} if out is None else {"a": a, "b": b, "out": out})
    sa = _scale("scale_a", scale_a, m, "row", device) if scaled else None
    sb = _scale("scale_b", scale_b, n, "column", device) if scaled else None
    bias_t = None
    if bias is not None:
        bias_t = as_tensor("bias", bias)
        if tuple(bias_t.shape) != (n,) or bias_t.dtype not in (*_SCALED_OUT,) or bias_t.device != device:
            raise invalid("bias", f"{tuple(bias_t.shape)} {bias_t.dtype} on {bias_t.device}",
                          f"({n},) bfloat16/float16/float32 on {device}")
    if out is None:
        out = (torch.empty((m, n), dtype=out_dtype, device=device) if allocate
               else torch.empty((m, n), dtype=out_dtype, device="meta"))
    else:
        if tuple(out.shape) != (m, n) or out.dtype != out_dtype:
            raise invalid("out", f"{tuple(out.shape)} {out.dtype}", f"({m}, {n}) {out_dtype}")
        check_no_internal_overlap("out", out)
        check_no_overlap("out", out, scaled_reads(a, b, sa, sb, bias_t))
    if out.numel() == 0:
        return out, None
    if k == 0:
        if allocate:
            out.zero_()
            if bias_t is not None:
                out.copy_(bias_t.to(out.dtype).expand(m, n))
        return out, None
    key = key + FAST_SUFFIX if fast_accum else key
    info = device_info(device)
    tma_ok, ws_ok = scaled_fits(*k_major(a, b, materialize=False), out, scaled, fast_accum, info)
    choice = space.select_mnk("gemm_scaled", space.MnkProblem(m, n, k, key, tma_ok, ws_ok), info)
    return out, (a, b, sa, sb, bias_t, choice, info.multiprocessors or 0)
