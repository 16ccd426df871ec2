"""The Gluon FMA family (``gemm_fma``: IEEE float32 on the FMA units, explicit 8×8 thread tiles)
forced to each configuration of ``space.FMA_SPACE``, beside cuBLAS's SGEMM and the shipped choice.

Written first as a standalone kernel in this probe (thirty-eighth session), moved into the library
(``tessera.blas.kernels.gemm_fma``, fortieth session) with C, alpha/beta and a grouped tile order;
neither version has run on a GPU yet. Each configuration is checked against fp64 first (relative
to |A|·|B|, not timed if it is off by more than float32 accumulation can be), then timed with
torch.matmul (TF32 off: cuBLAS's SGEMM) and the shipped ``gemm`` from CUDA graphs over cold operand
copies, the cases interleaved per round. Offline SASS: ``python benchmarks/sass_mix.py blas gemm
gemm_fma fp32 '{"block_k": 8, "buffers": 2}'``.

Usage: python benchmarks/sgemm_gluon_probe.py OUT.json [--sizes 2048,4096,8192] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys

import torch

from tessera._core.timing import cold_copies, graph_rounds, run_record, write_result
from tessera.blas import explain, gemm, space


def _forced(config: object, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    with space.forced(config):
        return gemm(a, b)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--sizes", default="2048,4096,8192")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    rows = []
    for n in (int(v) for v in args.sizes.split(",")):
        a, b = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
        copies = cold_copies((a, b))
        exact = a.double() @ b.double()
        scale = a.double().abs() @ b.double().abs()
        cases = {"sgemm": [lambda x=x, y=y: torch.matmul(x, y) for x, y in copies],
                 "shipped": [lambda x=x, y=y: gemm(x, y) for x, y in copies]}
        errors = {"sgemm": float(((torch.matmul(a, b).double() - exact).abs() / scale).max()),
                  "shipped": float(((gemm(a, b).double() - exact).abs() / scale).max())}
        for config in space.FMA_SPACE:
            name = config.short()
            with space.forced(config):
                taken = explain(a, b).config
            try:
                if taken != config:
                    raise RuntimeError(f"the call does not take the family: it ran {taken.short()}")
                err = float(((_forced(config, a, b).double() - exact).abs() / scale).max())
                why = f"wrong: max error {err:.3g} of |A|·|B|" if err > n * 2.0**-24 else None
            except Exception as exc:  # noqa: BLE001 - a probe reports what failed and goes on
                err, why = float("nan"), f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:200]}"
            if why is not None:
                rows.append({"n": n, "case": name, "error": why})
                print(n, name, why, flush=True)
                continue
            errors[name] = err
            cases[name] = [lambda x=x, y=y, c=config: _forced(c, x, y) for x, y in copies]
        times = graph_rounds(cases, args.rounds)
        vendor = statistics.median(times["sgemm"])
        for name, samples in times.items():
            ms = statistics.median(samples)
            rows.append({"n": n, "case": name, "ms_graph": ms, "tflops": 2 * n**3 / ms / 1e9,
                         "vs_sgemm": vendor / ms, "max_rel_error": errors[name], "samples": samples})
            print(f"{n:6d} {name:36s} {ms:8.3f} ms {2 * n**3 / ms / 1e9:6.1f} TFLOP/s "
                  f"{vendor / ms:5.2f}x err {errors[name]:.2e}", flush=True)
        rows.append({"n": n, "case": "shipped is", "kernel": explain(a, b).config.short()})
    record = run_record("benchmarks/sgemm_gluon_probe.py " + " ".join(sys.argv[1:]))
    write_result(args.out, {**record, "rows": rows})


if __name__ == "__main__":
    main()
