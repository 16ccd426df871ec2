"""gemv with op(A)'s columns contiguous (``gemv(trans=True)`` on a row-major A): where the time goes.

At 8192² bf16 the shipped launch splits the reduction over 8 programs per row block and adds the
partials in a second launch (0.92× torch.mv in CUDA graphs, blas-l12-h200-ee71c40.json). Timed
here from CUDA graphs beside torch.mv: the whole call, its main launch alone, and a design,
``_gemv_ticket_kernel``, that drops the second launch: each program stores its partial rows, takes
a ticket from a per-row-block counter (one atomic), and the program that draws the last ticket adds
the block's partials in the fixed order of the finishing launch (deterministic) and resets the
counter. Every design is checked against torch in fp32 before it is timed. At ee71c40: torch.mv
33.6 µs, the shipped call 36.6, its main launch alone 34.3, the ticket design 37.0 at best (the
shipped tile; other tiles 39.6–56.5): the second launch is not what trails cuBLAS. Also timed:
y = aᵀx as the GEMM xᵀa with M = 1 (one launch; the shipped bf16 GEMM logic was tuned at
M = 1 × 8192², where it measured 3.996 TFLOP/s = 33.6 µs), unforced and with forced tiles; and
torch.mv, the shipped gemv T and that GEMM at other sizes (``SIZES``).

Usage: python benchmarks/gemv_floor.py OUT.json
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable

import torch
import triton
import triton.language as tl

from tessera import blas
from tessera._core.device import device_info
from tessera._core.launch import cdiv, next_power_of_2
from tessera._core.timing import graph_ms, run_record, write_result
from tessera.blas import gemm, space
from tessera.blas.kernels import level2 as k
from tessera.blas.kernels.gemm_splitk import SplitKConfig
from tessera.blas.kernels.gemm_streamk import StreamKConfig
from tessera.blas.kernels.gemm_tile import TileConfig
from tessera.blas.kernels.level2 import GemvConfig

N = 8192
ROUNDS = 3
DEVICE = "cuda"
GEMM_ROUTES = (TileConfig(16, 64, 128, 8, 4, 4), TileConfig(16, 64, 128, 8, 4, 6),
               TileConfig(16, 128, 128, 8, 4, 4), TileConfig(16, 32, 256, 8, 4, 4),
               SplitKConfig(16, 64, 128, 2, 4, 4), SplitKConfig(16, 32, 128, 2, 4, 4),
               # stream-K: the 128 column tiles' K-iterations shared evenly by one program per SM
               # (a 16 × 64 tile grid leaves 4 of the 132 SMs idle)
               StreamKConfig(16, 64, 128, 0, 4, 4), StreamKConfig(16, 64, 128, 0, 4, 6),
               StreamKConfig(16, 64, 128, 0, 4, 4, True), StreamKConfig(16, 64, 256, 0, 4, 3),
               StreamKConfig(16, 32, 128, 0, 4, 4), StreamKConfig(16, 64, 128, 264, 4, 4))
DESIGNS = (GemvConfig(64, 128, 4, 8), GemvConfig(64, 128, 4, 16), GemvConfig(64, 128, 8, 8),
           GemvConfig(32, 256, 4, 8), GemvConfig(64, 64, 4, 16), GemvConfig(128, 64, 8, 8))


@triton.jit
def _gemv_ticket_kernel(a_ptr, x_ptr, y_ptr, ws_ptr, count_ptr, M, N, sam, san, cols_per_split,
                        SPLIT: tl.constexpr, SPLIT_P2: tl.constexpr, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr):
    """y = op(A)·x (bf16/fp32 in, float32 sums): partial rows into ws[split, i]; the last program
    of a row block (by ticket) adds the block's SPLIT partials in a fixed tree and writes y."""
    pid_m = tl.program_id(0)
    rows = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < M
    total = k.gemv_row_sums(a_ptr, x_ptr, rows, row_ok, N, sam, san, 0, 1, cols_per_split, False, BLOCK_M,
                            BLOCK_N)  # the shipped kernel's main loop
    tl.store(ws_ptr + tl.program_id(1).to(tl.int64) * M + rows, total, mask=row_ok)
    tl.debug_barrier()  # every thread's partial is stored before the ticket releases them
    ticket = tl.atomic_add(count_ptr + pid_m, 1, sem="acq_rel", scope="gpu")
    if ticket == SPLIT - 1:
        split = tl.arange(0, SPLIT_P2)
        parts = tl.load(ws_ptr + split.to(tl.int64)[:, None] * M + rows[None, :],
                        mask=(split < SPLIT)[:, None] & row_ok[None, :], other=0, cache_modifier=".cg")
        tl.store(y_ptr + rows, tl.sum(parts, 0).to(y_ptr.dtype.element_ty), mask=row_ok)
        tl.atomic_xchg(count_ptr + pid_m, 0)  # ready for the next call on this stream


def ticket_design(a: torch.Tensor, x: torch.Tensor, y: torch.Tensor, config: GemvConfig,
                  num_sms: int) -> Callable[[], object]:
    """``y = aᵀ x`` by the ticket design (a row-major: op(A)'s columns contiguous)."""
    m, n = a.shape[1], a.shape[0]
    row_programs = cdiv(m, config.block_m)
    split = max(2, min(cdiv(config.per_sm * num_sms, row_programs), cdiv(n, 4 * config.block_n), 64))
    per_split = cdiv(cdiv(n, split), config.block_n) * config.block_n
    split = cdiv(n, per_split)
    ws = torch.empty(split * m, dtype=torch.float32, device=a.device)
    count = torch.zeros(row_programs, dtype=torch.int32, device=a.device)

    def call() -> None:
        _gemv_ticket_kernel[(row_programs, split)](a, x, y, ws, count, m, n, 1, a.stride(0), per_split,
                                                   SPLIT=split, SPLIT_P2=next_power_of_2(split),
                                                   BLOCK_M=config.block_m, BLOCK_N=config.block_n,
                                                   num_warps=config.num_warps)
    return call


SIZES = [(1024, 1024), (4096, 4096), (4096, 14336), (14336, 4096), (16384, 16384), (8192, 28672)]


def size_row(rows: int, cols: int) -> dict:
    """y = aᵀx on a row-major (rows × cols) bf16 a: torch.mv, the shipped gemv T and the M = 1
    GEMM xᵀa (shipped logic), checked, then graph-timed in interleaved rounds."""
    a = torch.randn(rows, cols, device=DEVICE).to(torch.bfloat16)
    x = torch.randn(rows, device=DEVICE).to(torch.bfloat16)
    y = torch.empty(cols, device=DEVICE, dtype=torch.bfloat16)
    want = a.float().t() @ x.float()
    cases = {"torch": lambda: torch.mv(a.t(), x, out=y), "gemv": lambda: blas.gemv(a, x, y, trans=True),
             "gemm": lambda: gemm(x[None, :], a, out=y[None, :])}
    row: dict = {"rows": rows, "cols": cols}
    for name, fn in cases.items():
        y.zero_()
        fn()
        row[f"{name}_error"] = float((y.float() - want).abs().max() / want.abs().max())
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(ROUNDS):
        for name, fn in cases.items():
            times[name].append(graph_ms([fn]))
    row.update({f"{name}_us": 1e3 * statistics.median(t) for name, t in times.items()})
    print(f"{rows}x{cols}: torch.mv {row['torch_us']:.2f} µs, gemv T {row['gemv_us']:.2f} "
          f"({row['torch_us'] / row['gemv_us']:.2f}×), gemm {row['gemm_us']:.2f} "
          f"({row['torch_us'] / row['gemm_us']:.2f}×)", flush=True)
    return row


def main() -> None:
    out = sys.argv[1]
    gen = torch.Generator(device=DEVICE).manual_seed(5)
    a = torch.randn(N, N, device=DEVICE, generator=gen).to(torch.bfloat16)
    x = torch.randn(N, device=DEVICE, generator=gen).to(torch.bfloat16)
    y = torch.empty(N, device=DEVICE, dtype=torch.bfloat16)
    want = a.float().t() @ x.float()
    sms = device_info().multiprocessors or 1
    key = space.gemv_dtype(a.dtype, True)  # op(A)'s columns contiguous
    shipped = space.select_shape("gemv", (N, N), key, device_info(a.device)).config
    m, n = N, N
    row_programs = cdiv(m, shipped.block_m)
    split = max(1, min(cdiv(shipped.per_sm * sms, row_programs), cdiv(n, 4 * shipped.block_n), 64))
    per_split = cdiv(cdiv(n, split), shipped.block_n) * shipped.block_n
    split = cdiv(n, per_split)
    ws = torch.empty(split * m, dtype=torch.float32, device=DEVICE)

    def main_only() -> None:
        batch_steps = (0, 0, 0)  # one entry
        k.gemv_launch((row_programs, split), (a, x, y, ws, m, n, 1, N, 0, 1, 0, 1, *batch_steps, 1.0, 0.0,
                                              per_split),
                      {"SPLIT": split, "BETA_ZERO": True, "FP64": False, "BLOCK_M": shipped.block_m,
                       "BLOCK_N": shipped.block_n, "PDL": k.pdl_mode(ws, k.PDL_OFF)}, shipped.num_warps, 3)

    cases: dict[str, Callable[[], object]] = {
        "copy (matrix bytes)": lambda: a.view(-1)[: N * N // 2].copy_(a.view(-1)[N * N // 2:]),
        "torch.mv(a.t())": lambda: torch.mv(a.t(), x, out=y),
        f"shipped gemv T ({shipped.short()}, split {split})": lambda: blas.gemv(a, x, y, trans=True),
        "its main launch alone": main_only,
    }
    errors = {}
    x_row, y_row = x[None, :], y[None, :]  # xᵀ (1 × N) and yᵀ: y = aᵀx is the GEMM xᵀa

    def gemm_route(config: object = None) -> Callable[[], object]:
        def call() -> None:
            if config is None:
                gemm(x_row, a, out=y_row)
            else:
                with space.forced(config):
                    gemm(x_row, a, out=y_row)
        return call

    designs = {"gemm(xᵀ, a), shipped logic": (gemm_route(), 1)}  # name: (call, calls before the check)
    designs.update({f"gemm(xᵀ, a), {config.short()}": (gemm_route(config), 1) for config in GEMM_ROUTES})
    # two calls of a ticket design: the second checks that the counters were reset
    designs.update({f"ticket design {config.short()}": (ticket_design(a, x, y, config, sms), 2)
                    for config in DESIGNS})
    for name, (call, calls) in designs.items():
        for _ in range(calls):
            y.zero_()
            call()
        errors[name] = float((y.float() - want).abs().max() / want.abs().max())
        if errors[name] > 1e-2:
            print(f"{name}: wrong results (relative error {errors[name]:.3g}), not timed")
            continue
        cases[name] = call
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(ROUNDS):
        for name, fn in cases.items():
            times[name].append(graph_ms([fn]))
    torch_us = 1e3 * statistics.median(times["torch.mv(a.t())"])
    copy_us = 1e3 * statistics.median(times["copy (matrix bytes)"])
    rows = []
    for name in cases:
        us = 1e3 * statistics.median(times[name])
        rows.append({"case": name, "graph_us": us, "vs_torch": torch_us / us,
                     "pct_copy": 100 * copy_us / us, "relative_error": errors.get(name)})
        print(f"{name:<52} {us:8.2f} µs  {torch_us / us:5.2f}× torch  {100 * copy_us / us:5.1f}% copy")
    result = {**run_record("python benchmarks/gemv_floor.py OUT.json"),
              "n": N, "rows": rows, "sizes": [size_row(*size) for size in SIZES],
              "note": "copy moves half the matrix (read + write = the matrix's bytes)"}
    write_result(out, result)


if __name__ == "__main__":
    main()
