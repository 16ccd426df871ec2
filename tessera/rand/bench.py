"""Random-number benchmark rows: Tessera beside torch and raw cuRAND (through CuPy), same process.

Figures are GB/s of output written; the device-to-device copy bandwidth of the same run (bytes read
plus written) is the ceiling they are compared with. Vendor and Tessera alternate over rounds.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

from tessera._core.device import torch_dtype
from tessera._core.timing import back_to_back_ms, flushed_ms, on_gpu
from tessera.rand.api import Generator


@dataclass(frozen=True)
class RandCase:
    distribution: str  # "uniform" or "normal"
    dtype: str
    n: int  # values drawn (points × dimensions for sobol32)
    generator: str = "philox4x32_10"
    dimensions: int = 32  # sobol32 only

    def describe(self) -> str:
        return f"{self.generator} {self.distribution} {self.dtype} 2^{self.n.bit_length() - 1}"

    def shape(self) -> tuple[int, ...]:
        return (self.n // self.dimensions, self.dimensions) if self.generator == "sobol32" else (self.n,)


PRESETS: dict[str, list[RandCase]] = {
    "full": [RandCase("uniform", "fp32", 1 << 28), RandCase("normal", "fp32", 1 << 28),
             RandCase("normal", "bf16", 1 << 28), RandCase("uniform", "fp64", 1 << 27),
             RandCase("uniform", "fp32", 1 << 28, "mrg32k3a"),
             RandCase("uniform", "fp32", 1 << 28, "sobol32")],
    "quick": [RandCase("uniform", "fp32", 1 << 26), RandCase("normal", "fp32", 1 << 26)],
    "interpreter": [RandCase("uniform", "fp32", 1 << 12), RandCase("normal", "fp32", 1 << 12),
                    RandCase("uniform", "fp32", 1 << 10, "mrg32k3a"),
                    RandCase("uniform", "fp32", 1 << 12, "sobol32")],
}


def _vendor_torch(case: RandCase, out: torch.Tensor) -> Callable[[], object] | None:
    if case.generator == "sobol32":
        return None  # torch's SobolEngine runs on the CPU only
    if case.distribution == "uniform":
        return lambda: out.uniform_()
    return lambda: out.normal_()


def _vendor_curand(case: RandCase) -> Callable[[], object] | None:
    """Raw cuRAND host-API Philox through CuPy, or None where CuPy or a GPU is missing."""
    if not on_gpu() or case.dtype not in ("fp32", "fp64"):
        return None
    try:
        import cupy
        from cupy.cuda import curand
    except ImportError:
        return None
    kinds = {"philox4x32_10": curand.CURAND_RNG_PSEUDO_PHILOX4_32_10,
             "mrg32k3a": curand.CURAND_RNG_PSEUDO_MRG32K3A, "sobol32": curand.CURAND_RNG_QUASI_SOBOL32}
    set_dimensions = getattr(curand, "setQuasiRandomGeneratorDimensions", None)
    if case.generator == "sobol32" and set_dimensions is None:
        return None  # CuPy does not wrap it (seen with the H200 image's CuPy)
    generator = curand.createGenerator(kinds[case.generator])
    if set_dimensions is not None and case.generator == "sobol32":
        set_dimensions(generator, case.dimensions)
    else:
        curand.setPseudoRandomGeneratorSeed(generator, 1234)
    out = cupy.empty(case.n, dtype=cupy.float32 if case.dtype == "fp32" else cupy.float64)
    fn = {("uniform", "fp32"): curand.generateUniform, ("normal", "fp32"): curand.generateNormal,
          ("uniform", "fp64"): curand.generateUniformDouble,
          ("normal", "fp64"): curand.generateNormalDouble}[(case.distribution, case.dtype)]
    if case.distribution == "uniform":
        return lambda: fn(generator, out.data.ptr, case.n)
    return lambda: fn(generator, out.data.ptr, case.n, 0.0, 1.0)


def run_case(case: RandCase, rounds: int = 3) -> dict:
    device = "cuda" if on_gpu() else "cpu"
    dtype = torch_dtype(case.dtype)
    extra = {"dimensions": case.dimensions} if case.generator == "sobol32" else {"seed": 1234}
    gen = Generator(case.generator, device=device, **extra)
    ours_out = torch.empty(case.shape(), dtype=dtype, device=device)
    torch_out = torch.empty(case.n, dtype=dtype, device=device)
    draw = gen.uniform if case.distribution == "uniform" else gen.normal

    def ours() -> object:
        gen.offset = 0  # redraw the same values: long benchmarks must not run off the stream's end
        return draw(case.shape(), dtype=dtype, out=ours_out)

    candidates: dict[str, Callable[[], object]] = {"tessera": ours}
    torch_fn = _vendor_torch(case, torch_out)
    if torch_fn is not None:
        candidates["torch"] = torch_fn
    curand_fn = _vendor_curand(case)
    if curand_fn is not None:
        candidates["curand"] = curand_fn
    source = torch.empty(case.n * dtype.itemsize // 4, dtype=torch.float32, device=device)
    copy_dest = torch.empty_like(source)
    candidates["copy"] = lambda: copy_dest.copy_(source)
    times: dict[str, list[float]] = {name: [] for name in candidates}
    b2b: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(rounds):
        for name, fn in candidates.items():
            times[name].append(flushed_ms(fn))
            b2b[name].append(back_to_back_ms(fn))
    out_bytes = case.n * dtype.itemsize
    row: dict = {**asdict(case), "problem": case.describe(), "rounds": rounds}
    for name in candidates:
        ms, ms_b2b = statistics.median(times[name]), statistics.median(b2b[name])
        moved = 2 * out_bytes if name == "copy" else out_bytes  # a copy reads and writes
        row[f"{name}_ms"], row[f"{name}_gbs"] = ms, moved / ms / 1e6
        row[f"{name}_gbs_b2b"] = moved / ms_b2b / 1e6
    row["vs_torch"] = row["torch_ms"] / row["tessera_ms"] if "torch_ms" in row else None
    row["vs_curand"] = row["curand_ms"] / row["tessera_ms"] if "curand_ms" in row else None
    row["pct_copy"] = 100 * row["tessera_gbs"] / row["copy_gbs"]
    return row


def format_table(rows: list[dict]) -> str:
    head = (f"{'problem':<36} {'tessera GB/s':>12} {'% copy':>7} {'torch GB/s':>10} {'ratio':>6} "
            f"{'cuRAND GB/s':>11} {'ratio':>6}")
    lines = [head, "-" * len(head)]
    for r in rows:
        curand = (f"{r['curand_gbs']:>11.0f} {r['vs_curand']:>6.2f}" if r.get("vs_curand") is not None
                  else f"{'-':>11} {'-':>6}")
        torch_cols = (f"{r['torch_gbs']:>10.0f} {r['vs_torch']:>6.2f}" if r.get("vs_torch") is not None
                      else f"{'-':>10} {'-':>6}")
        lines.append(f"{r['problem']:<36} {r['tessera_gbs']:>12.0f} {r['pct_copy']:>7.1f} "
                     f"{torch_cols} {curand}")
    return "\n".join(lines)
