"""`tessera logic`, `tessera tune` and `tessera pack`: tuning data, the tuner, and packs."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tessera._core.device import DeviceInfo
from tessera._core.errors import InvalidArgumentError, TesseraError
from tessera.cli.common import use_interpreter_without_gpu

if TYPE_CHECKING:
    from tessera.tuning.logic import LogicFile
    from tessera.tuning.tuner import TunableOp


def cmd_logic(args: argparse.Namespace) -> int:
    import yaml

    from tessera._core.files import write_atomically
    from tessera.tuning.logic import load_logic, merge

    if args.action == "merge":
        base, update = load_logic(args.base), load_logic(args.update)
        doc = merge(base, update)
        write_atomically(args.output, yaml.safe_dump(doc, sort_keys=False), check=load_logic)
        replaced = len({row.sizes for row in base.table} & {row.sizes for row in update.table})
        print(f"wrote {args.output}: {len(doc['table'])} rows ({replaced} replaced and "
              f"{len(update.table) - replaced} added from {args.update}), {len(doc['solutions'])} solutions")
        return 0
    if args.action == "show":
        logic = load_logic(args.file)
        print(f"{logic.path}: {logic.arch} {logic.library}.{logic.op} {dict(logic.problem)}; "
              f"runtime {dict(logic.runtime)}; distance {logic.distance}"
              + (f" (max {logic.max_distance})" if logic.max_distance is not None else "")
              + (f"; rows within {logic.wave_slack} of the nearest weighed by waves"
                 if logic.wave_slack is not None else "")
              + (f" (their ratio to the power {logic.wave_exponent})"
                 if logic.wave_exponent is not None else "")
              + (f" (their ratio capped at {logic.wave_ratio_max})"
                 if logic.wave_ratio_max is not None else "")
              + (f"; split rows only where a slice is at least {_split_depths(logic)} (or as deep as at "
                 f"their size)"
                 if logic.min_split_depth is not None else ""))
        print("solutions:")
        for sid, config in sorted(logic.solutions.items()):
            print(f"  {sid:>3}  {config.short()}")
        print("table:")
        for row in logic.table:
            measured = " ".join(f"{k} {v:g}" for k, v in row.measured.items())
            device = f"  (on {row.device})" if row.device else ""
            print(f"  {'x'.join(map(str, row.sizes)):<24} solution {row.solution:>3}  {measured}{device}")
        return 0
    failed = 0
    for path in args.files:
        try:
            logic = load_logic(path)
        except TesseraError as exc:
            failed += 1
            print(f"invalid: {exc}", file=sys.stderr)
            continue
        layout = f" {logic.problem['layout']}" if "layout" in logic.problem else ""
        unnamed = logic.unnamed_solutions
        print(f"ok: {path} ({logic.arch} {logic.library}.{logic.op} {logic.problem.get('dtype')}{layout}, "
              f"{len(logic.solutions)} solutions, {len(logic.table)} rows)"
              + (f"; no row names solution {', '.join(map(str, unnamed))}: a pack would compile it for no "
                 f"call, so remove it" if unnamed else ""))
    return 1 if failed else 0


def _split_depths(logic: LogicFile) -> str:
    """A file's ``min_split_depth`` in words: ``512 deep``, or ``256 deep from m 1, 512 from m 32``."""
    from tessera.tuning.logic import registered_ops

    rule = logic.min_split_depth
    if not isinstance(rule, tuple):
        return f"{rule:g} deep"
    key = registered_ops()[(logic.library, logic.op)].size_keys[0]
    (start, depth), *rest = rule
    return ", ".join([f"{depth:g} deep from {key} {start}", *(f"{d:g} from {key} {m}" for m, d in rest)])


def _tuning_device(interpreting: bool) -> DeviceInfo:
    """The device a tuning run measures on, after saying so when it is Triton's interpreter."""
    from tessera import device_info

    if interpreting:
        print("No GPU: tuning in Triton's CPU interpreter; figures are not GPU performance.")
    return device_info()


def _matmul_tflops(problem: tuple[int, ...], dtype: str, layout: str | None = None) -> float:
    """``torch.matmul``'s TFLOP/s on (m, n, k, batch) in ``dtype`` (bf16 … tf32), operands stored in
    ``layout`` (default NN), timed as the tuner times its candidates: from a CUDA graph over cold
    operand copies. tf32 is torch.matmul with TF32 on (off by default: plain fp32 was once timed as
    the tf32 vendor)."""
    import torch

    from tessera._core.device import torch_dtype, torch_matmul_tf32_as
    from tessera._core.timing import cold_copies, graph_ms, on_gpu
    from tessera.blas.tune import stored_operands

    m, n, k, batch = problem
    a, b = (t.to(torch_dtype(dtype)) for t in stored_operands(problem, layout,
                                                              device="cuda" if on_gpu() else "cpu"))
    with torch_matmul_tf32_as(dtype == "tf32"):
        calls = [lambda x=x, y=y: torch.matmul(x, y) for x, y in cold_copies((a, b))]
        return 2.0 * m * n * k * batch / graph_ms(calls) / 1e9


def cmd_tune_gemm(args: argparse.Namespace) -> int:
    interpreting = use_interpreter_without_gpu()

    from tessera.blas.tune import SIZE_PRESETS, default_choice, gemm_tunable, quantized_op
    from tessera.tuning.tuner import parse_sizes

    problems = parse_sizes(args.sizes, SIZE_PRESETS, width=4)
    if args.layout is not None and quantized_op(args.dtype) is not None:
        raise InvalidArgumentError(f"--layout is for float GEMM; --dtype {args.dtype} has its own fixed "
                                   f"operand layout: leave --layout out")
    if args.wave_slack is not None and quantized_op(args.dtype) is not None:
        raise InvalidArgumentError(f"--wave-slack is for float GEMM; {quantized_op(args.dtype)}'s logic "
                                   f"(--dtype {args.dtype}) weighs no rows by waves: leave it out")
    for flag, value in (("--wave-exponent", args.wave_exponent), ("--wave-ratio-max", args.wave_ratio_max)):
        if value is not None and args.wave_slack is None:
            raise InvalidArgumentError(f"{flag} shapes the waves that --wave-slack weighs rows by; "
                                       f"give --wave-slack too, or leave {flag} out")
    if args.min_split_depth is not None and quantized_op(args.dtype) is not None:
        raise InvalidArgumentError(f"--min-split-depth is for float GEMM; {quantized_op(args.dtype)}'s logic "
                                   f"(--dtype {args.dtype}) sets no limit on its splits: leave it out")
    if args.stream_k_margin is not None and quantized_op(args.dtype) is not None:
        raise InvalidArgumentError(f"--stream-k-margin is for float GEMM; {quantized_op(args.dtype)} "
                                   f"(--dtype {args.dtype}) tunes no stream-K family: leave it out")
    device = _tuning_device(interpreting)
    if quantized_op(args.dtype) is not None:
        return _tune_quantized(args, problems, device)
    op = gemm_tunable(args.dtype, problems, args.space, device, layout=args.layout)
    path, rows = _tune(op, args, problems, lambda problem: default_choice(problem, args.dtype, device),
                       lambda problem: _matmul_tflops(problem, args.dtype, args.layout))
    return _summarize(path, f"GEMM {args.dtype} {args.layout or 'NN'} on {device.name}", *rows, "vendor",
                      "TFLOP/s", args.no_plot)


def _tune_quantized(args: argparse.Namespace, problems: list[tuple[int, ...]], device: DeviceInfo) -> int:
    """``tessera tune gemm --dtype`` for the quantized ops: sizes (m, n, k); the vendor column is
    bf16 ``torch.matmul`` of the same shape."""
    from tessera.blas.tune import quantized_default, quantized_tunable

    if any(p[3] != 1 for p in problems):
        raise InvalidArgumentError(f"--dtype {args.dtype} takes no batch; got sizes {problems}")
    problems3 = [p[:3] for p in problems]
    op = quantized_tunable(args.dtype, problems3, args.space, device)
    path, rows = _tune(op, args, problems3, lambda problem: quantized_default(problem, args.dtype, device),
                       lambda problem: _matmul_tflops((*problem, 1), "bf16"))
    return _summarize(path, f"{op.op} {args.dtype} on {device.name}", *rows, "bf16 torch.matmul", "TFLOP/s",
                      args.no_plot)


def _only_families(op: TunableOp, names: str, default_config: Callable[[tuple[int, ...]], object]
                   ) -> TunableOp:
    """``op`` with its candidates cut to the kernel families named (``--families``), the heuristic's
    pick kept: a short tune of the families that can win at its sizes."""
    import dataclasses

    from tessera.tuning.logic import registered_ops

    known = registered_ops()[(op.library, op.op)].families
    wanted = {name.strip() for name in names.split(",") if name.strip()}
    unknown = sorted(wanted - set(known))
    if unknown or not wanted:
        raise InvalidArgumentError(f"--families {names!r}: {', '.join(unknown) or 'none named'} is not a "
                                   f"kernel family of {op.library}.{op.op}; its families: "
                                   f"{', '.join(sorted(known))}")
    every = op.candidates

    def candidates(problem: tuple[int, ...]) -> list[object]:
        default = default_config(problem)
        return [c for c in every(problem) if c.kernel in wanted or c == default]

    return dataclasses.replace(op, candidates=candidates)


def _tune(op: TunableOp, args: argparse.Namespace, problems: list[tuple[int, ...]],
          default_config: Callable[[tuple[int, ...]], object],
          vendor_figure: Callable[[tuple[int, ...]], float],
          ) -> tuple[Path, tuple[list[str], list[float], list[float], list[float]]]:
    """Run the tuner (``--out``, ``--resume``, ``--budget-minutes``), then for every problem it
    tuned: (label, tuned figure, the heuristic default's figure, the vendor's figure). The default's
    figure is its journaled median when it was a candidate (the same sweep as the tuned one: timed
    again minutes later, a power-limited GPU read ~10 % apart at 8192³); only the vendor is timed
    here."""
    from tessera.tuning.logic import SELECTION_RULES
    from tessera.tuning.tuner import Tuner, config_key

    if args.families:
        op = _only_families(op, args.families, default_config)
    rules = {name: getattr(args, name, None) for name in SELECTION_RULES}  # the flags this command has
    tuner = Tuner(op, args.out, resume=args.resume,
                  budget_s=None if args.budget_minutes is None else 60 * args.budget_minutes,
                  **rules, local_margin=getattr(args, "stream_k_margin", None))
    path = tuner.run()
    print(f"wrote {path}")
    for sizes, (count, reason) in sorted(tuner.unsolved().items()):
        print(f"{'x'.join(map(str, sizes))}: none of {count} candidates was correct; the first: {reason}")
    medians, best = tuner.medians(), tuner.best()
    labels, tuned, default, vendor = [], [], [], []
    for problem in problems:
        by_config = medians.get(tuple(problem))
        if not by_config:
            continue
        labels.append("x".join(map(str, problem)))
        tuned.append(best[tuple(problem)][1])  # the row written (--stream-k-margin may pass the fastest)
        config = default_config(problem)
        journaled = by_config.get(config_key(config))
        default.append(journaled if journaled is not None else op.measure(problem, config))
        vendor.append(vendor_figure(problem))
    return path, (labels, tuned, default, vendor)


def _summarize(path: Path, title: str, labels: list[str], tuned: list[float], default: list[float],
               figures: list[float], name: str, unit: str, no_plot: bool) -> int:
    """Print tuned vs heuristic default vs vendor per problem, the geometric-mean gain, and plot."""
    import math

    from tessera.tuning.plot import plot_results

    if not labels:
        print("no problem has a correct candidate yet")
        return 1
    print(f"{'problem':<24} {'tuned':>10} {'default':>10} {name:>10} {'tuned/default':>13}  ({unit})")
    for row in zip(labels, tuned, default, figures, strict=True):
        print(f"{row[0]:<24} {row[1]:>10.4g} {row[2]:>10.4g} {row[3]:>10.4g} {row[1] / row[2]:>13.3f}")
    gain = math.exp(sum(math.log(t / d) for t, d in zip(tuned, default, strict=True)) / len(tuned))
    print(f"geometric-mean gain of tuned over the heuristic default: x{gain:.3f}")
    if not no_plot:
        series = {"tuned": tuned, "default (heuristic)": default}
        if not all(math.isnan(v) for v in figures):
            series[name] = figures
        print(f"wrote {plot_results(path.with_suffix('.png'), title, labels, series, unit)}")
    return 0


def cmd_tune_gemv(args: argparse.Namespace) -> int:
    interpreting = use_interpreter_without_gpu()

    import torch

    from tessera._core.device import torch_dtype
    from tessera._core.timing import graph_ms, on_gpu
    from tessera.blas.tune import GEMV_PRESETS, gemv_tunable, shape_default
    from tessera.tuning.tuner import parse_sizes

    problems = parse_sizes(args.sizes, GEMV_PRESETS, width=2)
    device = _tuning_device(interpreting)
    target = "cuda" if on_gpu() else "cpu"
    elem, trans = torch_dtype(args.dtype.removesuffix("_t")), args.dtype.endswith("_t")

    def vendor(problem: tuple[int, ...]) -> float:
        m, n = problem
        a = torch.randn((n, m) if trans else (m, n), device=target).to(elem)
        x = torch.randn(n, device=target).to(elem)
        return a.numel() * a.element_size() / graph_ms([lambda: torch.mv(a.t() if trans else a, x)]) / 1e6

    op = gemv_tunable(args.dtype, problems, args.space, device)
    path, rows = _tune(op, args, problems, lambda problem: shape_default("gemv", args.dtype, device), vendor)
    return _summarize(path, f"gemv {args.dtype} on {device.name}", *rows, "torch.mv", "GB/s", args.no_plot)


def cmd_tune_level1(args: argparse.Namespace) -> int:
    interpreting = use_interpreter_without_gpu()

    import torch

    from tessera._core.timing import graph_ms
    from tessera.blas.tune import LEVEL1_PRESETS, level1_routine, level1_tunable, shape_default
    from tessera.tuning.tuner import parse_sizes

    op = f"level1_{args.level1_op}"
    problems = parse_sizes(args.sizes, LEVEL1_PRESETS, width=1)
    device = _tuning_device(interpreting)
    target = "cuda" if torch.cuda.is_available() and not interpreting else "cpu"
    operands, _, bytes_per_element = level1_routine(op, args.dtype, target)

    def torch_swap(x: torch.Tensor, y: torch.Tensor) -> None:
        """torch's nearest to BLAS swap (it has none): through a temporary, three copies."""
        kept = x.clone()
        x.copy_(y)
        y.copy_(kept)

    torch_equivalent = {"level1_map": lambda x, y: y.add_(x, alpha=1.5), "level1_swap": torch_swap,
                        "level1_reduce": lambda x, y: (torch.dot(x, y), torch.linalg.vector_norm(x)),
                        "level1_extreme": lambda x: (x.real.abs() + x.imag.abs() if x.is_complex()
                                                     else x.abs()).argmax()}[op]

    def vendor(problem: tuple[int, ...]) -> float:
        args_ = operands(problem)
        return problem[0] * bytes_per_element / graph_ms([lambda: torch_equivalent(*args_)]) / 1e6

    tunable = level1_tunable(op, args.dtype, problems, args.space, device)
    path, rows = _tune(tunable, args, problems, lambda problem: shape_default(op, args.dtype, device), vendor)
    return _summarize(path, f"{op} {args.dtype} on {device.name}", *rows, "torch", "GB/s", args.no_plot)


def cmd_tune_level2(args: argparse.Namespace) -> int:
    interpreting = use_interpreter_without_gpu()

    import torch

    from tessera._core.device import torch_dtype
    from tessera._core.timing import graph_ms
    from tessera.blas.tune import LEVEL2_PRESETS, level2_bytes, level2_tunable, shape_default
    from tessera.tuning.tuner import parse_sizes

    op = args.level2_op
    problems = parse_sizes(args.sizes, LEVEL2_PRESETS[op], width=2 if op == "ger" else 1)
    device = _tuning_device(interpreting)
    target = "cuda" if torch.cuda.is_available() and not interpreting else "cpu"
    elem = torch_dtype(args.dtype)

    def vendor(problem: tuple[int, ...]) -> float:
        """torch's equivalent on the same bytes: addr_, mv on the full matrix, solve_triangular."""
        m, n = (problem[0], problem[1]) if op == "ger" else (problem[0], problem[0])
        a = torch.randn(m, n, device=target) + n * torch.eye(m, n, device=target)
        x, y = torch.randn(n, device=target), torch.randn(m, device=target)
        if op != "trsv":  # solve_triangular takes no 16-bit matrices: it runs in fp32 (fp64 as asked)
            a, x, y = a.to(elem), x.to(elem), y.to(elem)
        elif elem == torch.float64:
            a, x = a.double(), x.double()
        call = {"ger": lambda: a.addr_(y, x, alpha=1.5), "symv": lambda: torch.mv(a, x),
                "trsv": lambda: torch.linalg.solve_triangular(a, x[:, None], upper=True)}[op]
        return level2_bytes(op, args.dtype, problem) / graph_ms([call]) / 1e6

    tunable = level2_tunable(op, args.dtype, problems, args.space, device)
    path, rows = _tune(tunable, args, problems, lambda problem: shape_default(op, args.dtype, device), vendor)
    return _summarize(path, f"{op} {args.dtype} on {device.name}", *rows, "torch", "GB/s", args.no_plot)


def cmd_tune_rand(args: argparse.Namespace) -> int:
    interpreting = use_interpreter_without_gpu()
    import math

    import torch

    from tessera._core.timing import flushed_ms
    from tessera.rand import space
    from tessera.rand.tune import SIZE_PRESETS, SOBOL_PRESETS, drawer, rand_tunable, split_op
    from tessera.tuning.tuner import parse_sizes

    family, _, distribution = split_op(args.rand_op)
    dtype = args.dtype or ("int32" if distribution == "bits" else "fp32")
    problems = parse_sizes(args.sizes, SOBOL_PRESETS if family == "sobol32" else SIZE_PRESETS,
                           width=2 if family == "sobol32" else 1)
    device = _tuning_device(interpreting)
    target = "cuda" if torch.cuda.is_available() and not interpreting else "cpu"

    def vendor(problem: tuple[int, ...]) -> float:
        out = drawer(args.rand_op, dtype, target)(problem)
        fill = {"uniform": out.uniform_, "normal": out.normal_}.get(distribution)
        if fill is None or family == "sobol32":
            return math.nan
        return out.numel() * out.element_size() / flushed_ms(fill) / 1e6

    op = rand_tunable(args.rand_op, dtype, problems, args.space, device)
    path, rows = _tune(op, args, problems, lambda _: space.heuristic(args.rand_op, device.arch).config,
                       vendor)
    return _summarize(path, f"rand {args.rand_op} {dtype} on {device.name}", *rows, "torch", "GB/s",
                      args.no_plot)


def cmd_pack(args: argparse.Namespace) -> int:
    from tessera.tuning import packs

    if args.action == "build":
        archs = [a.strip() for a in args.arch.split(",") if a.strip()]
        rows = []
        for arch in archs:
            out = args.output / f"tessera-{arch}.tar.gz" if len(archs) > 1 else args.output
            result = packs.build_pack(arch, out, logic_dir=args.logic, precompile=args.precompile,
                                      name=args.name, version=args.version, workers=args.jobs,
                                      progress=True)
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
        _prepare_binaries(installed.manifest["arch"])
        return 0
    if args.action == "list":
        found = packs.list_packs()
        if not found:
            print(f"no packs installed under {packs.install_root()}")
        for p in found:
            state = "current" if p.current else ("previous" if p.previous else "")
            m = p.manifest
            print(f"{state:<9} {m['name']} {m['version']} {m['arch']} triton {m['runtime'].get('triton')} "
                  f"{m.get('created', '')} {packs.binaries_state(m)} {p.directory}")
        return 0
    if args.action == "rollback":
        now = packs.rollback()
        print(f"current is now {now.manifest['name']} {now.manifest['version']} ({now.directory})")
        return 0
    if args.action == "remove":
        gone = packs.remove(directory=args.directory)
        print(f"removed {gone}")
        return 0
    return pack_verify()


def pack_verify() -> int:
    """Installed files intact, results right, and speed beside the vendor on a few problems."""
    interpreting = use_interpreter_without_gpu()
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


def _prepare_binaries(arch: str) -> None:
    """Load the pack's precompiled kernels once where a GPU of its arch is present (builds Triton's
    per-signature launcher stubs now rather than on the first call)."""
    from tessera._core.device import device_info
    from tessera.tuning import binaries

    if not binaries.installed():
        return
    info = device_info()
    if info.arch != arch:
        print(f"precompiled kernels not loaded: this machine's device is {info.arch}, the pack's {arch}")
        return
    loaded, problems = binaries.prepare()
    print(f"precompiled kernels: {loaded} loaded on {info.name}")
    for problem in problems:
        print(f"  cannot load {problem}", file=sys.stderr)
