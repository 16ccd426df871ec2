"""BLAS level-1/2 benchmark rows in the style of rocblas-bench: Tessera beside the torch equivalent
and a device-to-device copy, same process.

Each routine is checked against an fp64 reference first (a fast wrong answer is not a result),
then both sides and the copy are timed in interleaved rounds, each in the reverse order of the one
before and the first after a warm-up: eagerly with the L2 cache flushed before each
call, and on a GPU replayed from a CUDA graph (``graph_*`` keys: no host launch cost, which
decides a 20 µs vector call timed eagerly). Figures are GB/s of the bytes a routine must move at
least (axpy reads x and y and writes y; symv and trsv read the stored triangle once), against the
copy bandwidth of the same run (bytes read plus written) as the ceiling. The full preset is the
issue's: level 1 at 2^26 fp32 elements, level 2 on 8192² bf16 (trsv fp32), and the same bytes
strided (dot, incx = 2) and strided-batched (dot and nrm2 on 4096 rows of 2^14, gemv on 1024
matrices of 256²); ``benchmarks/blas_level12.py`` runs it for the committed results.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch

from tessera._core.device import torch_dtype
from tessera._core.errors import InvalidArgumentError
from tessera._core.timing import copy_call, flushed_ms, graph_ms, on_gpu, warm_up
from tessera.blas import level1, level2

LEVEL1_ROUTINES = ("axpy", "scal", "copy", "swap", "rot", "dot", "nrm2", "asum", "iamax")
LEVEL2_ROUTINES = ("gemv_n", "gemv_t", "symv", "ger", "trsv")
ROUTINES = LEVEL1_ROUTINES + LEVEL2_ROUTINES
BATCHED = ("dot", "nrm2", "asum", "iamax", "gemv_n", "gemv_t")  # timed strided-batched too (batch > 1)
ALPHA, SCALE, COS, SIN = 0.5, 1.0001, 0.6, 0.8  # scal's factor near 1: repeated calls stay finite
# the relative error a correct result stays within, by dtype (the storage's rounding, sums of up to
# 2^26 terms in fp32; iamax must match exactly)
TOLERANCE = {"fp16": 2e-2, "bf16": 2e-2, "fp32": 1e-4, "fp64": 1e-10}


@dataclass(frozen=True)
class BlasCase:
    """One routine at one size: level 1 on vectors of n elements ``inc`` apart, level 2 on an
    m × n matrix (gemv, ger; m = 0: square) or an n × n one (symv, trsv); ``batch`` > 1: that many
    contiguous vectors or matrices, one call (the routines in ``BATCHED``)."""

    routine: str
    n: int
    dtype: str = "fp32"
    m: int = 0
    inc: int = 1
    batch: int = 1

    def __post_init__(self) -> None:
        if self.routine not in ROUTINES:
            raise InvalidArgumentError(f"routine must be one of {', '.join(ROUTINES)} "
                                       f"(actual: {self.routine!r})")
        if self.n < 1 or self.m < 0 or self.inc < 1 or self.batch < 1:
            raise InvalidArgumentError(f"sizes must be n ≥ 1, m ≥ 0, inc ≥ 1 and batch ≥ 1 (actual: "
                                       f"n={self.n}, m={self.m}, inc={self.inc}, batch={self.batch})")
        if self.batch > 1 and (self.routine not in BATCHED or self.inc != 1):
            raise InvalidArgumentError(f"batched cases are {', '.join(BATCHED)} with unit increments "
                                       f"(actual: {self.routine} batch={self.batch}, inc={self.inc})")
        if self.routine in LEVEL2_ROUTINES and self.inc != 1:
            raise InvalidArgumentError(f"{self.routine} is benchmarked with unit increments "
                                       f"(actual: inc={self.inc})")

    @property
    def rows(self) -> int:
        """The matrix's rows: m for gemv and ger (n when m is 0), n for the square ones."""
        return (self.m or self.n) if self.routine in ("gemv_n", "gemv_t", "ger") else self.n

    def describe(self) -> str:
        batched = f" batch {self.batch}" if self.batch > 1 else ""
        if self.routine in LEVEL1_ROUTINES:
            size = f"2^{self.n.bit_length() - 1}" if self.n & (self.n - 1) == 0 else str(self.n)
            strided = f" inc {self.inc}" if self.inc > 1 else ""
            return f"{self.routine} {self.dtype} {size}{strided}{batched}"
        return f"{self.routine} {self.dtype} {self.rows}x{self.n}{batched}"

    @property
    def bytes_moved(self) -> int:
        """The bytes the routine must move at least: each operand element read or written once."""
        n, m = self.n, self.rows
        elements = {"axpy": 3 * n, "scal": 2 * n, "copy": 2 * n, "swap": 4 * n, "rot": 4 * n, "dot": 2 * n,
                    "nrm2": n, "asum": n, "iamax": n, "gemv_n": m * n + n + m, "gemv_t": m * n + n + m,
                    "symv": n * (n + 1) // 2 + 2 * n, "ger": 2 * m * n + m + n,
                    "trsv": n * (n + 1) // 2 + 2 * n}[self.routine]
        return self.batch * elements * torch_dtype(self.dtype).itemsize


PRESETS: dict[str, list[BlasCase]] = {
    "full": [*(BlasCase(r, 1 << 26) for r in LEVEL1_ROUTINES), BlasCase("dot", 1 << 25, inc=2),
             BlasCase("dot", 1 << 14, batch=4096), BlasCase("nrm2", 1 << 14, batch=4096),
             *(BlasCase(r, 8192, "bf16") for r in LEVEL2_ROUTINES if r != "trsv"), BlasCase("trsv", 8192),
             BlasCase("gemv_n", 256, "bf16", batch=1024)],
    "quick": [*(BlasCase(r, 1 << 24) for r in ("axpy", "copy", "dot", "nrm2", "iamax")),
              *(BlasCase(r, 4096, "bf16") for r in ("gemv_n", "gemv_t", "symv"))],
    "interpreter": [*(BlasCase(r, 3001) for r in LEVEL1_ROUTINES), BlasCase("axpy", 1000, inc=3),
                    *(BlasCase(r, 72, m=40) for r in ("gemv_n", "gemv_t", "ger")),
                    *(BlasCase(r, 75) for r in ("symv", "trsv")),
                    *(BlasCase(r, 300, batch=3) for r in ("dot", "nrm2", "iamax")),
                    *(BlasCase(r, 72, m=40, batch=2) for r in ("gemv_n", "gemv_t"))],
}


@dataclass
class _Calls:
    """A case's operands and its two calls; ``check`` runs Tessera's call once on fresh copies and
    returns its relative error against an fp64 reference."""

    ours: Callable[[], object]
    vendor: Callable[[], object] | None
    vendor_name: str
    check: Callable[[], float]


def _random(shape: tuple[int, ...], dtype: torch.dtype, device: str, seed: int) -> torch.Tensor:
    """Standard normal values drawn on the device (2^26 of them in a moment there), then rounded."""
    gen = torch.Generator(device=device).manual_seed(seed)
    wide = torch.float64 if dtype == torch.float64 else torch.float32
    return torch.randn(shape, generator=gen, dtype=wide, device=device).to(dtype)


def _relative(got: torch.Tensor, want: torch.Tensor) -> float:
    got, want = got.double().cpu(), want.double().cpu()
    return float((got - want).norm() / want.norm().clamp_min(1e-300))


def _level1(case: BlasCase, dt: torch.dtype, device: str) -> _Calls:
    n, inc, r = case.n, case.inc, case.routine
    shape = (case.batch, n) if case.batch > 1 else (n * inc,)  # batched: one result a row
    x, y = _random(shape, dt, device, 1), _random(shape, dt, device, 2)
    both, one = ({"n": n, "incx": inc, "incy": inc}, {"n": n, "incx": inc}) if case.batch == 1 else ({}, {})
    ours: dict[str, Callable[[torch.Tensor, torch.Tensor], object]] = {
        "axpy": lambda u, v: level1.axpy(ALPHA, u, v, **both),
        "scal": lambda u, v: level1.scal(SCALE, u, **one), "copy": lambda u, v: level1.copy(u, v, **both),
        "swap": lambda u, v: level1.swap(u, v, **both),
        "rot": lambda u, v: level1.rot(u, v, COS, SIN, **both), "dot": lambda u, v: level1.dot(u, v, **both),
        "nrm2": lambda u, v: level1.nrm2(u, **one), "asum": lambda u, v: level1.asum(u, **one),
        "iamax": lambda u, v: level1.iamax(u, **one)}
    vendors: dict[str, tuple[Callable[[torch.Tensor, torch.Tensor], object], str]] = {
        "axpy": (lambda u, v: v.add_(u, alpha=ALPHA), "y.add_(x, alpha)"),
        "scal": (lambda u, v: u.mul_(SCALE), "x.mul_(a)"), "copy": (lambda u, v: v.copy_(u), "y.copy_(x)"),
        "dot": (torch.dot, "torch.dot"), "nrm2": (lambda u, v: torch.linalg.vector_norm(u), "vector_norm"),
        "asum": (lambda u, v: torch.linalg.vector_norm(u, 1), "vector_norm(x, 1)"),
        "iamax": (lambda u, v: u.abs().argmax(), "x.abs().argmax()")}
    if case.batch > 1:
        vendors |= {"dot": (torch.linalg.vecdot, "linalg.vecdot"),
                    "nrm2": (lambda u, v: torch.linalg.vector_norm(u, dim=-1), "vector_norm(dim=-1)"),
                    "asum": (lambda u, v: torch.linalg.vector_norm(u, 1, dim=-1), "vector_norm(1, dim=-1)"),
                    "iamax": (lambda u, v: u.abs().argmax(dim=-1), "x.abs().argmax(dim=-1)")}
    # fp64 references: (x, y) after the in-place routines, the value (a row's) of the others
    reference: dict[str, Callable[[torch.Tensor, torch.Tensor], Any]] = {
        "axpy": lambda u, v: (u, ALPHA * u + v), "scal": lambda u, v: (SCALE * u, v),
        "copy": lambda u, v: (u, u), "swap": lambda u, v: (v, u),
        "rot": lambda u, v: (COS * u + SIN * v, COS * v - SIN * u),
        "dot": lambda u, v: (u * v).sum(-1), "nrm2": lambda u, v: u.norm(dim=-1),
        "asum": lambda u, v: u.abs().sum(-1), "iamax": lambda u, v: u.abs().argmax(-1)}

    def check() -> float:
        xc, yc = x.clone(), y.clone()
        want = reference[r](x[::inc].double(), y[::inc].double())
        got = ours[r](xc, yc)
        if r == "iamax":
            found = torch.as_tensor(got).long().cpu().reshape(-1)
            return float(not torch.equal(found, want.cpu().reshape(-1)))
        if isinstance(want, tuple):
            return max(_relative(xc[::inc], want[0]), _relative(yc[::inc], want[1]))
        return _relative(torch.as_tensor(got).reshape(want.shape), want)

    vendor, name = vendors.get(r, (None, "-"))
    xv, yv = x[::inc], y[::inc]
    return _Calls(lambda: ours[r](x, y), None if vendor is None else (lambda: vendor(xv, yv)), name, check)


def _level2(case: BlasCase, dt: torch.dtype, device: str) -> _Calls:
    m, n, r = case.rows, case.n, case.routine
    lead = (case.batch,) if case.batch > 1 else ()  # gemv only (BATCHED)
    if r == "trsv":  # upper triangular, well conditioned: unit diagonal plus small entries
        eye = torch.eye(n, dtype=torch.float64, device=device)
        a = (_random((n, n), torch.float64, device, 3) * (0.5 / n) + eye).triu().to(dt)
    else:
        a = _random((n, n) if r == "symv" else (*lead, m, n), dt, device, 3)
    x = _random((*lead, m if r == "gemv_t" else n), dt, device, 4)
    y = _random((*lead, n if r == "gemv_t" else m), dt, device, 5)
    b = x.clone()  # trsv solves in place: each timed call restores the right-hand side first
    ours: dict[str, Callable[[torch.Tensor], object]] = {
        "gemv_n": lambda t: level2.gemv(t, x, y), "gemv_t": lambda t: level2.gemv(t, x, y, trans=True),
        "symv": lambda t: level2.symv(t, x, y), "ger": lambda t: level2.ger(1e-3, y, x, t),
        "trsv": lambda t: level2.trsv(t, b.copy_(x))}
    vendors: dict[str, tuple[Callable[[], object], str]] = {
        "gemv_n": (lambda: torch.mv(a, x, out=y), "torch.mv"),
        "gemv_t": (lambda: torch.mv(a.t(), x, out=y), "torch.mv(a.t())"),
        "symv": (lambda: torch.mv(a, x, out=y), "torch.mv (full matrix)"),
        "ger": (lambda: a.addr_(y, x, alpha=1e-3), "a.addr_"),
        "trsv": (lambda: torch.linalg.solve_triangular(a, x[:, None], upper=True), "solve_triangular")}
    if case.batch > 1:
        vendors |= {"gemv_n": (lambda: torch.bmm(a, x[:, :, None]), "torch.bmm"),
                    "gemv_t": (lambda: torch.bmm(a.transpose(1, 2), x[:, :, None]), "torch.bmm(a.mT)")}

    def check() -> float:
        a64, x64, y64 = a.double(), x.double(), y.double()
        want = {"gemv_n": lambda: (a64 @ x64[..., None])[..., 0],
                "gemv_t": lambda: (a64.transpose(-1, -2) @ x64[..., None])[..., 0],
                "symv": lambda: (a64.triu() + a64.triu(1).t()) @ x64,
                "ger": lambda: a64 + 1e-3 * torch.outer(y64, x64),
                "trsv": lambda: torch.linalg.solve_triangular(a64, x64[:, None], upper=True)[:, 0]}[r]()
        written = a.clone()
        got = ours[r](written)
        return _relative(written if r == "ger" else got, want)

    return _Calls(lambda: ours[r](a), *vendors[r], check)


def _graphed(fn: Callable[[], object]) -> float | None:
    """Milliseconds a call replayed from a CUDA graph; None off a GPU or if it cannot be captured."""
    if not on_gpu():
        return None
    try:
        return graph_ms([fn])
    except RuntimeError:
        torch.cuda.synchronize()
        return None


COPY_CEILING_BYTES = 8 << 26  # a copy of 2^26 fp32 values, read + written: the issue's level-1 size


def ceiling_copy(cases: list[BlasCase]) -> tuple[Callable[[], object], int]:
    """One copy call to time beside every case of a run, as large as the largest case's bytes up
    to ``COPY_CEILING_BYTES`` (and, on a GPU, at least four times L2: ``copy_call``). Not larger:
    replayed from CUDA graphs on an H100 a copy moving 1 GB ran at 2430 GB/s where one of 2^26
    fp32 values ran at 3000 and the same 1 GB copy called eagerly at 2960 (fifty-first session,
    ``benchmarks/results/blas-l12-h100-fe31167.json``), which made every routine's replayed
    figure read 120 % of "copy"."""
    return copy_call(min(max(case.bytes_moved for case in cases), COPY_CEILING_BYTES))


def run_case(case: BlasCase, rounds: int = 3, copy: tuple[Callable[[], object], int] | None = None) -> dict:
    """Check and time one routine; one row (times in ms, rates in GB/s). ``copy``: the run's copy
    call and its bytes (:func:`copy_call`), timed in the same rounds."""
    device = "cuda" if on_gpu() else "cpu"
    dt = torch_dtype(case.dtype)
    calls = (_level1 if case.routine in LEVEL1_ROUTINES else _level2)(case, dt, device)
    error = calls.check()
    vendor, vendor_name = calls.vendor, calls.vendor_name
    if vendor is not None:
        try:
            vendor()
        except (RuntimeError, NotImplementedError) as exc:  # e.g. torch's triangular solve in bf16
            vendor, vendor_name = None, f"{vendor_name}: {str(exc).splitlines()[0][:60]}"
    copy_fn, copy_bytes = copy or copy_call(case.bytes_moved)
    timings: dict[str, list[float]] = {}
    sides = [(key, fn) for key, fn in (("t", calls.ours), ("v", vendor), ("copy", copy_fn)) if fn is not None]
    warm_up(sides[0][1])  # from a steady state, not an idle GPU
    for _ in range(rounds):
        for key, fn in sides:
            timings.setdefault(key, []).append(flushed_ms(fn))
            graphed = _graphed(fn)
            if graphed is not None:
                timings.setdefault(key + "_graph", []).append(graphed)
        sides.reverse()  # no side always runs right after another (benchmarks/order_probe.py)
    med = {k: statistics.median(v) for k, v in timings.items() if len(v) == rounds}

    def gbs(key: str) -> float:
        return case.bytes_moved / med[key] / 1e6

    row: dict[str, Any] = {**asdict(case), "problem": case.describe(), "bytes": case.bytes_moved,
                           "rel_err": error, "correct": error <= TOLERANCE[case.dtype], "rounds": rounds,
                           "vendor": vendor_name, "tessera_ms": med["t"], "gbs": gbs("t"),
                           "copy_gbs": copy_bytes / med["copy"] / 1e6}
    row["pct_copy"] = 100 * row["gbs"] / row["copy_gbs"]
    if "v" in med:
        row.update(vendor_ms=med["v"], vendor_gbs=gbs("v"), vs_vendor=med["v"] / med["t"])
    if "t_graph" in med and "copy_graph" in med:
        row.update(tessera_ms_graph=med["t_graph"], gbs_graph=gbs("t_graph"),
                   copy_gbs_graph=copy_bytes / med["copy_graph"] / 1e6)
        row["pct_copy_graph"] = 100 * row["gbs_graph"] / row["copy_gbs_graph"]
        if "v_graph" in med:
            row.update(vendor_ms_graph=med["v_graph"], vs_vendor_graph=med["v_graph"] / med["t_graph"])
    return row


def format_table(rows: list[dict[str, Any]]) -> str:
    """One line a routine: eager (L2 flushed) GB/s, % of copy and ratio to the torch equivalent,
    then the same from CUDA-graph replays where measured, and the check's relative error."""
    head = (f"{'problem':<26} {'GB/s':>7} {'%copy':>6} {'vs torch':>8} | {'graph GB/s':>10} {'%copy':>6} "
            f"{'vs torch':>8} | {'rel err':>8}  torch equivalent")
    lines = [head, "-" * len(head)]

    def fmt(value: float | None, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    for r in rows:
        lines.append(f"{r['problem']:<26} {r['gbs']:>7.0f} {r['pct_copy']:>6.1f} "
                     f"{fmt(r.get('vs_vendor'), '.3f'):>8} | {fmt(r.get('gbs_graph'), '.0f'):>10} "
                     f"{fmt(r.get('pct_copy_graph'), '.1f'):>6} {fmt(r.get('vs_vendor_graph'), '.3f'):>8} | "
                     f"{r['rel_err']:>8.1e}{'' if r['correct'] else ' WRONG'}  {r['vendor']}")
    return "\n".join(lines)
