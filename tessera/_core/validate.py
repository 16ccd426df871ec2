"""Checks every op runs before it launches anything.

Each helper raises :class:`InvalidArgumentError` or :class:`UnsupportedError` with a message that
names the argument, what it was and what was expected, so bad input never reaches a kernel.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Sequence

import numpy as np
import torch
from torch.autograd.graph import increment_version

from tessera._core.device import interpreter_enabled
from tessera._core.errors import InvalidArgumentError, UnsupportedError, invalid
from tessera._core.footprint import Footprint, byte_range, check_apart

INT32_MAX = 2**31 - 1


def as_tensor(name: str, value: object) -> torch.Tensor:
    """Accept a tensor, or any object with ``__dlpack__`` (converted without a copy)."""
    if isinstance(value, torch.Tensor):
        return value
    if hasattr(value, "__dlpack__"):
        try:
            return torch.from_dlpack(value)
        except Exception as exc:
            raise invalid(name, type(value).__name__, "convertible with torch.from_dlpack") from exc
    raise invalid(name, type(value).__name__, "a torch.Tensor or an object with __dlpack__")


def check_dtype(name: str, t: torch.Tensor, allowed: Iterable[torch.dtype], also: str = "") -> None:
    """Refuse ``t`` unless its dtype is one of ``allowed``; ``also`` names what else the caller
    takes on another path (said in the message)."""
    allowed = tuple(allowed)
    if t.dtype not in allowed:
        names = ", ".join(str(d).replace("torch.", "") for d in allowed)
        raise UnsupportedError(
            f"{name} has dtype {str(t.dtype).replace('torch.', '')}; supported: {names}{also}"
        )


def check_ndim(name: str, t: torch.Tensor, allowed: Sequence[int]) -> None:
    if t.dim() not in allowed:
        dims = " or ".join(f"{d}-D" for d in allowed)
        raise invalid(f"{name}.dim()", f"{t.dim()} (shape {tuple(t.shape)})", dims)


def check_same_device(tensors: dict[str, torch.Tensor]) -> torch.device:
    """All operands on one device, and that device one Tessera can run on."""
    devices = {name: t.device for name, t in tensors.items()}
    first_name, first = next(iter(devices.items()))
    for name, dev in devices.items():
        if dev != first:
            raise InvalidArgumentError(
                f"all operands must be on one device (actual: {first_name} on {first}, "
                f"{name} on {dev}); move them with .to(device)"
            )
    check_runnable(first)
    return first


def check_runnable(device: torch.device, what: str = "operands are") -> None:
    """A device Tessera runs on: a CUDA/ROCm GPU, or the CPU in Triton's interpreter."""
    if device.type == "cpu" and not interpreter_enabled():
        raise InvalidArgumentError(
            f"{what} on the CPU (actual: {device}); Tessera runs on a CUDA/ROCm GPU, or on "
            "the CPU only in Triton's interpreter: set TRITON_INTERPRET=1 before importing tessera"
        )
    if device.type not in ("cpu", "cuda"):
        raise UnsupportedError(f"device {device} is not supported; supported: cuda (CUDA or ROCm)")


def check_dtype_argument(name: str, value: object, none_ok: bool = False) -> None:
    """A dtype argument must be a torch.dtype (a string such as "float32" is not one)."""
    if not (isinstance(value, torch.dtype) or (none_ok and value is None)):
        expected = "a torch.dtype, e.g. torch.float32"
        raise invalid(name, repr(value), f"None or {expected}" if none_ok else expected)


def check_nonnegative_dims(name: str, t: torch.Tensor) -> None:
    """Torch tensors cannot have negative sizes; kept for shape tuples passed by users."""
    if any(s < 0 for s in t.shape):  # pragma: no cover - torch forbids it
        raise invalid(f"{name}.shape", tuple(t.shape), "non-negative sizes")


def extent_offsets(t: torch.Tensor) -> tuple[int, int]:
    """The byte range [lo, hi) the memory of ``t`` covers (:func:`footprint.byte_range`), relative
    to ``t.data_ptr()``; (0, 0) when empty. Fixed by shape, strides and dtype, so a caller that has
    checked those may test overlap per call from data pointers alone."""
    extent = byte_range(Footprint.of_tensor(t))
    return (0, 0) if extent is None else (extent[0] - t.data_ptr(), extent[1] - t.data_ptr())


def extents_meet(out_extent: tuple[int, int], inputs: Iterable[tuple[int, int]]) -> bool:
    """Whether the byte range ``out_extent`` [lo, hi) meets any input's; empty ranges meet nothing."""
    out_lo, out_hi = out_extent
    return out_lo != out_hi and any(lo != hi and lo < out_hi and out_lo < hi for lo, hi in inputs)


def check_no_overlap(out_name: str, out: torch.Tensor, inputs: dict[str, torch.Tensor]) -> None:
    """``out`` must share no element with any input (the kernel would read what it wrote); an
    output interleaved with an input without sharing an element is taken (:mod:`footprint`)."""
    reads = {name: Footprint.of_tensor(t) for name, t in inputs.items()}
    check_apart(out_name, Footprint.of_tensor(out), reads)


def check_out_apart(extents: tuple[tuple[int, int], ...], out: torch.Tensor,
                    inputs: dict[str, torch.Tensor]) -> None:
    """:func:`check_no_overlap` of ``out`` against ``inputs`` in a repeat call whose tensors have the
    layouts of the call that recorded ``extents`` (out's byte range, then each input's, from
    :func:`extent_offsets`): from data pointers alone where the ranges are apart (every call but
    odd ones), element by element where they meet."""
    (out_lo, out_hi), *offsets = extents
    start = out.data_ptr()
    ranges = [(t.data_ptr() + lo, t.data_ptr() + hi)
              for t, (lo, hi) in zip(inputs.values(), offsets, strict=True)]
    if extents_meet((start + out_lo, start + out_hi), ranges):
        check_no_overlap("out", out, inputs)


def checked_out(out: torch.Tensor, extents: tuple[tuple[int, int], ...] | None,
                inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """``out`` of a repeat call, checked as the full path checks it: not tracked by autograd
    (:func:`check_untracked_write`), sharing no element with ``inputs`` (:func:`check_out_apart`;
    ``extents`` recorded by the first call, which had an ``out`` of this layout)."""
    assert extents is not None  # a signature with out always records them
    check_untracked_write("out", out)
    check_out_apart(extents, out, inputs)
    return out


def integer(value: object) -> int | None:
    """``value`` as a Python int when it is an integer — a Python int or a NumPy integer scalar, as
    torch takes them for sizes and seeds — and None otherwise (a bool, a float, anything else)."""
    if type(value) is int:  # the per-call fast path: the ABC check below costs ~1 µs a call
        return value
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        return None
    return int(value)


def real(value: object) -> float | None:
    """``value`` as a float when it is a real number — a Python int or float, or a NumPy real
    scalar (``np.float32(2)``) — and None otherwise (a bool, a complex number, a tensor: a 0-d
    tensor would need a device sync, ``t.item()`` is the caller's)."""
    if type(value) is float or type(value) is int:  # the per-call fast path (bool is not int's type)
        return float(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        return None
    return float(value)


def real_scalar(name: str, value: object) -> float:
    """A real scalar argument (alpha, beta, a rotation's c and s) as a float (:func:`real`), or a
    clear error."""
    number = real(value)
    if number is None:
        raise invalid(name, repr(value), "a real number (Python or NumPy scalar)")
    return number


def check_bools(note: str = "", **flags: object) -> None:
    """Each flag must be a bool: a truthy string or number would be read as True silently
    (``trans="N"`` would transpose). ``note`` is added to the message."""
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise invalid(name, repr(value), f"True or False{note}")


def check_no_internal_overlap(name: str, t: torch.Tensor) -> None:
    """An output whose elements alias each other (a stride of 0, an expanded view) is refused."""
    if t.numel() > 1 and any(st == 0 and s > 1 for s, st in zip(t.shape, t.stride(), strict=True)):
        raise invalid(f"{name}.stride()", t.stride(), "non-zero strides for an output (no expand())")


def max_offset(t: torch.Tensor) -> int:
    """Largest element offset the tensor's view reaches from its data pointer."""
    if t.is_contiguous() and t.numel() > 0:  # the per-call fast path: no loop over dimensions
        return t.numel() - 1
    return sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride(), strict=True) if s > 0)


def needs_int64_index(*tensors: torch.Tensor) -> bool:
    """True when some element offset does not fit int32, so kernels must index in int64."""
    return any(t.numel() > 0 and max_offset(t) > INT32_MAX for t in tensors)


def check_untracked_write(name: str, t: torch.Tensor) -> None:
    """Refuse to write ``t`` in place where autograd tracks it (grad mode on and ``t`` requiring a
    gradient): Tessera's kernels write through data pointers, which autograd cannot record — torch
    refuses such writes too (in-place ops on leaves, ``out=`` with gradients)."""
    if t.requires_grad and torch.is_grad_enabled():
        raise InvalidArgumentError(
            f"{name} requires a gradient, and Tessera would write it in place, which autograd cannot "
            f"record; write it under torch.no_grad(), or into a tensor that does not require one")


def mark_written(*tensors: torch.Tensor) -> None:
    """Tell autograd that ``tensors`` were written in place through their data pointers (their
    version counters, shared with their views, go up), so a backward pass that saved one of them
    before the write raises instead of using the new values."""
    increment_version(tensors)
