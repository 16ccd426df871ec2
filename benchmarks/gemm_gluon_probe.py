"""The warp-specialized Gluon GEMM (``gemm_ws``) forced to a few configurations, beside cuBLAS and
the shipped choice.

Written first as a standalone probe with its own copy of the kernel (as committed in 984cffd, with
both wgmma orders: waiting for each wgmma before issuing the next measured 0.907× torch at bf16
8192³ against 1.015× with one left in flight), then shipped as ``tessera.blas.kernels.gemm_ws``;
this times that family through ``gemm`` under ``space.forced``. Each configuration is checked
against torch.matmul first (not timed if wrong), then timed with torch.matmul and the shipped
``gemm`` from CUDA graphs over cold operand copies, the cases interleaved per round. Results:
``benchmarks/results/gluon-probe-h200-e504ee4/``. Run from the repository root with it on
``PYTHONPATH`` (it shares ``gemm_ws_probe.timed_rows``).

``--dtypes fp8``: fp8 e4m3 A times column-major B, per-tensor scales, bf16 out, fast accumulation,
through ``gemm`` with the scaled use of the family (``ScaledWsConfig``) forced, against
``torch._scaled_mm(use_fast_accum=True)`` and the shipped choice. ``--dtypes tf32``: float32
with TF32 allowed on both sides, configurations with 32-deep steps (without ``--configs``,
``space.WS_TF32_SPACE``'s, TF32_CONFIGS below): the row-major B multiplied swapped where the
configuration can (``gemm_ws.swap_fits``; "swapped"), else copied K-major by gemm first ("after
the copy"), and each on a B made K-major before timing ("on K-major B": the kernel unswapped, no
copy in the call).

Usage: python benchmarks/gemm_gluon_probe.py OUT.json [--sizes 8192,4096,MxNxK] [--dtypes bf16,fp16,fp8]
       [--rounds 3] [--configs BMxBNxBK:stages:warps:group[:split][:pp|:h],...]  (pp: ping-pong,
       h: halves, each warp group a partition multiplying half of every tile)
"""

from __future__ import annotations

import itertools

import torch

from benchmarks.gemm_ws_probe import precision_for, probe_arguments, problems, shipped_row, timed_rows
from tessera._core.timing import write_result
from tessera.blas import explain, gemm, space
from tessera.blas.kernels.gemm_ws import ScaledWsConfig, WsConfig, swap_fits


def parse_config(text: str, fp8: bool) -> WsConfig:
    tile, stages, warps, group, *rest = text.split(":")
    bm, bn, bk = (int(v) for v in tile.split("x"))
    schedule = rest.pop() if rest[-1:] in (["pp"], ["h"]) else ""
    if len(rest) > 1:
        raise ValueError(f"configuration {text!r}: expected BMxBNxBK:stages:warps:group[:split][:pp|:h]")
    return (ScaledWsConfig if fp8 else WsConfig)(bm, bn, bk, int(group), int(warps), int(stages),
                                                 int(rest[0]) if rest else 1, pingpong=schedule == "pp",
                                                 halves=schedule == "h")


def forced_gemm(config: WsConfig, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    with space.forced(config):
        return gemm(a, b, precision=precision_for(a))


def forced_fp8(config: WsConfig, a: torch.Tensor, b: torch.Tensor, one: torch.Tensor) -> torch.Tensor:
    """fp8 A (row-major) times B (column-major), per-tensor scales, bf16 out, fast accumulation."""
    with space.forced(config):
        return gemm(a, b, scale_a=one, scale_b=one, fast_accum=True)


def _tf32_path(config: WsConfig) -> str:
    """How a tf32 call with a row-major B runs ``config``: swapped, or after gemm's K-major copy."""
    return " swapped" if swap_fits(config) else " after the copy"


DEFAULT = "128x256x64:3:8:8,128x256x64:3:8:16,128x256x32:6:8:8,256x128x64:3:8:8,128x128x64:4:4:8"
TF32_CONFIGS = ("128x256x32:3:8:8:2,256x128x32:3:8:8:2,128x128x32:5:8:8,128x128x32:5:4:8,"
                "128x128x32:4:4:8:2:pp,64x128x32:6:4:8")


def main() -> None:
    args, record = probe_arguments(DEFAULT, "benchmarks/gemm_gluon_probe.py")
    rows = []
    one = torch.ones((), device="cuda")
    for dtype_name, fp8, size, a, b, want, scale, sets, cases in problems(args, one):
        scaled = dict(scale_a=one, scale_b=one, fast_accum=True) if fp8 else {"precision": precision_for(a)}
        listed = TF32_CONFIGS if dtype_name == "tf32" and args.configs == DEFAULT else args.configs
        # tf32: the row-major B multiplied swapped where a configuration can (else copied K-major
        # first, as for gemm_tma), and each configuration on a K-major B made before timing (the
        # kernel alone, unswapped)
        layouts = [("", sets)]
        if dtype_name == "tf32":
            layouts.append((" on K-major B", [(x, y.t().contiguous().t()) for x, y in sets]))
        for config, (suffix, operands) in itertools.product(
                [parse_config(c, fp8) for c in listed.split(",")], layouts):
            name = config.short() + (suffix or (_tf32_path(config) if dtype_name == "tf32" else ""))
            x0, y0 = operands[0]
            with space.forced(config):
                taken = explain(x0, y0, **scaled).config
            try:
                if taken != config:
                    raise RuntimeError(f"the call does not take the family: it ran {taken.short()}")
                got = forced_fp8(config, x0, y0, one) if fp8 else forced_gemm(config, x0, y0)
                err = float((got.float() - want).abs().max()) / scale
                why = f"wrong: max |diff| {err:.3g} of max |torch|" if err > 0.02 else None
            except Exception as exc:  # noqa: BLE001 - a probe reports what failed and goes on
                why = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:200]}"
            if why is not None:
                rows.append({"dtype": dtype_name, "size": size, "case": name, "error": why})
                print(dtype_name, size, name, why, flush=True)
                continue
            cases[name] = [(lambda x=x, y=y, c=config: forced_fp8(c, x, y, one)) if fp8 else
                           (lambda x=x, y=y, c=config: forced_gemm(c, x, y)) for x, y in operands]
        rows += timed_rows(cases, args.rounds, dtype_name, size)
        rows.append(shipped_row(dtype_name, size, explain(a, b, **scaled)))
    write_result(args.out, {**record, "rows": rows})


if __name__ == "__main__":
    main()
