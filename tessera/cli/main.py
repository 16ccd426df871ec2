"""The ``tessera`` command: the parser, dispatch, and ``tessera info``.

Commands live beside this file: ``bench.py`` (bench gemm|blas|rand, report) and ``tuning.py`` (logic,
tune, pack). Without a GPU the kernels run in Triton's CPU interpreter: commands switch it on before
any kernel is imported, say so, and limit presets to sizes the interpreter finishes in seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path

from tessera._core.errors import TesseraError
from tessera.cli.bench import cmd_bench_blas, cmd_bench_gemm, cmd_bench_rand, cmd_report
from tessera.cli.common import use_interpreter_without_gpu
from tessera.cli.tuning import (
    cmd_logic,
    cmd_pack,
    cmd_tune_gemm,
    cmd_tune_gemv,
    cmd_tune_level1,
    cmd_tune_level2,
    cmd_tune_rand,
)
from tessera.tuning.logic import LAYOUTS, step_start_problem


def _run_options(parser: argparse.ArgumentParser) -> None:
    """The options every ``tessera tune`` subcommand shares (budget, resume, plot, output)."""
    parser.add_argument("--budget-minutes", type=_positive, help="stop (progress saved) after this long")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted run in --out")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--max-distance", type=_non_negative, metavar="D",
                        help="the logic applies within this log distance of a tuned size (sum of squared "
                             "natural-log ratios, square-rooted; 0.69 = one size doubled); farther, the "
                             "heuristic decides. Default: no limit (the nearest row always applies)")
    parser.add_argument("--families", metavar="NAMES",
                        help="time only these kernel families, comma-separated (e.g. gemm_tma,gemm_ws); "
                             "the heuristic's own pick is always timed. Default: the whole space")
    parser.add_argument("--out", type=Path, required=True, help="directory for <arch>/ logic, journal, plot")


def _number(text: str, *, positive: bool) -> float:
    """argparse type: a number > 0 (``positive``) or ≥ 0; anything else, NaN included, an error."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 if positive else value >= 0):
        kind = "positive" if positive else "non-negative"
        raise argparse.ArgumentTypeError(f"{text!r} is not a {kind} number")
    return value


def _non_negative(text: str) -> float:
    return _number(text, positive=False)


def _exponent(text: str) -> float:
    """argparse type: a number in (0, 1]."""
    value = _number(text, positive=True)
    if value > 1:
        raise argparse.ArgumentTypeError(f"{text!r} is above 1 (a wave exponent damps, in (0, 1])")
    return value


def _finite_from_one(meaning: str) -> Callable[[str], float]:
    """argparse type: a finite number of at least 1; ``meaning`` says what it is when refused."""
    def parse(text: str) -> float:
        value = _number(text, positive=True)
        if not 1 <= value < math.inf:
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number of at least 1 ({meaning})")
        return value

    return parse


_ratio_cap = _finite_from_one("a cap on how much faster a row's waves may make it")
_depth = _finite_from_one("the K a split-K slice must multiply at least")


def _split_depth(text: str) -> float | tuple[tuple[int, float], ...]:
    """``--min-split-depth``: one depth (``512``), or steps by M, each from its M up (``1:256,32:512``)."""
    if ":" not in text:
        return _depth(text)
    steps: list[tuple[int, float]] = []
    for part in text.split(","):
        start, _, depth = part.partition(":")
        try:
            m: int | str = int(start)
        except ValueError:
            m = start
        problem = step_start_problem(m, steps[-1][0] if steps else None, "m")
        if problem:
            raise argparse.ArgumentTypeError(
                f"{part!r} in {text!r}: the step's M {problem}; each step is M:DEPTH (e.g. 1:256,32:512)")
        steps.append((int(m), _depth(depth)))
    return tuple(steps)


def _positive(text: str) -> float:
    return _number(text, positive=True)


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
    merge = logic_sub.add_parser("merge", help="fold a partial re-tune into a logic file: UPDATE's rows "
                                               "replace BASE's at the same sizes and add new ones")
    merge.add_argument("base", type=Path)
    merge.add_argument("update", type=Path)
    merge.add_argument("-o", "--output", type=Path, required=True,
                       help="file to write (may be BASE itself; written atomically, checked by loading)")

    report = sub.add_parser("report", help="device, installed pack and bench rows as JSON + Markdown")
    report.add_argument("--bench", choices=["quick", "full", "none"], default="quick")
    report.add_argument("-o", "--output", type=Path, required=True, help="directory to write into")

    tune = sub.add_parser("tune", help="benchmark kernel configurations and write logic files")
    tune_sub = tune.add_subparsers(dest="op", required=True)
    tg = tune_sub.add_parser("gemm", help="tune GEMM for the running device")
    tg.add_argument("--dtype", default="bf16",
                    choices=["bf16", "fp16", "fp32", "tf32", "tf32x3", "fp64", "fp8e4m3", "fp8e5m2",
                             "fp8e4m3_fast", "fp8e5m2_fast", "int8",
                             "int4_bf16", "int4_fp16", "int8_bf16", "int8_fp16"],
                    help="float GEMM; fp8/int8 operands (op gemm_scaled); weight-only intN_act (op gemm_wq)")
    tg.add_argument("--sizes", default="preset",
                    help="preset names (preset, square, skinny, prefill, shortk, batched, wave, tiny) "
                         "or MxNxK[xB], comma-separated")
    tg.add_argument("--space", default="default", choices=["default", "wide", "tiny"])
    tg.add_argument("--layout", choices=list(LAYOUTS),
                    help="operands' layout, A then B (N row-major, T column-major; NT is x @ W.t()): "
                         "writes that layout's logic file, which refines the dtype's (default: NN, "
                         "the dtype's own file)")
    tg.add_argument("--wave-slack", type=_non_negative, metavar="S",
                    help="float GEMM: write S into the logic file, so that a size with no row of its own "
                         "weighs the rows within S of its nearest by their tiles' waves there (what a "
                         "file merged into must carry as well). Default: the nearest row decides")
    tg.add_argument("--wave-exponent", type=_exponent, metavar="E",
                    help="with --wave-slack: write E into the logic file, so that the waves' ratio is "
                         "raised to E (under 1: trusted less). Default: 1")
    tg.add_argument("--wave-ratio-max", type=_ratio_cap, metavar="R",
                    help="with --wave-slack: write R into the logic file, so that a row is scaled up by "
                         "its waves at most R times (a row timed far under a wave carried to a full one "
                         "speeds up less than its waves say). Default: no cap")
    tg.add_argument("--min-split-depth", type=_split_depth, metavar="D",
                    help="float GEMM: write D into the logic file, so that a split-K row serves only sizes "
                         "whose K slices are at least D deep, or as deep as at its own size (split-K "
                         "rows stretched to short K lost to the rows they displaced); or steps by M, "
                         "M:D,M:D (1:256,32:512: 256 from M = 1, 512 from M = 32). Default: no limit")
    tg.add_argument("--stream-k-margin", type=_non_negative, metavar="M",
                    help="float GEMM: a stream-K configuration takes a size's row only where it beats "
                         "the best data-parallel one by more than this share (0.05: 5 %%); its figure "
                         "does not carry to the neighbours that row also serves. Default: the fastest")
    _run_options(tg)
    tv = tune_sub.add_parser("gemv", help="tune BLAS gemv's tile for the running device")
    tv.add_argument("--dtype", default="bf16",
                    choices=["fp16", "bf16", "fp32", "fp64", "fp16_t", "bf16_t", "fp32_t", "fp64_t"],
                    help="matrix dtype; _t: op(A)'s columns contiguous (gemv with trans=True)")
    tv.add_argument("--sizes", default="default",
                    help="presets (default, tiny) or MxN of op(A), comma-separated")
    tv.add_argument("--space", default="default", choices=["default", "tiny"])
    _run_options(tv)
    tl1 = tune_sub.add_parser("level1", help="tune a BLAS level-1 kernel's launch shape (this device)")
    tl1.add_argument("--op", dest="level1_op", required=True, choices=["map", "swap", "reduce", "extreme"],
                     help="map: axpy/scal/copy/rot (timed on axpy); swap; reduce: dot/dotc/asum/nrm2 "
                          "(timed on dot and nrm2 together); extreme: iamax/iamin (timed on iamax)")
    tl1.add_argument("--dtype", default="fp32",
                     choices=["fp16", "bf16", "fp32", "fp64", "complex64", "complex128"])
    tl1.add_argument("--sizes", default="default",
                     help="presets (default, tiny) or vector lengths, comma-separated")
    tl1.add_argument("--space", default="default", choices=["default", "tiny"])
    _run_options(tl1)
    tl2 = tune_sub.add_parser("level2", help="tune BLAS ger's, symv's or trsv's launch shape (this device)")
    tl2.add_argument("--op", dest="level2_op", required=True, choices=["ger", "symv", "trsv"])
    tl2.add_argument("--dtype", default="fp32", choices=["fp16", "bf16", "fp32", "fp64"])
    tl2.add_argument("--sizes", default="default",
                     help="presets (default, tiny) or sizes (ger: MxN; symv, trsv: N), comma-separated")
    tl2.add_argument("--space", default="default", choices=["default", "tiny"])
    _run_options(tl2)
    tr = tune_sub.add_parser("rand", help="tune a random-number kernel's launch configuration")
    tr.add_argument("--op", dest="rand_op", required=True,
                    help="generator_distribution: philox_{bits,uniform,normal}, "
                         "mrg32k3a_{bits,uniform,normal}, sobol32_{bits,uniform}")
    tr.add_argument("--dtype", choices=["int32", "fp16", "bf16", "fp32", "fp64"],
                    help="output dtype (default: int32 for bits, else fp32)")
    tr.add_argument("--sizes", default="default",
                    help="presets (default, large, tiny) or N (sobol32: POINTSxDIMS), comma-separated")
    tr.add_argument("--space", default="default", choices=["default", "tiny"])
    _run_options(tr)

    pack = sub.add_parser("pack", help="build, install, check and roll back tuned packs")
    pack_sub = pack.add_subparsers(dest="action", required=True)
    build = pack_sub.add_parser("build", help="build a pack offline (no GPU of that arch needed)")
    build.add_argument("--arch", required=True,
                       help="target, e.g. sm_90 or gfx1103; several (comma-separated) write one pack each")
    build.add_argument("--logic", type=Path, help="directory of logic files (default: shipped or heuristic)")
    build.add_argument("--precompile", action="store_true", help="compile kernels for the arch offline")
    build.add_argument("-j", "--jobs", type=int, default=None,
                       help="compiler processes at once with --precompile (default: one a CPU, at most 8)")
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
    g.add_argument("--dtype", default="bf16",
                   choices=["bf16", "fp16", "fp32", "tf32", "tf32x3", "bf16x9", "bf16x6", "fp64"],
                   help="tf32x3 / bf16x9 / bf16x6: float32 as three TF32 products / nine or six bf16 "
                        "products, against the vendor's IEEE float32")
    g.add_argument("--trans-a", action="store_true")
    g.add_argument("--trans-b", action="store_true")
    g.add_argument("--batch", type=int, default=1)
    g.add_argument("--quick", action="store_true", help="a preset of sizes (same as --preset quick)")
    g.add_argument("--preset", choices=["quick", "full", "grid", "fp32", "interpreter"],
                   help="grid: squares 1024…16384 in bf16, fp16, tf32, fp32, tf32x3, bf16x9 and bf16x6; "
                        "fp32: fp32, tf32x3, bf16x9 and bf16x6 squares 1024…8192")
    g.add_argument("--rounds", type=int, default=3, help="interleaved vendor/Tessera rounds")
    g.add_argument("--vs-heuristic", action="store_true",
                   help="also time the untuned heuristic's pick (logic files ignored): the tuned gain")
    g.add_argument("--json", type=Path, metavar="FILE", help="also write the results as JSON")
    bl = bench_sub.add_parser("blas", help="BLAS level 1 and 2 vs torch, as % of the copy bandwidth")
    bl.add_argument("--preset", choices=["quick", "full", "interpreter"], default="quick",
                    help="full: level 1 at 2^26 fp32, level 2 at 8192² bf16 (trsv fp32)")
    bl.add_argument("-f", dest="routines", metavar="ROUTINE[,ROUTINE…]",
                    help="axpy, scal, copy, swap, rot, dot, nrm2, asum, iamax, gemv_n, gemv_t, symv, ger, "
                         "trsv (instead of a preset)")
    bl.add_argument("-n", type=int, help="with -f: vector length, or the matrix's columns")
    bl.add_argument("-m", type=int, help="with -f: gemv / ger rows (default: n)")
    bl.add_argument("--dtype", choices=["fp16", "bf16", "fp32", "fp64"], help="with -f (default fp32)")
    bl.add_argument("--inc", type=int, help="with -f: level-1 increment of x and y (default 1)")
    bl.add_argument("--batch", type=int, help="with -f: strided-batched, this many vectors or matrices "
                                             "(dot, nrm2, asum, iamax, gemv_n, gemv_t; default 1)")
    bl.add_argument("--rounds", type=int, default=3, help="alternating Tessera / torch / copy rounds")
    bl.add_argument("--json", type=Path, metavar="FILE", help="also write the results as JSON")
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
            return cmd_logic(args)
        if args.command == "pack":
            return cmd_pack(args)
        if args.command == "tune":
            return {"rand": cmd_tune_rand, "gemv": cmd_tune_gemv, "level1": cmd_tune_level1,
                    "level2": cmd_tune_level2}.get(args.op, cmd_tune_gemm)(args)
        if args.command == "report":
            return cmd_report(args)
        return {"rand": cmd_bench_rand, "blas": cmd_bench_blas}.get(args.op, cmd_bench_gemm)(args)
    except TesseraError as exc:
        print(f"tessera: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader stopped early (`tessera logic show … | head`): not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second one at exit
        return 141  # what a shell reports for a process ended by SIGPIPE
    except OSError as exc:  # a path given on the command line cannot be read or written
        print(f"tessera: {exc.filename or ''}: {exc.strerror or exc}; check the path and its "
              f"permissions", file=sys.stderr)
        return 2


def _info(args: argparse.Namespace) -> int:
    use_interpreter_without_gpu()
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
