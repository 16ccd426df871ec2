"""Tuning the rand kernels: problems, candidate launch configurations, check and timing.

A candidate is correct when its output is bit-identical to the heuristic configuration's (the
output must not depend on the launch configuration; the test suite checks the heuristic's output
against independent references). The figure is GB/s of output written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from tessera._core.device import DeviceInfo, device_info
from tessera._core.errors import invalid
from tessera._core.timing import flushed_ms, on_gpu
from tessera.rand import space
from tessera.rand.api import Generator
from tessera.tuning.tuner import TunableOp, runtime_of

GENERATORS = {"philox": "philox4x32_10", "mrg32k3a": "mrg32k3a", "sobol32": "sobol32"}
OPS = tuple(f"{family}_{distribution}" for family, distributions in space.DISTRIBUTIONS.items()
            for distribution in distributions)
SIZE_PRESETS: dict[str, list[tuple[int, ...]]] = {
    "default": [(1 << 20,), (1 << 24,), (1 << 28,)],
    "large": [(1 << 28,)],
    "tiny": [(1 << 12,)],  # interpreter-sized, for CPU runs
}
SOBOL_PRESETS: dict[str, list[tuple[int, ...]]] = {
    "default": [(1 << 15, 32), (1 << 19, 32), (1 << 23, 32), (1 << 18, 1024)],
    "large": [(1 << 23, 32)],
    "tiny": [(64, 3)],
}
TINY_SPACES: dict[str, tuple[space.Config, ...]] = {
    "philox": (space.PhiloxConfig(64, 1), space.PhiloxConfig(256, 2)),
    "mrg32k3a": (space.MrgConfig(16, 64, 32, 1), space.MrgConfig(32, 64, 64, 2, True, True)),
    "sobol32": (space.SobolConfig(64, 2, 1), space.SobolConfig(128, 4, 2)),
}


def split_op(op: str) -> tuple[str, str, str]:
    """``mrg32k3a_normal`` → (family, generator, distribution), or a clear error."""
    if op not in OPS:
        raise invalid("op", repr(op), f"one of {', '.join(OPS)}")
    family, distribution = op.split("_", 1)
    return family, GENERATORS[family], distribution


def drawer(op: str, dtype: str, target: str) -> Callable[[tuple[int, ...]], torch.Tensor]:
    """A function drawing ``op`` into a fixed output for a problem (seed 1234, offset 0)."""
    _, generator, distribution = split_op(op)
    torch_dtype = space.TORCH_DTYPES[dtype]
    if (distribution == "bits") != (dtype == "int32"):
        raise invalid("dtype", dtype, "int32 for raw words, a float dtype otherwise")
    outputs: dict[tuple[int, ...], torch.Tensor] = {}

    def draw(problem: tuple[int, ...]) -> torch.Tensor:
        if problem not in outputs:
            outputs.clear()  # one problem at a time: keep memory bounded
            outputs[problem] = torch.empty(problem, dtype=torch_dtype, device=target)
        out = outputs[problem]
        kwargs = {"dimensions": problem[1]} if generator == "sobol32" else {"seed": 1234}
        g = Generator(generator, device=target, **kwargs)
        if distribution == "bits":
            return g.integers32(problem, out=out)
        if distribution == "uniform":
            return g.uniform(problem, torch_dtype, out=out)
        return g.normal(problem, dtype=torch_dtype, out=out)

    return draw


def rand_tunable(op: str, dtype: str, problems: Sequence[tuple[int, ...]], space_name: str = "default",
                 device: DeviceInfo | None = None) -> TunableOp:
    """``op`` (e.g. ``philox_normal``) into ``dtype`` as the tuner sees it, on the current device."""
    family, _, _ = split_op(op)
    device = device or device_info()
    target = "cuda" if on_gpu() else "cpu"
    draw = drawer(op, dtype, target)
    candidates_space = TINY_SPACES[family] if space_name == "tiny" else space.SPACES[family]
    reference: dict[tuple[int, ...], torch.Tensor] = {}

    def run(problem: tuple[int, ...], config: space.Config) -> torch.Tensor:
        with space.forced(config):
            return draw(problem)

    def check(problem: tuple[int, ...], config: space.Config) -> str | None:
        if problem not in reference:
            reference.clear()
            reference[problem] = run(problem, space.heuristic(op, device.arch).config).clone()
        same = torch.equal(run(problem, config), reference[problem])
        return None if same else "output differs from the heuristic configuration's bits"

    def measure(problem: tuple[int, ...], config: space.Config) -> float:
        out = run(problem, config)
        return out.numel() * out.element_size() / flushed_ms(lambda: run(problem, config)) / 1e6

    return TunableOp("rand", op, device.arch, dtype, list(problems), lambda _: list(candidates_space),
                     check, measure, figure="gbs", runtime=runtime_of(device))
