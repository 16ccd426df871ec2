"""Generate BENCHMARKS.md from the committed results JSON (never edit BENCHMARKS.md by hand).

    python benchmarks/render.py            # reads benchmarks/results/, writes BENCHMARKS.md
"""

from __future__ import annotations

import json
import math
import re
import subprocess
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

# Targets of the foundation issue (ratio = vendor time / Tessera time, L2 flushed, median).
TARGETS = {
    "bf16 NN 8192x8192x8192": 0.95, "bf16 NN 4096x4096x4096": 0.95,
    "fp16 NN 8192x8192x8192": 0.95, "fp16 NN 4096x4096x4096": 0.95,
    "tf32 NN 8192x8192x8192": 0.90, "fp32 NN 4096x4096x4096": 0.80, "fp64 NN 4096x4096x4096": 0.70,
}
# The tuning issue's (shipped sm_90 logic): (figure, bound).
TUNING_TARGETS = {
    "bf16 NN 8192x8192x8192": ("ratio", 1.02), "fp16 NN 8192x8192x8192": ("ratio", 1.02),
    "bf16 NN 1x8192x8192": ("pct_copy", 85.0), "bf16 NN 16x8192x8192": ("pct_copy", 85.0),
    "bf16 NN 64x64x64 x512": ("graph_ratio", 2.0),
}


def _created(path: Path) -> str:
    """When a result was made: its ``created`` field, else when git first saw the file (older
    result files lack the field), else its modification time (not yet committed)."""
    created = json.loads(path.read_text()).get("created")
    if created:
        return created
    try:
        added = subprocess.run(["git", "log", "--diff-filter=A", "--format=%cI", "--", str(path)], cwd=ROOT,
                               capture_output=True, text=True, check=True, timeout=10).stdout.split()
    except (OSError, subprocess.SubprocessError):
        added = []
    if added:
        return datetime.fromisoformat(added[-1]).astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _fmt(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _gemm_verdicts(r: dict) -> list[str]:
    """The foundation issue's ratio targets (eager, flushed) and the tuning issue's: squares ≥ 1.02×,
    skinny ≥ 85 % of copy, batched ≥ 2× — the last two judged on CUDA-graph figures where the run
    has them (eager, a tiny call is decided by the host; both are in the table)."""
    out = []
    target = TARGETS.get(r["problem"])
    if target is not None:
        out.append(f"≥ {target:.2f} {'met' if r['ratio'] >= target else '**missed**'}")
    tuned = TUNING_TARGETS.get(r["problem"])
    if tuned is not None:
        kind, bound = tuned
        if kind == "ratio":
            value, name = r["ratio"], f"≥ {bound:.2f}"
        elif kind == "graph_ratio":
            value = r.get("ratio_graph", r["ratio"])
            name = f"{'graph ' if 'ratio_graph' in r else ''}≥ {bound:.1f}×"
        else:
            value = r.get("pct_copy_graph", r.get("pct_copy"))
            name = f"{'graph ' if 'pct_copy_graph' in r else ''}≥ {bound:.0f}% copy"
        if value is not None:
            out.append(f"{name} {'met' if value >= bound else '**missed**'}")
    return out


def _gemm_section(path: Path) -> list[str]:
    data = json.loads(path.read_text())
    dev, ver = data["device"], data["device"]["versions"]
    graphed = any("ratio_graph" in r for r in data["rows"])
    gains = any("tuned_gain" in r for r in data["rows"])
    lines = [
        f"## GEMM on {dev['name']} ({dev['arch']}) — `{path.relative_to(ROOT)}`", "",
        f"Measured {data['created']} at revision `{data['git_revision']}` with `{data['command']}`; "
        f"torch {ver['torch']}, triton {ver['triton']}, CUDA {ver['cuda']}, driver {ver['driver']}. "
        "Vendor = `torch.matmul` (cuBLAS) in the same process, interleaved with Tessera over "
        f"{data['rows'][0]['rounds']} rounds; each figure is a median. *Flushed*: L2 flushed before "
        "every call (`triton.testing.do_bench`); *b2b*: back-to-back launches (sustained, host "
        "overhead included). Ratio = vendor time / Tessera time (> 1: Tessera faster). " + _note(data)
        + (" *Graph*: both sides replayed from CUDA graphs cycling over operand copies larger than "
           "twice L2 (kernel time, cold, no host cost); *% copy*: GB/s of operands moved against a "
           "device-to-device copy timed the same way (graph where measured)." if graphed else ""), "",
        "| problem | Tessera ms | TFLOP/s | % peak | vendor ms | vendor TFLOP/s | ratio | b2b ratio "
        + ("| graph ratio | % copy " if graphed else "") + "| target | kernel |"
        + (" tuned / heuristic | graph | heuristic kernel |" if gains else ""),
        "|---|---:|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if graphed else "") + "---|---|"
        + ("---:|---:|---|" if gains else ""),
    ]
    for r in data["rows"]:
        verdicts = _gemm_verdicts(r)
        label = f" ({r['label']})" if r.get("label") else ""
        copy = r.get("pct_copy_graph", r.get("pct_copy"))
        graph_cols = (f"{_fmt(r.get('ratio_graph'), 3)} | {_fmt(copy)} | " if graphed else "")
        lines.append(
            f"| {r['problem']}{label} | {r['tessera_ms']:.4f} | {_fmt(r['tessera_tflops'])} | "
            f"{_fmt(r['pct_peak'])} | {r['vendor_ms']:.4f} | {_fmt(r['vendor_tflops'])} | "
            f"{r['ratio']:.3f} | {r['ratio_b2b']:.3f} | {graph_cols}{'; '.join(verdicts) or '–'} | "
            f"`{r['kernel']}` |"
            + (f" {_fmt(r.get('tuned_gain'), 3)} | {_fmt(r.get('tuned_gain_graph'), 3)} | "
               f"`{r.get('heuristic_kernel', '–')}` |" if gains else "")
        )
    return [*lines, "", *_geomeans(data["rows"], gains)]


def _geomeans(rows: list[dict], gains: bool) -> list[str]:
    """Per dtype over the square rows (M = N = K ≥ 1024): geometric means of the ratio to the vendor
    (flushed, and in CUDA graphs where measured) and, where measured, of the tuned choice's gain
    over the untuned heuristic; then over the tuning issue's grid (bf16, fp16, tf32 and IEEE fp32:
    target ≥ 1.02×), and the same grid with tf32x3, bf16x9 or bf16x6 as its float32 rows (against the
    vendor's IEEE SGEMM; not the issue's definition, which is IEEE fp32)."""
    by_dtype: dict[str, list[dict]] = {}
    for r in rows:
        if _grid_square(r):
            by_dtype.setdefault(r["dtype"], []).append(r)
    if not any(len(v) > 1 for v in by_dtype.values()):
        return []
    graphed = all("ratio_graph" in r for group in by_dtype.values() for r in group)
    out = []
    for dtype, group in by_dtype.items():
        ratio = _geomean([r["ratio"] for r in group])
        sizes = ", ".join(str(r["m"]) for r in group)
        line = f"- {dtype} squares ({sizes}): geometric mean **{ratio:.3f}×** the vendor"
        if graphed:
            line += f", in CUDA graphs {_geomean([r['ratio_graph'] for r in group]):.3f}×"
        if gains and all("tuned_gain" in r for r in group):
            line += f"; tuned over untuned heuristic **{_geomean([r['tuned_gain'] for r in group]):.3f}×**"
            if all("tuned_gain_graph" in r for r in group):
                line += f" ({_geomean([r['tuned_gain_graph'] for r in group]):.3f}× in CUDA graphs)"
        out.append(line)
    for name, dtypes in (("the issue's grid (bf16, fp16, tf32, fp32 IEEE)", ("bf16", "fp16", "tf32", "fp32")),
                         ("that grid with tf32x3 as its float32 rows", ("bf16", "fp16", "tf32", "tf32x3")),
                         ("that grid with bf16x9 as its float32 rows", ("bf16", "fp16", "tf32", "bf16x9")),
                         ("that grid with bf16x6 as its float32 rows", ("bf16", "fp16", "tf32", "bf16x6"))):
        group = [r for d in dtypes for r in by_dtype.get(d, [])]
        if not all(d in by_dtype for d in dtypes):
            continue
        ratio = _geomean([r["ratio"] for r in group])
        line = f"- {name}, {len(group)} rows: **{ratio:.3f}×** flushed"
        if graphed:
            graph = _geomean([r["ratio_graph"] for r in group])
            line += f", **{graph:.3f}×** in CUDA graphs"
        line += " (target ≥ 1.02×)"
        timed = {d: {r["m"] for r in by_dtype[d]} for d in dtypes}
        sizes = sorted(set().union(*timed.values()))
        missing = [f"{d} {s}³" for d in dtypes for s in sizes if s not in timed[d]]
        if missing:
            line += f"; not timed in this run: {', '.join(missing)}"
        out.append(line)
    return [*out, ""]


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _grid_square(r: dict) -> bool:
    """A square row of the tuning issue's grid (M = N = K ≥ 1024, one GEMM, NN)."""
    return r["m"] == r["n"] == r["k"] >= 1024 and r["batch"] == 1 and not (r["trans_a"] or r["trans_b"])


TARGET_DEVICE = "H200"  # the issues' targets are figures of this GPU: the summary takes its runs only


def _newest(pattern: str, has: object = None) -> tuple[Path, dict] | None:
    """The newest result file matching ``pattern`` (by its ``created`` stamp) measured on the
    targets' GPU (TARGET_DEVICE) for which ``has(data)`` holds, with its data; None if there is
    none. Runs on other GPUs stay in their sections."""
    found = []
    for path in RESULTS.glob(pattern):
        data = json.loads(path.read_text())
        if TARGET_DEVICE in str(data.get("device", "")) and (has is None or has(data)):
            found.append((_created(path), path, data))
    if not found:
        return None
    _, path, data = max(found, key=lambda item: item[0])
    return path, data


def _verdict(value: float | None, bound: float, at_most: bool = False) -> str:
    if value is None:
        return "–"
    return "met" if (value <= bound if at_most else value >= bound) else "**missed**"


def _gemm_row(problem: str) -> tuple[Path, dict] | None:
    """The newest GEMM run with ``problem`` among its unlabelled rows, and that row."""
    hit = _newest("gemm-*.json", lambda d: any(r["problem"] == problem for r in d["rows"]))
    if hit is None:
        return None
    path, data = hit
    return path, next(r for r in data["rows"] if r["problem"] == problem)


def _targets_summary() -> list[str]:
    """One table of the issues' measured targets, each from the newest committed run of the
    standard benchmark that measures it (the sections below have every run). Probes outside these
    files (docs/status.md cites them) are not in it."""
    rows: list[tuple[str, str, str, str, str]] = []  # target, bound, figure, verdict, file

    def add(target: str, bound: str, figure: float | None, verdict: str, path: Path, digits: int = 3,
            also: str = "") -> None:
        if figure is not None:  # enough digits to show the figure on its verdict's side of the bound
            limit, at_most = float(bound.split()[1]), bound.startswith("≤")
            exact = _verdict(figure, limit, at_most)
            while digits < 6 and _verdict(round(figure, digits), limit, at_most) != exact:
                digits += 1
        rows.append((target, bound, _fmt(figure, digits) + also, verdict, f"`{path.name}`"))

    for problem in ("bf16 NN 8192x8192x8192", "fp16 NN 8192x8192x8192"):
        hit = _gemm_row(problem)
        if hit:
            path, r = hit
            add(f"{problem}: flushed", "≥ 1.02", r["ratio"], _verdict(r["ratio"], 1.02), path)
            if "ratio_graph" in r:
                graph = r["ratio_graph"]
                add(f"{problem}: in CUDA graphs", "≥ 1.02", graph, _verdict(graph, 1.02), path)
    grid = _newest("gemm-grid-*.json")
    if grid:
        path, data = grid
        squares = [r for r in data["rows"]
                   if r["dtype"] in ("bf16", "fp16", "tf32", "fp32") and _grid_square(r)]
        if squares:
            flushed = _geomean([r["ratio"] for r in squares])
            add(f"square grid geomean, {len(squares)} rows, flushed", "≥ 1.02", flushed,
                _verdict(flushed, 1.02), path)
            if all("ratio_graph" in r for r in squares):
                graph = _geomean([r["ratio_graph"] for r in squares])
                add("square grid geomean, in CUDA graphs", "≥ 1.02", graph, _verdict(graph, 1.02), path)
    for m in (1, 16):
        hit = _gemm_row(f"bf16 NN {m}x8192x8192")
        if hit:
            path, r = hit
            copy = r.get("pct_copy_graph", r.get("pct_copy"))
            add(f"skinny bf16 {m}×8192², % of copy", "≥ 85", copy, _verdict(copy, 85.0), path, 1)
    hit = _gemm_row("bf16 NN 64x64x64 x512")
    if hit:
        path, r = hit
        value = r.get("ratio_graph", r["ratio"])
        add("batched bf16 512 × 64³ vs torch.bmm (graphs)", "≥ 2.0", value, _verdict(value, 2.0), path)
    for problem in ("bf16", "tf32"):
        hit = _newest("first-call-*.json", lambda d, p=problem: d["problem"].split()[0] == p)
        if hit:
            path, data = hit
            packed = next((r for r in data["rows"] if r["setup"] == "tessera, pack installed"), None)
            if packed:
                compiles = max(run["triton_compiles"] for run in packed["runs"])
                add(f"first {problem} call with a pack / torch's ({compiles} compiles)", "≤ 0.5",
                    packed["vs_torch"], _verdict(packed["vs_torch"], 0.5, at_most=True) if compiles == 0
                    else "**missed**", path)
    quantized = _newest("quantized-*.json")
    if quantized:
        path, data = quantized
        for r in data["rows"]:
            add(f"W{r['bits']}A16 M = {r['m']} vs bf16 torch.matmul", f"≥ {r['target']}", r["vs_torch"],
                _verdict(r["vs_torch"], r["target"]), path)
        for r in data.get("operands") or []:
            if r.get("target") is not None and "error" not in r:
                add(f"{r['problem']} vs {r['vendor']}", f"≥ {r['target']}", r["vs_vendor"],
                    _verdict(r["vs_vendor"], r["target"]), path)
    level12 = _newest("blas-l12-*.json")
    if level12:
        path, data = level12
        for r in _level12_rows(data):
            if not r["issue_row"]:
                continue  # the targets are the unbatched routines at 2^26 elements / 8192²
            copy = r.get("graph_pct_copy", r.get("pct_copy"))
            add(f"{r['routine']}: % of copy (graphs)", "≥ 85", copy, _verdict(copy, 85.0), path, 1)
            versus = r.get("graph_vs_torch") or r.get("vs_torch")
            if versus:
                both = r.get("graph_vs_torch") and r.get("vs_torch")
                flushed = f" (flushed {r['vs_torch']:.3f})" if both else ""
                add(f"{r['routine']}: vs {r['torch']} (graphs)", "≥ 1.0", versus, _verdict(versus, 1.0), path,
                    also=flushed)
    if not rows:
        return []
    return ["## The issues' targets in the newest run of each benchmark", "",
            "Each row from the newest committed result that measures it (the sections below hold every "
            "run, oldest last); probes outside these benchmarks are cited in docs/status.md. Stream-K's "
            "targets (three named shapes) are in its section.", "",
            "| target | bound | measured | verdict | file |", "|---|---|---:|---|---|",
            *(f"| {t} | {b} | {f} | {v} | {p} |" for t, b, f, v, p in rows), ""]


def _host_section(path: Path) -> list[str]:
    data = json.loads(path.read_text())
    lines = [f"## Host overhead per call on {data['device']} — `{path.relative_to(ROOT)}`", "",
             "Tiny 64×64×64 bf16 problem (GPU work negligible), 2000 back-to-back calls, wall "
             "time per call; median of 3 rounds that alternate the variants in one process "
             f"(`benchmarks/host_overhead.py`). {_note(data)}", "", "| call | µs/call |", "|---|---:|"]
    lines += [f"| {name} | {us:.1f} |" for name, us in data["us_per_call"].items()]
    if data.get("launch_steps_us"):
        lines += ["", "Each step of a warm direct launch timed apart (same tiny problem; "
                  "`launch_anatomy`):", "", "| step | µs/call |", "|---|---:|"]
        lines += [f"| {name} | {us:.2f} |" for name, us in data["launch_steps_us"].items()]
    return [*lines, ""]


def _wq_eager_section(path: Path) -> list[str]:
    data = json.loads(path.read_text())
    lines = [f"## Weight-only rows eagerly on {data['device']} — `{path.relative_to(ROOT)}`", "",
             _provenance(data, "python benchmarks/wq_eager.py OUT.json") + " N = K = 8192, group 128, "
             "bf16 activations, the shipped logic's choice. *Host*: wall time per call of 500 "
             "back-to-back calls (the larger of host and GPU time); *back-to-back*: the same loop "
             "between GPU events; *flushed*: `do_bench` with L2 flushed; bf16 torch.matmul beside "
             "each.", "",
             "| row | configuration | recipe kept | host µs (torch) | back-to-back µs (torch) | "
             "flushed µs (torch) |", "|---|---|---|---:|---:|---:|"]
    lines += [f"| W{r['bits']}A16 M = {r['m']} | `{r['config']}` | {'yes' if r['recipe'] else '**no**'} | "
              f"{r['host_us']:.1f} ({r['torch_host_us']:.1f}) | {r['back_to_back_us']:.1f} "
              f"({r['torch_back_to_back_us']:.1f}) | {r['flushed_us']:.1f} ({r['torch_flushed_us']:.1f}) |"
              for r in data["rows"]]
    return [*lines, ""]


def _wq4_cuda_core_section(path: Path) -> list[str]:
    data = json.loads(path.read_text())
    lines = [f"## W4A16 decode on CUDA cores against the tensor-core tile on {data['device']} — "
             f"`{path.relative_to(ROOT)}`", "",
             _provenance(data) + f" M = 1, N = K = {data['n']}, group {data['group']}, bf16. Replayed from "
             "CUDA graphs over four weight copies, medians of 3 rounds; each variant checked against fp64 "
             "first (error: max |err| / Σ|x·w|).", "",
             "| case | µs | × torch | error |", "|---|---:|---:|---:|"]
    errors = {r["case"]: r.get("max_err_over_sum_abs") for r in data["rows"] if "graph_us" not in r}
    for r in (r for r in data["rows"] if "graph_us" in r):
        error = errors.get(r["case"])
        lines.append(f"| {r['case']} | {r['graph_us']:.2f} | {r['vs_torch']:.2f} | "
                     f"{'–' if error is None else f'{error:.1e}'} |")
    return [*lines, ""]


def _level1_vs_torch_section(path: Path) -> list[str]:
    """``level1_vs_torch.py``: each level-1 routine beside torch, and the element-wise launch
    shapes of ``--map-sweep``."""
    data = json.loads(path.read_text())

    def cells(row: dict) -> str:
        ratio = (f"{row['graph_vs_torch']:.3f} | {row['eager_vs_torch']:.3f}" if "graph_vs_torch" in row
                 else "– | –")
        return f"{1000 * row['graph_ms']:.2f} | {1000 * row['eager_ms']:.2f} | {ratio}"

    lines = [f"## Level 1 beside torch on {data['device']} — `{path.relative_to(ROOT)}`", "",
             f"{_provenance(data)} {_note(data)}2^26 fp32; graph = replayed from a CUDA graph (cold: "
             "every operand exceeds L2), flushed = do_bench with the L2 flushed; medians of "
             f"{data['rounds']} rounds ({data.get('sweep_rounds', data['rounds'])} for the launch "
             "shapes), torch in the same round.", "",
             "| routine | graph µs | flushed µs | graph vs torch | flushed vs torch |",
             "|---|---:|---:|---:|---:|"]
    lines += [f"| {name} | {cells(row)} |" for name, row in data["rows"].items()]
    if data.get("map_shapes"):
        lines += ["", "Element-wise routines forced to a launch shape (block, warps):", "",
                  "| routine | block | warps | graph µs | flushed µs | graph vs torch | flushed vs torch |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        lines += [f"| {r['routine']} | {r['block']} | {r['num_warps']} | {cells(r)} |"
                  for r in data["map_shapes"]]
    return [*lines, ""]


def _provenance(data: dict, command: str = "") -> str:
    """When, at which revision, with which command (``command`` where the JSON names none) and
    versions a benchmark script's JSON was made."""
    return (f"Measured {data['created']} at revision `{data['git']}` with "
            f"`{data.get('command', command)}`; torch "
            f"{data['versions']['torch']}, triton {data['versions']['triton']}.")


def _note(data: dict) -> str:
    """A result file's own remark on how it was made and the launch settings it ran with (as
    sentences), or nothing."""
    settings = ", ".join(f"`{k}={v}`" for k, v in data.get("settings", {}).items())
    return (f"Note: {data['note']}. " if data.get("note") else "") + (
        f"Settings: {settings}. " if settings else "")


_LEVEL12_KEYS = {"problem": "routine", "vendor": "torch", "vs_vendor": "vs_torch", "vendor_gbs": "torch_gbs",
                 "gbs_graph": "graph_gbs", "pct_copy_graph": "graph_pct_copy",
                 "vs_vendor_graph": "graph_vs_torch"}  # `tessera bench blas`'s names → this file's


def _level12_rows(data: dict) -> list[dict]:
    """A level-1/2 result's rows in one form, with ``issue_row`` (a routine the issue's targets
    name: unbatched, unit increments, not trsv). Runs since the fifty-first session hold
    ``tessera bench blas``'s rows (named ``problem``, fields after the vendor, square sizes as
    NxN: written N² here, as the earlier runs named them); earlier runs named each row by routine,
    fields after torch, which this form keeps."""
    rows = []
    for r in data["rows"]:
        if "problem" not in r:  # the earlier form
            old = r["routine"]
            rows.append({**r, "issue_row": not ("2^" in old or "batched" in old or "trsv" in old)})
            continue
        row = {_LEVEL12_KEYS.get(key, key): value for key, value in r.items() if key != "routine"}
        row["routine"] = re.sub(r"\b(\d+)x\1\b", "\\1²", row["routine"])
        row["issue_row"] = r["batch"] == 1 and r["inc"] == 1 and r["routine"] != "trsv"
        rows.append(row)
    return rows


def _level12_section(path: Path) -> list[str]:
    """BLAS level 1/2 rows; the issue's targets: ≥ 85 % of copy and ≥ 1.0× torch (judged on the
    CUDA-graph timing when the run has it: no host launch cost, no dirty-L2 write-back from the
    flush, the same for both sides and for the copy)."""
    data = json.loads(path.read_text())
    graphed = "copy_graph_gbs" in data
    lines = [f"## BLAS level 1 and 2 on {data['device']} — `{path.relative_to(ROOT)}`", "",
             f"{_provenance(data)} {_note(data)}Level 1 at 2^26 fp32, "
             "level 2 at 8192² (bf16; trsv fp32). GB/s of the bytes a routine must move; % copy against "
             f"the device-to-device copy of the same run ({data['copy_gbs']:.0f} GB/s eager"
             + (f", {data['copy_graph_gbs']:.0f} GB/s from a CUDA graph" if graphed else "")
             + ", read + write); medians of 3 alternating rounds; eager = do_bench with the L2 flushed"
             + ("; graph = replayed from a CUDA graph (every operand exceeds L2, so it is cold too); the "
                "targets are judged on the graph figures" if graphed else "")
             + ". Targets: ≥ 85 % of copy and ≥ 1.0× torch (trsv is latency-bound: a chain of dependent "
             "blocks, so its % copy says little).", ""]
    if graphed:
        lines += ["| routine | eager GB/s | eager % copy | eager vs torch | graph GB/s | graph % copy | "
                  "torch equivalent | graph vs torch | targets |",
                  "|---|---:|---:|---:|---:|---:|---|---:|---|"]
    else:
        lines += ["| routine | Tessera GB/s | % copy | torch equivalent | torch GB/s | vs torch | targets |",
                  "|---|---:|---:|---|---:|---:|---|"]
    for row in _level12_rows(data):
        pct = row.get("graph_pct_copy", row["pct_copy"]) if graphed else row["pct_copy"]
        vs = row.get("graph_vs_torch", row.get("vs_torch")) if graphed else row.get("vs_torch")
        checks = [f"copy {'met' if pct >= 85 else '**missed**'}"]
        if vs is not None:
            checks.append(f"torch {'met' if vs >= 1.0 else '**missed**'}")
        ratio = f"{row['vs_torch']:.2f}" if "vs_torch" in row else "–"
        if graphed:
            g_gbs = f"{row['graph_gbs']:.0f}" if "graph_gbs" in row else "–"
            g_pct = f"{row['graph_pct_copy']:.1f}" if "graph_pct_copy" in row else "–"
            g_vs = f"{row['graph_vs_torch']:.2f}" if "graph_vs_torch" in row else "–"
            lines.append(f"| {row['routine']} | {row['gbs']:.0f} | {row['pct_copy']:.1f} | {ratio} | "
                         f"{g_gbs} | {g_pct} | {row['torch']} | {g_vs} | {'; '.join(checks)} |")
        else:
            torch_gbs = f"{row['torch_gbs']:.0f}" if "torch_gbs" in row else "–"
            lines.append(f"| {row['routine']} | {row['gbs']:.0f} | {row['pct_copy']:.1f} | {row['torch']} | "
                         f"{torch_gbs} | {ratio} | {'; '.join(checks)} |")
    if data.get("gemv_sweep"):
        lines += ["", "gemv tile sweep (BLOCK_M, BLOCK_N, warps[, programs per SM] → GB/s"
                  + (" eager / graph" if graphed else "") + "): " + ", ".join(
                      f"{'T' if r['trans'] else 'N'} {tuple(r['tile'])} {r['gbs']:.0f}"
                      + (f" / {r['graph_gbs']:.0f}" if "graph_gbs" in r else "") for r in data["gemv_sweep"])]
    return [*lines, ""]


def _quantized_section(path: Path) -> list[str]:
    """Weight-only rows beside bf16 torch.matmul and fp8/int8 rows beside torch, with targets."""
    data = json.loads(path.read_text())
    lines = [f"## Quantized GEMM on {data['device']} — `{path.relative_to(ROOT)}`", "",
             f"{_provenance(data)} {_note(data)}x (M × 8192, bf16) times "
             "an 8192² weight quantized with group 128; torch = bf16 `torch.matmul` of the same shape; "
             "medians of 3 rounds. M ≤ 16 timed from CUDA graphs cycling over 4 weight copies (cold L2; "
             "eager calls are host-bound there, their times in the last column), larger M eager with "
             "the L2 flushed. Weight GB/s counts codes and scales.", "",
             "| weights | M | Tessera µs | torch µs | vs torch | target | weight GB/s "
             "| eager µs (Tessera / torch) |",
             "|---|---:|---:|---:|---:|---|---:|---|"]
    for r in data["rows"]:
        verdict = "met" if r["vs_torch"] >= r["target"] else "**missed**"
        eager = f"{r['eager_ms'] * 1e3:.1f} / {r['eager_torch_ms'] * 1e3:.1f}" if "eager_ms" in r else "–"
        lines.append(f"| int{r['bits']} | {r['m']} | {r['ms'] * 1e3:.1f} | {r['torch_ms'] * 1e3:.1f} | "
                     f"{r['vs_torch']:.2f} | ≥ {r['target']}× {verdict} | {r['weight_gbs']:.0f} | {eager} |")
    if data.get("operands"):
        lines += ["", "| fp8 / int8 operands, 8192³ | Tessera T/s | vendor | vs vendor | target |",
                  "|---|---:|---|---:|---|"]
        for r in data["operands"]:
            if "error" in r:
                lines.append(f"| {r['problem']} | – | {r['vendor']} | – | {r['error']} |")
                continue
            target = r.get("target")
            verdict = "–" if target is None else (
                f"≥ {target}× {'met' if r['vs_vendor'] >= target else '**missed**'}")
            lines.append(f"| {r['problem']} | {r['tflops']:.0f} | {r['vendor']} | {r['vs_vendor']:.2f} | "
                         f"{verdict} |")
        lines.append("")
    if data.get("accumulation"):
        lines += ["fp8 accumulation error, max |error| / Σ|a·b| at K = 8192 (fp32 out): " + "; ".join(
            f"{r['dtype'].split('.')[-1]} {r['who']} {r['max_rel']:.1e}" for r in data["accumulation"]
            if r["max_rel"] is not None), ""]
    return [*lines, ""]


def _streamk_section(path: Path) -> list[str]:
    """Stream-K against the best data-parallel config on wave-quantized shapes (target ≥ 1.10×),
    and (results from the wave preset on) what the shipped logic chooses there; from f020b7f on,
    CUDA-graph kernel times beside the flushed eager ones."""
    data = json.loads(path.read_text())
    chosen = "selected_ms" in data["rows"][0]
    graphs = "graph_ms" in data["rows"][0]
    note = (" The logic's choice: what `gemm` selects unforced (shipped logic), against the best "
            "data-parallel time (target ≥ 1.10× where stream-K wins, ≥ 0.95× elsewhere).") if chosen else ""
    if graphs:
        note += (" Graphs: replayed from a CUDA graph over operand copies larger than L2 (kernel time, "
                 "cold operands, as the tuner times); eager: do_bench, L2 flushed, the launch path included.")
    extra = (" the logic's choice | its µs | vs data-parallel |", "---|---:|---|") if chosen else ("", "")
    if graphs:
        extra = (extra[0] + " graphs: stream-K vs data-parallel | graphs: the logic's choice vs "
                 "data-parallel |", extra[1] + "---|---|")
    lines = [f"## Stream-K on {data['device']} — `{path.relative_to(ROOT)}`", "",
             f"{_provenance(data)} {_note(data)}bf16; do_bench medians, L2 flushed. Idle = "
             f"share of the last wave's SMs without a tile under the heuristic's config.{note}", "",
             "| M×N×K | tiles | idle in last wave | torch µs | best data-parallel µs | best stream-K µs | "
             "stream-K vs data-parallel |" + extra[0], "|---|---:|---:|---:|---:|---:|---|" + extra[1]]
    for r in data["rows"]:
        timed = {key: v for key, v in r.items() if isinstance(v, float) and not key.endswith(" error")}
        dp = r["selected_ms"] * r["selected_vs_best_data_parallel"] if chosen else min(
            v for key, v in timed.items()
            if key.startswith(("gemm_tile", "gemm_tma")) or key == "heuristic_ms")
        sk = min(v for key, v in timed.items() if key.startswith("gemm_streamk"))
        verdict = "met" if r["streamk_vs_best_data_parallel"] >= 1.10 else "**missed**"
        line = (f"| {r['m']}×{r['n']}×{r['k']} | {r['tiles']} | {r['idle_in_last_wave']:.0%} | "
                f"{r['torch_ms'] * 1e3:.0f} | {dp * 1e3:.0f} | {sk * 1e3:.0f} | "
                f"{r['streamk_vs_best_data_parallel']:.2f} (≥ 1.10 {verdict}) |")
        if chosen:
            line += (f" `{r['selected']}` | {r['selected_ms'] * 1e3:.0f} | "
                     f"{r['selected_vs_best_data_parallel']:.2f} |")
        if graphs:
            line += (f" {r['streamk_vs_best_data_parallel_graph']:.2f} | "
                     f"{r['selected_vs_best_data_parallel_graph']:.2f} |")
        lines.append(line)
    return [*lines, ""]


def _streamk_designs_section(path: Path) -> list[str]:
    """Two stream-K designs and the first one without its fixup (benchmarks/streamk_designs.py)."""
    data = json.loads(path.read_text())
    keys = [key for key in data["rows"][0] if isinstance(data["rows"][0][key], dict) and "graph" in
            data["rows"][0][key]]
    lines = [f"## Stream-K designs on {data['device']} — `{path.relative_to(ROOT)}`", "",
             f"{_provenance(data)} bf16, µs: CUDA-graph median over operand copies larger than L2 / "
             "do_bench flushed eager median (three interleaved rounds). `first`: the shipped kernel (only "
             "the leftover tiles shared, up to 8 pieces a tile); `nofix`: the same without the fixup "
             "(wrong result, time only); `two-wave`: the last two waves shared (revision 6168d03, "
             "reverted); `norot`: two-wave with ranges walked in plain order; pN: MAX_PIECES.", "",
             "| candidate | " + " | ".join(f"{r['m']}×{r['n']}×{r['k']}" for r in data["rows"]) + " |",
             "|---|" + "---|" * len(data["rows"])]
    for key in keys:
        lines.append(f"| {key} | " + " | ".join(f"{r[key]['graph']:.1f} / {r[key]['flushed']:.1f}"
                                               for r in data["rows"]) + " |")
    return [*lines, ""]


# Targets of the rand issue: (problem, versus) → minimum ratio.
RAND_TARGETS = {
    ("philox4x32_10 uniform fp32 2^28", "curand"): 1.0, ("philox4x32_10 uniform fp32 2^28", "copy"): 85.0,
    ("philox4x32_10 normal fp32 2^28", "curand"): 1.0, ("philox4x32_10 normal fp32 2^28", "torch"): 1.4,
    ("philox4x32_10 normal bf16 2^28", "torch"): 3.0, ("mrg32k3a uniform fp32 2^28", "curand"): 1.5,
    ("sobol32 uniform fp32 2^28", "copy"): 80.0,
}


def _rand_section(path: Path) -> list[str]:
    data = json.loads(path.read_text())
    dev, ver = data["device"], data["device"]["versions"]
    lines = [f"## Random numbers on {dev['name']} — `{path.relative_to(ROOT)}`", "",
             f"Measured {data['created']} at revision `{data['git_revision']}` with `{data['command']}`; "
             f"torch {ver['torch']}, triton {ver['triton']}. GB/s of output written (median of "
             f"{data['rows'][0]['rounds']} interleaved rounds, L2 flushed); % copy = against the "
             "device-to-device copy of the same run (read + write); ratios = vendor time / Tessera "
             "time. cuRAND through CuPy's host API.", "",
             "| problem | Tessera GB/s | % copy | torch GB/s | vs torch | cuRAND GB/s | vs cuRAND "
             "| targets |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in data["rows"]:
        figures = {"torch": r.get("vs_torch"), "curand": r.get("vs_curand"), "copy": r["pct_copy"]}
        verdicts = [f"{versus} ≥ {goal:g}{'%' if versus == 'copy' else '×'} "
                    f"{'met' if (figures[versus] or 0) >= goal else '**missed**'}"
                    for (problem, versus), goal in RAND_TARGETS.items() if problem == r["problem"]]
        lines.append(f"| {r['problem']} | {r['tessera_gbs']:.0f} | {r['pct_copy']:.1f} | "
                     f"{_fmt(r.get('torch_gbs'), 0)} | {_fmt(r.get('vs_torch'), 2)} | "
                     f"{_fmt(r.get('curand_gbs'), 0)} | {_fmt(r.get('vs_curand'), 2)} | "
                     f"{'; '.join(verdicts) or '–'} |")
    return [*lines, ""]


def _philox_floor_section(path: Path) -> list[str]:
    data = json.loads(path.read_text())
    rows, summary = data["rows"], data["summary"]
    lines = [f"## Philox bf16 normal: the arithmetic floor on {data['device']} — `{path.relative_to(ROOT)}`",
             "", f"Measured {data['created']} at revision `{data['git']}` with "
             f"`python benchmarks/rand_floor.py`; torch {data['versions']['torch']}, triton "
             f"{data['versions']['triton']}. 2^{data['n'].bit_length() - 1} bf16 values; median of "
             f"{data['rounds']} interleaved rounds, L2 flushed. *philox only*: the same Philox blocks "
             "and stores without the Box–Muller; *Box–Muller only*: without the Philox rounds.", "",
             "| kernel | µs | GB/s (bf16 output; the copy: read + write) |", "|---|---:|---:|"]
    lines += [f"| {name.replace('_', ' ')} | {row['us']:.1f} | {row['gbs_of_bf16_output']:.0f} |"
              for name, row in rows.items()]
    lines += ["", f"3× torch needs ≤ {summary['three_x_torch_needs_us']:.1f} µs; the Philox rounds alone "
              f"take {100 * summary['philox_only_fraction_of_3x_budget']:.0f} % of that "
              f"(production: {summary['production_vs_torch']:.2f}× torch).", ""]
    return lines


def _table_head(title: str, path: Path, data: dict, note: str, columns: dict[str, str]) -> list[str]:
    """A result section's heading, provenance line with ``note``, and table header (column name →
    its alignment row cell, e.g. ``"---:"``)."""
    return [f"## {title} — `{path.relative_to(ROOT)}`", "", f"{_provenance(data)} {note}", "",
            "| " + " | ".join(columns) + " |", "|" + "|".join(columns.values()) + "|"]


def _split_floor_section(path: Path) -> list[str]:
    """benchmarks/level1_floor.py and symv_floor.py: a routine's launches and plain reads of its
    bytes, graph-timed beside torch (rows: case, µs, GB/s, % of the run's copy)."""
    data = json.loads(path.read_text())
    what = "dot and nrm2 at 2^26 fp32" if path.name.startswith("level1") else "symv, 8192² bf16"
    lines = _table_head(f"Where the time goes: {what} on {data['device']}", path, data,
                        "Replayed from CUDA graphs, medians of 3 alternating rounds; GB/s of the bytes the "
                        "routine must move (torch.mv: the whole matrix; the copy: read + write).",
                        {"case": "---", "µs": "---:", "GB/s": "---:", "% copy": "---:"})
    lines += [f"| {r['case']} | {r['graph_us']:.1f} | {r['gbs']:.0f} | {r['pct_copy']:.1f} |"
              for r in data["rows"]]
    return [*lines, ""]


def _batched_floor_section(path: Path) -> list[str]:
    """benchmarks/batched_floor.py: small batched GEMM designs beside the shipped kernel and torch.bmm."""
    data = json.loads(path.read_text())
    lines = _table_head(f"Small batched GEMM designs, {data['problem']} on {data['device']}", path, data,
                        "Replayed from CUDA graphs over cold copies, medians of 3 alternating rounds; each "
                        "design checked against torch.bmm first (relative error of its bf16 result). Rows "
                        "marked *warm L2* replay one set of operands (resident in L2) and compare with "
                        "torch.bmm warm.",
                        {"case": "---", "µs": "---:", "vs torch.bmm": "---:", "relative error": "---:"})
    lines += [f"| {r['case']} | {r['graph_us']:.2f} | {r['vs_torch']:.2f} | {_fmt(r['relative_error'], 4)} |"
              for r in data["rows"]]
    return [*lines, ""]


def _gemv_floor_section(path: Path) -> list[str]:
    """benchmarks/gemv_floor.py: gemv T's launches and a one-launch design beside torch.mv."""
    data = json.loads(path.read_text())
    lines = _table_head(f"Where the time goes: gemv T, {data['n']}² bf16 on {data['device']}", path, data,
                        "Replayed from CUDA graphs, medians of 3 alternating rounds; % copy: the time of a "
                        "copy moving the matrix's bytes (read + write) over the case's time; each design "
                        "checked against torch first (relative error).",
                        {"case": "---", "µs": "---:", "vs torch.mv": "---:", "% copy": "---:",
                         "relative error": "---:"})
    lines += [f"| {r['case']} | {r['graph_us']:.2f} | {r['vs_torch']:.2f} | {r['pct_copy']:.1f} | "
              f"{_fmt(r['relative_error'], 4)} |" for r in data["rows"]]
    if data.get("sizes"):  # y = aᵀx at other sizes: the shipped gemv T and the M = 1 GEMM (fef7384 on)
        lines += ["", "| a (rows × cols) | torch.mv µs | gemv T µs | vs torch.mv | GEMM xᵀa µs | "
                  "vs torch.mv |", "|---|---:|---:|---:|---:|---:|"]
        lines += [f"| {r['rows']}×{r['cols']} | {r['torch_us']:.2f} | {r['gemv_us']:.2f} | "
                  f"{r['torch_us'] / r['gemv_us']:.2f} | {r['gemm_us']:.2f} | "
                  f"{r['torch_us'] / r['gemm_us']:.2f} |" for r in data["sizes"]]
    return [*lines, ""]


def _wq_floor_section(path: Path) -> list[str]:
    """benchmarks/wq_floor.py: weight-only decode's launches timed apart beside torch.matmul."""
    data = json.loads(path.read_text())
    title = (f"Where the time goes: weight-only decode, M = {data['m']}, N = K = {data['n']}, group "
             f"{data['group']} on {data['device']}")
    lines = _table_head(title, path, data, "Replayed from CUDA graphs cycling over four weight copies (cold "
                        "L2), medians of 3 alternating rounds; torch.matmul on the bf16 weights.",
                        {"weights": "---", "case": "---", "µs": "---:", "vs torch.matmul": "---:"})
    lines += [f"| int{r['bits']} | {r['case']} | {r['graph_us']:.2f} | {r['vs_torch']:.2f} |"
              for r in data["rows"]]
    return [*lines, ""]


def _wq_tc_section(path: Path) -> list[str]:
    """benchmarks/wq_tc.py: gemm_wq's tensor-core tiles at decode and small M, two code layouts."""
    data = json.loads(path.read_text())
    title = (f"Weight-only GEMM on tensor cores: tiles and code layouts, N = K = {data['n']}, group "
             f"{data['group']}, bf16, on {data['device']}")
    lines = _table_head(title, path, data,
                        "Replayed from CUDA graphs cycling over four weight copies (cold L2), medians of 3 "
                        "rounds; each configuration checked against x @ dequantize_weight(q) first; n-major: "
                        "columns contiguous, k-major: each column's K run contiguous.",
                        {"weights": "---", "M": "---:", "layout": "---", "case": "---", "µs": "---:",
                         "vs torch.matmul": "---:"})
    for r in data["rows"]:
        if "error" in r:
            lines.append(f"| int{r['bits']} | {r['m']} | {r['layout']} | {r['case']} | {r['error'][:60]} | |")
        else:
            lines.append(f"| int{r['bits']} | {r['m']} | {r['layout']} | {r['case']} | {r['graph_us']:.2f} | "
                         f"{r['vs_torch']:.2f} |")
    return [*lines, ""]


def _tf32_layout_section(path: Path) -> list[str]:
    """benchmarks/tf32_layout.py: tf32 GEMM with B copied K-major (shipped) or read row-major."""
    data = json.loads(path.read_text())
    lines = _table_head(f"tf32 with a row-major B: copied K-major or read as it lies, on {data['device']}",
                        path, data, "Square problems; eager: do_bench (median, L2 flushed); back to back: "
                        "mean of a loop of calls (host-bound for small sizes); graph: replayed from a CUDA "
                        "graph.",
                        {"size": "---:", "case": "---", "kernel": "---", "eager ms": "---:",
                         "back-to-back ms": "---:", "graph ms": "---:"})
    for r in data["rows"]:
        if "error" in r:
            lines.append(f"| {r['size']} | {r['case']} | {r.get('kernel', '–')} | {r['error'][:60]} | | |")
        else:
            lines.append(f"| {r['size']} | {r['case']} | {r.get('kernel', '–')} | {r['eager_ms']:.4f} | "
                         f"{r['b2b_ms']:.4f} | {r['graph_ms']:.4f} |")
    return [*lines, ""]


def _persistent_sweep_section(path: Path) -> list[str]:
    """benchmarks/persistent_sweep.py: descriptor-family configurations beside the vendor."""
    data = json.loads(path.read_text())
    lines = _table_head(f"Persistent TMA configurations beside the vendor on {data['device']}", path, data,
                        "do_bench (median, L2 flushed), ours and the vendor's alternating; fp8/int8 at "
                        "8192³ against torch._scaled_mm / torch._int_mm, 16-bit squares against "
                        "torch.matmul; *shipped*: what the library picks today; each result checked "
                        "against the vendor's first.",
                        {"problem": "---", "configuration": "---", "T(FL)OP/s": "---:", "vs vendor": "---:"})
    for r in [*data["scaled"], *data["float"]]:
        name = r["config"] + (" *(shipped)*" if r.get("shipped") or r["config"] == "shipped" else "")
        if "error" in r:
            lines.append(f"| {r['problem']} | {name} | {r['error'][:70]} | |")
        else:
            lines.append(f"| {r['problem']} | {name} | {r['tflops']:.0f} | {r['vs_vendor']:.3f} |")
    return [*lines, ""]


def _first_call_section(path: Path) -> list[str]:
    data = json.loads(path.read_text())
    lines = [f"## First call, fresh process, {data['problem']} on {data['device']} — "
             f"`{path.relative_to(ROOT)}`", "",
             f"Revision `{data['git']}`; {data.get('command', '`python benchmarks/first_call.py`')}. "
             "CUDA context and operands created before timing; wall time of the first call, "
             "synchronized; median over fresh processes." + (f" {data['note']}." if "note" in data else ""),
             "", "| setup | first call ms | vs torch | Triton compilations per process |",
             "|---|---:|---:|---|"]
    for row in data["rows"]:
        compiles = [r["triton_compiles"] for r in row["runs"]]
        lines.append(f"| {row['setup']} | {row['first_ms']:.1f} | {row['vs_torch']:.2f} | {compiles} |")
    return [*lines, ""]


def _eager_tuning_section(path: Path) -> list[str]:
    """The first sm_90 GEMM tuning run (eager timing): kept as the evidence for graph-timed tuning."""
    data = json.loads(path.read_text())
    lines = [f"## GEMM tuned with eager timing (not shipped) — `{path.relative_to(ROOT)}`", "",
             data["note"], "",
             "| problem | Tessera ms | vendor ms | ratio | graph ratio | tuned / heuristic | tuned kernel | "
             "heuristic kernel |", "|---|---:|---:|---:|---:|---:|---|---|"]
    for r in data["grid_vs_heuristic"]:
        lines.append(f"| {r['dtype']} {r['m']}x{r['n']}x{r['k']} | {r['tessera_ms']:.4f} | "
                     f"{r['vendor_ms']:.4f} | "
                     f"{r['ratio']:.3f} | {r['ratio_graph']:.3f} | {r['tuned_gain']:.3f} | `{r['kernel']}` | "
                     f"`{r['heuristic_kernel']}` |")
    return [*lines, ""]


def _tuning_section(folder: Path) -> list[str]:
    import yaml

    lines = [f"## Tuning run — `{folder.relative_to(ROOT)}`", ""]
    notes = folder / "README.md"
    if notes.is_file():
        lines += [notes.read_text().split("\n\n", 1)[-1].strip(), ""]
    for path in sorted(folder.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        solutions = {s["id"]: s for s in doc["solutions"]}
        figure = "gbs" if any("gbs" in row for row in doc["table"]) else "tflops"
        lines += [f"`{path.name}` ({doc['arch']}, {doc['runtime'].get('device', '')}, triton "
                  f"{doc['runtime'].get('triton')}):", "",
                  f"| problem | {'GB/s' if figure == 'gbs' else 'TFLOP/s'} | solution |", "|---|---:|---|"]
        for row in doc["table"]:
            sol = solutions[row["solution"]]
            config = " ".join(f"{k}={v}" for k, v in sol.items() if k not in ("id", "kernel"))
            sizes = "x".join(str(v) for k, v in row.items() if k not in ("solution", "tflops", "gbs"))
            lines.append(f"| {sizes} | {row.get(figure, '–')} | `{sol['kernel']} {config}` |")
        lines.append("")
    return lines


def render() -> str:
    """BENCHMARKS.md's text from the committed results."""
    out = ["# Benchmarks", "",
           "Generated by `python benchmarks/render.py` from `benchmarks/results/*.json`; "
           "do not edit by hand. Sweeps of candidate configurations (`sweep-*.json`) are kept "
           "as the evidence behind the selection rules in `tessera/blas/space.py`. Several runs of "
           "the same preset are kept: their spread (a few % for large problems, up to 2× for "
           "host-bound small ones) is part of the result.", "", *_targets_summary()]
    runs = sorted(RESULTS.glob("gemm-*.json"), key=lambda p: json.loads(p.read_text())["created"])
    for path in reversed(runs):  # newest first
        out += _gemm_section(path)
    for path in sorted(RESULTS.glob("rand-*.json"), key=lambda p: json.loads(p.read_text())["created"],
                       reverse=True):
        out += _rand_section(path)
    for path in sorted(RESULTS.glob("philox-floor-*.json"), reverse=True):
        out += _philox_floor_section(path)
    for path in sorted(RESULTS.glob("first-call-*.json"), key=_created, reverse=True):
        out += _first_call_section(path)
    for path in sorted(RESULTS.glob("blas-l12-*.json"), key=lambda p: json.loads(p.read_text())["created"],
                       reverse=True):
        out += _level12_section(path)
    for path in sorted(RESULTS.glob("l1-map-*.json"), key=_created, reverse=True):
        out += _level1_vs_torch_section(path)
    for pattern in ("level1-floor-*.json", "symv-floor-*.json"):
        for path in sorted(RESULTS.glob(pattern), key=_created, reverse=True):
            out += _split_floor_section(path)
    for path in sorted(RESULTS.glob("batched-floor-*.json"), key=_created, reverse=True):
        out += _batched_floor_section(path)
    for path in sorted(RESULTS.glob("gemv-floor-*.json"), key=_created, reverse=True):
        out += _gemv_floor_section(path)
    for path in sorted(RESULTS.glob("wq-floor-*.json"), key=_created, reverse=True):
        out += _wq_floor_section(path)
    for path in sorted(RESULTS.glob("wq-tc-*.json"), key=_created, reverse=True):
        out += _wq_tc_section(path)
    for path in sorted(RESULTS.glob("wq4-cuda-core-*.json"), key=_created, reverse=True):
        out += _wq4_cuda_core_section(path)
    for path in sorted(RESULTS.glob("wq-eager-*.json"), key=_created, reverse=True):
        out += _wq_eager_section(path)
    for path in sorted(RESULTS.glob("tf32-layout-*.json"), key=_created, reverse=True):
        out += _tf32_layout_section(path)
    for path in sorted(RESULTS.glob("quantized-*.json"), key=_created, reverse=True):
        out += _quantized_section(path)
    for path in sorted(RESULTS.glob("persistent-sweep-*.json"), key=_created, reverse=True):
        out += _persistent_sweep_section(path)
    for path in sorted(RESULTS.glob("streamk-h200-*.json"), key=_created, reverse=True):
        out += _streamk_section(path)
    for path in sorted(RESULTS.glob("streamk-designs-*.json"), key=_created, reverse=True):
        out += _streamk_designs_section(path)
    for path in sorted(RESULTS.glob("host-overhead-*.json"), key=_created, reverse=True):
        out += _host_section(path)
    for path in sorted(RESULTS.glob("tune-eager-*.json")):
        out += _eager_tuning_section(path)
    for folder in sorted(p for p in RESULTS.glob("tune-*") if p.is_dir()):
        out += _tuning_section(folder)
    return "\n".join(out)


def main() -> None:
    (ROOT / "BENCHMARKS.md").write_text(render())


if __name__ == "__main__":
    main()
