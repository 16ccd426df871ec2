"""Why a large GEMM of ours is slower replayed from a CUDA graph than launched eagerly.

The square grid (``gemm-grid-h200-2a66748.json``) put bf16 8192³ at 1.633 ms flushed eagerly,
1.635 back to back and 1.726 from a graph, while cuBLAS took 1.621 / 1.628 / 1.630 (fp16 8192³
alike: 1.723 / 1.698 / 1.829 against 1.712 / 1.699 / 1.703). This times both sides, alternating,
in each timing — flushed eager, back to back for 50 ms, graphs of 20 and of 100 ms — with the
PDL mode the process runs under (``TESSERA_PDL``) recorded, so that runs under different modes
can be compared.

Usage: python benchmarks/graph_gap.py OUT.json [--size S] [--dtypes bf16,fp16] [--rounds R]
"""

from __future__ import annotations

import os
import statistics
import sys

import torch

from tessera._core.timing import back_to_back_ms, flushed_ms, graph_ms, run_record, write_result
from tessera.blas import explain, gemm

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def _option(name: str, default: str) -> str:
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def main() -> None:
    out = sys.argv[1]
    size = int(_option("--size", "8192"))
    rounds = int(_option("--rounds", "2"))
    rows = []
    for name in _option("--dtypes", "bf16,fp16").split(","):
        gen = torch.Generator(device="cuda").manual_seed(1)
        a = torch.randn(size, size, device="cuda", generator=gen).to(DTYPES[name])
        b = torch.randn(size, size, device="cuda", generator=gen).to(DTYPES[name])
        sides = {"torch.matmul": lambda a=a, b=b: torch.matmul(a, b), "tessera": lambda a=a, b=b: gemm(a, b)}
        timings: dict[tuple[str, str], list[float]] = {}
        for _ in range(rounds):
            for side, call in sides.items():
                for timing, fn in (("flushed", lambda c=call: flushed_ms(c)),
                                   ("b2b", lambda c=call: back_to_back_ms(c)),
                                   ("graph20", lambda c=call: graph_ms([c], target_ms=20.0)),
                                   ("graph100", lambda c=call: graph_ms([c], target_ms=100.0))):
                    timings.setdefault((side, timing), []).append(fn())
        choice = explain(a, b)
        kernel = "none" if choice is None else choice.config.short()
        for (side, timing), samples in timings.items():
            ms = statistics.median(samples)
            tflops = 2 * size ** 3 / ms / 1e9
            rows.append({"dtype": name, "kernel": kernel if side == "tessera" else "cuBLAS", "side": side,
                         "timing": timing, "ms": ms, "tflops": tflops, "samples": samples})
            print(f"{name} {size}³ PDL={os.environ.get('TESSERA_PDL', 'measured'):<8} {side:<13} {timing:<9} "
                  f"{ms:8.4f} ms {tflops:7.1f} TFLOP/s", flush=True)
        print(f"  ours: {kernel}")
    record = {**run_record(" ".join(["python benchmarks/graph_gap.py OUT.json", *sys.argv[2:]])),
              "size": size, "rows": rows}
    write_result(out, record)


if __name__ == "__main__":
    main()
