"""Why an eager, L2-flushed level-2 call runs slower than its graph replay: host time or GPU time.

``blas_level12.py`` at 3d7c148 on the H200 timed symv 8192² bf16 at 98.8 µs eagerly (do_bench:
flush, event, call, event) against 21.6 µs replayed, and gemv T at 93.5 against 33.3, where gemv N
took 44.0 against 32.8 (torch.mv 44–45 eagerly). For each call this times, on one GPU:
  host      µs of Python and launches per call, the calls queued behind a long sleep kernel (so no
            queue wait and no GPU time enters the figure)
  flushed   do_bench's median (the eager figure of the committed runs)
  slack     the same loop with a sleep kernel after the flush, so the host is ahead when the call's
            first launch reaches the GPU: the eager call's GPU time alone
  graph     replayed from a CUDA graph over cold copies
and a cProfile of the host path of ``PROFILED`` calls. Run it once with ``TESSERA_PDL`` unset and
once with ``TESSERA_PDL=off`` (read at import). Usage: python benchmarks/eager_level2.py OUT.json
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import statistics
import sys
import time
from collections.abc import Callable

import torch
import triton.testing

from tessera._core.timing import graph_ms, run_record, write_result
from tessera.blas import level1, level2

SIZE = 8192
CALLS = 200
PROFILED = 300


def _sleep_cycles(us: float) -> int:
    return int(us * 2000)  # at most ~2 GHz: at least ``us`` µs


def host_us(fn: Callable[[], object]) -> float:
    """Host µs per call: ``CALLS`` calls queued behind a sleep kernel long enough to cover them."""
    torch.cuda.synchronize()
    torch.cuda._sleep(_sleep_cycles(CALLS * 400.0))
    start = time.perf_counter()
    for _ in range(CALLS):
        fn()
    spent = time.perf_counter() - start
    torch.cuda.synchronize()
    return spent / CALLS * 1e6


def slack_ms(fn: Callable[[], object], cache: torch.Tensor, reps: int = 100) -> float:
    """do_bench's loop with a 300 µs sleep kernel between the flush and the start event."""
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(reps)]
    cycles = _sleep_cycles(300.0)
    for start, end in events:
        cache.zero_()
        torch.cuda._sleep(cycles)
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events)


def profile_text(fn: Callable[[], object]) -> str:
    torch.cuda.synchronize()
    torch.cuda._sleep(_sleep_cycles(PROFILED * 1000.0))
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(PROFILED):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(25)
    return out.getvalue()


def main() -> None:
    torch.manual_seed(0)
    copies = 4  # 4 × 128 MiB matrices: the replays read cold operands
    mats = [torch.randn(SIZE, SIZE, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
    x = torch.randn(SIZE, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(SIZE, device="cuda", dtype=torch.bfloat16)
    xs, ys = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    cases: dict[str, Callable[[torch.Tensor], object]] = {
        "symv": lambda a: level2.symv(a, x, y),
        "gemv_t": lambda a: level2.gemv(a, x, y, trans=True),
        "gemv_n": lambda a: level2.gemv(a, x, y),
        "torch.mv": lambda a: torch.mv(a, x, out=y),
        "torch.mv(a.t())": lambda a: torch.mv(a.t(), x, out=y),
    }
    tiny: dict[str, Callable[[], object]] = {
        "dot 4096": lambda: level1.dot(xs, ys), "axpy 4096": lambda: level1.axpy(2.0, xs, ys),
        "nrm2 4096": lambda: level1.nrm2(xs), "torch.dot 4096": lambda: torch.dot(xs, ys),
    }
    cache = torch.empty(int(256e6 // 4), dtype=torch.int32, device="cuda")
    rows, profiles = [], []
    for name, call in cases.items():
        fn = lambda call=call: call(mats[0])  # noqa: E731
        for _ in range(20):
            fn()
        row = {"call": f"{name} bf16 {SIZE}²", "host_us": host_us(fn),
               "flushed_us": 1e3 * triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"),
               "slack_us": 1e3 * slack_ms(fn, cache),
               "graph_us": 1e3 * graph_ms([lambda a=a, call=call: call(a) for a in mats])}
        rows.append(row)
        print(row, flush=True)
        if name in ("symv", "gemv_t", "gemv_n"):
            profiles.append(f"=== {name} ===\n{profile_text(fn)}")
    for name, fn in tiny.items():
        for _ in range(20):
            fn()
        rows.append({"call": name, "host_us": host_us(fn)})
        print(rows[-1], flush=True)
    profiles.append(f"=== dot 4096 ===\n{profile_text(tiny['dot 4096'])}")
    record = run_record(" ".join(["python", *sys.argv]))
    write_result(sys.argv[1], {**record, "pdl": os.environ.get("TESSERA_PDL", "measured"), "rows": rows})
    with open(sys.argv[1].removesuffix(".json") + "-profile.txt", "w") as f:
        f.write("\n".join(profiles))
    print("\n".join(profiles)[:6000])


if __name__ == "__main__":
    main()
