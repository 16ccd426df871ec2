"""Public BLAS-style functions: validate → allocate → pick a kernel → launch.

Every check happens before any launch, so bad input raises a :class:`TesseraError` subclass and
leaves ``out`` untouched.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import torch

from tessera._core import launch, log
from tessera._core.device import (
    BF16_PRODUCT_KEYS,
    FP32_PRECISIONS,
    TF32_KEYS,
    DeviceInfo,
    device_info,
    dtype_key,
    interpreter_enabled,
    torch_matmul_tf32,
)
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
    needs_int64_index,
    real_scalar,
)
from tessera.blas import autograd, emulated, repeat, space
from tessera.blas.emulated import EmulatedConfig
from tessera.blas.kernels.copy import column_major_copy, row_major_copy
from tessera.blas.kernels.gemm_fma import FmaConfig, fma_supported, launch_gemm_fma
from tessera.blas.kernels.gemm_scaled import launch_gemm_scaled
from tessera.blas.kernels.gemm_splitk import SplitKConfig, launch_gemm_splitk
from tessera.blas.kernels.gemm_streamk import StreamKConfig, launch_gemm_streamk
from tessera.blas.kernels.gemm_tile import TileConfig, launch_gemm_tile
from tessera.blas.kernels.gemm_tma import is_col_major, launch_gemm_tma, tma_supported
from tessera.blas.kernels.gemm_ws import WsConfig, launch_gemm_ws, swaps, ws_supported
from tessera.blas.quantized import (
    QUANTIZED_INPUTS,
    SCALED_RECIPES,
    plan_scaled,
    remember_scaled,
    scaled_signature,
)
from tessera.tuning import logic

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

# Output dtypes each input dtype may produce: the same, or wider.
_OUT_DTYPES: dict[torch.dtype, tuple[torch.dtype, ...]] = {
    torch.float16: (torch.float16, torch.float32),
    torch.bfloat16: (torch.bfloat16, torch.float32),
    torch.float32: (torch.float32,),
    torch.float64: (torch.float64,),
}


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _layout_kept(t: torch.Tensor) -> bool:
    """Whether the kernels read ``t`` as it is: row- or column-major (any leading dimension)."""
    return 1 in (t.stride(-1), t.stride(-2)) or min(t.shape[-2:]) <= 1


def _matrix_layout(name: str, t: torch.Tensor) -> torch.Tensor:
    """Keep row- or column-major matrices (any leading dimension) as views; copy anything else."""
    if _layout_kept(t):
        return t
    log.info(f"{name}: strides {tuple(t.stride())} are neither row- nor column-major; copying")
    return t.contiguous()


def _operand_layouts(op_a: torch.Tensor, op_b: torch.Tensor,
                     k_major: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """op(A) and op(B) as the kernels read them: row- or column-major, and K-major for tf32 on
    Hopper (``k_major``); copies only where a stride needs it."""
    op_a, op_b = _matrix_layout("a", op_a), _matrix_layout("b", op_b)
    return _k_major(op_a, op_b, materialize=True) if k_major else (op_a, op_b)


def _batch_of(t: torch.Tensor) -> int:
    return t.shape[0] if t.dim() == 3 else 1


def _as_2d(t: torch.Tensor) -> torch.Tensor:
    """The matrix of a 2-D view or of a batch-1 3-D view."""
    return t if t.dim() == 2 else t[0]


@dataclass(frozen=True)
class _GemmPlan:
    """Everything a launch needs, decided before anything runs. Operands are 2-D or 3-D views; one
    without the batch dimension (or with batch 1) is broadcast over ``batch``."""

    op_a: torch.Tensor
    op_b: torch.Tensor
    c: torch.Tensor | None
    d: torch.Tensor
    batch: int
    alpha: float
    beta: float
    precision: str
    problem: space.GemmProblem
    choice: space.Choice
    multiprocessors: int
    k_major: bool = False  # operands copied K-major (tf32 on Hopper); a repeat call copies again


def gemm(
    a: torch.Tensor,
    b: torch.Tensor,
    c: torch.Tensor | None = None,
    *,
    alpha: float = 1.0,
    beta: float = 0.0,
    trans_a: bool = False,
    trans_b: bool = False,
    out_dtype: torch.dtype | None = None,
    out: torch.Tensor | None = None,
    precision: str = "ieee",
    scale_a: torch.Tensor | None = None,
    scale_b: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    fast_accum: bool = False,
) -> torch.Tensor:
    """``alpha · op(A) · op(B) + beta · C`` with ``op(X) = Xᵀ`` when ``trans_x``.

    fp8 (``float8_e4m3fn``, ``float8_e5m2``) and int8 operands take float32 scales instead of
    alpha/beta/C: ``(op(A) @ op(B)) · scale_a · scale_b + bias``, a scale being one element (per
    tensor) or one per row of op(A) / column of op(B), the result bf16 (default), fp16 or fp32.
    int8 without scales gives the exact int32 product. 2-D only. ``fast_accum`` (fp8 only, as
    ``torch._scaled_mm(use_fast_accum=True)``) lets Hopper's tensor cores sum whole K blocks in
    their narrower accumulator: faster, less accurate (docs/architecture.md gives the errors).

    A and B are 2-D, or 3-D for a batch (a 2-D or batch-1 operand broadcasts over it); any strides.
    Float16/bfloat16 accumulate in float32 and may return float32 (``out_dtype``); float32 is exact
    IEEE unless ``precision="tf32"`` allows TF32 tensor cores (operands cut to 10 fraction bits:
    the tensor cores truncate them) or
    ``precision="tf32x3"`` computes each product as three TF32 ones (hi·hi + hi·lo + lo·hi of the
    split x = hi + lo: fp32's accuracy on tensor cores, but a value above the largest TF32,
    |x| > 3.4026e38, rounds to inf in the split; NVIDIA; AMD GPUs compute IEEE fp32), and
    ``precision="bf16x9"`` splits each operand exactly into three bf16 pieces and sums all nine
    products of the pieces on bf16 tensor cores (``"bf16x6"``: the six largest; both anywhere bf16
    GEMMs run; ``tessera.blas.emulated`` says what differs from IEEE and the scratch memory taken);
    float64 accumulates in float64. As in BLAS, ``beta == 0``
    never reads C (NaN in C does not leak) and ``alpha == 0`` never reads A or B. C may broadcast
    to the result's shape; ``out`` may be C itself (in-place update) but must share no element with
    A or B (interleaved with one, as the odd and even columns of a buffer, is fine).
    Returns the result (``out`` when given). With grad mode on and an operand that requires a
    gradient, the call records one (float operands; the backward products are Tessera GEMMs;
    ``tessera.blas.autograd``); ``out=`` and the fp8 / int8 GEMM are then refused.
    """
    if autograd.wants_grad(a, b, c, scale_a, scale_b, bias):
        quantized = (getattr(a, "dtype", None) in QUANTIZED_INPUTS
                     or any(t is not None for t in (scale_a, scale_b, bias)) or fast_accum is not False)
        return autograd.gemm(a, b, c, alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b,
                             out_dtype=out_dtype, out=out, precision=precision, quantized=quantized)
    signature = None
    plain = (type(a) is torch.Tensor and type(b) is torch.Tensor and type(alpha) in _REALS
             and type(beta) in _REALS and not log.modes())
    if plain and a.dtype in QUANTIZED_INPUTS:
        if (c is None and (out is None or type(out) is torch.Tensor) and alpha == 1.0 and beta == 0.0
                and fast_accum in (False, True)
                and all(t is None or type(t) is torch.Tensor for t in (scale_a, scale_b, bias))):
            signature = scaled_signature(a, b, trans_a, trans_b, out_dtype, scale_a, scale_b, bias,
                                         fast_accum, out)
            scaled_recipe = SCALED_RECIPES.get(signature)
            if scaled_recipe is not None:  # validated and selected before for exactly this signature
                return scaled_recipe.run(a, b, trans_a, trans_b, (scale_a, scale_b, bias), out)
    elif (plain and (out is None or (type(out) is torch.Tensor and precision not in BF16_PRODUCT_KEYS))
          and (c is None or (type(c) is torch.Tensor and precision not in BF16_PRODUCT_KEYS))
          and scale_a is None and scale_b is None and bias is None and fast_accum is False):
        signature = _signature(a, b, alpha, beta, trans_a, trans_b, out_dtype, precision, c, out)
        recipe = _RECIPES.get(signature, (alpha, beta))
        if recipe is not None:  # validated and selected before for exactly this signature
            return recipe.run(a, b, trans_a, trans_b, alpha, beta, out, c)
    a, b = as_tensor("a", a), as_tensor("b", b)
    given_out = out is not None  # written in place: autograd must not track it, and is told after
    if given_out:
        out = as_tensor("out", out)
        check_untracked_write("out", out)
    if a.dtype in QUANTIZED_INPUTS:
        out, scaled = _plan_quantized(a, b, c, alpha, beta, trans_a, trans_b, scale_a, scale_b, bias,
                                      out_dtype, out, fast_accum, allocate=True)
        if scaled is not None:
            op_a, op_b, sa, sb, bias_t, choice, num_sms = scaled
            with launch.recording() as calls:
                launch_gemm_scaled(op_a, op_b, sa, sb, bias_t, out, config=choice.config,
                                   fast_accum=fast_accum, num_sms=num_sms)
            if signature is not None:
                remember_scaled(signature, calls, op_a, op_b, out, (sa, sb, bias_t), given_out)
        if given_out:
            mark_written(out)
        return out
    _check_not_quantized_args(a, scale_a, scale_b, bias, fast_accum)
    with launch.recording() if signature is not None else contextlib.nullcontext([]) as copies:
        out, plan = _plan(a, b, c, alpha, beta, trans_a, trans_b, out_dtype, out, precision,
                          allocate=True)  # its only launches: the K-major copies of tf32 on Hopper
    if plan is not None and isinstance(plan.choice.config, EmulatedConfig):  # its own recipe
        recipe = emulated.run(plan.op_a, plan.op_b, plan.c, plan.d, plan.alpha, plan.beta, plan.precision,
                              remember=signature is not None)
        if recipe is not None:  # its launches take alpha in forms of their own: kept by value
            _RECIPES.put(signature, recipe, (plan.alpha, plan.beta))
    elif plan is not None and signature is None:
        _launch(plan)
    elif plan is not None:
        with launch.recording() as calls:
            _launch(plan)
        reads_c = plan.c is not None  # beta (in the signature) != 0: C is read
        reads = (a, b, c) if reads_c else (a, b)
        extents = None if signature[-1] is None else tuple(map(extent_offsets, (out, *reads)))
        given = (a.transpose(-1, -2) if trans_a else a, b.transpose(-1, -2) if trans_b else b)
        plain = all(t.data_ptr() == g.data_ptr() for t, g in zip((plan.op_a, plan.op_b), given, strict=True))
        replays = launch.Replay.each_of(calls, (plan.op_a, plan.op_b, plan.d, *([plan.c] if reads_c else [])))
        slots = repeat.scalar_slots(calls, (plan.alpha, plan.beta)) if replays is not None else ()
        copied = None if plain else _copy_replays(given, plan, copies)
        recipe = _Recipe(tuple(out.shape), out.dtype, plan.batch, plan.precision, plan.problem, plan.choice,
                         plan.multiprocessors, plan.k_major, plain, replays, extents, copied,
                         slots if slots and any(slots) else (), reads_c)
        _RECIPES.put(signature, recipe, (plan.alpha, plan.beta) if slots is None else None)
    if given_out:
        mark_written(out)
    return out


# Repeat calls (same shapes, strides, dtypes, devices, 16-byte alignment and arguments, of out too
# when given; no C; logging off) skip validation and selection: _plan's decisions depend on
# nothing else, except whether out overlaps A or B, which depends on where they are: a recipe
# keeps their byte extents relative to their data pointers and checks that per call (element by
# element, as _plan, only where the byte ranges meet). The
# key holds the forced configuration and the logic generation, so overrides and pack installs
# apply at once. The operand copies _plan makes (odd strides; tf32's K-major operands) depend on
# the strides alone, so a repeat call makes them again through the same function. Where the
# first call's launches each took only operands (and kept scratch buffers), the repeat call
# replays them with the new operands (launch.Replay): no arguments, descriptors or launch key
# are built again.
_REALS = (int, float)
_UNITS = (0, 1, -1)  # alpha's values a signature holds (any other is a launch argument)


@dataclass(frozen=True)
class _Recipe:
    """What _plan decided for one call signature, minus the tensors."""

    out_shape: tuple[int, ...]
    out_dtype: torch.dtype
    batch: int
    precision: str
    problem: space.GemmProblem
    choice: space.Choice
    multiprocessors: int
    k_major: bool  # tf32 on Hopper: operands copied K-major
    plain: bool  # op(A) and op(B) are read as they are (the first call copied neither)
    replays: tuple[launch.Replay, ...] | None  # the launches, repeatable on new operands (op(A), op(B), D)
    extents: tuple[tuple[int, int], ...] | None  # out's, A's and B's byte extents (calls with out)
    copies: _CopyReplays | None = None  # the K-major copies (k_major), repeatable on new operands
    slots: repeat.Slots = ()  # each replay's places of alpha and beta (``repeat.scalar_slots``)
    reads_c: bool = False  # C given with beta != 0: the launches read it (broadcast to the result)

    def run(self, a: torch.Tensor, b: torch.Tensor, trans_a: bool, trans_b: bool, alpha: float,
            beta: float, out: torch.Tensor | None = None, c: torch.Tensor | None = None) -> torch.Tensor:
        """The call this recipe was made for, on new operands (``c`` and ``out`` too where its
        signature has them); ``out``, written in place, is checked against autograd and what the
        call reads first, and its version bumped after, as on the full path."""
        c_view = torch.broadcast_to(c, self.out_shape) if self.reads_c else None  # type: ignore[arg-type]
        if out is None:
            d = torch.empty(self.out_shape, dtype=self.out_dtype, device=a.device)
        elif c_view is None or _same_view(out, c):  # type: ignore[arg-type]  # out may be C itself
            d = checked_out(out, self.extents and self.extents[:3], {"a": a, "b": b})
        else:  # what _plan's overlap checks decide
            d = checked_out(out, self.extents, {"a": a, "b": b, "c": c})  # type: ignore[dict-item]
        op_a = a.transpose(-1, -2) if trans_a else a
        op_b = b.transpose(-1, -2) if trans_b else b
        if self.copies is not None:
            op_a, op_b = self.copies.run(op_a, op_b)
        elif not self.plain:
            op_a, op_b = _operand_layouts(op_a, op_b, self.k_major)
        if self.replays is not None:
            operands = (op_a, op_b, d) if c_view is None else (op_a, op_b, d, c_view)
            repeat.replay_each(self.replays, self.slots, operands, (alpha, beta))
        else:
            _launch(_GemmPlan(op_a, op_b, c_view, d, self.batch, float(alpha), float(beta), self.precision,
                              self.problem, self.choice, self.multiprocessors))
        if out is not None:
            mark_written(out)
        return d


@dataclass(frozen=True)
class _CopyReplays:
    """The K-major copies a first tf32 call made on Hopper (copy.py's launches), replayed by a
    repeat call onto buffers it allocates alike: no launch key, layout checks or copy planning."""

    replays: tuple[launch.Replay, ...]  # on (op(A), op(B), *buffers)
    buffers: tuple[tuple[int, tuple[int, ...], tuple[int, ...]], ...]  # (operand, shape, strides)

    def run(self, op_a: torch.Tensor, op_b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """op(A) and op(B) as the GEMM reads them: the copied ones replaced by their new copies."""
        made = [torch.empty_strided(shape, strides, dtype=op_a.dtype, device=op_a.device)
                for _, shape, strides in self.buffers]
        for replay in self.replays:
            replay((op_a, op_b, *made))
        operands = [op_a, op_b]
        for (index, _, _), t in zip(self.buffers, made, strict=True):
            operands[index] = t
        return operands[0], operands[1]


def _copy_replays(given: tuple[torch.Tensor, torch.Tensor], plan: _GemmPlan,
                  calls: list[launch.Call]) -> _CopyReplays | None:
    """The copies ``calls`` (one launch for each operand copied K-major, A's first) as replays
    from the call's op(A), op(B) (``given``) into new buffers; None when they are not exactly
    that (an odd-strided operand copied by torch first, a batch over several launches, operands
    sharing memory): such a recipe plans its copies again on each call."""
    made = [(i, t) for i, (old, t) in enumerate(zip(given, (plan.op_a, plan.op_b), strict=True))
            if t.data_ptr() != old.data_ptr()]
    if not made or len(calls) != len(made) or any(
            call.args[1].data_ptr() != t.data_ptr() for call, (_, t) in zip(calls, made, strict=True)):
        return None
    replays = launch.Replay.each_of(calls, (*given, *(t for _, t in made)))
    if replays is None:
        return None
    return _CopyReplays(replays, tuple((i, tuple(t.shape), tuple(t.stride())) for i, t in made))


# Kept under the signature, which keys alpha by class, when the launches take any alpha (slots
# found, or no replays: the recipe plans its launch again with the call's values); else under
# alpha's and beta's values too (``blas.repeat.scalar_slots``: −α in a launch, alpha = beta; a
# bf16-product recipe, whose launches take alpha in forms of their own). The bf16-product
# precisions' recipes (calls without out) are kept here too.
_RECIPES: RecipeTable[_Recipe | emulated.Recipe] = RecipeTable(512)


def _signature(a: torch.Tensor, b: torch.Tensor, alpha: float, beta: float, trans_a: bool, trans_b: bool,
               out_dtype: torch.dtype | None, precision: str, c: torch.Tensor | None,
               out: torch.Tensor | None) -> tuple:
    """Everything _plan's decisions depend on (out last: None, or its layout; C's the same); of
    alpha only whether it is 0, 1, −1 or another value of its type (``blas.repeat.scalar_class``,
    inlined: this runs on every call), its value being the launches' argument. beta by value
    (whether C is read at all, and how, follow from it)."""
    return (*launch.layout_key(a), *launch.layout_key(b), alpha if alpha in _UNITS else type(alpha), beta,
            trans_a, trans_b, out_dtype, precision, space.forced.config, logic.generation(),
            launch.layout_key(c), launch.layout_key(out))


def _check_not_quantized_args(a: torch.Tensor, scale_a: object, scale_b: object, bias: object,
                              fast_accum: bool) -> None:
    """Float operands take none of the fp8/int8 arguments."""
    if scale_a is not None or scale_b is not None or bias is not None:
        raise invalid("scale_a/scale_b/bias", "given", f"None for {_dtype_name(a.dtype)} operands (scales "
                      "and bias apply to fp8/int8; use c and beta for a bias here)")
    if fast_accum:
        raise invalid("fast_accum", True, f"False for {_dtype_name(a.dtype)} operands (it applies to fp8)")


def _plan_quantized(a: torch.Tensor, b: torch.Tensor, c: object, alpha: float, beta: float, trans_a: bool,
                    trans_b: bool, scale_a: object, scale_b: object, bias: object,
                    out_dtype: torch.dtype | None, out: torch.Tensor | None, fast_accum: bool, *,
                    allocate: bool) -> tuple:
    """fp8/int8 operands: alpha, beta and C do not apply (scales and bias do)."""
    check_ndim("a", a, (2, 3))  # 3-D: a batch, refused by plan_scaled as not yet supported
    check_ndim("b", b, (2, 3))
    check_bools(trans_a=trans_a, trans_b=trans_b)
    alpha, beta = real_scalar("alpha", alpha), real_scalar("beta", beta)
    if c is not None or beta != 0.0 or alpha != 1.0:
        raise UnsupportedError("fp8/int8 GEMM takes scale_a, scale_b and bias, not alpha, beta or c "
                               "(fold alpha into a scale; add C afterwards)")
    if fast_accum not in (False, True):
        raise invalid("fast_accum", fast_accum, "True or False")
    if fast_accum and a.dtype == torch.int8:
        raise invalid("fast_accum", True, "False for int8 operands (they accumulate exactly in int32)")
    if out is not None:
        out = as_tensor("out", out)
    op_a = a.transpose(-1, -2) if trans_a else a
    op_b = b.transpose(-1, -2) if trans_b else b
    if op_a.dim() == 2 and op_b.dim() == 2 and op_b.shape[0] != op_a.shape[1]:
        raise InvalidArgumentError(
            f"inner dimensions differ: op(a) is {op_a.shape[0]}x{op_a.shape[1]} but op(b) is "
            f"{op_b.shape[0]}x{op_b.shape[1]}; expected op(a).shape[-1] == op(b).shape[-2]")
    return plan_scaled(_matrix_layout("a", op_a), _matrix_layout("b", op_b), scale_a, scale_b, bias,
                       out_dtype, out, bool(fast_accum), allocate)


def explain(
    a: torch.Tensor,
    b: torch.Tensor,
    c: torch.Tensor | None = None,
    *,
    alpha: float = 1.0,
    beta: float = 0.0,
    trans_a: bool = False,
    trans_b: bool = False,
    out_dtype: torch.dtype | None = None,
    precision: str = "ieee",
    scale_a: torch.Tensor | None = None,
    scale_b: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    fast_accum: bool = False,
) -> space.Choice | None:
    """The kernel, configuration and reason :func:`gemm` would use for these arguments, without
    running anything; None when no kernel would launch (empty problem, K = 0, alpha = 0)."""
    a, b = as_tensor("a", a), as_tensor("b", b)
    if a.dtype in QUANTIZED_INPUTS:
        _, scaled = _plan_quantized(a, b, c, alpha, beta, trans_a, trans_b, scale_a, scale_b, bias,
                                    out_dtype, None, fast_accum, allocate=False)
        return None if scaled is None else scaled[-2]
    _check_not_quantized_args(a, scale_a, scale_b, bias, fast_accum)
    _, plan = _plan(a, b, c, alpha, beta, trans_a, trans_b, out_dtype, None, precision,
                    allocate=False)
    return None if plan is None else plan.choice


def _plan(
    a: torch.Tensor, b: torch.Tensor, c: torch.Tensor | None, alpha: float, beta: float,
    trans_a: bool, trans_b: bool, out_dtype: torch.dtype | None, out: torch.Tensor | None,
    precision: str, *, allocate: bool,
) -> tuple[torch.Tensor, _GemmPlan | None]:
    """Validate everything and decide the launch; the plan is None when nothing must launch
    (``out`` is then already final). ``allocate=False`` (explain) writes nothing and allocates
    only meta-device stand-ins."""
    a = as_tensor("a", a)
    b = as_tensor("b", b)
    c = as_tensor("c", c) if c is not None else None
    out = as_tensor("out", out) if out is not None else None

    check_ndim("a", a, (2, 3))
    check_ndim("b", b, (2, 3))
    check_bools(trans_a=trans_a, trans_b=trans_b)
    check_dtype_argument("out_dtype", out_dtype, none_ok=True)
    check_dtype("a", a, FLOAT_DTYPES, "; and int8, float8_e4m3fn or float8_e5m2 with scale_a / scale_b "
                "(int8 also without: an exact int32 product)")
    if b.dtype != a.dtype:
        raise UnsupportedError(
            f"a and b must share a dtype (actual: a {_dtype_name(a.dtype)}, b {_dtype_name(b.dtype)});"
            " supported: both float16, bfloat16, float32 or float64 (cast one with .to())"
        )
    if precision not in FP32_PRECISIONS:
        raise invalid("precision", repr(precision),
                      f"{', '.join(map(repr, FP32_PRECISIONS[:-1]))} or {FP32_PRECISIONS[-1]!r}")
    if a.dtype != torch.float32:
        precision = "ieee"  # the tensor-core precisions are float32's; other dtypes have one
    allowed_out = _OUT_DTYPES[a.dtype]
    out_dtype = out_dtype if out_dtype is not None else a.dtype
    if out_dtype not in allowed_out:
        raise UnsupportedError(
            f"out_dtype {_dtype_name(out_dtype)} for {_dtype_name(a.dtype)} inputs is not supported;"
            f" supported: {', '.join(_dtype_name(d) for d in allowed_out)}"
        )
    alpha, beta = real_scalar("alpha", alpha), real_scalar("beta", beta)
    if beta != 0.0 and c is None:
        raise invalid("c", None, "a tensor when beta != 0 (BLAS reads C only when beta != 0)")

    op_a = a.transpose(-1, -2) if trans_a else a
    op_b = b.transpose(-1, -2) if trans_b else b
    m, k = op_a.shape[-2], op_a.shape[-1]
    if op_b.shape[-2] != k:
        raise InvalidArgumentError(
            f"inner dimensions differ: op(a) is {m}x{k} but op(b) is "
            f"{op_b.shape[-2]}x{op_b.shape[-1]} (a {tuple(a.shape)} trans_a={trans_a}, "
            f"b {tuple(b.shape)} trans_b={trans_b}); expected op(a).shape[-1] == op(b).shape[-2]"
        )
    n = op_b.shape[-1]
    batched = a.dim() == 3 or b.dim() == 3
    batch_a, batch_b = _batch_of(a), _batch_of(b)
    if batch_a != batch_b and 1 not in (batch_a, batch_b):
        raise InvalidArgumentError(
            f"batch sizes differ: a has {batch_a}, b has {batch_b}; expected equal sizes, or one "
            "operand 2-D or with batch 1 to broadcast"
        )
    batch = batch_b if batch_a == 1 else batch_a  # an empty batch stays empty against a broadcast one
    out_shape = (batch, m, n) if batched else (m, n)

    tensors = {"a": a, "b": b}
    if c is not None and beta != 0.0:
        check_dtype("c", c, dict.fromkeys((a.dtype, out_dtype)))  # one of each
        if c.dim() > len(out_shape) or any(
            cs not in (1, os_) for cs, os_ in zip(reversed(c.shape), reversed(out_shape), strict=False)
        ):
            raise invalid("c.shape", tuple(c.shape), f"broadcastable to the result's {out_shape}")
        tensors["c"] = c
    else:
        c = None  # beta == 0: C is never read, as BLAS specifies
    if out is not None:
        if tuple(out.shape) != out_shape:
            raise invalid("out.shape", tuple(out.shape), f"{out_shape}")
        if out.dtype != out_dtype:
            raise invalid("out.dtype", _dtype_name(out.dtype), _dtype_name(out_dtype))
        tensors["out"] = out
    device = check_same_device(tensors)
    if out is not None:
        check_no_internal_overlap("out", out)
        check_no_overlap("out", out, {"a": a, "b": b})
        if c is not None and not _same_view(out, c):
            check_no_overlap("out", out, {"c": c})
    elif allocate:
        out = torch.empty(out_shape, dtype=out_dtype, device=device)
    else:  # explain(): a shape-only stand-in, never written
        out = torch.empty_strided(out_shape, _contiguous_strides(out_shape), dtype=out_dtype,
                                  device="meta")

    if out.numel() == 0:
        return out, None
    if k == 0 or alpha == 0.0:
        if allocate:
            _scale_c_into(out, c, beta)
        return out, None

    c_view = None if c is None else torch.broadcast_to(c, out_shape)
    if precision in BF16_PRODUCT_KEYS:  # two bf16 GEMMs, each validated and chosen on its own
        problem = space.GemmProblem(m, n, k, batch, precision, False)
        choice = space.Choice(EmulatedConfig(precision), f"{precision}: float32 as bf16 products")
        if allocate and log.modes():
            _log_call(problem, choice, a, b, trans_a, trans_b, batched)
        return out, _GemmPlan(op_a, op_b, c_view, out, batch, alpha, beta, precision, problem, choice, 1)
    op_a, op_b = _operand_layouts(op_a, op_b, k_major=False)

    info = device_info(device)
    if precision != "ieee" and info.backend == "hip":
        precision = "ieee"  # AMD GPUs have no tf32 in Triton: IEEE fp32 is what "allow tf32" gives
    key = dtype_key(a.dtype, precision)
    problem, choice = _selection(op_a, op_b, c_view, out, (m, n, k, batch), alpha, precision, key, info)
    # tf32 on Hopper: wgmma reads 32-bit shared-memory operands K-major only, so the operands are
    # copied so first, unless the warp-specialized kernel takes the call as it lies (a row-major B
    # multiplied swapped)
    k_major = (key in TF32_KEYS and space.tf32_wants_k_major(info)
               and not (problem.ws_swapped and isinstance(choice.config, WsConfig)))
    if k_major:
        op_a, op_b = _k_major(op_a, op_b, materialize=allocate)
        problem, choice = _selection(op_a, op_b, c_view, out, (m, n, k, batch), alpha, precision, key, info)
    if allocate and log.modes():
        _log_call(problem, choice, a, b, trans_a, trans_b, batched)
    return out, _GemmPlan(op_a, op_b, c_view, out, batch, alpha, beta, precision, problem, choice,
                          info.multiprocessors or 1, k_major)


def _selection(op_a: torch.Tensor, op_b: torch.Tensor, c: torch.Tensor | None, out: torch.Tensor,
               sizes: tuple[int, int, int, int], alpha: float, precision: str, key: str,
               info: DeviceInfo) -> tuple[space.GemmProblem, space.Choice]:
    """The problem (m, n, k, batch of ``sizes``) as selection sees it for operands in these
    layouts, and the choice made."""
    batch = sizes[3]
    tma_ok = (
        batch == 1
        and op_a.dtype != torch.float64
        and (space.tma_capable(info) or (info.backend == "interpreter" and op_a.dtype != torch.bfloat16))
        and tma_supported(op_a, op_b, out)
    )  # the interpreter's bf16 dot is wrong and only the tile family upcasts around it
    ws_ok = tma_ok and space.ws_capable(info) and ws_supported(op_a, op_b, c, out, alpha, precision)
    fma_ok = batch == 1 and info.backend == "cuda" and fma_supported(op_a, op_b, c, out, precision)
    layout = ("T" if is_col_major(op_a) else "N") + ("T" if is_col_major(op_b) else "N")
    problem = space.GemmProblem(*sizes, key, tma_ok, ws_ok, ws_ok and swaps(op_b), fma_ok, layout)
    return problem, space.select(problem, info)


def _launch(plan: _GemmPlan) -> None:
    a, b, c, d = plan.op_a, plan.op_b, plan.c, plan.d
    config = plan.choice.config
    if isinstance(config, TileConfig):
        launch_gemm_tile(
            a, b, c, d, plan.batch, plan.alpha, plan.beta, precision=plan.precision,
            upcast=interpreter_enabled() and a.dtype == torch.bfloat16,
            index_64=needs_int64_index(a, b, d, *([c] if c is not None else [])),
            config=config,
        )
    elif isinstance(config, StreamKConfig):
        launch_gemm_streamk(
            _as_2d(a), _as_2d(b), None if c is None else _as_2d(c), _as_2d(d), plan.alpha, plan.beta,
            precision=plan.precision, upcast=interpreter_enabled() and a.dtype == torch.bfloat16,
            num_sms=plan.multiprocessors, config=config,
        )
    elif isinstance(config, WsConfig):
        launch_gemm_ws(_as_2d(a), _as_2d(b), _as_2d(d), num_sms=plan.multiprocessors, config=config)
    elif isinstance(config, FmaConfig):
        launch_gemm_fma(_as_2d(a), _as_2d(b), None if c is None else _as_2d(c), _as_2d(d), plan.alpha,
                        plan.beta, config=config)
    elif isinstance(config, SplitKConfig):
        launch_gemm_splitk(
            a, b, c, d, plan.batch, plan.alpha, plan.beta, precision=plan.precision,
            upcast=interpreter_enabled() and a.dtype == torch.bfloat16, config=config,
        )
    else:
        launch_gemm_tma(
            _as_2d(a), _as_2d(b), None if c is None else _as_2d(c), _as_2d(d), plan.alpha, plan.beta,
            precision=plan.precision, num_sms=plan.multiprocessors, config=config,
        )


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def _k_major(
    a: torch.Tensor, b: torch.Tensor, *, materialize: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Copy A to row-major and B to column-major where they are not (tf32 wgmma reads K-major).

    ``materialize=False`` returns shape-and-stride stand-ins on the meta device instead of copies.
    """
    if a.stride(-1) != 1:
        if materialize:
            log.info("a: copied to row-major (K-major) for tf32 tensor cores")
            a = row_major_copy(a)
        else:
            a = torch.empty(a.shape, device="meta")
    if b.stride(-2) != 1:
        if materialize:
            log.info("b: copied to column-major (K-major) for tf32 tensor cores")
            b = column_major_copy(b)
        else:
            b = torch.empty((*b.shape[:-2], b.shape[-1], b.shape[-2]), device="meta").transpose(-1, -2)
    return a, b


def _same_view(x: torch.Tensor, y: torch.Tensor) -> bool:
    return x.data_ptr() == y.data_ptr() and x.shape == y.shape and x.stride() == y.stride()


def _scale_c_into(out: torch.Tensor, c: torch.Tensor | None, beta: float) -> None:
    """The K = 0 / alpha = 0 result: ``beta · C``, or zeros when C is not read."""
    if c is None:
        out.zero_()
    else:
        out.copy_(torch.broadcast_to(c, out.shape).to(torch.float64 if out.dtype == torch.float64
                                                        else torch.float32) * beta)


def _log_call(
    problem: space.GemmProblem, choice: space.Choice, a: torch.Tensor, b: torch.Tensor,
    trans_a: bool, trans_b: bool, batched: bool,
) -> None:
    if log.trace_enabled():
        log.trace(
            f"gemm m={problem.m} n={problem.n} k={problem.k} batch={problem.batch} "
            f"dtype={problem.dtype} a{tuple(a.shape)}:{a.stride()} b{tuple(b.shape)}:{b.stride()} "
            f"-> {choice.config.kernel} {choice.config} ({choice.reason})"
        )
    if log.bench_enabled():
        flags = (" --trans-a" if trans_a else "") + (" --trans-b" if trans_b else "")
        flags += f" --batch {problem.batch}" if batched else ""
        log.bench_command(
            f"tessera bench gemm -m {problem.m} -n {problem.n} -k {problem.k} "
            f"--dtype {problem.dtype}{flags}"
        )


def matmul(a: torch.Tensor, b: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """``torch.matmul`` semantics, computed by :func:`gemm`: any number of dimensions.

    A 1-D operand is promoted to a row (left) or a column (right) and the added dimension removed
    from the result; the dimensions before the last two are batch dimensions and broadcast. A
    matrix against a batch stays one GEMM whose matrix is shared; batches of the same shape are
    flattened into one (a view when their layout allows, else a copy); batch dimensions that
    broadcast against each other are expanded first (a copy of the broadcast operand). Float32
    is multiplied in TF32 where torch.matmul's is (``torch.backends.cuda.matmul.fp32_precision``,
    or ``allow_tf32`` on a torch without it). ``out``: the result's shape and a's dtype (torch
    would resize another shape; Tessera refuses it), written in place — directly where its layout
    is a view of the GEMM's output, else through a copy — and returned.
    """
    a = as_tensor("a", a)
    b = as_tensor("b", b)
    for name, t in (("a", a), ("b", b)):
        if t.dim() == 0:
            raise invalid(f"{name}.dim()", "0 (a scalar)", "at least 1 (vectors and matrices)")
    if a.dim() == 1 and b.dim() == 1:
        if a.shape[0] != b.shape[0]:
            raise InvalidArgumentError(
                f"inner dimensions differ: a has {a.shape[0]} elements, b has {b.shape[0]}"
            )
        target = _matmul_out(out, (), a, b)
        result = gemm(a.unsqueeze(0), b.unsqueeze(1), precision=_matmul_precision(a))[0, 0]
        return result if target is None else target.copy_(result)
    a2 = a.unsqueeze(0) if a.dim() == 1 else a
    b2 = b.unsqueeze(1) if b.dim() == 1 else b
    try:
        batch = torch.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    except RuntimeError as exc:
        raise InvalidArgumentError(
            f"batch dimensions do not broadcast: a {tuple(a.shape)}, b {tuple(b.shape)}") from exc
    (m, k), (k_b, n) = a2.shape[-2:], b2.shape[-2:]
    if k != k_b:
        raise InvalidArgumentError(
            f"inner dimensions differ: a {tuple(a.shape)}, b {tuple(b.shape)}; expected a.shape[-1] == "
            f"b.shape[-2] (or b's only dimension)")
    shape = (*batch, *((m,) if a.dim() > 1 else ()), *((n,) if b.dim() > 1 else ()))
    target = _matmul_out(out, shape, a, b)
    operands = (_batch_of_matrices(a2, batch), _batch_of_matrices(b2, batch))
    if target is not None:
        batched = any(t.dim() == 3 for t in operands)
        try:  # the GEMM's own output shape, as a view of out
            view = target.view((math.prod(batch), m, n) if batched else (m, n))
        except RuntimeError:  # out's strides do not flatten to it
            view = None
        if view is not None:
            gemm(*operands, precision=_matmul_precision(a), out=view)
            return target
    result = gemm(*operands, precision=_matmul_precision(a)).reshape(shape)
    return result if target is None else target.copy_(result)


def _matmul_out(out: object, shape: tuple[int, ...], a: torch.Tensor, b: torch.Tensor) -> torch.Tensor | None:
    """matmul's ``out`` checked before anything runs: the result's shape and a's dtype, no element
    shared with a or b, not tracked by autograd, and no gradient to record (torch refuses that)."""
    if out is None:
        return None
    if autograd.wants_grad(a, b):
        autograd.refuse_out("matmul", out)
    out = as_tensor("out", out)
    if tuple(out.shape) != shape or out.dtype != a.dtype:
        raise invalid("out", f"{tuple(out.shape)} {_dtype_name(out.dtype)}",
                      f"the result's shape {shape} and dtype {_dtype_name(a.dtype)}")
    check_no_internal_overlap("out", out)
    check_no_overlap("out", out, {"a": a, "b": b})
    check_untracked_write("out", out)
    return out


def _batch_of_matrices(t: torch.Tensor, batch: torch.Size) -> torch.Tensor:
    """``t`` as gemm takes it in a matmul over ``batch``: a matrix as it is (gemm broadcasts it),
    else one batch dimension, ``t``'s own flattened where its batch is all of ``batch``, or after
    expanding it to ``batch`` (a 1-sized batch of one matrix stays that one matrix)."""
    if t.dim() == 2:
        return t
    own = t.shape[:-2]
    if math.prod(own) == 1:
        return t.reshape(t.shape[-2:])
    if own != batch:
        t = t.expand(*batch, *t.shape[-2:])
    return t.reshape(math.prod(batch), *t.shape[-2:])


def _matmul_precision(a: torch.Tensor) -> str:
    return "tf32" if a.dtype == torch.float32 and torch_matmul_tf32() else "ieee"
