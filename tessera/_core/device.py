"""What GPU (or interpreter) we run on: architecture name, sizes, peaks and runtime versions.

The architecture string is the compiler's own name (``sm_90``, ``gfx1103``) so that logic files and
packs can be keyed by it. Peaks are datasheet figures (dense, no sparsity) looked up by device name;
``None`` where we do not know them rather than a guess.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import platform
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

INTERPRETER_ARCH = "interpreter"
# the names an architecture has here: NVIDIA's sm_<major><minor> (sm_90, sm_100a), AMD's gfx ID as
# gcnArchName gives it without features (gfx1103, gfx90a), or the interpreter
ARCH_NAME = re.compile(rf"sm_\d{{2,3}}a?|gfx[0-9a-f]{{3,4}}|{INTERPRETER_ARCH}")

# Dense peak TFLOP/s per dtype and HBM bandwidth (TB/s), by a substring of the device name.
# Sources: vendor datasheets (SXM parts). The tf32 row is the tensor-core rate; "fp32" is plain FMA;
# "tf32x3" (fp32 as three TF32 products, derived in ``_peaks_for``) a third of tf32; "bf16x9" and
# "bf16x6" (fp32 as nine or six bf16 products) a ninth and a sixth of bf16.
_PEAKS: list[tuple[str, str, dict[str, float], float]] = [
    # (arch, name substring, peaks, bandwidth TB/s)
    ("sm_90", "H200", {"fp16": 989.4, "bf16": 989.4, "tf32": 494.7, "fp32": 66.9, "fp64": 66.9,
                       "fp8": 1978.9, "int8": 1978.9}, 4.8),
    ("sm_90", "H100", {"fp16": 989.4, "bf16": 989.4, "tf32": 494.7, "fp32": 66.9, "fp64": 66.9,
                       "fp8": 1978.9, "int8": 1978.9}, 3.35),
    ("sm_80", "A100", {"fp16": 312.0, "bf16": 312.0, "tf32": 156.0, "fp32": 19.5, "fp64": 19.5,
                       "int8": 624.0}, 2.04),
    ("gfx942", "", {"fp16": 1307.4, "bf16": 1307.4, "tf32": 653.7, "fp32": 163.4, "fp64": 163.4,
                    "fp8": 2614.9, "int8": 2614.9}, 5.3),
]


@dataclass(frozen=True)
class ArchFacts:
    """What offline builds need about an architecture without the GPU at hand."""

    backend: str  # "cuda" or "hip"
    warp_size: int
    shared_memory_per_block: int  # bytes a block may use (opt-in maximum on NVIDIA)


# Vendor documentation: NVIDIA's per-block opt-in shared memory; AMD's 64 KiB LDS per workgroup
# (160 KiB on gfx950). RDNA (gfx10/11/12) runs Triton in wave32, CDNA and GCN in wave64.
KNOWN_ARCHS: dict[str, ArchFacts] = {
    "sm_80": ArchFacts("cuda", 32, 166912), "sm_86": ArchFacts("cuda", 32, 101376),
    "sm_89": ArchFacts("cuda", 32, 101376), "sm_90": ArchFacts("cuda", 32, 232448),
    **{a: ArchFacts("hip", 64, 65536) for a in ("gfx803", "gfx900", "gfx906", "gfx908", "gfx90a",
                                                   "gfx90c", "gfx942")},
    "gfx950": ArchFacts("hip", 64, 163840),
    **{a: ArchFacts("hip", 32, 65536) for a in ("gfx1010", "gfx1012", "gfx1030", "gfx1031", "gfx1100",
                                                   "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151",
                                                   "gfx1200", "gfx1201")},
}


# The multiprocessors a pack build launches for where an arch's count is unknown (the H100 SXM's
# and the H200's): a launch's SM count is an argument Triton specializes only when it is 1 or a
# multiple of 16, so a binary built for 132 serves any GPU whose count is neither.
OFFLINE_MULTIPROCESSORS = 132


def build_multiprocessors(info: DeviceInfo) -> int:
    """The SM count launches are built for on ``info``: its own, else :data:`OFFLINE_MULTIPROCESSORS`."""
    return info.multiprocessors or OFFLINE_MULTIPROCESSORS


def offline_device(arch: str) -> DeviceInfo:
    """A DeviceInfo for an architecture we are building for but not running on."""
    if arch == INTERPRETER_ARCH:
        return DeviceInfo(arch, "interpreter", "Triton interpreter (offline)", None, 32, None, {}, None)
    facts = KNOWN_ARCHS.get(arch)
    if facts is None:
        backend = "cuda" if arch.startswith("sm_") else "hip"
        return DeviceInfo(arch, backend, f"{arch} (offline, properties unknown)", None,
                          32 if backend == "cuda" else 64, None, {}, None)
    return DeviceInfo(arch, facts.backend, f"{arch} (offline)", None, facts.warp_size,
                      facts.shared_memory_per_block, {}, None)


@dataclass(frozen=True)
class DeviceInfo:
    """Facts about one device that kernel selection and reports need."""

    arch: str
    backend: str  # "cuda", "hip" or "interpreter"
    name: str
    multiprocessors: int | None
    warp_size: int
    shared_memory_per_block: int | None
    peak_tflops: dict[str, float | None]
    memory_bandwidth_tbs: float | None
    versions: dict[str, str | None] = field(default_factory=dict)

    def peak(self, dtype_name: str) -> float | None:
        """Dense peak TFLOP/s for ``fp16``/``bf16``/``tf32``/``fp32``/``fp64``…, or None."""
        return self.peak_tflops.get(dtype_name)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@functools.cache
def interpreter_enabled() -> bool:
    """True when Triton runs kernels in its CPU interpreter (``TRITON_INTERPRET=1``).

    Read once, like Triton itself, which decides at kernel definition time."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def _peaks_for(arch: str, name: str) -> tuple[dict[str, float | None], float | None]:
    for entry_arch, substring, peaks, bandwidth in _PEAKS:
        if entry_arch == arch and substring in name:
            derived = {"tf32x3": peaks["tf32"] / 3} if "tf32" in peaks else {}
            if "bf16" in peaks:
                derived.update(bf16x9=peaks["bf16"] / 9, bf16x6=peaks["bf16"] / 6)
            return {**peaks, **derived}, bandwidth
    return {}, None


def _driver_version() -> str | None:
    """The NVIDIA driver release (``580.159.04``) read through NVML; None where unavailable."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
        if nvml.nvmlInit_v2() != 0:
            return None
        buffer = ctypes.create_string_buffer(96)
        ok = nvml.nvmlSystemGetDriverVersion(buffer, ctypes.c_uint(96)) == 0
        nvml.nvmlShutdown()
    except (OSError, AttributeError):
        return None
    return buffer.value.decode() if ok else None


def _versions(backend: str) -> dict[str, str | None]:
    try:
        import triton

        triton_version: str | None = triton.__version__
    except ImportError:  # pragma: no cover - triton is a dependency
        triton_version = None
    from tessera import __version__

    return {
        "tessera": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton_version,
        "cuda": torch.version.cuda if backend == "cuda" else None,
        "hip": torch.version.hip if backend == "hip" else None,
        "driver": _driver_version() if backend == "cuda" else None,
    }


@functools.cache
def _device_info_cached(index: int | None) -> DeviceInfo:
    if index is None:
        return DeviceInfo(
            arch=INTERPRETER_ARCH,
            backend="interpreter",
            name=f"Triton interpreter on {platform.processor() or platform.machine()}",
            multiprocessors=os.cpu_count(),
            warp_size=32,
            shared_memory_per_block=None,
            peak_tflops={},
            memory_bandwidth_tbs=None,
            versions=_versions("interpreter"),
        )
    props = torch.cuda.get_device_properties(index)
    backend = "hip" if torch.version.hip else "cuda"
    if backend == "hip":
        arch = str(getattr(props, "gcnArchName", "gfx000")).split(":")[0]
    else:
        arch = f"sm_{props.major}{props.minor}"
    peaks, bandwidth = _peaks_for(arch, props.name)
    shared = getattr(props, "shared_memory_per_block_optin", None) or getattr(
        props, "shared_memory_per_block", None)
    return DeviceInfo(
        arch=arch,
        backend=backend,
        name=props.name,
        multiprocessors=props.multi_processor_count,
        warp_size=int(getattr(props, "warp_size", 64 if backend == "hip" else 32)),
        shared_memory_per_block=int(shared) if shared else None,
        peak_tflops=peaks,
        memory_bandwidth_tbs=bandwidth,
        versions=_versions(backend),
    )


def device_info(device: torch.device | int | str | None = None) -> DeviceInfo:
    """Describe ``device`` (default: the current CUDA/HIP device, else the Triton interpreter).

    CPU devices describe the interpreter, since that is what runs Tessera's kernels there.
    """
    if isinstance(device, torch.device) and device.type == "cuda" and device.index is not None:
        return _device_info_cached(device.index)  # the per-call fast path
    if device is None:
        index = torch.cuda.current_device() if torch.cuda.is_available() else None
    else:
        dev = torch.device(device) if not isinstance(device, int) else torch.device("cuda", device)
        if dev.type == "cpu":
            index = None
        else:
            index = dev.index if dev.index is not None else torch.cuda.current_device()
    return _device_info_cached(index)


# How float32 GEMMs may use tensor cores (``gemm``'s ``precision``): "ieee" not at all (FMA units),
# "tf32" with operands rounded to TF32, "tf32x3" as three TF32 products (hi·hi + hi·lo + lo·hi of
# each operand's split x = hi + lo: CUTLASS's 3xTF32, Triton's ``input_precision="tf32x3"``);
# "bf16x9" and "bf16x6" as bf16 GEMMs of each operand's three bf16 pieces (all nine products of
# the pieces, or the six largest: cuBLAS's FP32_EMULATED_BF16X9 idea; ``tessera.blas.emulated``).
# Each precision other than "ieee" is its own dtype key: logic files tune the TF32 ones apart from
# fp32, while the bf16 ones run bf16 GEMMs chosen by bf16's logic.
TF32_KEYS = ("tf32", "tf32x3")  # computed as TF32 MMAs: on Hopper, from K-major operands
BF16_PRODUCT_KEYS = ("bf16x9", "bf16x6")
TENSOR_CORE_PRECISIONS = (*TF32_KEYS, *BF16_PRODUCT_KEYS)  # each its own dtype key
FP32_PRECISIONS = ("ieee", *TENSOR_CORE_PRECISIONS)


def dtype_key(dtype: torch.dtype, precision: str = "ieee") -> str:
    """Short dtype name used in peaks, logic files and the CLI (``fp32`` with tf32 → ``tf32``,
    with tf32x3 → ``tf32x3``, with bf16x9 → ``bf16x9``)."""
    if dtype == torch.float32 and precision in TENSOR_CORE_PRECISIONS:
        return precision
    return _DTYPE_KEYS[dtype]


def precision_of(key: str) -> str:
    """The ``precision`` a dtype key is computed with (:func:`dtype_key`'s other half)."""
    return key if key in TENSOR_CORE_PRECISIONS else "ieee"


def torch_matmul_tf32() -> bool:
    """Whether ``torch.matmul`` multiplies float32 on CUDA in TF32: torch's ``fp32_precision`` where
    torch has it (``torch.backends.fp32_precision`` and the cuda.matmul one, whichever applies;
    once they are used, reading the legacy ``allow_tf32`` raises), else ``allow_tf32``."""
    matmul = torch.backends.cuda.matmul
    try:
        return matmul.fp32_precision == "tf32"
    except AttributeError:  # a torch before the fp32_precision API
        return bool(matmul.allow_tf32)


@contextlib.contextmanager
def torch_matmul_tf32_as(enabled: bool) -> Iterator[None]:
    """``torch.matmul``'s float32 in TF32 (or IEEE) inside the block, the previous setting back
    after: the vendor side of a benchmark, set through the API the running torch reads."""
    matmul = torch.backends.cuda.matmul
    try:
        name, value, previous = "fp32_precision", "tf32" if enabled else "ieee", matmul.fp32_precision
    except AttributeError:  # a torch before the fp32_precision API
        name, value, previous = "allow_tf32", enabled, matmul.allow_tf32
    setattr(matmul, name, value)
    try:
        yield
    finally:
        setattr(matmul, name, previous)


_DTYPE_KEYS: dict[torch.dtype, str] = {
    torch.float16: "fp16",
    torch.bfloat16: "bf16",
    torch.float32: "fp32",
    torch.float64: "fp64",
    torch.complex64: "complex64",  # level-1 vectors
    torch.complex128: "complex128",
}
_KEY_DTYPES: dict[str, torch.dtype] = {**dict.fromkeys(TENSOR_CORE_PRECISIONS, torch.float32),
                                       **{key: dtype for dtype, key in _DTYPE_KEYS.items()}}


def torch_dtype(key: str) -> torch.dtype:
    """The torch dtype of a short dtype name (:func:`dtype_key`'s inverse; ``tf32`` and ``tf32x3``
    are float32)."""
    return _KEY_DTYPES[key]
