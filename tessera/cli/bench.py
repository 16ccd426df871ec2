"""`tessera bench gemm|blas|rand` and `tessera report`: Tessera beside the vendor, same process."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from tessera._core.errors import TesseraError
from tessera._core.files import write_atomically
from tessera.cli.common import use_interpreter_without_gpu, write_json_atomically

if TYPE_CHECKING:
    from pathlib import Path

    from tessera._core.device import DeviceInfo


def _provenance(info: DeviceInfo, interpreting: bool, *, command: bool) -> dict[str, object]:
    """The fields a bench or report JSON opens with: when, at which revision, with which launch
    settings, in the interpreter or not, on which device (and, with ``command``, the command line)."""
    from tessera._core.timing import git_revision, launch_settings

    fields: dict[str, object] = {"created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                 "git_revision": git_revision()}
    if command:
        fields["command"] = "tessera " + " ".join(sys.argv[1:])
    return {**fields, "settings": launch_settings(), "interpreter": interpreting,
            "device": info.as_dict()}


def _write_rows(path: Path | None, op: str, rows: list[dict], info: DeviceInfo, interpreting: bool) -> None:
    """A bench command's rows as JSON at ``path`` (none: nothing), after its provenance."""
    if path is not None:
        write_json_atomically(path, {"op": op, **_provenance(info, interpreting, command=True), "rows": rows})
        print(f"wrote {path}")


def cmd_bench_gemm(args: argparse.Namespace) -> int:
    interpreting = use_interpreter_without_gpu()
    from tqdm import tqdm

    from tessera import InvalidArgumentError, device_info
    from tessera.blas.bench import PRESETS, GemmCase, format_table, run_case

    preset = "quick" if args.quick else args.preset
    sizes = (args.m, args.n, args.k)
    if preset is None and None in sizes:
        raise InvalidArgumentError("give -m, -n and -k, or --quick / --preset NAME")
    if preset is not None and any(v is not None for v in sizes):
        raise InvalidArgumentError("give either -m/-n/-k or a preset, not both")
    for name, value in (("-m", args.m), ("-n", args.n), ("-k", args.k), ("--batch", args.batch),
                        ("--rounds", args.rounds)):
        least = 1 if name in ("--batch", "--rounds") else 0
        if value is not None and value < least:
            raise InvalidArgumentError(f"{name} must be {'at least 1' if least else 'non-negative'} "
                                       f"(actual: {value})")
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
        rows.append(run_case(case, rounds=1 if interpreting else args.rounds, info=info,
                             vs_heuristic=args.vs_heuristic))
    print(format_table(rows))
    _write_rows(args.json, "gemm", rows, info, interpreting)
    return 0


def cmd_bench_blas(args: argparse.Namespace) -> int:
    """BLAS level 1 and 2 beside torch and the copy bandwidth; exit status 1 if a check failed."""
    interpreting = use_interpreter_without_gpu()
    from tqdm import tqdm

    from tessera import InvalidArgumentError, device_info
    from tessera.blas.bench_level12 import PRESETS, ROUTINES, BlasCase, ceiling_copy, format_table, run_case

    if args.rounds < 1:
        raise InvalidArgumentError(f"--rounds must be at least 1 (actual: {args.rounds})")
    if args.routines is None:
        if any(v is not None for v in (args.n, args.m, args.dtype, args.inc, args.batch)):
            raise InvalidArgumentError("-n, -m, --dtype, --inc and --batch need -f ROUTINE[,ROUTINE…]")
        preset = "interpreter" if interpreting else args.preset
        cases = PRESETS[preset]
    else:
        names = [name.strip() for name in args.routines.split(",") if name.strip()]
        unknown = [name for name in names if name not in ROUTINES]
        if unknown or not names:
            raise InvalidArgumentError(f"-f takes routines among {', '.join(ROUTINES)} "
                                       f"(actual: {args.routines!r})")
        if args.n is None:
            raise InvalidArgumentError("-f needs -n (vector length, or the matrix's columns)")
        given = {key: value for key, value in (("dtype", args.dtype), ("m", args.m), ("inc", args.inc),
                                               ("batch", args.batch)) if value is not None}
        cases = [BlasCase(name, args.n, **given) for name in names]  # BlasCase checks the values
    if interpreting:
        print("No GPU: running Tessera's kernels in Triton's CPU interpreter (TRITON_INTERPRET=1). "
              "Times below measure the interpreter, not GPU performance.")
    info = device_info()
    print(f"device: {info.name} ({info.arch}, {info.backend}); torch {info.versions['torch']}, "
          f"triton {info.versions['triton']}")
    copy = ceiling_copy(cases)  # one ceiling for the whole run
    rounds = 1 if interpreting else args.rounds
    rows = [run_case(case, rounds, copy)
            for case in tqdm(cases, desc="blas", unit="routine", disable=len(cases) < 2, file=sys.stderr)]
    print(format_table(rows))
    _write_rows(args.json, "blas", rows, info, interpreting)
    wrong = [row["problem"] for row in rows if not row["correct"]]
    if wrong:
        print(f"tessera: wrong results (relative error over the dtype's bound): {', '.join(wrong)}",
              file=sys.stderr)
    return 1 if wrong else 0


def cmd_bench_rand(args: argparse.Namespace) -> int:
    interpreting = use_interpreter_without_gpu()
    from tessera import device_info
    from tessera.rand.bench import PRESETS, format_table, run_case

    if args.rounds < 1:
        raise TesseraError(f"--rounds must be at least 1 (actual: {args.rounds})")
    preset = "interpreter" if interpreting else args.preset
    if interpreting:
        print("No GPU: running in Triton's CPU interpreter on small sizes; not GPU performance.")
    info = device_info()
    rows = [run_case(case, rounds=1 if interpreting else args.rounds) for case in PRESETS[preset]]
    print(format_table(rows))
    _write_rows(args.json, "rand", rows, info, interpreting)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """What a user posts when contributing performance or compatibility data."""
    interpreting = use_interpreter_without_gpu()
    from tqdm import tqdm

    from tessera import device_info
    from tessera.blas import bench_level12
    from tessera.blas.bench import PRESETS, format_table, run_case
    from tessera.tuning import packs

    args.output.mkdir(parents=True, exist_ok=True)  # before the benchmark: a bad path fails at once

    info = device_info()
    installed = [{"name": p.manifest["name"], "version": p.manifest["version"],
                  "arch": p.manifest["arch"], "triton": p.manifest["runtime"].get("triton"),
                  "logic_origin": p.manifest.get("logic_origin"), "directory": str(p.directory),
                  "binaries": packs.binaries_state(p.manifest), "current": p.current}
                 for p in packs.list_packs()]
    preset = None if args.bench == "none" else ("interpreter" if interpreting else args.bench)
    cases = PRESETS[preset] if preset else []
    rounds = 1 if interpreting else 3
    rows = [run_case(c, rounds=rounds, info=info)
            for c in tqdm(cases, desc="report", unit="problem", disable=len(cases) < 2, file=sys.stderr)]
    blas_cases = bench_level12.PRESETS[preset] if preset else []  # level 1/2 rows of the same preset
    copy = bench_level12.ceiling_copy(blas_cases) if blas_cases else None
    blas_rows = [bench_level12.run_case(c, rounds, copy) for c in blas_cases]
    data = {**_provenance(info, interpreting, command=False), "packs": installed, "gemm": rows,
            "blas": blas_rows}
    write_json_atomically(args.output / "report.json", data)
    current = next((p for p in installed if p["current"]), None)
    pack_line = (f"{current['name']} {current['version']} (logic: {current['logic_origin']}; "
                 f"{current['binaries']})" if current else "none")
    lines = [f"# Tessera report — {info.name} ({info.arch})", "",
             f"Created {data['created']}; revision {data['git_revision']}.", "",
             "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in info.versions.items()]
    lines += [f"| multiprocessors | {info.multiprocessors} |", f"| warp size | {info.warp_size} |",
              f"| shared memory per block | {info.shared_memory_per_block} |",
              f"| installed pack | {pack_line} |", ""]
    if rows:
        lines += ["```", format_table(rows), "```", ""]
    if blas_rows:
        lines += ["```", bench_level12.format_table(blas_rows), "```", ""]
    if (rows or blas_rows) and interpreting:
        lines.append("No GPU: kernels ran in Triton's CPU interpreter; times are not GPU performance.")
    markdown = args.output / "report.md"
    write_atomically(markdown, "\n".join(lines) + "\n")
    print(f"wrote {args.output / 'report.json'} and {markdown}")
    return 0
