"""Quantized GEMM on the GPU beside torch in the same run.

fp8 e4m3 8192³ (per-tensor scales, bf16 out) against ``torch._scaled_mm(use_fast_accum=True)``; int8
8192³ → int32 against ``torch._int_mm`` with B column-major and row-major. Then weight-only
quantized GEMM (W4A16, W8A16, group 128) beside bf16 torch.matmul of the same shape.

x (M × 8192, bf16) times an 8192 × 8192 weight, M = 1 and 16 (decode: the weight's bytes decide)
and 4096 (prefill: the tensor cores decide). Both sides timed with triton.testing.do_bench (median,
L2 flushed), alternating over 3 rounds. The issue's targets: W4A16 ≥ 2.5× torch at M = 1 and 16,
W8A16 ≥ 1.6×, both ≥ 0.8× at M = 4096.
A short sweep of ``gemm_wq`` configurations (W4A16, M = 1, 16, 4096) follows, as evidence for
the heuristic in ``tessera/blas/space.py``.
Usage: python benchmarks/quantized.py OUT.json
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import torch
import triton

from tessera._core.device import device_info
from tessera._core.timing import flushed_ms, git_revision
from tessera.blas import gemm, gemm_wq, quantize_weight, space
from tessera.blas.kernels.gemm_wq import WqConfig

N = K = 8192
TARGETS = {(4, 1): 2.5, (4, 16): 2.5, (8, 1): 1.6, (8, 16): 1.6, (4, 4096): 0.8, (8, 4096): 0.8}
SWEEP = {1: [WqConfig(16, bn, bk, split, 8, 4, 3) for bn, bk in ((64, 128), (128, 128), (256, 64))
             for split in (4, 8, 16)],
         4096: [WqConfig(bm, bn, 64, 1, 8, w, 3) for bm, bn, w in ((128, 128, 8), (128, 256, 8), (64, 128, 4),
                                                                   (128, 64, 4))]}


def operand_rows() -> list[dict]:
    """fp8 and int8 operands at 8192³: TFLOP/s (TOP/s) and the ratio to torch's kernel."""
    size, rows = 8192, []
    a8 = torch.randn(size, size, device="cuda").to(torch.float8_e4m3fn)
    b8 = torch.randn(size, size, device="cuda").to(torch.float8_e4m3fn).t()  # column-major
    one = torch.ones((), device="cuda")
    ai = torch.randint(-128, 128, (size, size), device="cuda", dtype=torch.int8)
    bi_col = torch.randint(-128, 128, (size, size), device="cuda", dtype=torch.int8).t()
    bi_row = bi_col.contiguous()
    cases = [
        ("fp8 e4m3, per-tensor scales, bf16 out", 1.05,
         lambda: gemm(a8, b8, scale_a=one, scale_b=one),
         lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                  use_fast_accum=True), "torch._scaled_mm(use_fast_accum=True)"),
        ("int8 → int32, B column-major", 1.3, lambda: gemm(ai, bi_col), lambda: torch._int_mm(ai, bi_col),
         "torch._int_mm"),
        ("int8 → int32, B row-major", 5.0, lambda: gemm(ai, bi_row), lambda: torch._int_mm(ai, bi_row),
         "torch._int_mm"),
    ]
    for name, target, ours, theirs, vendor in cases:
        row = {"problem": name, "size": size, "target": target, "vendor": vendor}
        try:
            mine = [flushed_ms(ours) for _ in range(3)]
            other = [flushed_ms(theirs) for _ in range(3)]
            row.update(ms=statistics.median(mine), vendor_ms=statistics.median(other))
            row["vs_vendor"] = row["vendor_ms"] / row["ms"]
            row["tflops"] = 2 * size**3 / row["ms"] / 1e9
            print(f"{name:<40} {row['tflops']:7.0f} T/s  {row['vs_vendor']:.2f}x {vendor} (target {target}x)")
        except (RuntimeError, TypeError) as error:  # a vendor call this torch lacks: recorded, not fatal
            row["error"] = repr(error)[:300]
            print(f"{name:<40} error: {row['error']}")
        rows.append(row)
    return rows


def main() -> None:
    operands = operand_rows()
    w = torch.randn(K, N, device="cuda", dtype=torch.bfloat16) * 0.02
    rows = []
    for bits in (4, 8):
        q = quantize_weight(w, bits=bits, group_size=128)
        for m in (1, 16, 4096):
            x = torch.randn(m, K, device="cuda", dtype=torch.bfloat16)
            ours, theirs = [], []
            for _ in range(3):
                ours.append(flushed_ms(lambda x=x, q=q: gemm_wq(x, q)))
                theirs.append(flushed_ms(lambda x=x: torch.matmul(x, w)))
            ms, torch_ms = statistics.median(ours), statistics.median(theirs)
            weight_bytes = q.codes.numel() + 2 * q.scales.numel()
            rows.append({"bits": bits, "m": m, "n": N, "k": K, "group": 128, "ms": ms, "torch_ms": torch_ms,
                         "vs_torch": torch_ms / ms, "tflops": 2 * m * N * K / ms / 1e9,
                         "weight_gbs": weight_bytes / ms / 1e6, "target": TARGETS[(bits, m)]})
            r = rows[-1]
            print(f"W{bits}A16 M={m:<5} {ms * 1e3:9.1f} us  torch {torch_ms * 1e3:9.1f} us  "
                  f"{r['vs_torch']:.2f}x (target {r['target']}x)  {r['tflops']:.0f} TFLOP/s  "
                  f"weights {r['weight_gbs']:.0f} GB/s")
    sweep = []
    q = quantize_weight(w, bits=4, group_size=128)
    for m, configs in SWEEP.items():
        x = torch.randn(m, K, device="cuda", dtype=torch.bfloat16)
        for config in configs:
            with space.forced(config):
                ms = flushed_ms(lambda x=x: gemm_wq(x, q))
            sweep.append({"bits": 4, "m": m, "config": config.short(), "ms": ms})
            print(f"sweep W4A16 M={m:<5} {config.short():<40} {ms * 1e3:9.1f} us")
    info = device_info()
    with open(sys.argv[1], "w") as f:
        json.dump({"device": info.name, "arch": info.arch, "git": git_revision(),
                   "versions": {"torch": torch.__version__, "triton": triton.__version__},
                   "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "command": "python benchmarks/quantized.py OUT.json", "operands": operands, "rows": rows,
                   "sweep": sweep},
                  f, indent=1)


if __name__ == "__main__":
    main()
