"""Launch configurations of the rand kernels: their families, tuning spaces, and the one place a
draw's configuration is chosen.

Every kernel computes each value from its stream position alone, so a configuration changes only
speed, never a bit of the output (tests check this over the spaces below). Selection is GEMM's:
the installed pack's logic file for this arch → the logic shipped in the wheel → the heuristic
(defaults measured on the H200). Ops are ``<generator>_<distribution>`` with the output dtype as the
logic file's dtype: ``rand.philox_normal.bf16.yaml`` holds Philox normal draws into bf16.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from tessera._core.device import DeviceInfo, dtype_key
from tessera.tuning import logic


@dataclass(frozen=True)
class PhiloxConfig:
    """Philox stream kernels: ``block`` Philox blocks (4 words each) per program."""

    block: int = 1024
    num_warps: int = 4

    kernel = "philox"

    def short(self) -> str:
        return f"{self.kernel} block {self.block} w{self.num_warps}"


@dataclass(frozen=True)
class MrgConfig:
    """MRG32k3a: ``block`` lanes per program; each lane makes ``chunk`` consecutive values, the
    power of two near n / ``lanes`` clamped to [32, ``max_chunk``]. ``int_m1``/``int_m2`` compute that
    component's recurrence in 64-bit integer arithmetic instead of fp64 (same exact remainders;
    the integer and fp64 pipes then share the work)."""

    block: int = 128
    lanes: int = 1 << 18
    max_chunk: int = 1024
    num_warps: int = 4
    int_m1: bool = False
    int_m2: bool = False

    kernel = "mrg32k3a"

    def short(self) -> str:
        arith = "".join(("i" if flag else "f") for flag in (self.int_m1, self.int_m2))
        return (f"{self.kernel} block {self.block} lanes {self.lanes} chunk<={self.max_chunk} "
                f"w{self.num_warps} arith {arith}")

    def chunk(self, n: int) -> int:
        """Values per lane for a draw of ``n``."""
        want = max(1, -(-n // self.lanes))
        return min(self.max_chunk, max(32, 1 << (want - 1).bit_length()))


@dataclass(frozen=True)
class SobolConfig:
    """Sobol': a program writes ``steps`` tiles of about ``values`` values (points × dimensions)."""

    values: int = 2048
    steps: int = 16
    num_warps: int = 8

    kernel = "sobol32"

    def short(self) -> str:
        return f"{self.kernel} tile {self.values} steps {self.steps} w{self.num_warps}"


Config = PhiloxConfig | MrgConfig | SobolConfig
FAMILIES: dict[str, type] = {"philox": PhiloxConfig, "mrg32k3a": MrgConfig, "sobol32": SobolConfig}
GENERATOR_FAMILY = {"philox4x32_10": "philox", "mrg32k3a": "mrg32k3a", "sobol32": "sobol32"}
DISTRIBUTIONS = {"philox": ("bits", "uniform", "normal"), "mrg32k3a": ("bits", "uniform", "normal"),
                 "sobol32": ("bits", "uniform")}
OUTPUT_DTYPES = ("fp16", "bf16", "fp32", "fp64")
TORCH_DTYPES = {"int32": torch.int32, "fp16": torch.float16, "bf16": torch.bfloat16,
                "fp32": torch.float32, "fp64": torch.float64}


def op_name(generator: str, distribution: str) -> str:
    """The logic op of a draw: ``philox_normal``, ``mrg32k3a_uniform``, ``sobol32_bits``."""
    return f"{GENERATOR_FAMILY[generator]}_{distribution}"


def size_keys(op: str) -> tuple[str, ...]:
    return ("points", "dims") if op.startswith("sobol32") else ("n",)


# Tuning spaces: what `tessera tune rand` forks over.
PHILOX_SPACE: tuple[PhiloxConfig, ...] = tuple(
    PhiloxConfig(block, warps) for block in (256, 512, 1024, 2048, 4096) for warps in (2, 4, 8))
MRG_SPACE: tuple[MrgConfig, ...] = tuple(  # fp64 arithmetic first: it won on the H200
    MrgConfig(block, lanes, max_chunk, warps, int_m1, int_m2)
    for int_m1, int_m2 in ((False, False), (False, True), (True, True))
    for block, warps in ((256, 4), (128, 4), (512, 4), (256, 2), (256, 8))
    for lanes in (1 << 16, 1 << 17, 1 << 18)
    for max_chunk in (1024, 4096))
SOBOL_SPACE: tuple[SobolConfig, ...] = tuple(
    SobolConfig(values, steps, warps) for values in (1024, 2048, 4096) for steps in (8, 16, 32)
    for warps in (4, 8))
SPACES: dict[str, tuple[Config, ...]] = {"philox": PHILOX_SPACE, "mrg32k3a": MRG_SPACE,
                                         "sobol32": SOBOL_SPACE}


@dataclass(frozen=True)
class Choice:
    config: Config
    reason: str


def _fp64_is_fast(arch: str) -> bool:
    """Datacenter parts with fp64 at half the fp32 rate (elsewhere it runs at 1/16 to 1/64)."""
    return arch in ("sm_60", "sm_70", "sm_80", "sm_90", "sm_100", "gfx90a", "gfx942", "gfx950")


def heuristic(op: str, arch: str) -> Choice:
    """The untuned configuration for ``op`` on ``arch``."""
    family = op.split("_")[0]
    if family == "philox":
        return Choice(PhiloxConfig(), "philox default: 1024 blocks a program, 4 warps")
    if family == "sobol32":
        return Choice(SobolConfig(), "sobol32 default: tiles of 2048 values, 16 steps")
    if _fp64_is_fast(arch):  # H200, 2^28 fp32 values: all-fp64 2150 GB/s, mixed 1945, integer 1695
        return Choice(MrgConfig(256, 1 << 17, 4096), f"mrg32k3a on {arch}: fp64 recurrences")
    return Choice(MrgConfig(int_m1=True, int_m2=True),
                  f"mrg32k3a on {arch}: integer recurrences (fp64 assumed slow there; unmeasured)")


def dtype_name(dtype: torch.dtype) -> str:
    """The logic files' dtype key of an output dtype (raw words are ``int32``)."""
    return "int32" if dtype == torch.int32 else dtype_key(dtype)


# ``with forced(config):`` makes draws of ``config``'s family in the block use it (tests, the tuner).
forced = logic.Override()


def select(generator: str, distribution: str, dtype: torch.dtype, sizes: tuple[int, ...],
           device: DeviceInfo) -> Choice:
    """The configuration for a draw (sizes: (n,), or (points, dims) for sobol32)."""
    if forced.config is not None and forced.config.kernel == GENERATOR_FAMILY[generator]:
        return Choice(forced.config, "forced")
    return _select_cached(op_name(generator, distribution), dtype_name(dtype), sizes, device.arch,
                          logic.generation())


@functools.lru_cache(maxsize=4096)
def _select_cached(op: str, dtype: str, sizes: tuple[int, ...], arch: str,
                   _logic_generation: int) -> Choice:
    match, reasons = logic.lookup(arch, "rand", op, dtype, sizes)
    if match is not None:
        return Choice(match.config, match.describe())
    choice = heuristic(op, arch)
    return Choice(choice.config, "; ".join([*reasons, choice.reason]))


def heuristic_logic(device: DeviceInfo, op: str) -> list[dict]:
    """Logic documents for ``op`` holding the heuristic's pick (what a pack ships untuned)."""
    config = heuristic(op, device.arch).config
    row = {"points": 1 << 15, "dims": 32} if op.startswith("sobol32") else {"n": 1 << 20}
    dtypes = ("int32",) if op.endswith("_bits") else OUTPUT_DTYPES
    return [logic.heuristic_document(device.arch, device.backend, "rand", op, dtype, [(row, config)])
            for dtype in dtypes]


for _family, _distributions in DISTRIBUTIONS.items():
    for _distribution in _distributions:
        _op = f"{_family}_{_distribution}"
        logic.register_op("rand", _op, size_keys(_op), {_family: FAMILIES[_family]},
                          heuristic=functools.partial(heuristic_logic, op=_op))
