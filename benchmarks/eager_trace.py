"""Where an eager, L2-flushed GEMM call's time goes on the GPU (torch.profiler), beside torch.

``bench gemm`` times eager calls as ``triton.testing.do_bench`` does: flush L2, record an event,
call, record an event. At 1024³ bf16 that measured 16.3 µs for Tessera against 7.4 µs replayed
from a CUDA graph (cuBLAS 9.3 against 5.9; 68cf936). This script repeats do_bench's loop under
torch.profiler and prints each GPU kernel's mean duration, so the kernel's own time can be told
from the gaps around it, and the host-side calls (launches, synchronizations, allocations).
Usage: python benchmarks/eager_trace.py OUT.txt
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile

from tessera.blas import gemm

CALLS = 30


def trace(name: str, fn: Callable[[], object], cache: torch.Tensor) -> str:
    """do_bench's loop (flush, event, call, event) under the profiler: per-kernel GPU times."""
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(CALLS)]
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        for start, end in events:
            cache.zero_()
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
    spans = sorted(start.elapsed_time(end) * 1e3 for start, end in events)
    averages = prof.key_averages()
    gpu = averages.table(sort_by="cuda_time_total", row_limit=8, max_name_column_width=60)
    host = averages.table(sort_by="self_cpu_time_total", row_limit=12, max_name_column_width=60)
    return f"=== {name}: event span median {spans[len(spans) // 2]:.1f} us ===\n{gpu}\n{host}\n"


def main() -> None:
    cache = torch.empty(int(256e6 // 4), dtype=torch.int32, device="cuda")
    out = []
    for size in (1024, 2048):
        a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
        out.append(trace(f"tessera bf16 {size}", lambda a=a, b=b: gemm(a, b), cache))
        out.append(trace(f"torch bf16 {size}", lambda a=a, b=b: torch.matmul(a, b), cache))
        fa, fb = a.float(), b.float()
        out.append(trace(f"tessera tf32 {size}", lambda a=fa, b=fb: gemm(a, b, precision="tf32"), cache))
        torch.backends.cuda.matmul.allow_tf32 = True
        out.append(trace(f"torch tf32 {size}", lambda a=fa, b=fb: torch.matmul(a, b), cache))
        torch.backends.cuda.matmul.allow_tf32 = False
    text = "\n".join(out)
    print(text)
    with open(sys.argv[1], "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
