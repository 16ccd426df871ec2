"""Where do dot and nrm2 lose to torch at 2^26 fp32? The reduction's parts, timed beside torch.

The target "level 1 ≥ 1.0× torch" was missed by dot (0.92×) and nrm2 (0.92×) at 9da7fd5 while
asum, the same kernel with |x| instead of x·y, matched torch. This script times, in one run,
graph-replayed (no host cost; every operand larger than the L2 cache, so cold) and interleaved
over rounds:

- ``torch``: torch.dot, torch.linalg.vector_norm (2 and 1), and a device-to-device copy;
- ``shipped``: blas.dot, blas.nrm2, blas.asum as shipped (the partials kernel, then the combine:
  torch's sum of the partials for dot and asum, a one-program finish kernel for nrm2);
- ``partials``: the partials kernel alone, to split a routine's time into its two launches;
- ``contiguous``: dot partials with program p reading one contiguous chunk of ITERS blocks (the
  kernel shipped before 2026-12-03) beside the shipped grid-stride walk (program p reads blocks
  p, p + P, p + 2P …: the programs running at once read neighbouring blocks), at a few launch
  shapes.

At b493768 (``level1-floor-h200-b493768.json``) the grid-stride walk read 2^26-element dot
partials in 119.7 µs (2048 × 8, 8 warps) against 136.5 µs for the contiguous chunks at the
shipped shape, torch.dot 127.1 µs; and nrm2 from fp64 squares (one sum: no square of an fp32
value overflows in fp64) took 82.8 µs against Blue's fp32 sums' 74.5 µs (fp64 conversion and
arithmetic bound), so nrm2 kept Blue's algorithm.

Usage: python benchmarks/level1_floor.py OUT.json
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable

import torch
import triton
import triton.language as tl

from tessera import blas
from tessera._core.timing import graph_ms, run_record, write_result
from tessera.blas import space
from tessera.blas.kernels import level1 as k

N = 1 << 26
ROUNDS = 3
SHAPES = ((4096, 16, 2), (2048, 16, 4), (1024, 32, 4), (4096, 8, 4), (2048, 8, 8))


@triton.jit
def _dot_contiguous_kernel(x_ptr, y_ptr, part_ptr, n, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    """Partial dot of program p over its contiguous chunk of ITERS blocks."""
    pid = tl.program_id(0).to(tl.int64)
    acc = tl.zeros((BLOCK,), tl.float32)
    for it in range(ITERS):
        i = (pid * ITERS + it) * BLOCK + tl.arange(0, BLOCK)
        mask = i < n
        acc += tl.load(x_ptr + i, mask=mask, other=0) * tl.load(y_ptr + i, mask=mask, other=0)
    tl.store(part_ptr + pid, tl.sum(acc, 0))


def contiguous_dot(x: torch.Tensor, y: torch.Tensor, block: int, iters: int, warps: int,
                    parts_only: bool) -> torch.Tensor:
    count = triton.cdiv(x.numel(), block * iters)
    parts = torch.empty(count, dtype=torch.float32, device=x.device)
    _dot_contiguous_kernel[(count,)](x, y, parts, x.numel(), BLOCK=block, ITERS=iters, num_warps=warps)
    return parts if parts_only else parts.sum()


def forced_dot(x: torch.Tensor, y: torch.Tensor, config: k.VectorConfig) -> torch.Tensor:
    with space.forced(config):
        return blas.dot(x, y)


def main() -> None:
    out = sys.argv[1]
    gen = torch.Generator(device="cuda").manual_seed(5)
    x = torch.randn(N, device="cuda", generator=gen)
    y = torch.randn(N, device="cuda", generator=gen)
    config = space.shape_of("level1_reduce", (N,), x)
    x_args, y_args = (x, 0, 1), (y, 0, 1)

    def partials(op: int) -> Callable[[], object]:
        return lambda: k.launch_reduce(op, x_args, y_args, N, complex_=False, conj=False, fp64=False,
                                       config=config)

    cases: dict[str, tuple[int, Callable[[], object]]] = {
        "copy": (8 * N, lambda: y.copy_(x)),
        "torch.dot": (8 * N, lambda: torch.dot(x, y)),
        "shipped dot": (8 * N, lambda: blas.dot(x, y)),
        "partials dot": (8 * N, partials(k.DOT)),
        "torch vector_norm": (4 * N, lambda: torch.linalg.vector_norm(x)),
        "shipped nrm2": (4 * N, lambda: blas.nrm2(x)),
        "partials nrm2": (4 * N, partials(k.NRM2)),
        "torch vector_norm(x, 1)": (4 * N, lambda: torch.linalg.vector_norm(x, 1)),
        "shipped asum": (4 * N, lambda: blas.asum(x)),
    }
    for block, iters, warps in SHAPES:
        with space.forced(k.VectorConfig(block, iters, warps)):
            blas.dot(x, y)  # compile outside the timing
        cases[f"shipped dot {block}x{iters} w{warps}"] = (8 * N, lambda b=block, i=iters, w=warps: forced_dot(
            x, y, k.VectorConfig(b, i, w)))
        cases[f"contiguous dot {block}x{iters} w{warps}"] = (8 * N, lambda b=block, i=iters, w=warps:
                                                             contiguous_dot(x, y, b, i, w, False))
    want = float(x.double() @ y.double())
    checks = {"shipped dot": float(blas.dot(x, y)), "torch.dot": float(torch.dot(x, y)),
              **{f"contiguous {b}x{i} w{w}": float(contiguous_dot(x, y, b, i, w, False))
                 for b, i, w in SHAPES}}
    norm = float(x.double().norm())
    norms = {"shipped nrm2": float(blas.nrm2(x)), "torch": float(torch.linalg.vector_norm(x))}
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(ROUNDS):
        for name, (_, fn) in cases.items():
            times[name].append(graph_ms([fn]))
    copy_gbs = cases["copy"][0] / statistics.median(times["copy"]) / 1e6
    rows = []
    for name, (nbytes, _) in cases.items():
        ms = statistics.median(times[name])
        rows.append({"case": name, "graph_us": 1e3 * ms, "gbs": nbytes / ms / 1e6,
                     "pct_copy": 100 * nbytes / ms / 1e6 / copy_gbs})
        print(f"{name:<36} {1e3 * ms:8.1f} µs {rows[-1]['gbs']:7.0f} GB/s {rows[-1]['pct_copy']:6.1f}% copy")
    result = {**run_record("python benchmarks/level1_floor.py OUT.json"),
              "n": N,
              "shipped_config": config.short(), "rows": rows,
              "dot_relative_error": {name: abs(v - want) / abs(want) for name, v in checks.items()},
              "nrm2_relative_error": {name: abs(v - norm) / norm for name, v in norms.items()}}
    print(json.dumps({"dot": result["dot_relative_error"], "nrm2": result["nrm2_relative_error"]}, indent=1))
    write_result(out, result)


if __name__ == "__main__":
    main()
