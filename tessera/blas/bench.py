"""GEMM benchmark rows in the style of rocblas-bench: Tessera beside torch.matmul, same process.

Each problem is checked against the vendor result first (a fast wrong answer is not a result), then
timed in interleaved rounds (vendor, Tessera, vendor, …) so clock and thermal drift hit both sides
alike; each figure is the median over rounds of per-round medians.

On a GPU both sides are also timed replayed from a CUDA graph (``graph_*`` keys) that cycles over
operand copies together larger than twice the L2 cache: the kernels' own time, cold, without the
host's launch cost — which decides small problems when timed eagerly (a tiny ``gemm`` call costs
Tessera's Python path ~3× torch's, see the host-overhead rows). Memory-bound rows (M ≤ 256 or
batched) also report GB/s of operands moved against a device-to-device copy of the same bytes
timed the same ways (``pct_copy``, ``graph_pct_copy``).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch

from tessera._core.device import DeviceInfo, device_info, precision_of, torch_dtype, torch_matmul_tf32_as
from tessera._core.timing import (
    back_to_back_ms,
    cold_copies,
    copy_call,
    flushed_ms,
    graph_ms,
    on_gpu,
    warm_up,
)
from tessera.blas.api import explain, gemm
from tessera.tuning import logic


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

    @property
    def bytes_moved(self) -> int:
        """Operands read plus the result written, each once."""
        elements = self.m * self.k + self.k * self.n + self.m * self.n
        return torch_dtype(self.dtype).itemsize * self.batch * elements

    @property
    def memory_bound(self) -> bool:
        return self.m <= 256 or self.batch > 1


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
        GemmCase(1, 8192, 8192, "bf16", label="decode"),
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
    # The tuning issue's square grid in the dtypes sm_90 ships tuned logic for (run with
    # --vs-heuristic for the gain over the untuned heuristic).
    # Every dtype at every size the logic is tuned for, fp32's 16384³ (~0.2 s a call on the FMA
    # units) included: a geometric mean that skipped a tuned row would not be the issue's.
    # tf32x3, bf16x9 and bf16x6 (float32 as three TF32 products, as nine or six bf16 ones) are
    # timed against the vendor's IEEE float32, as fp32.
    "grid": [GemmCase(s, s, s, dtype) for dtype in ("bf16", "fp16", "tf32", "fp32", "tf32x3", "bf16x9",
                                                    "bf16x6")
             for s in (1024, 2048, 4096, 8192, 16384)],
    # float32 every way, against the same vendor float32 GEMM
    "fp32": [GemmCase(s, s, s, dtype) for dtype in ("fp32", "tf32x3", "bf16x9", "bf16x6")
             for s in (1024, 2048, 4096, 8192)],
    # Small enough for Triton's CPU interpreter (seconds, not hours).
    "interpreter": [
        GemmCase(64, 64, 64, "fp32"), GemmCase(96, 80, 72, "fp16"),
        GemmCase(64, 48, 40, "bf16", trans_b=True), GemmCase(16, 16, 16, "fp32", batch=4),
    ],
}


def _operands(case: GemmCase, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    dt = torch_dtype(case.dtype)
    a_shape = (case.k, case.m) if case.trans_a else (case.m, case.k)
    b_shape = (case.n, case.k) if case.trans_b else (case.k, case.n)
    if case.batch > 1:
        a_shape, b_shape = (case.batch, *a_shape), (case.batch, *b_shape)
    a = torch.randn(a_shape, device=device, dtype=torch.float32).to(dt)
    b = torch.randn(b_shape, device=device, dtype=torch.float32).to(dt)
    return a, b


def run_case(case: GemmCase, rounds: int = 3, info: DeviceInfo | None = None,
             vs_heuristic: bool = False) -> dict:
    """Check and time one problem; return one row (times in ms, rates in TFLOP/s). With
    ``vs_heuristic``, also time what an untuned call picks (logic files ignored) in the same rounds:
    ``tuned_gain`` = heuristic time / Tessera time (1.0 when both pick the same kernel), and
    ``tuned_gain_graph`` the same from CUDA-graph replays (the tuner's own timing, host-free)."""
    info = info or device_info()
    device = "cuda" if on_gpu() else "cpu"
    a, b = _operands(case, device)
    precision = precision_of(case.dtype)
    op_a = a.transpose(-1, -2) if case.trans_a else a
    op_b = b.transpose(-1, -2) if case.trans_b else b

    def ours() -> torch.Tensor:
        return gemm(a, b, trans_a=case.trans_a, trans_b=case.trans_b, precision=precision)

    def vendor() -> torch.Tensor:
        return torch.matmul(op_a, op_b)

    with torch_matmul_tf32_as(case.dtype == "tf32"):
        ref, got = vendor().double(), ours().double()
        rel_err = ((got - ref).norm() / ref.norm().clamp_min(1e-300)).item()
        choice = heuristic_choice = _choice_for(case, a, b)
        if vs_heuristic:
            with logic.ignored():
                heuristic_choice = _choice_for(case, a, b)
        timings: dict[str, list[float]] = {k: [] for k in ("v", "t", "v_b2b", "t_b2b")}
        graphed = _graphed_pair(case, a, b, precision) if on_gpu() else None
        copy, copy_bytes = copy_call(case.bytes_moved) if case.memory_bound else (None, 0)
        warm_up(vendor)  # the first round times the vendor first: from a steady state, not an idle GPU
        for index in range(rounds):
            ours_first = index % 2 == 1  # alternate: no side always runs right after the other
            _time_round(timings, vendor, ours, ours_first)
            if heuristic_choice != choice:
                with logic.ignored():
                    timings.setdefault("h", []).append(flushed_ms(ours))
            if graphed is not None:
                graphed = _time_graphs(timings, *graphed, ours_first)
            if graphed is not None and heuristic_choice != choice:
                with logic.ignored():  # captured while ignored: the replays run the heuristic's kernel
                    timings.setdefault("h_graph", []).append(graph_ms(graphed[1]))
            if copy is not None:
                timings.setdefault("copy", []).append(flushed_ms(copy))
                if on_gpu():
                    timings.setdefault("copy_graph", []).append(graph_ms([copy]))

    med = {k: statistics.median(v) for k, v in timings.items()}
    peak = info.peak(case.dtype)

    def tflops(ms: float) -> float:
        return case.flops / ms / 1e9

    extra: dict[str, Any] = {}
    if vs_heuristic:
        heuristic_ms = med.get("h", med["t"])  # the same kernel as the tuned choice: the same time
        extra.update(heuristic_kernel=heuristic_choice, heuristic_ms=heuristic_ms,
                     heuristic_tflops=tflops(heuristic_ms), tuned_gain=heuristic_ms / med["t"])
        if "t_graph" in med:
            h_graph = med.get("h_graph", med["t_graph"])
            extra.update(heuristic_ms_graph=h_graph, tuned_gain_graph=h_graph / med["t_graph"])
    if "t_graph" in med:
        extra.update(tessera_ms_graph=med["t_graph"], tessera_tflops_graph=tflops(med["t_graph"]),
                     vendor_ms_graph=med["v_graph"], vendor_tflops_graph=tflops(med["v_graph"]),
                     ratio_graph=med["v_graph"] / med["t_graph"])
    if "copy" in med:
        gbs, copy_gbs = case.bytes_moved / med["t"] / 1e6, copy_bytes / med["copy"] / 1e6
        extra.update(gbs=gbs, copy_gbs=copy_gbs, pct_copy=100 * gbs / copy_gbs)
        if "copy_graph" in med and "t_graph" in med:
            gbs, copy_gbs = case.bytes_moved / med["t_graph"] / 1e6, copy_bytes / med["copy_graph"] / 1e6
            extra.update(gbs_graph=gbs, copy_gbs_graph=copy_gbs, pct_copy_graph=100 * gbs / copy_gbs)
    return {
        **asdict(case), "problem": case.describe(), "kernel": choice,
        "tessera_ms": med["t"], "tessera_tflops": tflops(med["t"]),
        "pct_peak": 100 * tflops(med["t"]) / peak if peak else None,
        "vendor_ms": med["v"], "vendor_tflops": tflops(med["v"]), "ratio": med["v"] / med["t"],
        "tessera_ms_b2b": med["t_b2b"], "tessera_tflops_b2b": tflops(med["t_b2b"]),
        "vendor_ms_b2b": med["v_b2b"], "vendor_tflops_b2b": tflops(med["v_b2b"]),
        "ratio_b2b": med["v_b2b"] / med["t_b2b"], "rel_err_vs_vendor": rel_err, "rounds": rounds,
        **extra,
    }


def _graphed_pair(case: GemmCase, a: torch.Tensor, b: torch.Tensor,
                  precision: str) -> tuple[list[Callable[[], object]], list[Callable[[], object]]]:
    """(vendor calls, Tessera calls) over operand copies that together exceed twice the L2 cache,
    for :func:`graph_ms` (a graph cannot flush the cache between calls fairly)."""
    sets = cold_copies((a, b), case.bytes_moved)
    def op(t: torch.Tensor, transposed: bool) -> torch.Tensor:
        return t.transpose(-1, -2) if transposed else t

    vendor = [lambda x=x, y=y: torch.matmul(op(x, case.trans_a), op(y, case.trans_b)) for x, y in sets]
    ours = [lambda x=x, y=y: gemm(x, y, trans_a=case.trans_a, trans_b=case.trans_b, precision=precision)
            for x, y in sets]
    return vendor, ours


def _in_turn(time: Callable[[Any], float], vendor: Any, ours: Any, ours_first: bool) -> tuple[float, float]:
    """(vendor's time, ours) measured in the order asked: a time can depend on the kernel that ran
    just before it (benchmarks/order_probe.py), so rounds alternate which side goes first."""
    if ours_first:
        t = time(ours)
        return time(vendor), t
    v = time(vendor)
    return v, time(ours)


def _time_graphs(timings: dict[str, list[float]], vendor: list[Callable[[], object]],
                 ours: list[Callable[[], object]], ours_first: bool = False) -> tuple[list, list] | None:
    """Append both sides' graph-replay times; None (and a note) when a call cannot be captured."""
    try:
        v, t = _in_turn(graph_ms, vendor, ours, ours_first)
    except RuntimeError as exc:
        print(f"  (no CUDA-graph timing: {str(exc).splitlines()[0][:120]})")
        torch.cuda.synchronize()
        return None
    timings.setdefault("v_graph", []).append(v)
    timings.setdefault("t_graph", []).append(t)
    return vendor, ours


def _time_round(timings: dict[str, list[float]], vendor: Callable[[], object],
                ours: Callable[[], object], ours_first: bool = False) -> None:
    for key, time in (("", flushed_ms), ("_b2b", back_to_back_ms)):
        v, t = _in_turn(time, vendor, ours, ours_first)
        timings["v" + key].append(v)
        timings["t" + key].append(t)


def _choice_for(case: GemmCase, a: torch.Tensor, b: torch.Tensor) -> str:
    """The kernel and config :func:`gemm` picks for this case."""
    precision = precision_of(case.dtype)
    choice = explain(a, b, trans_a=case.trans_a, trans_b=case.trans_b, precision=precision)
    return "none" if choice is None else choice.config.short()


def format_table(rows: list[dict[str, Any]]) -> str:
    """rocblas-bench-like table: L2-flushed medians, back-to-back (sustained) medians, then the
    CUDA-graph ratio and % of copy bandwidth where measured."""
    head = (f"{'problem':<28} {'tessera ms':>10} {'TFLOP/s':>8} {'%peak':>6} {'vendor ms':>10} "
            f"{'TFLOP/s':>8} {'ratio':>6} | {'b2b TF/s':>8} {'vendor':>8} {'ratio':>6} | "
            f"{'graph':>6} {'%copy':>6}  kernel")
    gains = any("tuned_gain" in r for r in rows)
    if gains:
        head += "  | tuned/heuristic  graph  heuristic kernel"
    lines = [head, "-" * len(head)]
    for r in rows:
        peak = f"{r['pct_peak']:.1f}" if r["pct_peak"] is not None else "-"
        graph = f"{r['ratio_graph']:.3f}" if "ratio_graph" in r else "-"
        copy = r.get("pct_copy_graph", r.get("pct_copy"))
        lines.append(
            f"{r['problem']:<28} {r['tessera_ms']:>10.4f} {r['tessera_tflops']:>8.1f} {peak:>6} "
            f"{r['vendor_ms']:>10.4f} {r['vendor_tflops']:>8.1f} {r['ratio']:>6.3f} | "
            f"{r['tessera_tflops_b2b']:>8.1f} {r['vendor_tflops_b2b']:>8.1f} {r['ratio_b2b']:>6.3f} | "
            f"{graph:>6} {'-' if copy is None else f'{copy:.1f}':>6}  {r['kernel']}"
            + (f"  | {r['tuned_gain']:>15.3f}  {r.get('tuned_gain_graph', float('nan')):>5.3f}  "
               f"{r['heuristic_kernel']}" if "tuned_gain" in r else "")
        )
    return "\n".join(lines)
