"""tf32 with a row-major B: B's K-major copy beside the GEMM instead of before it (a probe).

``gemm`` copies a row-major float32 B K-major before a tf32 GEMM (wgmma reads 32-bit operands
from shared memory K-major only). At 8192³ the copy is ~4 % of the call: the grid's tf32 8192³
row runs ~0.95× cuBLAS in graphs where the kernel on a K-major B alone ran 1.02–1.06×. This
times whether the copy can run beside the GEMM instead (docs/status.md, "Ideas not yet timed"):
B in P column panels; panel 0 copied first, then launch p multiplies panel p on ``programs``
persistent programs while panel p + 1 is copied on a second stream (forked and joined inside the
CUDA graph, so the two are independent nodes the GPU may run together). The GEMM's programs hold
nearly all of a multiprocessor's registers, so the copy may need multiprocessors of its own: at
8192³ the 2048 128×256 tiles take 16 rounds on 132 programs or on 128, so 128 leaves four free
at no cost. Beside it, in the same rounds (alternating, all replayed from CUDA graphs): the
shipped call, the kernel alone on a K-major B (132 and 128 programs), the copy alone, the same
panels one after another on one stream, and torch.matmul with TF32. Every variant's D is first
checked bitwise equal to the kernel's on the whole K-major B (the same tiles, the same K loop).
Usage:
python benchmarks/tf32_copy_overlap.py OUT.json [--size 8192] [--panels 2,4] [--programs 128,132]
    [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import torch

from tessera import blas
from tessera._core.device import torch_matmul_tf32_as
from tessera._core.timing import graph_rounds, run_record, write_result
from tessera.blas.kernels.copy import copy_into
from tessera.blas.kernels.gemm_tma import TmaConfig, launch_gemm_tma

# the shipped sm_90 tf32 row at 8192³ and 16384³ (logic/sm_90/blas.gemm.tf32.yaml)
CONFIG = TmaConfig(128, 256, 32, group_m=8, num_warps=8, num_stages=3, epilogue_split=2)


def _gemm(a: torch.Tensor, b_kmajor: torch.Tensor, d: torch.Tensor, programs: int) -> None:
    """D = A·B on the tile family with B given K-major (``b_kmajor`` is (N, K) contiguous)."""
    launch_gemm_tma(a, b_kmajor.t(), None, d, 1.0, 0.0, precision="tf32", num_sms=programs, config=CONFIG)


def _panels(a: torch.Tensor, b: torch.Tensor, b_kmajor: torch.Tensor, d: torch.Tensor, panels: int,
            programs: int, side: torch.cuda.Stream | None) -> None:
    """B copied K-major panel by panel, each panel's GEMM after its copy; with ``side``, panel p + 1
    is copied on that stream while panel p is multiplied (joined back before panel p + 1's GEMM)."""
    width = b.shape[1] // panels
    main = torch.cuda.current_stream() if side is not None else None

    def copy(p: int) -> None:
        cols = slice(p * width, (p + 1) * width)
        copy_into(b[:, cols], b_kmajor[cols].t())

    copy(0)
    for p in range(panels):
        ahead = p + 1 < panels
        if ahead and side is not None:
            side.wait_stream(main)  # panel p is in place, and the previous launches are ordered
            with torch.cuda.stream(side):
                copy(p + 1)
        cols = slice(p * width, (p + 1) * width)
        _gemm(a, b_kmajor[cols], d[:, cols], programs)
        if ahead and side is None:
            copy(p + 1)
        elif ahead:
            main.wait_stream(side)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--panels", default="2,4")
    parser.add_argument("--programs", default="128,132")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    n = args.size
    panel_counts = [int(p) for p in args.panels.split(",")]
    program_counts = [int(p) for p in args.programs.split(",")]
    if any(n % (p * CONFIG.block_n) for p in panel_counts):
        raise SystemExit(f"--size {n} must split into panels of whole {CONFIG.block_n}-column tiles")
    torch.manual_seed(0)
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    b_kmajor = b.t().contiguous()
    scratch = torch.empty_like(b_kmajor)  # the variants' own K-major copy
    d = torch.empty(n, n, device="cuda")
    side = torch.cuda.Stream()

    want = torch.empty_like(d)
    _gemm(a, b_kmajor, want, max(program_counts))
    cases: dict[str, Callable[[], object]] = {
        "torch.matmul tf32": lambda: torch.matmul(a, b, out=d),
        "shipped call": lambda: blas.gemm(a, b, out=d, precision="tf32"),
        "copy alone": lambda: copy_into(b, scratch.t()),
    }
    for programs in program_counts:
        cases[f"kernel alone, K-major B, {programs} programs"] = lambda p=programs: _gemm(a, b_kmajor, d, p)
        for panels in panel_counts:
            cases[f"{panels} panels in sequence, {programs} programs"] = (
                lambda p=programs, k=panels: _panels(a, b, scratch, d, k, p, None))
            cases[f"{panels} panels beside, {programs} programs"] = (
                lambda p=programs, k=panels: _panels(a, b, scratch, d, k, p, side))

    checks: dict[str, str] = {}
    with torch_matmul_tf32_as(True):
        for name, call in cases.items():
            if name in ("torch.matmul tf32", "copy alone"):
                continue
            d.zero_()
            call()
            torch.cuda.synchronize()
            diff = float((d - want).abs().max())
            checks[name] = "equal" if torch.equal(d, want) else f"max diff {diff:.3e}"
        times = graph_rounds({name: [call] for name, call in cases.items()}, args.rounds)

    vendor = statistics.median(times["torch.matmul tf32"])
    flops = 2.0 * n**3
    rows = []
    for name, samples in times.items():
        ms = statistics.median(samples)
        if name == "copy alone":  # B read and written: GB/s, not a GEMM's figures
            row = {"case": name, "ms": ms, "samples_ms": samples, "gbs": 8.0 * n * n / ms / 1e6}
            print(f"{name:<44} {ms:8.4f} ms {row['gbs']:7.0f} GB/s", flush=True)
        else:
            row = {"case": name, "ms": ms, "samples_ms": samples, "tflops": flops / ms / 1e9,
                   "vs_torch": vendor / ms, "check": checks.get(name)}
            print(f"{name:<44} {ms:8.4f} ms {row['tflops']:7.1f} TFLOP/s {row['vs_torch']:6.3f}× torch"
                  f"  {row['check'] or ''}", flush=True)
        rows.append(row)
    record = run_record("python benchmarks/tf32_copy_overlap.py OUT.json " + " ".join(
        f"--{k} {v}" for k, v in (("size", n), ("panels", args.panels), ("programs", args.programs),
                                  ("rounds", args.rounds))))
    write_result(args.out, {**record, "config": CONFIG.short(), "rows": rows})


if __name__ == "__main__":
    main()
