"""Eager cost of the weight-only rows (N = K = 8192, group 128) with the shipped logic: whether the
first call kept a replay recipe, the host's cost per call (wall time of back-to-back calls with the
GPU synchronized only at the ends: the larger of host and GPU time), the same loop's GPU time per
call between events, the L2-flushed eager time (``do_bench``), and bf16 torch.matmul beside each.

Written when W8A16 M = 16's eager time was found at 144–216 µs against 25 µs in CUDA graphs (its
byte-plane tile kept no recipe, e72ce71). Usage: python benchmarks/wq_eager.py [OUT.json]
"""

from __future__ import annotations

import functools
import sys

import torch

from tessera import blas
from tessera._core.device import device_info
from tessera._core.timing import back_to_back_ms, flushed_ms, per_call_us, run_record, write_result
from tessera.blas import quantized, space


def main() -> None:
    n = k = 8192
    w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) / k**0.5
    rows, info = [], device_info(w.device)
    for bits in (4, 8):
        q = blas.quantize_weight(w, bits=bits, group_size=128)
        for m in (1, 16):
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            quantized._RECIPES.clear()
            blas.gemm_wq(x, q)
            recipe = len(quantized._RECIPES) == 1
            ours = functools.partial(blas.gemm_wq, x, q)
            theirs = functools.partial(torch.matmul, x, w)
            chosen = space.select_mnk("gemm_wq", space.MnkProblem(m, n, k, f"int{bits}_bf16"), info).config
            row = {"bits": bits, "m": m, "recipe": recipe, "config": chosen.short(),
                   "host_us": per_call_us(ours, calls=500), "torch_host_us": per_call_us(theirs, calls=500),
                   "back_to_back_us": back_to_back_ms(ours) * 1e3,
                   "torch_back_to_back_us": back_to_back_ms(theirs) * 1e3,
                   "flushed_us": flushed_ms(ours) * 1e3, "torch_flushed_us": flushed_ms(theirs) * 1e3}
            rows.append(row)
            print(f"W{bits}A16 M={m:<3} {chosen.short():<50} recipe {recipe!s:<5} "
                  f"host {row['host_us']:6.1f} us "
                  f"(torch {row['torch_host_us']:5.1f})  back-to-back {row['back_to_back_us']:6.1f} "
                  f"(torch {row['torch_back_to_back_us']:5.1f})  flushed {row['flushed_us']:6.1f} "
                  f"(torch {row['torch_flushed_us']:5.1f})")
    if len(sys.argv) > 1:
        write_result(sys.argv[1], {**run_record("python benchmarks/wq_eager.py OUT.json"), "rows": rows})


if __name__ == "__main__":
    main()
