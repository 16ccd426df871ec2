"""Weight-only quantized GEMM (W4A16, W8A16, group 128) beside bf16 torch.matmul of the same shape.

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
from tessera.blas import gemm_wq, quantize_weight, space
from tessera.blas.kernels.gemm_wq import WqConfig

N = K = 8192
TARGETS = {(4, 1): 2.5, (4, 16): 2.5, (8, 1): 1.6, (8, 16): 1.6, (4, 4096): 0.8, (8, 4096): 0.8}
SWEEP = {1: [WqConfig(16, bn, bk, split, 8, 4, 3) for bn, bk in ((64, 128), (128, 128), (256, 64))
             for split in (4, 8, 16)],
         4096: [WqConfig(bm, bn, 64, 1, 8, w, 3) for bm, bn, w in ((128, 128, 8), (128, 256, 8), (64, 128, 4),
                                                                   (128, 64, 4))]}


def main() -> None:
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
                   "command": "python benchmarks/quantized.py OUT.json", "rows": rows, "sweep": sweep},
                  f, indent=1)


if __name__ == "__main__":
    main()
