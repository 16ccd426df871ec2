"""gemm_wq's decode rows (W4A16 / W8A16, M = 1 and 16, 8192², group 128) called eagerly a few times
each, for a run under compute-sanitizer (memcheck): the shipped selection (gemm_wq_ws, PDL per
code width), calls back to back on the stream as quantized.py makes them."""

from __future__ import annotations

import torch

from tessera.blas import gemm_wq, quantize_weight

torch.manual_seed(0)
w = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16) * 0.02
for bits in (4, 8):
    q = quantize_weight(w, bits=bits, group_size=128)
    for m in (1, 16):
        x = torch.randn(m, 8192, device="cuda", dtype=torch.bfloat16)
        want = x.float() @ w.float()
        for _ in range(4):
            y = gemm_wq(x, q)
        torch.cuda.synchronize()
        err = float((y.float() - want).abs().max() / want.abs().max())
        print(f"W{bits}A16 M={m}: max |y - x·w| / max |x·w| {err:.3g}", flush=True)
