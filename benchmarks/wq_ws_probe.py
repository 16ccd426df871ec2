"""The warp-specialized weight-only decode kernel (``gemm_wq_ws``, Gluon, sm_90; W4A16 or W8A16)
beside the weight-only call as shipped (``gemm_wq``, the logic files' choice) and bf16
torch.matmul of the same shape: each configuration checked against x · dequantize_weight(q) in
fp64 first (and again after ``--stress`` launches back to back), then graph-timed over four
weight copies (cold L2), medians of three interleaved rounds. Run one configuration a process
while a kernel is new (a hang then costs one process, under ``timeout -s KILL``).

A configuration is STAGES:CONSUMERS[:SPLIT_K] (``WqWsConfig``).

Usage: python benchmarks/wq_ws_probe.py OUT.json [--rows 1,16] [--configs 8:4,8:3] [--n 8192]
       [--k 8192] [--group 128] [--bits 4|8] [--dtype bf16|fp16] [--stress N] [--check-only]
"""

from __future__ import annotations

import argparse
import statistics

import torch

from tessera._core.timing import graph_rounds, run_record, write_result
from tessera.blas import dequantize_weight, gemm_wq, quantize_weight
from tessera.blas.kernels.gemm_wq_ws import WqWsConfig, launch_gemm_wq_ws, wq_ws_supported

COPIES = 4
ROUNDS = 3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--rows", default="1,16")
    parser.add_argument("--configs", default="8:4")
    parser.add_argument("--n", type=int, default=8192)
    parser.add_argument("--k", type=int, default=8192)
    parser.add_argument("--group", type=int, default=128)
    parser.add_argument("--bits", type=int, default=4, choices=(4, 8))
    parser.add_argument("--dtype", default="bf16")
    parser.add_argument("--check-only", action="store_true", help="check, do not time")
    parser.add_argument("--stress", type=int, default=0, help="launch each configuration this many times "
                        "back to back (after its check) and check the last result again")
    args = parser.parse_args()
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    n, k = args.n, args.k
    gen = torch.Generator(device="cuda").manual_seed(7)
    weights = [(torch.randn(k, n, device="cuda", generator=gen) * 0.02).to(dtype) for _ in range(COPIES)]
    qs = [quantize_weight(w, bits=args.bits, group_size=args.group) for w in weights]
    rows = []
    for m in (int(r) for r in args.rows.split(",")):
        x = torch.randn(m, k, device="cuda", generator=gen).to(dtype)
        ref = x.double() @ dequantize_weight(qs[0], torch.float64)
        scale = ref.abs().max().item()
        shipped_err = (gemm_wq(x, qs[0]).double() - ref).abs().max().item() / scale
        calls: dict[str, list] = {"torch.matmul": [lambda w=w, x=x: torch.matmul(x, w) for w in weights],
                                  "shipped gemm_wq": [lambda q=q, x=x: gemm_wq(x, q) for q in qs]}
        for spec in args.configs.split(","):
            config = WqWsConfig(*(int(v) for v in spec.split(":")))
            assert wq_ws_supported(x, qs[0].codes, qs[0].scales, None, args.bits, args.group)

            def launch(q: object, y: torch.Tensor, c: WqWsConfig = config, x: torch.Tensor = x) -> None:
                launch_gemm_wq_ws(x, q.codes, q.scales, args.bits, args.group, y, c)

            y = torch.empty(m, n, dtype=dtype, device="cuda")
            launch(qs[0], y)
            torch.cuda.synchronize()
            err = (y.double() - ref).abs().max().item() / scale
            print(f"M={m} {config.short()}: max err {err:.2e} of max|y| (shipped {shipped_err:.2e})",
                  flush=True)
            row = {"m": m, "case": config.short(), "max_err_rel": err, "shipped_max_err_rel": shipped_err}
            if args.stress:
                for _ in range(args.stress):
                    launch(qs[0], y)
                torch.cuda.synchronize()
                row["stress_launches"] = args.stress
                row["stress_max_err_rel"] = (y.double() - ref).abs().max().item() / scale
                print(f"  {args.stress} launches back to back: max err {row['stress_max_err_rel']:.2e}",
                      flush=True)
            rows.append(row)
            if not max(err, row.get("stress_max_err_rel", 0.0)) <= max(4 * shipped_err, 1e-2):
                print("  WRONG: not timed", flush=True)
                continue
            ys = [torch.empty(m, n, dtype=dtype, device="cuda") for _ in qs]
            calls[config.short()] = [lambda q=q, y=y, f=launch: f(q, y) for q, y in zip(qs, ys, strict=True)]
        if args.check_only:
            continue
        samples = {name: [1e3 * ms for ms in values] for name, values in graph_rounds(calls, ROUNDS).items()}
        torch_us = statistics.median(samples["torch.matmul"])
        for name, values in samples.items():
            us = statistics.median(values)
            rows.append({"m": m, "case": name, "graph_us": us, "vs_torch": torch_us / us,
                         "samples_us": values})
            print(f"W{args.bits}A16 M={m:<3} {name:<24} {us:7.2f} µs  {torch_us / us:5.2f}× torch",
                  flush=True)
    settings = " ".join(f"--{a.replace('_', '-')} {getattr(args, a)}"
                        for a in ("rows", "configs", "n", "k", "group", "bits", "dtype", "stress"))
    write_result(args.out, {**run_record(f"python benchmarks/wq_ws_probe.py OUT.json {settings}"),
                            "n": n, "k": k, "group": args.group, "bits": args.bits, "rows": rows})


if __name__ == "__main__":
    main()
