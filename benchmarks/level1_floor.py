"""Where do dot and nrm2 lose to torch at 2^26 fp32? The reduction's parts, timed beside torch.

The target "level 1 ≥ 1.0× torch" was missed by dot (0.92×) and nrm2 (0.92×) at 9da7fd5 while
asum, the same kernel with |x| instead of x·y, matched torch. This script times, in one run,
graph-replayed (no host cost; every operand larger than the L2 cache, so cold) and interleaved
over rounds:

- ``torch``: torch.dot, torch.linalg.vector_norm (2 and 1), and a device-to-device copy;
- ``shipped``: blas.dot, blas.nrm2, blas.asum as shipped (the partials kernel, then the combine:
  torch's sum of the partials for dot and asum, a one-program finish kernel for nrm2);
- ``partials``: the partials kernel alone, to split a routine's time into its two launches;
- ``blue_fp32``: nrm2 by Blue's three fp32 sums (shipped for fp32 data before this script's
  revision) beside ``squares_fp64`` (fp64 squares: one sum, shipped since);
- ``interleaved``: dot partials with program p reading blocks p, p + P, p + 2P … (a grid-stride
  walk: the programs running at once read neighbouring blocks) instead of one contiguous chunk.

Usage: python benchmarks/level1_floor.py OUT.json
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable

import torch
import triton
import triton.language as tl

from tessera import blas
from tessera._core.device import device_info
from tessera._core.timing import git_revision, graph_ms
from tessera.blas import space
from tessera.blas.kernels import level1 as k

N = 1 << 26
ROUNDS = 3
INTERLEAVED = ((4096, 16, 2), (2048, 16, 4), (1024, 32, 4), (4096, 8, 4), (2048, 8, 8))


@triton.jit
def _dot_interleaved_kernel(x_ptr, y_ptr, part_ptr, n, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    """Partial dot of program p over blocks p, p + P, … (P programs, ITERS blocks each)."""
    pid = tl.program_id(0).to(tl.int64)
    programs = tl.num_programs(0).to(tl.int64)
    acc = tl.zeros((BLOCK,), tl.float32)
    for it in range(ITERS):
        i = (it * programs + pid) * BLOCK + tl.arange(0, BLOCK)
        mask = i < n
        acc += tl.load(x_ptr + i, mask=mask, other=0) * tl.load(y_ptr + i, mask=mask, other=0)
    tl.store(part_ptr + pid, tl.sum(acc, 0))


def interleaved_dot(x: torch.Tensor, y: torch.Tensor, block: int, iters: int, warps: int,
                    parts_only: bool) -> torch.Tensor:
    count = triton.cdiv(x.numel(), block * iters)
    parts = torch.empty(count, dtype=torch.float32, device=x.device)
    _dot_interleaved_kernel[(count,)](x, y, parts, x.numel(), BLOCK=block, ITERS=iters, num_warps=warps)
    return parts if parts_only else parts.sum()


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

    def blue() -> torch.Tensor:
        return k.launch_nrm2_finish(partials(k.NRM2)(), fp64=False)

    cases: dict[str, tuple[int, Callable[[], object]]] = {
        "copy": (8 * N, lambda: y.copy_(x)),
        "torch.dot": (8 * N, lambda: torch.dot(x, y)),
        "shipped dot": (8 * N, lambda: blas.dot(x, y)),
        "partials dot": (8 * N, partials(k.DOT)),
        "torch vector_norm": (4 * N, lambda: torch.linalg.vector_norm(x)),
        "shipped nrm2": (4 * N, lambda: blas.nrm2(x)),
        "partials squares_fp64": (4 * N, partials(k.NRM2_SQUARES)),
        "blue_fp32 nrm2": (4 * N, blue),
        "partials blue_fp32": (4 * N, partials(k.NRM2)),
        "torch vector_norm(x, 1)": (4 * N, lambda: torch.linalg.vector_norm(x, 1)),
        "shipped asum": (4 * N, lambda: blas.asum(x)),
    }
    for block, iters, warps in INTERLEAVED:
        for parts_only in (False, True):
            name = f"{'partials ' if parts_only else ''}interleaved dot {block}x{iters} w{warps}"
            cases[name] = (8 * N, lambda b=block, i=iters, w=warps, p=parts_only:
                           interleaved_dot(x, y, b, i, w, p))
    want = float(x.double() @ y.double())
    checks = {"shipped dot": float(blas.dot(x, y)), "torch.dot": float(torch.dot(x, y)),
              **{f"interleaved {b}x{i} w{w}": float(interleaved_dot(x, y, b, i, w, False))
                 for b, i, w in INTERLEAVED}}
    norm = float(x.double().norm())
    norms = {"shipped nrm2": float(blas.nrm2(x)), "blue_fp32": float(blue()),
             "torch": float(torch.linalg.vector_norm(x))}
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
    info = device_info()
    result = {"device": info.name, "arch": info.arch, "git": git_revision(),
              "versions": {"torch": torch.__version__, "triton": triton.__version__},
              "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "command": "python benchmarks/level1_floor.py OUT.json", "n": N,
              "shipped_config": config.short(), "rows": rows,
              "dot_relative_error": {name: abs(v - want) / abs(want) for name, v in checks.items()},
              "nrm2_relative_error": {name: abs(v - norm) / norm for name, v in norms.items()}}
    print(json.dumps({"dot": result["dot_relative_error"], "nrm2": result["nrm2_relative_error"]}, indent=1))
    with open(out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
