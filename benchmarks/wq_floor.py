"""Weight-only decode (M = 1, N = K = 8192, group 128): where the time goes.

``gemm_wq`` at M = 1 is two launches: ``gemv_wq`` (K split into slices, partial rows to an fp32
workspace) and ``sum_slices`` (the slices added in a fixed order). At dc9acc4 W4A16 reached 1.69×
and W8A16 1.43× bf16 torch.matmul (targets 2.5× / 1.6×). Timed here from CUDA graphs cycling over
four weight copies (cold L2), beside torch.matmul on the bf16 weights: the whole call, each of its
two launches alone (captured from a shipped call and replayed as captured), a copy moving the
codes' bytes (the floor of reading them once), and the two launches with the second one started
by programmatic dependent launch (PDL, Hopper): ``_sum_slices_pdl_kernel`` waits on the grid
dependency (``gdc_wait``) before it reads the workspace, so the runtime may launch it while the
first kernel's last programs run, hiding its launch latency.
At d5ab7b1 (wq-floor-h200-d5ab7b1.json): W8A16 23.3 µs = 1.46× torch, its main launch alone
21.2 (1.60×), the slice sum alone 1.8, a copy of the codes' bytes 17.6; W4A16 20.5 (1.65×), main
alone 18.7 (1.81×), copy 9.7. The PDL sum made the pair slower (23.8 / 21.4 µs): dropped.

Since the fifteenth session 4-bit decode runs on tensor cores (``gemm_wq`` on column-major codes,
the slice sum after it); at eaf6736 (wq-floor-h200-eaf6736.json) 17.6 µs = 1.93× torch, its main
launch alone 16.2 µs, the slice sum 1.3 µs, a copy of the codes' bytes 9.7 µs.

Usage: python benchmarks/wq_floor.py OUT.json
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable

import torch
import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_wait

from tessera._core import launch
from tessera._core.device import device_info
from tessera._core.timing import graph_rounds, run_record, write_result
from tessera.blas import gemm_wq, quantize_weight, space
from tessera.blas.kernels.gemm_wq import add_slices

N = K = 8192
COPIES = 4
ROUNDS = 3
DEVICE = "cuda"


@triton.jit
def _sum_slices_pdl_kernel(ws_ptr, y_ptr, N, SIZE, stride_ym, stride_yn, SPLIT: tl.constexpr,
                           SPLIT_P2: tl.constexpr, BLOCK: tl.constexpr):
    """The shipped ``_sum_slices_kernel``, waiting first for the grid it depends on."""
    gdc_wait()
    add_slices(ws_ptr, y_ptr, N, SIZE, stride_ym, stride_yn, SPLIT, SPLIT_P2, BLOCK)


def with_pdl_sum(calls: list[launch.Call]) -> Callable[[], None]:
    """The captured main launch, then the slice sum launched as a programmatic dependent."""
    main, total = calls

    def run() -> None:
        replayed(main)()
        _sum_slices_pdl_kernel[total.grid](*total.args, **total.constexprs, num_warps=total.num_warps,
                                           num_stages=total.num_stages, launch_pdl=True)
    return run


def replayed(call: launch.Call) -> Callable[[], None]:
    """The captured launch, run again with the arguments it was captured with."""
    return lambda: call.launcher(call.grid, call.args, call.constexprs, call.num_warps, call.num_stages)


def main() -> None:
    out = sys.argv[1]
    gen = torch.Generator(device=DEVICE).manual_seed(11)
    weights = [torch.randn(K, N, device=DEVICE, generator=gen).to(torch.bfloat16) * 0.02
               for _ in range(COPIES)]
    x = torch.randn(1, K, device=DEVICE, generator=gen).to(torch.bfloat16)
    rows = []
    for bits in (8, 4):
        qs = [quantize_weight(w, bits=bits, group_size=128) for w in weights]
        codes = [torch.as_strided(q.codes, (q.codes.numel(),), (1,)) for q in qs]  # storage, any layout
        halves = [(c[: c.numel() // 2], c[c.numel() // 2:]) for c in codes]
        captured = []
        for q in qs:
            with launch.capture() as calls:
                gemm_wq(x, q)
            captured.append(calls)
        problem = space.MnkProblem(1, N, K, f"int{bits}_bf16")
        shipped = space.select_mnk("gemm_wq", problem, device_info()).config
        cases: dict[str, list[Callable[[], object]]] = {
            "torch.matmul (bf16 weights)": [lambda w=w: torch.matmul(x, w) for w in weights],
            f"shipped gemm_wq ({shipped.short()})": [lambda q=q: gemm_wq(x, q) for q in qs],
            "copy of the codes' bytes (read + write = the codes)":
                [lambda h=h: h[1].copy_(h[0]) for h in halves],
        }
        for i, name in enumerate(launch.function_name(c.launcher.kernel).split(":")[-1] for c in captured[0]):
            cases[f"launch {i + 1} alone: {name}"] = [replayed(calls[i]) for calls in captured]
        if len(captured[0]) == 2 and DEVICE == "cuda":
            cases["both launches, the sum by PDL"] = [with_pdl_sum(calls) for calls in captured]
        times = graph_rounds(cases, ROUNDS)
        torch_us = 1e3 * statistics.median(times["torch.matmul (bf16 weights)"])
        for name in cases:
            us = 1e3 * statistics.median(times[name])
            rows.append({"bits": bits, "case": name, "graph_us": us, "vs_torch": torch_us / us})
            print(f"W{bits}A16 {name:<60} {us:8.2f} µs  {torch_us / us:5.2f}× torch")
    result = {**run_record("python benchmarks/wq_floor.py OUT.json"),
              "m": 1, "n": N, "k": K, "group": 128,
              "rows": rows}
    write_result(out, result)


if __name__ == "__main__":
    main()
