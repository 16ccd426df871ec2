"""Launch a ``@triton.jit`` kernel without Triton's per-call dispatch once it has been compiled.

``JITFunction.run`` binds and specializes every argument and hashes a cache key on each call
(tens of µs on the H200's host). :class:`Launcher` keys its own cache on exactly what Triton
specializes on, so a hit is guaranteed to be the binary Triton itself would pick, and then calls the
compiled kernel's launcher directly; a miss goes through Triton's JIT (which compiles or finds the
binary) and records the result. The rules (identical in triton 3.6 and 3.9, checked with
``native_specialize_impl``): an integer equal to 1 becomes a constant; other integers specialize on
divisibility by 16 and on i32/i64/u64 width (a parameter named in ``do_not_specialize`` on its width
only); pointers on 16-byte alignment; tensor descriptors on dtype and block shape; floats and bools
not at all. Under ``TRITON_INTERPRET=1`` it simply calls the
kernel, and ``TESSERA_DIRECT_LAUNCH=0`` turns the cache off. A :class:`Replay` (a repeat call's
launch) goes one step further where Triton 3.6's launcher layout is found: it calls the kernel's
C launcher itself (:class:`RawLauncher`), its tensor descriptors' TMA maps kept by address,
skipping Triton's Python wrappers (``TESSERA_RAW_LAUNCH=0`` turns that off).

A kernel whose ``PDL`` constexpr is not off is compiled with ``launch_pdl`` (programmatic dependent
launch, CUDA sm_90+): see :func:`pdl_mode`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import warnings
import weakref
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import torch

from tessera._core.device import interpreter_enabled

_I32_MIN, _I32_MAX, _I64_MAX = -(2**31), 2**31 - 1, 2**63 - 1


def _int_key(v: int) -> tuple[bool, bool, int]:
    width = 0 if _I32_MIN <= v <= _I32_MAX else (1 if v <= _I64_MAX else 2)
    return (v == 1, v % 16 == 0, width)


def _tensor_key(t: torch.Tensor) -> tuple[torch.dtype, bool]:
    return (t.dtype, t.data_ptr() % 16 == 0)


_BY_TYPE: dict[type, Any] = {
    int: _int_key, torch.Tensor: _tensor_key, float: lambda _: "f", bool: lambda _: "u1",
    type(None): lambda _: None,
}


def specialization_key(arg: Any, specialize: bool = True) -> Any:
    """What Triton's JIT specializes ``arg`` on (a superset is safe; a subset would not be);
    ``specialize=False`` for a ``do_not_specialize`` parameter (an integer then keys on its width)."""
    if not specialize and type(arg) is int:
        return ("i", _int_key(arg)[2])
    rule = _BY_TYPE.get(type(arg))
    if rule is not None:
        return rule(arg)
    if isinstance(arg, torch.Tensor):  # subclasses (nn.Parameter, …)
        return _tensor_key(arg)
    base = getattr(arg, "base", None)  # a TensorDescriptor
    if isinstance(base, torch.Tensor):
        return ("desc", base.dtype, tuple(arg.block_shape), getattr(arg, "padding", None),
                getattr(arg, "round_f32_to_tf32", None))
    raise TypeError(f"no specialization rule for a {type(arg).__name__} kernel argument")


_compile_only: ContextVar[bool] = ContextVar("tessera_compile_only", default=False)


@contextlib.contextmanager
def compile_only() -> Iterator[None]:
    """Launches in this block only compile (``JITFunction.warmup``): the tuner uses it inside
    Triton's ``AsyncCompileMode`` to compile candidates in parallel before timing them."""
    token = _compile_only.set(True)
    try:
        yield
    finally:
        _compile_only.reset(token)


_building_for: ContextVar[tuple[str, str] | None] = ContextVar("tessera_building_for", default=None)


@contextlib.contextmanager
def building_for(backend: str, arch: str = "") -> Iterator[None]:
    """Launches in this block are for ``backend`` ("cuda" or "hip") and ``arch`` ("sm_90", …;
    empty: unknown), whatever device their tensors are on: pack builds capture launches on CPU
    tensors for a GPU target."""
    token = _building_for.set((backend, arch))
    try:
        yield
    finally:
        _building_for.reset(token)


def build_arch() -> str:
    """The architecture a pack build in progress compiles for (:func:`building_for`); empty at run
    time or when the build's architecture is unknown."""
    building = _building_for.get()
    return building[1] if building is not None else ""


def nvidia_target(t: torch.Tensor) -> bool:
    """Whether a launch on ``t``'s device compiles for an NVIDIA GPU (so inline PTX may be used):
    the pack build's target inside :func:`building_for`, else t is a CUDA (not ROCm) tensor and
    the interpreter is off."""
    building = _building_for.get()
    if building is not None:
        return building[0] == "cuda"
    return t.is_cuda and torch.version.hip is None and not interpreter_enabled()


# Programmatic dependent launch (PDL) modes, the ``PDL`` constexpr of kernels that take it
# (``pdl.dependent_launch``): off; wait for the previous kernel, then let the next one launch at
# once ("early"); wait only, the next kernel launching as this one's programs exit ("exit").
PDL_OFF, PDL_EARLY, PDL_AT_EXIT = 0, 1, 2
PDL_MODES = {"off": PDL_OFF, "early": PDL_EARLY, "exit": PDL_AT_EXIT}  # by name (TESSERA_PDL, configs)
_PDL_NAMES = {"0": PDL_OFF, **PDL_MODES}


def _pdl_override(value: str | None) -> int | None:
    """TESSERA_PDL: unset, "1" or "measured" → None (each launch site's measured choice); "0"/"off",
    "early", "exit" → that mode at every launch site that takes PDL (for comparisons)."""
    if value is None or value in ("", "1", "measured"):
        return None
    if value in _PDL_NAMES:
        return _PDL_NAMES[value]
    warnings.warn(f"TESSERA_PDL={value!r} is not one of 0, 1, measured, off, early, exit: using each "
                  "launch site's measured choice", stacklevel=2)
    return None


_PDL = _pdl_override(os.environ.get("TESSERA_PDL"))


def pdl_mode(t: torch.Tensor, measured: int) -> int:
    """The PDL mode of a launch on ``t``'s device: ``measured`` (the launch site's choice, from
    timings on the H200) unless TESSERA_PDL overrides it, and always off where the target has no
    PDL (it needs NVIDIA sm_90+; pack builds follow their target). A PDL launch may start while the
    stream's previous kernel finishes (when that one allows it, as cuBLAS's do); the kernel waits
    (``griddepcontrol.wait``) before its first memory access, so it sees all that kernel wrote."""
    if not _pdl_supported(t):
        return PDL_OFF
    return measured if _PDL is None else _PDL


def _pdl_supported(t: torch.Tensor) -> bool:
    if not nvidia_target(t):
        return False
    building = _building_for.get()
    if building is not None:
        return _sm_version(building[1]) >= 90
    index = t.device.index if t.device.index is not None else torch.cuda.current_device()
    return _device_sm_version(index) >= 90


def _sm_version(arch: str) -> int:
    """90 for "sm_90" (and "sm_90a"), 0 when ``arch`` is not an NVIDIA architecture name."""
    digits = arch[3:].rstrip("abf") if arch.startswith("sm_") else ""
    return int(digits) if digits.isdigit() else 0


@functools.cache
def _device_sm_version(index: int) -> int:
    major, minor = torch.cuda.get_device_capability(index)
    return 10 * major + minor


def launch_options(constexprs: dict[str, Any]) -> dict[str, Any]:
    """Compile options a launch implies besides warps and stages: ``launch_pdl`` for a launch
    whose ``PDL`` mode is not off, ``maxnreg`` for a kernel's nonzero ``MAXNREG`` (a register cap
    that is part of the launch key, so a pack compiles it as the JIT does)."""
    options: dict[str, Any] = {"launch_pdl": True} if constexprs.get("PDL") else {}
    if constexprs.get("MAXNREG"):
        options["maxnreg"] = constexprs["MAXNREG"]
    return options


@dataclass(frozen=True)
class Call:
    """One launch, as :func:`capture` records it."""

    launcher: Launcher
    grid: tuple[int, ...]
    args: tuple[Any, ...]
    constexprs: dict[str, Any]
    num_warps: int
    num_stages: int

    def key(self) -> tuple:
        """This launch's :func:`launch_key`: what its Launcher caches the binary under, and (as its
        ``repr``) what a pack names the binary it precompiles for it."""
        return launch_key(self.args, self.constexprs, self.num_warps, self.num_stages,
                          unspecialized(self.launcher.kernel))


_captured: ContextVar[list[Call] | None] = ContextVar("tessera_captured", default=None)


@contextlib.contextmanager
def _collecting(var: ContextVar[list[Call] | None]) -> Iterator[list[Call]]:
    """Launches in this block are appended to the list it yields (through ``var``), and on leaving
    it to an enclosing block's list too: a block nested in another (a ``gemm`` call recording its
    launches for a recipe inside a caller's recording) hides nothing from the outer one."""
    calls: list[Call] = []
    outer = var.get()
    token = var.set(calls)
    try:
        yield calls
    finally:
        var.reset(token)
        if outer is not None:
            outer.extend(calls)


def capture() -> contextlib.AbstractContextManager[list[Call]]:
    """Launches in this block are recorded, not run (no GPU needed): pack builds use it to learn
    the exact arguments a family's launcher passes for a representative problem."""
    return _collecting(_captured)


def function_name(kernel: Any) -> str:
    """A kernel's stable name across processes: ``module:function``."""
    return f"{kernel.fn.__module__}:{kernel.fn.__name__}"


def jit_specialization(kernel: Any, args: Sequence[Any], constexprs: dict[str, Any], num_warps: int,
                       num_stages: int, backend: Any) -> tuple[dict, dict, dict, Any]:
    """What Triton's JIT would compile for this launch on ``backend``'s target — (signature,
    constexprs, attrs, options) — computed with Triton's own binder, so an offline compile of it
    is the binary the JIT would build (works without a GPU of that target; pack builds use it)."""
    from triton import knobs
    from triton.runtime.jit import create_function_from_signature

    kwargs: dict[str, Any] = dict(constexprs, num_warps=num_warps, num_stages=num_stages,
                                  **launch_options(constexprs))
    kwargs["debug"] = kernel.debug or knobs.runtime.debug  # as JITFunction.run sets them
    for knob in ("instrumentation_mode", "fpsan_homomorphic_casts"):
        if hasattr(knobs.compilation, knob):
            kwargs[knob] = getattr(knobs.compilation, knob)
    binder = create_function_from_signature(kernel.signature, kernel.params, backend)
    bound, specialization, options = binder(*args, **kwargs)
    options, signature, constants, attrs = kernel._pack_args(backend, kwargs, bound, specialization, options)
    return signature, constants, attrs, options


def unspecialized(kernel: Any) -> frozenset[int]:
    """Positions of ``kernel``'s ``do_not_specialize`` parameters."""
    return frozenset(p.num for p in getattr(kernel, "params", ()) if p.do_not_specialize)


def launch_key(args: Sequence[Any], constexprs: dict[str, Any], num_warps: int, num_stages: int,
               plain: frozenset[int] = frozenset()) -> tuple:
    """Everything the binary for a launch depends on besides the device: a :class:`Launcher` cache
    key, and (as its ``repr``) the name a pack gives the binary it precompiled for it. ``plain``:
    the positions of ``do_not_specialize`` parameters (:func:`unspecialized`)."""
    keys = []
    for i, a in enumerate(args):  # ints and tensors inline: this runs on every launch
        kind = type(a)
        if kind is int and i not in plain:
            width = 0 if _I32_MIN <= a <= _I32_MAX else (1 if a <= _I64_MAX else 2)
            keys.append((a == 1, a % 16 == 0, width))
        elif kind is torch.Tensor:
            keys.append((a.dtype, a.data_ptr() % 16 == 0))
        elif kind is float:
            keys.append("f")
        else:
            keys.append(specialization_key(a, i not in plain))
    return (num_warps, num_stages, tuple(constexprs.values()), tuple(keys))


def cdiv(a: int, b: int) -> int:
    """⌈a / b⌉ for launch grids. Host code uses this, not ``triton.cdiv``: in triton 3.6 and 3.9
    that is a ``constexpr_function`` costing 6–13 µs per host call (half of a gemv's host time)."""
    return -(-a // b)


def next_power_of_2(n: int) -> int:
    """The smallest power of two ≥ n (1 for n ≤ 1); see :func:`cdiv` for why not triton's."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def word(value: int) -> int:
    """A 32-bit word as the int32 holding its bits. Kernels take seeds, offsets and states as such
    words in ``do_not_specialize`` parameters: always i32, never specialized, so one binary serves
    every value (a Python int ≥ 2³¹ would make an i64 variant, one divisible by 16 another)."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def words(value: int) -> tuple[int, int]:
    """(low, high) 32-bit words of a 64-bit value, each as :func:`word`."""
    return word(value), word(value >> 32)


class Launcher:
    """Calls ``kernel[grid](*args, **constexprs, num_warps=…, num_stages=…)``, fast after the first time.

    ``args`` are the runtime arguments in parameter order and ``constexprs`` the kernel's trailing
    parameters, in order (checked on the first launch); constexpr values must be hashable.
    """

    # TESSERA_DIRECT_LAUNCH=0 sends every launch through Triton's JIT (for comparison or doubt).
    enabled = os.environ.get("TESSERA_DIRECT_LAUNCH", "1") != "0"

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self._plain = unspecialized(kernel)
        self._cache: dict[tuple, Any] = {}
        self.jit_launches = 0  # launches that went through Triton's JIT (tests count these)
        self.pack_loads = 0  # binaries taken from the installed pack (or the kernel cache) instead

    def _check_order(self, args: Sequence[Any], constexprs: dict[str, Any]) -> None:
        """Launch keys assume the constexprs follow the positional arguments in signature order."""
        trailing = list(self.kernel.arg_names[len(args):])
        if trailing != list(constexprs):
            raise TypeError(f"constexprs must be the kernel's trailing parameters {trailing}, in "
                            f"order (got {list(constexprs)})")

    def __call__(self, grid: Sequence[int], args: Sequence[Any], constexprs: dict[str, Any],
                 num_warps: int, num_stages: int) -> None:
        if several_gpus():  # launch on the operands' GPU, as torch's own ops do
            index = operands_device(args)
            if index is not None and index != torch.cuda.current_device():
                with torch.cuda.device(index):
                    return self(grid, args, constexprs, num_warps, num_stages)
        captured = _captured.get()
        if captured is not None:
            captured.append(Call(self, tuple(grid), tuple(args), dict(constexprs), num_warps, num_stages))
            return
        if _compile_only.get():
            if not interpreter_enabled():
                self.kernel.warmup(*args, grid=tuple(grid), **constexprs, num_warps=num_warps,
                                   num_stages=num_stages, **launch_options(constexprs))
            return
        recorded = _recorded.get()
        if recorded is not None:
            recorded.append(Call(self, tuple(grid), tuple(args), dict(constexprs), num_warps, num_stages))
        if not self.enabled or interpreter_enabled():
            self._check_order(args, constexprs)  # as on the GPU, so that CI catches a wrong order
            self.kernel[tuple(grid)](*args, **constexprs, num_warps=num_warps, num_stages=num_stages,
                                     **launch_options(constexprs))
            return
        device = _triton_runtime()[1].active.get_current_device()
        key = self._key(device, args, constexprs, num_warps, num_stages)
        compiled = self._cache.get(key)
        if compiled is None:
            self._check_order(args, constexprs)
            compiled = self._from_pack(key)
            if compiled is None:
                compiled = self.kernel[tuple(grid)](*args, **constexprs, num_warps=num_warps,
                                                    num_stages=num_stages, **launch_options(constexprs))
                self._cache[key] = compiled.result() if hasattr(compiled, "result") else compiled
                self.jit_launches += 1
                from tessera.tuning import binaries

                binaries.remember(self.kernel, repr(key[1:]), self._cache[key])
                return
            self._cache[key] = compiled
            self.pack_loads += 1
        run_compiled(compiled, grid, (*args, *constexprs.values()), device)

    def compiled_for(self, call: Call) -> tuple[Any, int] | None:
        """The binary (and device) a direct launch of ``call`` on the current device uses, if it has
        been launched or loaded before; None otherwise, or when launches go through Triton's JIT."""
        if not self.enabled or interpreter_enabled():
            return None
        device = _triton_runtime()[1].active.get_current_device()
        key = self._key(device, call.args, call.constexprs, call.num_warps, call.num_stages)
        compiled = self._cache.get(key)
        return None if compiled is None else (compiled, device)

    def _key(self, device: int, args: Sequence[Any], constexprs: dict[str, Any], num_warps: int,
             num_stages: int) -> tuple:
        """The cache key of a launch on ``device``: the device, then :func:`launch_key`."""
        return (device, *launch_key(args, constexprs, num_warps, num_stages, self._plain))

    def _from_pack(self, key: tuple) -> Any:
        """The installed pack's (else the kernel cache's) binary for this exact specialization,
        loaded, or None (no Triton code runs to decide: each binary is named by its launch key)."""
        from tessera.tuning import binaries

        return binaries.load(self.kernel, repr(key[1:]))


@functools.cache
def several_gpus() -> bool:
    """Whether this process sees more than one GPU: only then can a launch's operands live on a
    GPU other than the current one (one GPU: no per-launch check at all)."""
    return torch.cuda.is_available() and torch.cuda.device_count() > 1


def operands_device(args: Sequence[Any]) -> int | None:
    """The GPU index of a launch's first tensor argument (a tensor descriptor's too); None when
    it has none on a GPU. Kernels are compiled for, loaded into and queued on the current device
    (Triton's JIT works so too), so a launch on another GPU's tensors must switch to it first."""
    for arg in args:
        t = getattr(arg, "base", arg)
        if isinstance(t, torch.Tensor):
            return t.device.index if t.is_cuda else None
    return None


@functools.cache
def _triton_runtime() -> tuple[Any, Any]:
    """Triton's ``knobs`` and driver config, imported on first use (a per-launch import costs µs);
    Triton is told where the loaded CUDA driver library is first (:func:`loaded_libcuda`)."""
    from triton import knobs
    from triton.runtime.driver import driver

    if knobs.nvidia.libcuda_path is None and (folder := loaded_libcuda()) is not None:
        knobs.nvidia.libcuda_path = folder
    return knobs, driver


def loaded_libcuda(maps: str = "/proc/self/maps") -> str | None:
    """The folder of the ``libcuda.so.1`` this process has mapped (torch's CUDA context loads it),
    or None. Triton's driver set-up otherwise runs ``/sbin/ldconfig -p`` to find it, a subprocess
    of 3–6 ms in every process's first launch (fiftieth session's profile), unless its
    ``TRITON_LIBCUDA_PATH`` knob names the folder, which is where this answer goes (only when the
    user set none). A folder without ``libcuda.so.1`` in it (Triton links against that name) is
    not taken."""
    try:
        with open(maps) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        path = line.rpartition(" ")[2]
        if os.path.basename(path).startswith("libcuda.so"):
            folder = os.path.dirname(path)
            if os.path.exists(os.path.join(folder, "libcuda.so.1")):
                return folder
    return None


def _launch_hooks() -> tuple[Any, Any]:
    """Triton's launch enter and exit hooks, None where unset or an empty chain (a profiler such
    as Proton sets them: launches then go through Triton's own launch path)."""
    knobs = _triton_runtime()[0]
    enter, leave = knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook
    if not getattr(enter, "calls", True):
        enter = None
    if not getattr(leave, "calls", True):
        leave = None
    return enter, leave


def run_compiled(compiled: Any, grid: Sequence[int], bound: tuple[Any, ...], device: int) -> None:
    """Launch a compiled kernel on the current stream with every argument (constexprs last), as
    Triton's ``JITFunction.run`` does after it has found the binary. Empty launch-hook chains are
    passed as None, so the launcher neither builds launch metadata nor calls into Python twice."""
    stream = _triton_runtime()[1].active.get_current_stream(device)
    enter, leave = _launch_hooks()
    grid_0, grid_1, grid_2 = (*grid, 1, 1)[:3]
    metadata = None if enter is None else compiled.launch_metadata(grid, stream, *bound)
    compiled.run(grid_0, grid_1, grid_2, stream, compiled.function, compiled.packed_metadata, metadata,
                 enter, leave, *bound)


# Triton 3.6's CUDA launcher (``CudaLauncher``): a C function per kernel taking these leading
# arguments, wrapped (when the kernel takes tensor descriptors) by a closure over these names that
# encodes each descriptor into a TMA map on every launch. Another Triton's launcher takes other
# arguments (3.9's is one generic function taking the kernel's arguments as a tuple): its kernels
# keep Triton's launch path, so nothing is called with a layout not checked on a GPU.
_TRITON36_BASE_ARGS = "iiiKKppOOOOOO"
_TRITON36_DESCRIPTOR_CELLS = frozenset({"launcher", "tensordesc_indices", "tensordesc_meta"})


@dataclass(frozen=True)
class RawLauncher:
    """A compiled kernel's own C launcher, called with exactly what Triton's Python wrappers pass
    it (:func:`raw_launcher`). Those wrappers cost a repeat call most of its host time: on an H100
    a launch with three tensor descriptors took 16.2 µs through ``compiled.run`` (6.7 of them
    encoding the descriptors) and 6.1 µs through this launcher with the maps encoded before."""

    launch: Any  # the C function
    function: int  # the loaded CUfunction
    packed_metadata: Any
    cooperative: bool
    pdl: bool
    descriptors: dict[int, Any]  # argument position → Triton's TMA metadata of that descriptor
    encode: Any  # Triton's own expansion of a descriptor: [TMA map, *shape, *strides]

    def expand(self, position: int, descriptor: Any) -> list[Any]:
        """The launcher's arguments for tensor descriptor ``descriptor`` at ``position``."""
        return list(self.encode(descriptor, self.descriptors[position]))

    def __call__(self, grid: Sequence[int], stream: int, args: Sequence[Any]) -> None:
        grid_0, grid_1, grid_2 = (*grid, 1, 1)[:3]
        self.launch(grid_0, grid_1, grid_2, stream, self.function, self.cooperative, self.pdl, None, None,
                    self.packed_metadata, None, None, None, *args)


def raw_launcher(compiled: Any, driver_module: Any = None) -> RawLauncher | None:
    """``compiled``'s C launcher where it has Triton 3.6's layout (``driver_module``: Triton's
    NVIDIA driver module, imported when None), uses no global or profiling scratch (Triton's
    wrapper allocates those per launch) and encodes every tensor descriptor as a TMA map; else
    None (launch it with :func:`run_compiled`)."""
    if driver_module is None:
        try:
            from triton.backends.nvidia import driver as driver_module
        except ImportError:
            return None
    run = compiled.run
    if (getattr(driver_module, "_BASE_ARGS_FORMAT", None) != _TRITON36_BASE_ARGS
            or type(run).__name__ != "CudaLauncher" or getattr(run, "global_scratch_size", 1)
            or getattr(run, "profile_scratch_size", 1)):
        return None
    launch, descriptors = run.launch, {}
    closure = getattr(launch, "__closure__", None)
    if closure is not None:  # wrapped: the kernel takes tensor descriptors
        cells = dict(zip(launch.__code__.co_freevars, (cell.cell_contents for cell in closure), strict=True))
        if set(cells) != _TRITON36_DESCRIPTOR_CELLS:
            return None
        positions = sorted(cells["tensordesc_indices"])
        metadata = cells["tensordesc_meta"] or [None] * len(positions)
        if any(meta is None for meta in metadata):  # decomposed to pointers, not TMA maps
            return None
        launch, descriptors = cells["launcher"], dict(zip(positions, metadata, strict=True))
    elif not callable(launch) or hasattr(launch, "__code__"):
        return None  # neither the C function nor its known wrapper
    return RawLauncher(launch, compiled.function, compiled.packed_metadata, bool(run.launch_cooperative_grid),
                       bool(run.launch_pdl), descriptors, driver_module.make_tensordesc_arg)


_recorded: ContextVar[list[Call] | None] = ContextVar("tessera_recorded", default=None)


def recording() -> contextlib.AbstractContextManager[list[Call]]:
    """Launches in this block run as usual and are also recorded (what :class:`Replay` is built
    from; unlike :func:`capture`, which records instead of running)."""
    return _collecting(_recorded)


def _with_base(desc: Any, base: torch.Tensor | None) -> Any:
    """A copy of tensor descriptor ``desc`` over ``base`` (same dtype, shape and strides): skips
    the constructor's checks, which ``desc`` passed for that shape, strides and block."""
    try:
        clone = object.__new__(type(desc))
        clone.__dict__.update(desc.__dict__)
    except (AttributeError, TypeError):  # a descriptor class with __slots__
        import copy

        clone = copy.copy(desc)
    clone.base = base
    return clone


def layout_key(t: torch.Tensor | None) -> tuple | None:
    """What a recorded launch's binary and arguments depend on of a tensor it took (None:
    absent): a repeat call whose tensors have the same keys can replay it (:class:`Replay`)."""
    return None if t is None else (t.shape, t.stride(), t.dtype, t.device, t.data_ptr() % 16)


def _slot(t: torch.Tensor, operands: Sequence[torch.Tensor]) -> tuple[int, bool] | None:
    """Which operand ``t`` is — (index, transposed) — or None when it is none of them or could be
    more than one (operands sharing memory). A view with the operand's memory, shape, strides and
    dtype (one scale tensor reshaped twice) is that operand."""
    found = None
    for i, op in enumerate(operands):
        if t is op or (t.data_ptr() == op.data_ptr() and t.dtype == op.dtype and t.shape == op.shape
                       and t.stride() == op.stride()):
            transposed = False
        elif (t.data_ptr() == op.data_ptr() and op.dim() == 2 and t.shape == op.t().shape
              and t.stride() == op.t().stride()):
            transposed = True
        elif t.data_ptr() == op.data_ptr():
            return None  # another view of an operand's memory: no safe mapping
        else:
            continue
        if found is not None:
            return None
        found = (i, transposed)
    return found


# Scratch buffers (workspaces, counters) are kept per device, stream and thread, as torch keeps a
# cuBLAS handle and workspace per thread and stream: launches on one stream run one after another,
# so they can share one, and a call's launches (split-K's partials, then their sum) never
# interleave with another thread's use of the buffer on a shared stream. A buffer asked
# for ``zeroed`` is created zeroed and every kernel given one leaves it zeroed, so no fill runs
# before each launch. Under a CUDA graph capture, or while launches are only captured or
# compiled, each request gets a fresh buffer that is not kept (a zeroed one then records its fill
# in the graph): a kept buffer shared by a graph and by launches on another stream would race.
# So does a request above SCRATCH_KEPT_BYTES, so that a large problem's workspace returns to
# torch's allocator after the call instead of staying pinned (such a call gets no replay).
ScratchRequest = tuple[str, int, torch.dtype, torch.device, bool]  # name, numel, dtype, device, zeroed
SCRATCH_KEPT_BYTES = 64 << 20
_scratch: weakref.WeakKeyDictionary[threading.Thread, dict[tuple[str, torch.dtype, torch.device, bool, int],
                                                           torch.Tensor]] = weakref.WeakKeyDictionary()


_this_thread = threading.local()  # .kept: the thread's dict in _scratch, without a lookup by thread


def _kept() -> dict[tuple[str, torch.dtype, torch.device, bool, int], torch.Tensor]:
    """This thread's kept scratch buffers (dropped with the thread)."""
    kept = getattr(_this_thread, "kept", None)
    if kept is None:
        kept = _this_thread.kept = _scratch.setdefault(threading.current_thread(), {})
    return kept


def scratch(name: str, numel: int, dtype: torch.dtype, device: torch.device, zeroed: bool) -> torch.Tensor:
    """A buffer of at least ``numel`` elements for a kernel's use on the current stream (see
    above); ``name`` separates the buffers of different uses."""
    make = torch.zeros if zeroed else torch.empty
    too_large = numel * dtype.itemsize > SCRATCH_KEPT_BYTES
    if too_large or _captured.get() is not None or _compile_only.get():
        return make(numel, dtype=dtype, device=device)
    stream = 0
    if device.type == "cuda":
        if torch.cuda.is_current_stream_capturing():
            return make(numel, dtype=dtype, device=device)
        index = device.index if device.index is not None else torch.cuda.current_device()
        stream = _triton_runtime()[1].active.get_current_stream(index)
    key, kept = (name, dtype, device, zeroed, stream), _kept()
    buffer = kept.get(key)
    if buffer is None or buffer.numel() < numel:
        kept.pop(key, None)  # freed first: stream-ordered, so queued launches still see it
        buffer = kept[key] = make(numel, dtype=dtype, device=device)
    return buffer


def release_scratch() -> None:
    """Drop the kept scratch buffers of every thread (their memory returns to torch's caching
    allocator); the next launches allocate new ones."""
    for kept in list(_scratch.values()):
        kept.clear()


# Kernel arguments that stay the same tensor across calls (a cached plan or table, made once for
# its sizes and device): a Replay may keep them, as it keeps sizes and scalars. Registered by
# identity, with a weak reference so that a dead one's reused id is not taken for it.
_constants: dict[int, weakref.ref[torch.Tensor]] = {}


def constant(t: torch.Tensor) -> torch.Tensor:
    """``t``, marked as a launch argument that never changes (a :class:`Replay` keeps it)."""
    _constants[id(t)] = weakref.ref(t)
    return t


def _is_constant(t: torch.Tensor) -> bool:
    ref = _constants.get(id(t))
    return ref is not None and ref() is t


def _scratch_request(t: torch.Tensor) -> ScratchRequest | None:
    """The request that returns the kept buffer ``t`` again (on the same stream and thread), or
    None. ``t`` may be a view of the buffer from its first element on (a kernel takes a pointer:
    the buffer itself then stands for the view)."""
    pointer = t.data_ptr()
    for (name, dtype, device, zeroed, _), buffer in _kept().items():
        if buffer is t or (buffer.data_ptr() == pointer and buffer.dtype == t.dtype
                           and t.numel() <= buffer.numel()):
            return (name, t.numel(), dtype, device, zeroed)
    return None


class Replay:
    """One recorded launch, repeatable on new operands of the same shapes, strides, dtypes and
    16-byte alignment: every other argument (sizes, strides, scalars, grid, constexprs) stays as
    recorded, so the binary is the one the recording used and no launch key is computed again.

    A repeat ``gemm`` call uses it to skip its launcher's argument building; build it with
    :meth:`of` from a :func:`recording` of exactly one launch whose tensors (and tensor
    descriptors' bases) are all operands or their transposes, kept :func:`scratch` buffers
    (asked for again at each replay: the current stream's) or :func:`constant` ones (kept as
    recorded), else there is no replay. Repeat level-2 calls use it too (``blas.repeat``)."""

    def __init__(self, call: Call, slots: tuple[tuple[int, int, bool, bool], ...],
                 scratches: tuple[tuple[int, ScratchRequest], ...] = ()) -> None:
        self.slots = slots  # (argument position, operand index, transposed, is a descriptor)
        self.scratches = scratches  # (argument position, scratch request)
        args = list(call.args)
        for position, _, _, descriptor in slots:  # hold no operand: a recipe outlives its call
            args[position] = _with_base(args[position], None) if descriptor else None
        for position, _ in scratches:
            args[position] = None
        self.call = Call(call.launcher, call.grid, tuple(args), call.constexprs, call.num_warps,
                         call.num_stages)
        self.bound = [*args, *call.constexprs.values()]
        self.compiled: tuple[Any, int] | None = None
        self._raw: RawLauncher | bool | None = None  # None: not looked up; False: none
        self._template: list[Any] | None = None  # the C launcher's arguments (RawLauncher)
        self._place: list[int] = []  # argument position → its place in the template
        self._maps: dict[tuple[int, int], Any] = {}  # (position, address) → TMA map

    @classmethod
    def each_of(cls, calls: Sequence[Call], operands: Sequence[torch.Tensor]) -> tuple[Replay, ...] | None:
        """Every recorded launch as a Replay, in order (a split-K call's partials, then their sum),
        or None when any of them cannot be replayed."""
        replays = tuple(cls.of([call], operands) for call in calls)
        return replays if replays and all(r is not None for r in replays) else None  # type: ignore[return-value]

    @classmethod
    def of(cls, calls: Sequence[Call], operands: Sequence[torch.Tensor]) -> Replay | None:
        if len(calls) != 1:
            return None
        call, slots, scratches = calls[0], [], []
        for position, arg in enumerate(call.args):
            base = getattr(arg, "base", None)
            descriptor = isinstance(base, torch.Tensor)
            tensor = base if descriptor else arg
            if not isinstance(tensor, torch.Tensor):
                continue
            slot = _slot(tensor, operands)
            request = None if slot is not None or descriptor else _scratch_request(tensor)
            if request is not None:
                scratches.append((position, request))
            elif slot is None and not descriptor and _is_constant(tensor):
                continue  # kept, as recorded
            elif slot is None:
                return None
            else:
                slots.append((position, *slot, descriptor))
        return cls(call, tuple(slots), tuple(scratches))

    def _bound(self, operands: Sequence[torch.Tensor], values: Sequence[tuple[int, float]]) -> list[Any]:
        """Every argument of the launch on ``operands`` (constexprs last), ``values`` written in."""
        bound = list(self.bound)
        for position, value in values:
            bound[position] = value
        for position, index, transposed, descriptor in self.slots:
            t = operands[index].t() if transposed else operands[index]
            bound[position] = _with_base(bound[position], t) if descriptor else t
        for position, request in self.scratches:
            bound[position] = scratch(*request)
        return bound

    def __call__(self, operands: Sequence[torch.Tensor], values: Sequence[tuple[int, float]] = ()) -> None:
        """Launch on ``operands``, with ``values`` (argument position, float) in place of the
        recorded floats there (a routine's alpha: floats are not specialized, so the binary is the
        same)."""
        call = self.call
        if (call.launcher.enabled and _captured.get() is None and not _compile_only.get()
                and _recorded.get() is None):
            if self.compiled is None:
                self.compiled = call.launcher.compiled_for(Call(
                    call.launcher, call.grid, tuple(self._bound(operands, values)[:len(call.args)]),
                    call.constexprs, call.num_warps, call.num_stages))
            if self.compiled is not None and self._launch_compiled(*self.compiled, operands, values):
                return
        # through the launcher: capture, compile-only and recording blocks see every launch; JIT
        # launches (interpreter, TESSERA_DIRECT_LAUNCH=0); another current device (keyed again)
        bound = self._bound(operands, values)
        call.launcher(call.grid, bound[:len(call.args)], call.constexprs, call.num_warps, call.num_stages)

    def _launch_compiled(self, compiled: Any, device: int, operands: Sequence[torch.Tensor],
                         values: Sequence[tuple[int, float]]) -> bool:
        """Launch the recorded binary on ``operands`` if ``device`` is current (else False):
        through its C launcher where :func:`raw_launcher` finds one and no launch hook is set."""
        active = _triton_runtime()[1].active
        if active.get_current_device() != device:
            return False
        raw = self._raw_launcher(compiled)
        if raw is not None and _launch_hooks() == (None, None):
            raw(self.call.grid, active.get_current_stream(device), self._raw_args(raw, operands, values))
        else:
            run_compiled(compiled, self.call.grid, tuple(self._bound(operands, values)), device)
        return True

    # TESSERA_RAW_LAUNCH=0 sends replays through Triton's launch wrappers (for comparison or doubt).
    raw_enabled = os.environ.get("TESSERA_RAW_LAUNCH", "1") != "0"
    MAPS_KEPT = 64  # encoded TMA maps kept per replay (by argument and address), then cleared

    def _raw_launcher(self, compiled: Any) -> RawLauncher | None:
        """The compiled kernel's C launcher (looked up once), or None: Triton's launch path."""
        if self._raw is None:
            raw = raw_launcher(compiled) if self.raw_enabled else None
            described = {slot[0] for slot in self.slots if slot[3]}  # every descriptor is a slot
            self._raw = raw if raw is not None and set(raw.descriptors) == described else False
        return self._raw or None

    def _raw_args(self, raw: RawLauncher, operands: Sequence[torch.Tensor],
                  values: Sequence[tuple[int, float]]) -> list[Any]:
        """The C launcher's arguments on ``operands``: the recorded ones (laid out once, by
        Triton's own expansion of the first call's descriptors) with the operands, scratch
        buffers, ``values`` and TMA maps written in. A descriptor's shape, strides and block are
        the recording's, so its map depends only on its operand's address: kept per address. A
        pointer is passed as its address, an int, which the C function takes as it is; given a
        tensor it calls ``data_ptr()`` and asks the driver whether the GPU can reach it (a CPU
        tensor's refusal), which the recipe's key (the operands' device) settles for a replay."""
        if self._template is None:
            self._lay_out(raw, self._bound(operands, values))
        args, place, maps = list(self._template), self._place, self._maps  # type: ignore[arg-type]
        for position, value in values:
            args[place[position]] = value
        for position, index, transposed, descriptor in self.slots:
            t = operands[index]
            if descriptor:
                found = maps.get((position, t.data_ptr()))
                if found is None:
                    found = self._encode(raw, position, t.t() if transposed else t)
                args[place[position]] = found
            else:  # its address (a transposed view has the operand's)
                args[place[position]] = t.data_ptr()
        for position, request in self.scratches:
            args[place[position]] = scratch(*request).data_ptr()
        return args

    def _lay_out(self, raw: RawLauncher, bound: Sequence[Any]) -> None:
        """The C launcher's argument list with the per-call places left empty, from a first call's
        full arguments ``bound`` (the recipe keeps no operand), and where each argument goes."""
        template: list[Any] = []
        place: list[int] = []
        for position, arg in enumerate(bound):
            place.append(len(template))
            if position in raw.descriptors:
                expanded = raw.expand(position, arg)
                self._maps[(position, arg.base.data_ptr())] = expanded[0]
                template.extend([None, *expanded[1:]])
            else:  # a kept constant by its address: self.bound holds the tensor
                template.append(arg.data_ptr() if isinstance(arg, torch.Tensor) else arg)
        for position in (*(slot[0] for slot in self.slots), *(s[0] for s in self.scratches)):
            template[place[position]] = None
        self._template, self._place = template, place

    def _encode(self, raw: RawLauncher, position: int, base: torch.Tensor) -> Any:
        """The TMA map of the recorded descriptor at ``position`` over ``base``, kept by address."""
        if len(self._maps) >= self.MAPS_KEPT:
            self._maps.clear()
        found = self._maps[(position, base.data_ptr())] = raw.expand(
            position, _with_base(self.bound[position], base))[0]
        return found
