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

Usage: python benchmarks/gemm_gluon_probe.py OUT.json [--sizes 8192,4096] [--dtypes bf16,fp16]
       [--rounds 3] [--configs BMxBNxBK:stages:warps:group,...]
"""

from __future__ import annotations

import json

import torch

from benchmarks.gemm_ws_probe import probe_arguments, shipped_row, timed_rows
from tessera._core.timing import cold_copies, run_record
from tessera.blas import explain, gemm, space
from tessera.blas.kernels.gemm_ws import WsConfig


def _parse(text: str) -> WsConfig:
    tile, stages, warps, group = text.split(":")
    bm, bn, bk = (int(v) for v in tile.split("x"))
    return WsConfig(bm, bn, bk, int(group), int(warps), int(stages))


def _forced(config: WsConfig, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    with space.forced(config):
        return gemm(a, b)


DEFAULT = "128x256x64:3:8:8,128x256x64:3:8:16,128x256x32:6:8:8,256x128x64:3:8:8,128x128x64:4:4:8"


def main() -> None:
    args = probe_arguments(DEFAULT)
    configs = [_parse(c) for c in args.configs.split(",")]
    record = run_record("python benchmarks/gemm_gluon_probe.py " + " ".join(
        f"--{k} {v}" for k, v in vars(args).items() if k != "out"))
    rows = []
    for dtype_name in args.dtypes.split(","):
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
        for size in (int(s) for s in args.sizes.split(",")):
            a = torch.randn(size, size, device="cuda").to(dtype)
            b = torch.randn(size, size, device="cuda").to(dtype)
            want = torch.matmul(a, b).float()
            scale = float(want.abs().max())
            sets = cold_copies((a, b))
            cases = {"torch": [lambda x=x, y=y: torch.matmul(x, y) for x, y in sets],
                     "shipped": [lambda x=x, y=y: gemm(x, y) for x, y in sets]}
            for config in configs:
                err = float((_forced(config, a, b).float() - want).abs().max()) / scale
                if err > 0.02:
                    rows.append({"dtype": dtype_name, "size": size, "case": config.short(),
                                 "error": f"wrong: max |diff| {err:.3g} of max |torch|"})
                    print(dtype_name, size, config.short(), rows[-1]["error"], flush=True)
                    continue
                cases[config.short()] = [lambda x=x, y=y, c=config: _forced(c, x, y) for x, y in sets]
            rows += timed_rows(cases, args.rounds, dtype_name, size)
            rows.append(shipped_row(dtype_name, size, explain(a, b)))
    with open(args.out, "w") as f:
        json.dump({**record, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
