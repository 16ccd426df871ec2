"""tessera.rand: counter-based random numbers with cuRAND's generator model on torch tensors.

``Generator("philox4x32_10", seed=…, subsequence=…, offset=…)`` draws from one Philox stream; its
``offset`` counts the 32-bit words consumed, so the same (seed, subsequence, offset) gives the same
bits on any GPU, any launch configuration, and in Triton's CPU interpreter. Word ``p`` of a stream is
what cuRAND's device API returns from the (p+1)-th ``curand()`` after ``curand_init(seed,
subsequence, 0)`` (layout in ``kernels/philox.py``).

Intervals and transforms (cuRAND's conventions):
- ``uniform`` fp32: x·2⁻³² + 2⁻³³ in (0, 1]; fp64: 53 bits from two words, in (0, 1]; fp16 and bf16
  round the fp32 value (fp16 values below 2⁻²⁴ become 2⁻²⁴, so 0 is never returned).
- ``normal``: Box–Muller on consecutive word pairs (curand_normal): values 2t, 2t+1 come from words
  offset+2t, offset+2t+1; fp64 uses four words per pair of values. An odd count still consumes
  the whole last pair, as curand_normal does. Philox bf16 normals take one word per pair (word
  offset+t gives values 2t, 2t+1: a 20-bit radius uniform and a 12-bit angle, enough for bf16's
  8 significant bits; |z| ≤ 5.40, see ``kernels/philox.py``); fp16 uses fp32's word pairs.
- ``lognormal``: exp of the fp32 (fp64 for fp64) ``normal``, rounded to the dtype (so bf16 takes
  two words per pair here, like fp32).
``Generator("sobol32", dimensions=d)`` gives Sobol' points (Joe–Kuo direction numbers, shipped for
1024 dimensions) in Gray-code order, bit-exact with ``scipy.stats.qmc.Sobol(d, scramble=False)``;
draws have shape (n, d) (row-major points; cuRAND writes dimension-major) and ``offset`` counts
points. ``scramble=True`` applies a random digital shift (one Philox word per dimension, from
``seed``), which keeps the net structure. Uniform only: x·2⁻³² + 2⁻³³, so 0 is never returned.
``Generator("mrg32k3a", seed=…, subsequence=…, offset=…)`` follows L'Ecuyer's reference
recurrence bit for bit (fp64, as his code); subsequences start 2⁷⁶ steps apart (cuRAND's spacing),
``offset`` counts steps; the seed sets the state as ``kernels/mrg.py`` documents (seed 0 is the
classic all-12345 state). ``uniform`` is the reference's value in (0, 1) rounded to the dtype,
``integers32`` is ⌊u·2³²⌋, ``normal`` is Box–Muller on consecutive pairs.
``poisson(shape, lam)`` (Philox): inversion for λ < 16, PTRS rejection with a fixed budget above.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from tessera._core import log
from tessera._core.device import device_info, interpreter_enabled
from tessera._core.errors import UnsupportedError, invalid
from tessera._core.validate import (
    as_tensor,
    check_bools,
    check_dtype,
    check_dtype_argument,
    check_no_internal_overlap,
    check_runnable,
    check_same_device,
    check_untracked_write,
    integer,
    mark_written,
    real,
)
from tessera.rand.kernels.mrg import launch_mrg
from tessera.rand.kernels.philox import (
    POISSON_ATTEMPTS,
    POISSON_SMALL_LAMBDA,
    VALUES_PER_GROUP,
    WORDS_PER_GROUP,
    launch_bijection,
    launch_poisson,
    launch_stream,
    stream_kind,
)
from tessera.rand.kernels.sobol import MAX_DIMENSIONS, direction_numbers, launch_sobol
from tessera.rand.space import select

GENERATORS = ("philox4x32_10", "mrg32k3a", "sobol32")
FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_MAX_WORDS = 2**62  # stream positions are computed in int64
# The largest λ whose int32 counts cannot overflow: NumPy's bound for int64 counts (λ ≤ max − 10√max)
# taken to int32; a count past it is more than 10 σ out (PTRS's quick path stays within 1.9 σ).
_INT32_POISSON_LAM_MAX = (2**31 - 1) - 10 * math.sqrt(2**31 - 1)


def philox4x32_10(counter: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """The Philox4x32-10 bijection: ``counter`` (n, 4) and ``key`` (n, 2) 32-bit words (int32 or
    uint32 holding the raw bits) → (n, 4) int32 holding the output bits."""
    counter, key = as_tensor("counter", counter), as_tensor("key", key)
    for name, t, width in (("counter", counter, 4), ("key", key, 2)):
        check_dtype(name, t, (torch.int32, torch.uint32))
        if t.dim() != 2 or t.shape[1] != width:
            raise invalid(f"{name}.shape", tuple(t.shape), f"(n, {width})")
    if counter.shape[0] != key.shape[0]:
        raise invalid("key.shape[0]", key.shape[0], f"counter.shape[0] = {counter.shape[0]}")
    device = check_same_device({"counter": counter, "key": key})
    out = torch.empty(counter.shape, dtype=torch.int32, device=device)
    if counter.shape[0]:
        launch_bijection(counter.contiguous().view(torch.int32), key.contiguous().view(torch.int32), out)
    return out


def _default_device() -> torch.device:
    if torch.cuda.is_available() and not interpreter_enabled():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _device(device: object) -> torch.device:
    """``device`` (a torch.device, a string such as "cuda:0", or a device index) as a torch.device."""
    if isinstance(device, bool) or not isinstance(device, (torch.device, str, int)):
        raise invalid("device", repr(device), 'a torch.device, a string such as "cuda:0", or an index')
    try:
        return torch.device(device)
    except RuntimeError as exc:  # a string torch does not parse
        raise invalid("device", repr(device), 'a device torch knows, such as "cpu" or "cuda:0"') from exc


def _check_usable(device: torch.device) -> None:
    """The generator's device is one Tessera runs on and, for a GPU, one that torch sees: checked
    when a draw needs it, so that a generator made for a GPU elsewhere is refused with a
    TesseraError, not torch's assertion."""
    check_runnable(device, "the generator is")
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = device.index if device.index is not None else (torch.cuda.current_device() if count else 0)
        if index >= count:
            raise invalid("device", str(device), f"a GPU torch sees: {count} CUDA/ROCm GPU"
                          f"{'' if count == 1 else 's'} here (torch.cuda.device_count())")


def _finite(name: str, value: object, expected: str = "a finite real number") -> float:
    """``value`` as a float when it is a finite real number (:func:`validate.real`), or a clear error."""
    number = real(value)
    if number is None or not math.isfinite(number):
        raise invalid(name, repr(value), expected)
    return number


def _nonnegative_int(name: str, value: object, limit: int) -> int:
    number = integer(value)
    if number is None or not 0 <= number < limit:
        raise invalid(name, repr(value), f"an integer in [0, {limit})")
    return number


def _shape(shape: Sequence[int] | int) -> tuple[int, ...]:
    """A draw's shape as a tuple of non-negative integers (an int n is (n,)), or a clear error."""
    expected = "an integer or a sequence of integers in [0, 2**63)"
    if integer(shape) is not None:
        shape = (shape,)
    try:
        given = tuple(shape)
    except TypeError:  # not iterable: None, a float, a bool
        raise invalid("shape", repr(shape), expected) from None
    dims = tuple(map(integer, given))
    if any(d is None or not 0 <= d < 2**63 for d in dims):
        raise invalid("shape", given, expected)
    return dims


def _check_float(kind: int, dtype: torch.dtype) -> None:
    """Every draw but raw words (kind 0) writes a floating-point dtype."""
    check_dtype_argument("dtype", dtype)
    if kind != 0 and dtype not in FLOAT_DTYPES:
        raise UnsupportedError(f"dtype {str(dtype).replace('torch.', '')} is not supported; "
                               "supported: float16, bfloat16, float32, float64")


class Generator:
    """A random stream: ``Generator("philox4x32_10", seed=0, subsequence=0, offset=0, device=None)``."""

    def __init__(self, name: str = "philox4x32_10", *, seed: int = 0, subsequence: int = 0,
                 offset: int = 0, device: torch.device | str | None = None,
                 dimensions: int | None = None, scramble: bool = False) -> None:
        if name not in GENERATORS:
            raise invalid("name", repr(name), f"one of {', '.join(GENERATORS)}")
        quasi = name == "sobol32"
        if quasi:
            dimensions = integer(dimensions)
            if dimensions is None or not 1 <= dimensions <= MAX_DIMENSIONS:
                raise invalid("dimensions", repr(dimensions), f"an integer in [1, {MAX_DIMENSIONS}] "
                              "(the shipped Joe–Kuo direction numbers)")
        elif dimensions is not None or scramble:
            raise invalid("dimensions/scramble", (dimensions, scramble), f"unset for {name}")
        check_bools(scramble=scramble)
        self.name, self.scramble = name, scramble
        self.dimensions: int = dimensions if quasi else 0  # 0: a pseudo-random stream
        self.seed = _nonnegative_int("seed", seed, 2**64)
        self.subsequence = _nonnegative_int("subsequence", subsequence, 2**64)
        self._limit = 2**32 if quasi else _MAX_WORDS  # positions must stay below this
        self.offset = _nonnegative_int("offset", offset, self._limit)
        self.device = _device(device) if device is not None else _default_device()
        self._directions: torch.Tensor | None = None
        self._shifts: torch.Tensor | None = None

    def __repr__(self) -> str:
        return (f"Generator({self.name!r}, seed={self.seed}, subsequence={self.subsequence}, "
                f"offset={self.offset}, device={str(self.device)!r})")

    def skip(self, n: int) -> Generator:
        """Advance the stream by ``n`` positions (cuRAND's skipahead): 32-bit words for Philox,
        steps for MRG32k3a, points for Sobol'. Returns self."""
        self.offset = _nonnegative_int("offset after skip",
                                       self.offset + _nonnegative_int("n", n, self._limit), self._limit)
        return self

    def integers32(self, shape: Sequence[int] | int, *, out: torch.Tensor | None = None) -> torch.Tensor:
        """Raw 32-bit words (as curand() returns them) in an int32 tensor holding the bits."""
        return self._draw(0, shape, torch.int32, out, 0.0, 1.0)

    def uniform(self, shape: Sequence[int] | int, dtype: torch.dtype = torch.float32, *,
                out: torch.Tensor | None = None) -> torch.Tensor:
        """Uniform values in (0, 1] (see the module docstring for each dtype)."""
        return self._draw(3 if dtype == torch.float64 else 1, shape, dtype, out, 0.0, 1.0)

    def normal(self, shape: Sequence[int] | int, mean: float = 0.0, std: float = 1.0,
               dtype: torch.dtype = torch.float32, *, out: torch.Tensor | None = None) -> torch.Tensor:
        """Normal values ``mean + std·z``, z from Box–Muller as curand_normal."""
        if self.name == "sobol32":
            raise UnsupportedError("normal draws from sobol32 are not implemented yet; supported: "
                                   "uniform, integers32")
        if self.name == "philox4x32_10":
            kind = stream_kind("normal", dtype)  # bf16: one word per pair
        else:
            kind = 4 if dtype == torch.float64 else 2
        return self._draw(kind, shape, dtype, out, mean, std)

    def lognormal(self, shape: Sequence[int] | int, mean: float = 0.0, std: float = 1.0,
                  dtype: torch.dtype = torch.float32, *, out: torch.Tensor | None = None) -> torch.Tensor:
        """``exp(normal(mean, std))``: the logarithm is normal (curand_log_normal)."""
        _check_float(1, dtype)
        if out is not None:
            self._check_out(out, _shape(shape), dtype)
        result = self.normal(shape, mean, std, torch.float64 if dtype == torch.float64 else torch.float32)
        result = result.exp_().to(dtype)
        if out is not None:
            out.copy_(result)
            return out
        return result

    def poisson(self, shape: Sequence[int] | int, lam: float, dtype: torch.dtype = torch.int64, *,
                out: torch.Tensor | None = None) -> torch.Tensor:
        """Poisson(λ) counts (Philox only). λ < 16: inversion, one word per value; λ ≥ 16: Hörmann's
        PTRS transformed rejection with eight attempts of two words (the offset advances by 16 words
        per value); if all eight are rejected (probability < 1e-8) the value is round(λ). int32 counts
        take λ up to 2³¹ − 1 − 10·√(2³¹ − 1), so that no draw overflows (NumPy's rule for int64)."""
        if self.name != "philox4x32_10":
            raise UnsupportedError(f"poisson from {self.name} is not implemented yet; supported: "
                                   "philox4x32_10")
        expected = "a finite number in [0, 2**31)"
        number = _finite("lam", lam, expected)
        if not 0 <= number < 2**31:
            raise invalid("lam", repr(lam), expected)
        lam = number
        check_dtype_argument("dtype", dtype)
        if dtype not in (torch.int32, torch.int64, torch.float32, torch.float64):
            raise UnsupportedError(f"dtype {str(dtype).replace('torch.', '')} is not supported for "
                                   "poisson; supported: int32, int64, float32, float64")
        if dtype == torch.int32 and lam > _INT32_POISSON_LAM_MAX:
            raise invalid("lam", repr(lam), f"at most {math.floor(_INT32_POISSON_LAM_MAX)} for int32 counts, "
                          "which larger draws would overflow; ask for dtype=torch.int64")
        shape = _shape(shape)
        out = self._output(out, shape, dtype)
        n = math.prod(shape)
        words = n * (1 if lam < POISSON_SMALL_LAMBDA else 2 * POISSON_ATTEMPTS)
        if self.offset + words >= _MAX_WORDS:
            raise invalid("offset", self.offset, f"room for {words} more words below 2**62")
        if n:
            target = out if out.is_contiguous() else torch.empty(shape, dtype=dtype, device=out.device)
            launch_poisson(target.view(-1), float(lam), self.seed, self.subsequence, self.offset)
            mark_written(target)  # out itself, or a copy that torch's copy_ below counts in
            if target is not out:
                out.copy_(target)
        self.offset += words
        return out

    def _output(self, out: torch.Tensor | None, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """A new tensor on the generator's device, or ``out`` once checked."""
        if out is not None:
            return self._check_out(out, shape, dtype)
        _check_usable(self.device)
        return torch.empty(shape, dtype=dtype, device=self.device)

    def _check_out(self, out: torch.Tensor, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        _check_usable(self.device)
        out = as_tensor("out", out)
        if tuple(out.shape) != shape or out.dtype != dtype:
            raise invalid("out", f"{tuple(out.shape)} {out.dtype}", f"shape {shape} and dtype {dtype}")
        check_same_device({"out": out, "generator": torch.empty(0, device=self.device)})
        check_no_internal_overlap("out", out)
        check_untracked_write("out", out)
        return out

    def _draw(self, kind: int, shape: Sequence[int] | int, dtype: torch.dtype, out: torch.Tensor | None,
              mean: float, std: float) -> torch.Tensor:
        if self.name == "sobol32":
            return self._draw_sobol(kind, shape, dtype, out)
        shape = _shape(shape)
        _check_float(kind, dtype)
        mean, std = _finite("mean", mean), _finite("std", std)
        if std < 0:
            raise invalid("std", std, "non-negative")
        out = self._output(out, shape, dtype)
        n = math.prod(shape)
        if self.name == "mrg32k3a":  # one step per value; normal values come in pairs
            words = n + (n % 2 if kind in (2, 4) else 0)
        else:
            groups = -(-n // VALUES_PER_GROUP[kind])
            words = groups * WORDS_PER_GROUP[kind]
        if self.offset + words >= _MAX_WORDS:
            raise invalid("offset", self.offset, f"room for {words} more words below 2**62")
        if n:
            target = out if out.is_contiguous() else torch.empty(shape, dtype=dtype, device=out.device)
            distribution = ("bits", "uniform", "normal", "uniform", "normal", "normal")[kind]
            choice = select(self.name, distribution, dtype, (n,), device_info(out.device))
            if self.name == "mrg32k3a":
                launch_mrg(target.view(-1), ("bits", "uniform", "normal").index(distribution), self.seed,
                           self.subsequence, self.offset, mean, std, choice.config)
                if kind == 1 and dtype == torch.float16:
                    target.clamp_(min=2.0**-24)  # fp16 cannot hold the smallest values: keep (0, 1]
            else:
                launch_stream(target.view(-1), kind, self.seed, self.subsequence, self.offset, mean, std,
                              choice.config)
            mark_written(target)  # out itself, or a copy that torch's copy_ below counts in
            if target is not out:
                out.copy_(target)
            if log.trace_enabled():
                log.trace(f"rand {self.name} {distribution} n={n} seed={self.seed} subsequence="
                          f"{self.subsequence} offset={self.offset} -> {self.offset + words}: "
                          f"{choice.config.short()} ({choice.reason})")
        self.offset += words
        return out

    def _draw_sobol(self, kind: int, shape: Sequence[int] | int, dtype: torch.dtype,
                    out: torch.Tensor | None) -> torch.Tensor:
        points = integer(shape) is not None
        shape = _shape((shape, self.dimensions) if points else shape)
        if len(shape) != 2 or shape[1] != self.dimensions:
            raise invalid("shape", shape, f"(n, {self.dimensions}) or n: points × dimensions")
        _check_float(kind, dtype)
        n = shape[0]
        if self.offset + n > 2**32:
            raise invalid("offset + points", self.offset + n, "at most 2**32 (32-bit Sobol' points)")
        out = self._output(out, shape, dtype)
        if self._directions is None:
            table = direction_numbers()[: self.dimensions].T.view(np.int32)  # (32, dims)
            self._directions = torch.from_numpy(np.ascontiguousarray(table)).to(self.device)
            if self.scramble:
                self._shifts = Generator(seed=self.seed, device=self.device).integers32(self.dimensions)
        if n:
            wide = torch.float64 if dtype == torch.float64 else torch.float32
            target = out if (out.is_contiguous() and dtype in (torch.int32, wide)) else torch.empty(
                shape, dtype=torch.int32 if kind == 0 else wide, device=out.device)
            choice = select(self.name, "bits" if kind == 0 else "uniform", dtype, shape,
                            device_info(out.device))
            launch_sobol(target, self._directions, self._shifts, self.offset,
                         0 if kind == 0 else (3 if dtype == torch.float64 else 1), choice.config)
            mark_written(target)
            if dtype == torch.float16:
                target.clamp_(min=2.0**-24)  # fp16 cannot hold 2⁻³³: keep the interval (0, 1]
            if target is not out:
                out.copy_(target)
        self.offset += n
        return out
