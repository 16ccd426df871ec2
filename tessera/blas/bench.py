"""GEMM benchmark rows in the style of rocblas-bench: Tessera beside torch.matmul, same process.

Each problem is checked against the vendor result first (a fast wrong answer is not a result), then
timed in interleaved rounds (vendor, Tessera, vendor, …) so clock and thermal drift hit both sides
alike; each figure is the median over rounds of per-round medians.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch

from tessera._core.device import DeviceInfo, device_info
from tessera._core.timing import back_to_back_ms, flushed_ms, on_gpu
from tessera.blas.api import explain, gemm

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32,
          "tf32": torch.float32, "fp64": torch.float64}


@dataclass(frozen=True)
class GemmCase:
    m: int
    n: int
    k: int
    dtype: str = "bf16"
    batch: int = 1
    trans_a: bool = False
    trans_b: bool = False
    label: str = ""

    def describe(self) -> str:
        t = ("T" if self.trans_a else "N") + ("T" if self.trans_b else "N")
        batch = f" x{self.batch}" if self.batch > 1 else ""
        return f"{self.dtype} {t} {self.m}x{self.n}x{self.k}{batch}"

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k * self.batch


def _llm(m: int, n: int, k: int, label: str) -> GemmCase:
    return GemmCase(m, n, k, "bf16", label=label)


# The performance table: squares per dtype, skinny, batched, and LLM layer shapes
# (Llama-3-8B: MLP up 4096→14336, MLP down 14336→4096, grouped-query K/V projection 4096→1024).
PRESETS: dict[str, list[GemmCase]] = {
    "full": [
        GemmCase(8192, 8192, 8192, "bf16"), GemmCase(4096, 4096, 4096, "bf16"),
        GemmCase(8192, 8192, 8192, "fp16"), GemmCase(4096, 4096, 4096, "fp16"),
        GemmCase(8192, 8192, 8192, "tf32"), GemmCase(4096, 4096, 4096, "fp32"),
        GemmCase(4096, 4096, 4096, "fp64"),
        GemmCase(16, 8192, 8192, "bf16", label="skinny"),
        GemmCase(64, 64, 64, "bf16", batch=512, label="batched"),
        _llm(4096, 14336, 4096, "llama3-8b mlp up"), _llm(4096, 4096, 14336, "llama3-8b mlp down"),
        _llm(4096, 1024, 4096, "llama3-8b kv proj"),
        GemmCase(4096, 4096, 4096, "bf16", trans_a=True, label="A transposed"),
        GemmCase(4096, 4096, 4096, "bf16", trans_b=True, label="B transposed"),
    ],
    "quick": [
        GemmCase(4096, 4096, 4096, "bf16"), GemmCase(4096, 4096, 4096, "fp16"),
        GemmCase(4096, 4096, 4096, "tf32"), GemmCase(2048, 2048, 2048, "fp32"),
        GemmCase(2048, 2048, 2048, "fp64"), GemmCase(16, 8192, 8192, "bf16", label="skinny"),
        GemmCase(64, 64, 64, "bf16", batch=512, label="batched"),
    ],
    # Small enough for Triton's CPU interpreter (seconds, not hours).
    "interpreter": [
        GemmCase(64, 64, 64, "fp32"), GemmCase(96, 80, 72, "fp16"),
        GemmCase(64, 48, 40, "bf16", trans_b=True), GemmCase(16, 16, 16, "fp32", batch=4),
    ],
}


def _operands(case: GemmCase, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    dt = DTYPES[case.dtype]
    a_shape = (case.k, case.m) if case.trans_a else (case.m, case.k)
    b_shape = (case.n, case.k) if case.trans_b else (case.k, case.n)
    if case.batch > 1:
        a_shape, b_shape = (case.batch, *a_shape), (case.batch, *b_shape)
    a = torch.randn(a_shape, device=device, dtype=torch.float32).to(dt)
    b = torch.randn(b_shape, device=device, dtype=torch.float32).to(dt)
    return a, b


def run_case(case: GemmCase, rounds: int = 3, info: DeviceInfo | None = None) -> dict:
    """Check and time one problem; return one row (times in ms, rates in TFLOP/s)."""
    info = info or device_info()
    device = "cuda" if on_gpu() else "cpu"
    a, b = _operands(case, device)
    precision = "tf32" if case.dtype == "tf32" else "ieee"
    op_a = a.transpose(-1, -2) if case.trans_a else a
    op_b = b.transpose(-1, -2) if case.trans_b else b

    def ours() -> torch.Tensor:
        return gemm(a, b, trans_a=case.trans_a, trans_b=case.trans_b, precision=precision)

    def vendor() -> torch.Tensor:
        return torch.matmul(op_a, op_b)

    previous_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = case.dtype == "tf32"
    try:
        ref, got = vendor().double(), ours().double()
        rel_err = ((got - ref).norm() / ref.norm().clamp_min(1e-300)).item()
        timings: dict[str, list[float]] = {k: [] for k in ("v", "t", "v_b2b", "t_b2b")}
        for _ in range(rounds):
            _time_round(timings, vendor, ours)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous_tf32

    med = {k: statistics.median(v) for k, v in timings.items()}
    peak = info.peak(case.dtype)
    choice = _choice_for(case, a, b)

    def tflops(ms: float) -> float:
        return case.flops / ms / 1e9

    return {
        **asdict(case), "problem": case.describe(), "kernel": choice,
        "tessera_ms": med["t"], "tessera_tflops": tflops(med["t"]),
        "pct_peak": 100 * tflops(med["t"]) / peak if peak else None,
        "vendor_ms": med["v"], "vendor_tflops": tflops(med["v"]), "ratio": med["v"] / med["t"],
        "tessera_ms_b2b": med["t_b2b"], "tessera_tflops_b2b": tflops(med["t_b2b"]),
        "vendor_ms_b2b": med["v_b2b"], "vendor_tflops_b2b": tflops(med["v_b2b"]),
        "ratio_b2b": med["v_b2b"] / med["t_b2b"], "rel_err_vs_vendor": rel_err, "rounds": rounds,
    }


def _time_round(timings: dict[str, list[float]], vendor: Callable[[], object],
                ours: Callable[[], object]) -> None:
    timings["v"].append(flushed_ms(vendor))
    timings["t"].append(flushed_ms(ours))
    timings["v_b2b"].append(back_to_back_ms(vendor))
    timings["t_b2b"].append(back_to_back_ms(ours))


def _choice_for(case: GemmCase, a: torch.Tensor, b: torch.Tensor) -> str:
    """The kernel and config :func:`gemm` picks for this case."""
    precision = "tf32" if case.dtype == "tf32" else "ieee"
    choice = explain(a, b, trans_a=case.trans_a, trans_b=case.trans_b, precision=precision)
    return "none" if choice is None else choice.config.short()


def format_table(rows: list[dict[str, Any]]) -> str:
    """rocblas-bench-like table: L2-flushed medians, then back-to-back (sustained) medians."""
    head = (f"{'problem':<28} {'tessera ms':>10} {'TFLOP/s':>8} {'%peak':>6} {'vendor ms':>10} "
            f"{'TFLOP/s':>8} {'ratio':>6} | {'b2b TF/s':>8} {'vendor':>8} {'ratio':>6}  kernel")
    lines = [head, "-" * len(head)]
    for r in rows:
        peak = f"{r['pct_peak']:.1f}" if r["pct_peak"] is not None else "-"
        lines.append(
            f"{r['problem']:<28} {r['tessera_ms']:>10.4f} {r['tessera_tflops']:>8.1f} {peak:>6} "
            f"{r['vendor_ms']:>10.4f} {r['vendor_tflops']:>8.1f} {r['ratio']:>6.3f} | "
            f"{r['tessera_tflops_b2b']:>8.1f} {r['vendor_tflops_b2b']:>8.1f} {r['ratio_b2b']:>6.3f}"
            f"  {r['kernel']}"
        )
    return "\n".join(lines)
