"""What the last, partly filled wave of output tiles costs a persistent GEMM at the power limit.

At 8192³ the 128×256 tiles number 2048: 15.5 per multiprocessor of the H200's 132, so every
program walks 16 tiles' time while 68 of them do the sixteenth alone. With M = 8448 the tiles
number 2112, 16 per multiprocessor exactly: if the half-empty wave costs its full share, TFLOP/s
rise by 2112 / 2048 − 1 = 3.1 % from the first size to the second; if the multiprocessors that
finish early let the busy ones clock higher (the GPU runs at its power limit), by less. This is
the most splitting the last wave (stream-K) could win there. Shipped ``gemm`` and the vendor, each
replayed from CUDA graphs over cold operand copies, the cases interleaved over the rounds.

Usage: python benchmarks/wave_tail.py OUT.json [--rows 8192,8448] [--dtypes fp8,bf16] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics

import torch

from tessera._core.timing import cold_copies, graph_rounds, run_record, write_result
from tessera.blas import explain, gemm

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.float8_e4m3fn}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--rows", default="8192,8448")
    parser.add_argument("--dtypes", default="fp8,bf16")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    one = torch.ones((), device="cuda")
    scaled = {"scale_a": one, "scale_b": one}
    rows = []
    for name in args.dtypes.split(","):
        cases, kernels = {}, {}
        for m in (int(v) for v in args.rows.split(",")):
            a = torch.randn(m, 8192, device="cuda").to(DTYPES[name])
            b = torch.randn(8192, 8192, device="cuda").to(DTYPES[name])
            if name == "fp8":
                b = b.t()  # K-major, what 8-bit tensor cores and torch._scaled_mm take
                vendor = [lambda x=x, y=y: torch._scaled_mm(x, y, **scaled, out_dtype=torch.bfloat16,
                                                             use_fast_accum=True)
                          for x, y in cold_copies((a, b))]
                ours = [lambda x=x, y=y: gemm(x, y, **scaled, fast_accum=True)
                        for x, y in cold_copies((a, b))]
                kernels[m] = explain(a, b, **scaled, fast_accum=True).config.short()
            else:
                vendor = [lambda x=x, y=y: torch.matmul(x, y) for x, y in cold_copies((a, b))]
                ours = [lambda x=x, y=y: gemm(x, y) for x, y in cold_copies((a, b))]
                kernels[m] = explain(a, b).config.short()
            cases[("torch", m)], cases[("tessera", m)] = vendor, ours
        for (who, m), samples in graph_rounds(cases, args.rounds).items():
            ms = statistics.median(samples)
            tflops = 2 * m * 8192 * 8192 / ms / 1e9
            rows.append({"dtype": name, "m": m, "n": 8192, "k": 8192, "case": who, "ms_graph": ms,
                         "samples": samples, "tflops": tflops,
                         "kernel": kernels[m] if who == "tessera" else "vendor"})
            print(f"{name} M={m} {who:8s} {ms * 1e3:8.1f} us {tflops:7.1f} TF/s  {rows[-1]['kernel']}",
                  flush=True)
    write_result(args.out, {**run_record("python benchmarks/wave_tail.py " + " ".join(
                     f"--{k} {v}" for k, v in vars(args).items() if k != "out")), "rows": rows})


if __name__ == "__main__":
    main()
