"""fp32 GEMM on tensor cores in three TF32 products (Triton's ``input_precision="tf32x3"``):
speed of ``gemm_tma`` configurations against cuBLAS SGEMM and TF32, and the error of each
against an fp64 reference, one run.

Each operand x is split into hi = tf32(x) and lo = tf32(x − hi); D = hi·hi + hi·lo + lo·hi
(CUTLASS's 3xTF32). The error columns are max |D − D64| / (|A|·|B|) elementwise.

B is stored column-major (K-major, what TF32 wgmma reads from shared memory) or row-major
(``--layouts``): tf32x3 splits operands in registers, so it may not need the K-major copy that
``gemm`` makes for tf32. A non-finite check compares where ±inf and NaN land with SGEMM's.

Usage: python benchmarks/tf32x3_probe.py OUT.json [--sizes 2048,4096,8192] [--configs BMxBNxBK:W:S,...]
       [--layouts col,row]
"""

from __future__ import annotations

import argparse
import statistics

import torch

from tessera._core.device import device_info
from tessera._core.timing import cold_copies, graph_rounds, run_record, write_result
from tessera.blas.kernels.gemm_tma import TmaConfig, launch_gemm_tma


def relative_error(d: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> float:
    exact = a.double() @ b.double()
    scale = a.double().abs() @ b.double().abs()
    return float(((d.double() - exact).abs() / scale).max())


def non_finite(sms: int, config: TmaConfig) -> dict:
    """Where ±inf and NaN land with tf32x3 against SGEMM, for A holding an inf, a −inf and a NaN
    (Triton replaces NaNs of the small products by zeros, so hi·hi alone carries an inf)."""
    a = torch.randn(256, 256, device="cuda")
    b = torch.randn(256, 256, device="cuda").t().contiguous().t()
    a[3, 5], a[7, 9], a[11, 13] = float("inf"), float("-inf"), float("nan")
    b[9, 2] = 0.0  # inf·0 = NaN in row 7's column 2
    a[20, 0] = 3.4028e38  # above the largest TF32 (3.4026e38): hi rounds to inf
    b[0] *= 1e-10
    d = torch.empty(256, 256, device="cuda")
    launch_gemm_tma(a, b, None, d, 1.0, 0.0, precision="tf32x3", num_sms=sms, config=config)
    ref = torch.matmul(a, b)
    rows = torch.arange(256, device="cuda") != 20  # row 20 is reported apart
    same = {kind: bool(torch.equal(test(d[rows]), test(ref[rows]))) for kind, test in
            (("posinf", torch.isposinf), ("neginf", torch.isneginf), ("nan", torch.isnan))}
    finite = torch.isfinite(ref) & torch.isfinite(d)
    huge_row_finite = bool(torch.isfinite(d[20]).all())
    print("non-finite placement equal to SGEMM:", same, "row of 3.4028e38 finite:", huge_row_finite,
          flush=True)
    return {"case": "non_finite", "same_as_sgemm": same, "huge_row_finite": huge_row_finite,
            "finite_max_abs_diff": float((d[finite] - ref[finite]).abs().max())}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--sizes", default="2048,4096,8192")
    parser.add_argument("--configs", default="128x128x32:8:3,128x256x32:8:2,128x128x32:4:3,64x128x32:4:4")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--layouts", default="col,row", help="B column-major (K-major) and/or row-major")
    args = parser.parse_args()
    sms = device_info(torch.device("cuda")).multiprocessors
    configs = []
    for text in args.configs.split(","):
        tile, warps, stages = text.split(":")
        bm, bn, bk = (int(v) for v in tile.split("x"))
        configs.append(TmaConfig(bm, bn, bk, num_warps=int(warps), num_stages=int(stages)))
    rows = []
    for n in (int(v) for v in args.sizes.split(",")):
        torch.manual_seed(0)
        a = torch.randn(n, n, device="cuda")
        b_row = torch.randn(n, n, device="cuda")
        b = b_row.t().contiguous().t()  # K-major, what tf32 wgmma reads
        copies = cold_copies((a, b))
        row_copies = [(x, y.contiguous()) for x, y in copies]
        outs = [torch.empty(n, n, device="cuda") for _ in copies]
        errors: dict[str, float] = {}
        cases = {}

        def torch_mm(x: torch.Tensor, y: torch.Tensor, tf32: bool) -> torch.Tensor:
            torch.backends.cuda.matmul.allow_tf32 = tf32
            try:
                return torch.matmul(x, y)
            finally:
                torch.backends.cuda.matmul.allow_tf32 = False

        for name, tf32 in (("sgemm", False), ("cublas_tf32", True)):
            errors[name] = relative_error(torch_mm(a, b, tf32), a, b)
            cases[name] = [lambda x=x, y=y, t=tf32: torch_mm(x, y, t) for x, y in copies]
        for layout, config in ((layout, c) for layout in args.layouts.split(",") for c in configs):
            name = f"{config.short()} b-{layout}"
            pairs = copies if layout == "col" else row_copies
            d = outs[0]
            try:
                launch_gemm_tma(*pairs[0], None, d, 1.0, 0.0, precision="tf32x3", num_sms=sms, config=config)
                torch.cuda.synchronize()
            except Exception as error:  # noqa: BLE001 - a probe: record and go on
                print(name, "failed:", str(error)[:300])
                continue
            errors[name] = relative_error(d, a, b)
            cases[name] = [
                lambda x=x, y=y, o=o, c=config: launch_gemm_tma(x, y, None, o, 1.0, 0.0, precision="tf32x3",
                                                                num_sms=sms, config=c)
                for (x, y), o in zip(pairs, outs, strict=True)]
        times = graph_rounds(cases, args.rounds)
        sgemm = statistics.median(times["sgemm"])
        for name, samples in times.items():
            ms = statistics.median(samples)
            row = {"n": n, "case": name, "ms_graph": ms, "tflops": 2 * n**3 / ms / 1e9,
                   "vs_sgemm": sgemm / ms, "max_rel_error": errors[name], "samples": samples}
            rows.append(row)
            print(f"{n:6d} {name:40s} {ms:8.3f} ms {row['tflops']:7.1f} TFLOP/s {row['vs_sgemm']:5.2f}x "
                  f"err {row['max_rel_error']:.2e}", flush=True)
    rows.append(non_finite(sms, configs[0]))
    record = run_record("benchmarks/tf32x3_probe.py " + " ".join(f"{k}={v}" for k, v in vars(args).items()))
    record["rows"] = rows
    write_result(args.out, record)


if __name__ == "__main__":
    main()
