"""``tessera info`` and ``tessera bench gemm``.

Without a GPU the kernels run in Triton's CPU interpreter: the CLI switches it on before any
kernel is imported, says so, and limits presets to sizes the interpreter finishes in seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

from tessera._core.errors import TesseraError


def _use_interpreter_without_gpu() -> bool:
    """Turn on Triton's interpreter when there is no GPU; True when it is on."""
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tessera", description="Tessera GPU math libraries.")
    sub = parser.add_subparsers(dest="command", required=True)

    info = sub.add_parser("info", help="architecture, sizes, peaks and runtime versions")
    info.add_argument("--json", action="store_true", help="print JSON instead of a table")

    logic = sub.add_parser("logic", help="inspect and check logic (tuning) files")
    logic_sub = logic.add_subparsers(dest="action", required=True)
    show = logic_sub.add_parser("show", help="print a logic file's solutions and size table")
    show.add_argument("file", type=Path)
    validate = logic_sub.add_parser("validate", help="check logic files; exit 1 if any is invalid")
    validate.add_argument("files", type=Path, nargs="+")

    report = sub.add_parser("report", help="device, installed pack and bench rows as JSON + Markdown")
    report.add_argument("--bench", choices=["quick", "full", "none"], default="quick")
    report.add_argument("-o", "--output", type=Path, required=True, help="directory to write into")

    tune = sub.add_parser("tune", help="benchmark kernel configurations and write logic files")
    tune_sub = tune.add_subparsers(dest="op", required=True)
    tg = tune_sub.add_parser("gemm", help="tune GEMM for the running device")
    tg.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32", "tf32", "fp64"])
    tg.add_argument("--sizes", default="preset",
                    help="preset names (preset, square, skinny, batched, tiny) or MxNxK[xB], comma-separated")
    tg.add_argument("--space", default="default", choices=["default", "wide", "tiny"])
    tg.add_argument("--budget-minutes", type=float, help="stop (progress saved) after this long")
    tg.add_argument("--resume", action="store_true", help="continue an interrupted run in --out")
    tg.add_argument("--no-plot", action="store_true")
    tg.add_argument("--out", type=Path, required=True, help="directory for <arch>/ logic, journal, plot")

    pack = sub.add_parser("pack", help="build, install, check and roll back tuned packs")
    pack_sub = pack.add_subparsers(dest="action", required=True)
    build = pack_sub.add_parser("build", help="build a pack offline (no GPU of that arch needed)")
    build.add_argument("--arch", required=True,
                       help="target, e.g. sm_90 or gfx1103; several (comma-separated) write one pack each")
    build.add_argument("--logic", type=Path, help="directory of logic files (default: shipped or heuristic)")
    build.add_argument("--precompile", action="store_true", help="compile kernels for the arch offline")
    build.add_argument("--name")
    build.add_argument("--version", default="1")
    build.add_argument("-o", "--output", type=Path, required=True,
                       help="the pack file (a directory when several archs are given)")
    install = pack_sub.add_parser("install", help="verify and install a pack (the old one is kept)")
    install.add_argument("file", type=Path)
    pack_sub.add_parser("list", help="installed packs, current and previous")
    pack_sub.add_parser("verify", help="check the installed files, results and speed against the vendor")
    pack_sub.add_parser("rollback", help="switch back to the previous install")
    remove = pack_sub.add_parser("remove", help="remove the current pack (the previous one takes over)")
    remove.add_argument("directory", type=Path, nargs="?", help="an installed pack directory instead")

    bench = sub.add_parser("bench", help="time Tessera beside the vendor library")
    bench_sub = bench.add_subparsers(dest="op", required=True)
    g = bench_sub.add_parser("gemm", help="GEMM vs torch.matmul (cuBLAS / rocBLAS)")
    g.add_argument("-m", type=int)
    g.add_argument("-n", type=int)
    g.add_argument("-k", type=int)
    g.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32", "tf32", "fp64"])
    g.add_argument("--trans-a", action="store_true")
    g.add_argument("--trans-b", action="store_true")
    g.add_argument("--batch", type=int, default=1)
    g.add_argument("--quick", action="store_true", help="a preset of sizes (same as --preset quick)")
    g.add_argument("--preset", choices=["quick", "full", "interpreter"])
    g.add_argument("--rounds", type=int, default=3, help="interleaved vendor/Tessera rounds")
    g.add_argument("--json", type=Path, metavar="FILE", help="also write the results as JSON")
    r = bench_sub.add_parser("rand", help="random numbers vs torch and raw cuRAND (CuPy)")
    r.add_argument("--preset", choices=["quick", "full", "interpreter"], default="quick")
    r.add_argument("--rounds", type=int, default=3)
    r.add_argument("--json", type=Path, metavar="FILE", help="also write the results as JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    try:
        if args.command == "info":
            return _info(args)
        if args.command == "logic":
            return _logic(args)
        if args.command == "pack":
            return _pack(args)
        if args.command == "tune":
            return _tune_gemm(args)
        if args.command == "report":
            return _report(args)
        if args.op == "rand":
            return _bench_rand(args)
        return _bench_gemm(args)
    except TesseraError as exc:
        print(f"tessera: {exc}", file=sys.stderr)
        return 2


def _info(args: argparse.Namespace) -> int:
    _use_interpreter_without_gpu()
    from tessera import device_info

    info = device_info().as_dict()
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    for key, value in info.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items() if v is not None) or "unknown"
        print(f"{key:>24}: {value if value is not None else 'unknown'}")
    return 0


def _report(args: argparse.Namespace) -> int:
    """What a user posts when contributing performance or compatibility data."""
    interpreting = _use_interpreter_without_gpu()
    from tqdm import tqdm

    from tessera import device_info
    from tessera._core.timing import git_revision
    from tessera.blas.bench import PRESETS, run_case
    from tessera.tuning import packs

    info = device_info()
    installed = [{"name": p.manifest["name"], "version": p.manifest["version"],
                  "arch": p.manifest["arch"], "triton": p.manifest["runtime"].get("triton"),
                  "logic_origin": p.manifest.get("logic_origin"), "directory": str(p.directory),
                  "current": p.current}
                 for p in packs.list_packs()]
    preset = None if args.bench == "none" else ("interpreter" if interpreting else args.bench)
    cases = PRESETS[preset] if preset else []
    rows = [run_case(c, rounds=1 if interpreting else 3, info=info)
            for c in tqdm(cases, desc="report", unit="problem", disable=len(cases) < 2, file=sys.stderr)]
    data = {"created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "git_revision": git_revision(),
            "interpreter": interpreting, "device": info.as_dict(), "packs": installed, "gemm": rows}
    args.output.mkdir(parents=True, exist_ok=True)
    _write_json_atomically(args.output / "report.json", data)
    current = next((p for p in installed if p["current"]), None)
    pack_line = (f"{current['name']} {current['version']} (logic: {current['logic_origin']})"
                 if current else "none")
    lines = [f"# Tessera report — {info.name} ({info.arch})", "",
             f"Created {data['created']}; revision {data['git_revision']}.", "",
             "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in info.versions.items()]
    lines += [f"| multiprocessors | {info.multiprocessors} |", f"| warp size | {info.warp_size} |",
              f"| shared memory per block | {info.shared_memory_per_block} |",
              f"| installed pack | {pack_line} |", ""]
    if rows:
        lines += ["```", format_table(rows), "```", ""]
        if interpreting:
            lines.append("No GPU: kernels ran in Triton's CPU interpreter; times are not GPU performance.")
    markdown = args.output / "report.md"
    tmp = markdown.with_name(f".{markdown.name}.{os.getpid()}.tmp")
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, markdown)
    print(f"wrote {args.output / 'report.json'} and {markdown}")
    return 0


def _tune_gemm(args: argparse.Namespace) -> int:
    interpreting = _use_interpreter_without_gpu()
    import math

    import torch

    from tessera import device_info
    from tessera._core.timing import flushed_ms
    from tessera.blas.bench import DTYPES
    from tessera.blas.tune import SIZE_PRESETS, default_choice, gemm_tunable
    from tessera.tuning.plot import plot_results
    from tessera.tuning.tuner import Tuner, parse_sizes

    problems = parse_sizes(args.sizes, SIZE_PRESETS, width=4)
    if interpreting:
        print("No GPU: tuning in Triton's CPU interpreter; figures are not GPU performance.")
    device = device_info()
    op = gemm_tunable(args.dtype, problems, args.space, device)
    tuner = Tuner(op, args.out, resume=args.resume,
                  budget_s=None if args.budget_minutes is None else 60 * args.budget_minutes)
    path = tuner.run()
    print(f"wrote {path}")
    best = tuner.best()
    labels, tuned, default, vendor = [], [], [], []
    target = "cuda" if torch.cuda.is_available() and not interpreting else "cpu"
    for problem in problems:
        if problem not in best:
            continue
        m, n, k, batch = problem
        labels.append("x".join(map(str, problem)))
        tuned.append(best[problem][1])
        default.append(op.measure(problem, default_choice(problem, args.dtype, device)))
        shape_a, shape_b = ((batch, m, k), (batch, k, n)) if batch > 1 else ((m, k), (k, n))
        a = torch.randn(shape_a, device=target).to(DTYPES[args.dtype])
        b = torch.randn(shape_b, device=target).to(DTYPES[args.dtype])
        vendor.append(2.0 * m * n * k * batch / flushed_ms(lambda a=a, b=b: torch.matmul(a, b)) / 1e9)
    if not labels:
        print("no problem has a correct candidate yet")
        return 1
    print(f"{'problem':<24} {'tuned':>9} {'default':>9} {'vendor':>9} {'tuned/default':>13}")
    for row in zip(labels, tuned, default, vendor, strict=True):
        print(f"{row[0]:<24} {row[1]:>9.2f} {row[2]:>9.2f} {row[3]:>9.2f} {row[1] / row[2]:>13.3f}")
    gain = math.exp(sum(math.log(t / d) for t, d in zip(tuned, default, strict=True)) / len(tuned))
    print(f"geometric-mean gain of tuned over the heuristic default: x{gain:.3f}")
    if not args.no_plot:
        png = plot_results(path.with_suffix(".png"), f"GEMM {args.dtype} on {device.name}", labels,
                           {"tuned": tuned, "default (heuristic)": default, "vendor": vendor}, "TFLOP/s")
        print(f"wrote {png}")
    return 0


def _pack(args: argparse.Namespace) -> int:
    from tessera.tuning import packs

    if args.action == "build":
        archs = [a.strip() for a in args.arch.split(",") if a.strip()]
        rows = []
        for arch in archs:
            out = args.output / f"tessera-{arch}.tar.gz" if len(archs) > 1 else args.output
            result = packs.build_pack(arch, out, logic_dir=args.logic, precompile=args.precompile,
                                      name=args.name, version=args.version)
            manifest = result.manifest
            print(f"built {out}: {manifest['name']} {manifest['version']} for {arch} "
                  f"(logic: {manifest['logic_origin']}, triton {manifest['runtime']['triton']}, "
                  f"{len(manifest['files'])} files)")
            rows += [{"arch": arch, **row} for row in manifest["support"]]
        if rows:
            groups: dict[tuple, int] = {}
            for row in rows:
                reason = row.get("reason", "").splitlines()[-1] if row.get("reason") else ""
                key = (row["arch"], row["kernel"], row["dtype"], row["status"], reason)
                groups[key] = groups.get(key, 0) + 1
            print(f"\n{'arch':<9} {'kernel':<10} {'dtype':<5} {'configs':>7} {'status':<7} reason")
            for (arch, kernel, dtype, status, reason), count in groups.items():
                print(f"{arch:<9} {kernel:<10} {dtype:<5} {count:>7} {status:<7} {reason}")
            for arch in archs:
                ok = sum(r["status"] == "ok" for r in rows if r["arch"] == arch)
                total = sum(r["arch"] == arch for r in rows)
                print(f"{arch}: {ok}/{total} kernels compiled")
        return 0
    if args.action == "install":
        installed = packs.install_pack(args.file)
        print(f"installed {installed.manifest['name']} {installed.manifest['version']} into "
              f"{installed.directory} (previous install kept for `tessera pack rollback`)")
        return 0
    if args.action == "list":
        found = packs.list_packs()
        if not found:
            print(f"no packs installed under {packs.install_root()}")
        for p in found:
            state = "current" if p.current else ("previous" if p.previous else "")
            m = p.manifest
            print(f"{state:<9} {m['name']} {m['version']} {m['arch']} triton {m['runtime'].get('triton')} "
                  f"{m.get('created', '')} {p.directory}")
        return 0
    if args.action == "rollback":
        now = packs.rollback()
        print(f"current is now {now.manifest['name']} {now.manifest['version']} ({now.directory})")
        return 0
    if args.action == "remove":
        gone = packs.remove(directory=args.directory)
        print(f"removed {gone}")
        return 0
    return _pack_verify()


def _pack_verify() -> int:
    """Installed files intact, results right, and speed beside the vendor on a few problems."""
    interpreting = _use_interpreter_without_gpu()
    from tessera.blas.bench import PRESETS, run_case
    from tessera.tuning import packs

    problems = list(packs.verify_installed_files())
    for line in problems:
        print(f"problem: {line}", file=sys.stderr)
    if problems:
        return 1
    cases = PRESETS["interpreter" if interpreting else "quick"][:3]
    worst = 0.0
    for case in cases:
        row = run_case(case, rounds=1 if interpreting else 3)
        worst = max(worst, row["rel_err_vs_vendor"])
        print(f"{row['problem']:<28} {row['kernel']:<40} speedup vs vendor x{row['ratio']:.3f} "
              f"(relative difference {row['rel_err_vs_vendor']:.1e})")
    if worst > 1e-2:
        print(f"problem: results differ from the vendor's by {worst:.1e}", file=sys.stderr)
        return 1
    print("pack verified" + (" (interpreter: speeds are not GPU speeds)" if interpreting else ""))
    return 0


def _logic(args: argparse.Namespace) -> int:
    from tessera.tuning.logic import load_logic

    if args.action == "show":
        logic = load_logic(args.file)
        print(f"{logic.path}: {logic.arch} {logic.library}.{logic.op} {dict(logic.problem)}; "
              f"runtime {dict(logic.runtime)}; distance {logic.distance}"
              + (f" (max {logic.max_distance})" if logic.max_distance is not None else ""))
        print("solutions:")
        for sid, config in sorted(logic.solutions.items()):
            print(f"  {sid:>3}  {config.short()}")
        print("table:")
        for row in logic.table:
            measured = " ".join(f"{k} {v:g}" for k, v in row.measured.items())
            print(f"  {'x'.join(map(str, row.sizes)):<24} solution {row.solution:>3}  {measured}")
        return 0
    failed = 0
    for path in args.files:
        try:
            logic = load_logic(path)
        except TesseraError as exc:
            failed += 1
            print(f"invalid: {exc}", file=sys.stderr)
            continue
        print(f"ok: {path} ({logic.arch} {logic.library}.{logic.op} {logic.problem.get('dtype')}, "
              f"{len(logic.solutions)} solutions, {len(logic.table)} rows)")
    return 1 if failed else 0


def _bench_gemm(args: argparse.Namespace) -> int:
    interpreting = _use_interpreter_without_gpu()
    from tqdm import tqdm

    from tessera import InvalidArgumentError, device_info
    from tessera._core.timing import git_revision
    from tessera.blas.bench import PRESETS, GemmCase, run_case

    preset = "quick" if args.quick else args.preset
    sizes = (args.m, args.n, args.k)
    if preset is None and None in sizes:
        raise InvalidArgumentError("give -m, -n and -k, or --quick / --preset NAME")
    if preset is not None and any(v is not None for v in sizes):
        raise InvalidArgumentError("give either -m/-n/-k or a preset, not both")
    for name, value in (("-m", args.m), ("-n", args.n), ("-k", args.k), ("--batch", args.batch),
                        ("--rounds", args.rounds)):
        if value is not None and value < (1 if name in ("--batch", "--rounds") else 0):
            raise InvalidArgumentError(f"{name} must be non-negative (actual: {value})")
    if interpreting:
        print("No GPU: running Tessera's kernels in Triton's CPU interpreter (TRITON_INTERPRET=1). "
              "Times below measure the interpreter, not GPU performance.")
        if preset is not None:
            preset = "interpreter"
    cases = PRESETS[preset] if preset else [
        GemmCase(args.m, args.n, args.k, args.dtype, args.batch, args.trans_a, args.trans_b)
    ]
    info = device_info()
    print(f"device: {info.name} ({info.arch}, {info.backend}); torch {info.versions['torch']}, "
          f"triton {info.versions['triton']}")
    rows = []
    for case in tqdm(cases, desc="gemm", unit="problem", disable=len(cases) < 2, file=sys.stderr):
        rows.append(run_case(case, rounds=1 if interpreting else args.rounds, info=info))
    print(format_table(rows))
    if args.json:
        result = {
            "op": "gemm", "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "git_revision": git_revision(), "command": "tessera " + " ".join(sys.argv[1:]),
            "interpreter": interpreting, "device": info.as_dict(), "rows": rows,
        }
        _write_json_atomically(args.json, result)
        print(f"wrote {args.json}")
    return 0


def _bench_rand(args: argparse.Namespace) -> int:
    interpreting = _use_interpreter_without_gpu()
    from tessera import device_info
    from tessera._core.timing import git_revision
    from tessera.rand.bench import PRESETS, format_table, run_case

    if args.rounds < 1:
        raise TesseraError(f"--rounds must be at least 1 (actual: {args.rounds})")
    preset = "interpreter" if interpreting else args.preset
    if interpreting:
        print("No GPU: running in Triton's CPU interpreter on small sizes; not GPU performance.")
    info = device_info()
    rows = [run_case(case, rounds=1 if interpreting else args.rounds) for case in PRESETS[preset]]
    print(format_table(rows))
    if args.json:
        _write_json_atomically(args.json, {
            "op": "rand", "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "git_revision": git_revision(), "command": "tessera " + " ".join(sys.argv[1:]),
            "interpreter": interpreting, "device": info.as_dict(), "rows": rows})
        print(f"wrote {args.json}")
    return 0


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


def _write_json_atomically(path: Path, data: dict[str, Any]) -> None:
    """Write to a temporary file in the same directory, then rename: never a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(data, indent=1) + "\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
