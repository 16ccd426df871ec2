"""Does a graph-replayed time depend on what ran just before it? Each round times, from CUDA graphs
over cold operand copies (``graph_ms``, as the A/Bs and ``tessera bench`` do), torch.matmul twice
and then Tessera's call twice: T1 T2 O1 O2. T1 / T2 and O1 / O2 are the same calls timed right
after the other library's kernel and right after their own; T2 / O1 is the ratio a fixed order
"torch, then ours" reports, T1 / O2 (O2 of the round before) the reverse order's.

Why: an A/B of two tf32 logic files that, by a fault of the script, timed the same IEEE fp32
kernel twice reported the second 1.024× the first (33 shapes, an H100), in every round.

Since the sixty-fourth session ``graph_ms`` replays each graph twice untimed before timing it;
``--warmup-replays 0`` times as before, so two runs (0, then the default) show what the
warm-up removes: T1 / T2 and O1 / O2 should move to ~1.000.

Usage: python benchmarks/order_probe.py OUT.json [--rounds R] [--warmup-replays N]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from statistics import geometric_mean as geomean

import torch

from tessera._core.device import precision_of, torch_dtype, torch_matmul_tf32_as
from tessera._core.timing import cold_copies, graph_ms, run_record, write_result
from tessera.blas import gemm

CASES = [(dtype, s, s, s) for dtype in ("bf16", "fp16", "tf32", "fp32") for s in (1024, 2048, 4096, 8192)]
CASES += [("fp32", 512, 8192, 8192), ("fp32", 384, 6144, 11008), ("tf32", 512, 8192, 8192),
          ("bf16", 640, 11008, 5120)]


def probe(dtype: str, m: int, n: int, k: int, rounds: int, warmup_replays: int = 2) -> dict:
    """One case's samples, T1 T2 O1 O2 a round, and the ratios of the module's docstring."""
    element, precision = torch_dtype(dtype), precision_of(dtype)
    a = torch.randn(m, k, device="cuda").to(element)
    b = torch.randn(k, n, device="cuda").to(element)
    copies = cold_copies((a, b))
    theirs = [lambda x=x, y=y: torch.matmul(x, y) for x, y in copies]
    ours = [lambda x=x, y=y: gemm(x, y, precision=precision) for x, y in copies]
    samples: dict[str, list[float]] = {"T1": [], "T2": [], "O1": [], "O2": []}
    for _ in range(rounds):
        for name, calls in (("T1", theirs), ("T2", theirs), ("O1", ours), ("O2", ours)):
            samples[name].append(graph_ms(calls, warmup_replays=warmup_replays))
    t1, t2, o1, o2 = samples.values()
    ratios = {
        "T1/T2": geomean([x / y for x, y in zip(t1, t2, strict=True)]),
        "O1/O2": geomean([x / y for x, y in zip(o1, o2, strict=True)]),
        "torch_then_ours": geomean([t / o for t, o in zip(t2, o1, strict=True)]),
        "ours_then_torch": geomean([t / o for t, o in zip(t1[1:], o2[:-1], strict=True)]),
    }
    return dict(dtype=dtype, m=m, n=n, k=k, samples=samples, ratios=ratios)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--warmup-replays", type=int, default=2, help="graph_ms's untimed replays")
    args = parser.parse_args()
    record = run_record(" ".join(["python", *sys.argv]))
    rows: list[dict] = []
    for dtype, m, n, k in CASES:
        with torch_matmul_tf32_as(dtype == "tf32"):
            rows.append(probe(dtype, m, n, k, args.rounds, args.warmup_replays))
        write_result(args.out, {**record, "rows": rows})
        ratios = ", ".join(f"{key} {value:.3f}" for key, value in rows[-1]["ratios"].items())
        print(f"{dtype} {m}x{n}x{k}: {ratios}", flush=True)
    for key in rows[0]["ratios"]:
        print(f"geomean {key}: {geomean([row['ratios'][key] for row in rows]):.3f}")


if __name__ == "__main__":
    main()
