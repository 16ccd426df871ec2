"""What a split-K weight-only call's two launches cost apart: the shipped configuration's whole
call, its main launch alone and its slice sum alone, graph-timed over four weight copies (cold
L2), beside bf16 torch.matmul in the same run. It bounds what folding the slice sum into the main
launch could save.

Usage: python benchmarks/wq_parts.py OUT.json
"""

from __future__ import annotations

import statistics
import sys

import torch

from tessera._core.timing import graph_ms, run_record, write_result
from tessera.blas import gemm_wq, quantize_weight
from tessera.blas import quantized as wq

N = K = 8192
COPIES = 4
ROUNDS = 3
DEVICE = "cuda"
CASES = ((4, 1), (4, 16), (8, 1), (8, 16))


def main() -> None:
    gen = torch.Generator(device=DEVICE).manual_seed(7)
    weights = [torch.randn(K, N, device=DEVICE, generator=gen).to(torch.bfloat16) * 0.02
               for _ in range(COPIES)]
    rows = []
    for bits, m in CASES:
        qs = [quantize_weight(w, bits=bits, group_size=128) for w in weights]
        x = torch.randn(m, K, device=DEVICE, generator=gen).to(torch.bfloat16)
        parts: dict[str, list] = {"torch.matmul": [lambda w=w, x=x: torch.matmul(x, w) for w in weights],
                                  "call": [lambda q=q, x=x: gemm_wq(x, q) for q in qs]}
        for q in qs:
            gemm_wq(x, q)
            recipe = wq._RECIPES.get(wq._signature(x, q))
            y = torch.empty(m, N, dtype=x.dtype, device=DEVICE)
            operands = wq._main_operands(x, q, recipe.words, y)
            for j, replay in enumerate(recipe.replays):
                parts.setdefault(f"launch {j}", []).append(lambda r=replay, o=operands: r(o))
        samples: dict[str, list[float]] = {name: [] for name in parts}
        for _ in range(ROUNDS):
            for name, calls in parts.items():
                samples[name].append(1e3 * graph_ms(calls))
        torch_us = statistics.median(samples["torch.matmul"])
        for name, values in samples.items():
            us = statistics.median(values)
            rows.append({"bits": bits, "m": m, "part": name, "graph_us": us, "vs_torch": torch_us / us})
            print(f"W{bits}A16 M={m:<3} {name:<14} {us:7.2f} µs  {torch_us / us:5.2f}× torch", flush=True)
    write_result(sys.argv[1], {**run_record("python benchmarks/wq_parts.py OUT.json"), "n": N, "k": K,
                               "group": 128, "rows": rows})


if __name__ == "__main__":
    main()
