"""Weight-only decode with a register cap: does occupancy free the latency-bound kernels?

Nsight Compute (ncu-h200-10d7724) found the decode kernels latency-bound: W4A16 M = 1 `gemm_wq`
uses 126 registers a thread (2 blocks of 8 warps an SM, 25 % occupancy), M = 16 228 (12.5 %),
W8A16 M = 1 `gemv_wq` 31 %. Triton's ``maxnreg`` option caps the registers a thread may use
(ptxas spills what does not fit). Here the shipped configuration of each decode row is timed
with no cap, 96 and 72, alternating the caps in each of three rounds, beside torch.matmul on
the bf16 weights, from CUDA graphs over four weight copies (cold L2) as `quantized.py` times.
Each variant records the registers and spills of the binary it ran (the launch caches and the
repeat-call recipes are dropped between variants, or the replays would keep the first binary).

Usage: python benchmarks/wq_maxnreg.py OUT.json
"""

from __future__ import annotations

import statistics
import sys

import torch

from tessera._core import launch
from tessera._core.timing import graph_ms, run_record, write_result
from tessera.blas import gemm_wq, quantize_weight
from tessera.blas import quantized as wq_api
from tessera.blas.kernels import gemm_wq as wq_kernels

N = K = 8192
COPIES = 4
CAPS = (None, 96, 72)
ROWS = ((4, 1), (4, 16), (8, 1), (8, 16))
_plain_options = launch.launch_options


def cap_registers(cap: int | None) -> None:
    """Compile the weight-only main kernels (those with a BITS constexpr) with ``maxnreg=cap``."""
    def options(constexprs: dict) -> dict:
        extra = {"maxnreg": cap} if cap is not None and "BITS" in constexprs else {}
        return _plain_options(constexprs) | extra
    launch.launch_options = options
    for launcher in (wq_kernels._launch, wq_kernels._launch_gemv):
        launcher._cache.clear()  # launch keys do not hold the cap: compile (or find) it again
    wq_api._RECIPES.clear()  # repeat calls replay the binaries of their first call


def registers(x: torch.Tensor, q: object) -> str:
    with launch.recording() as calls:
        gemm_wq(x, q)
    torch.cuda.synchronize()
    out = []
    for call in calls:
        found = call.launcher.compiled_for(call)
        if found is not None:
            kernel = found[0]
            out.append(f"{getattr(kernel, 'name', '?')}: {getattr(kernel, 'n_regs', '?')} regs, "
                       f"{getattr(kernel, 'n_spills', '?')} spills")
    return "; ".join(out)


def main() -> None:
    weights = [torch.randn(K, N, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(COPIES)]
    rows = []
    for bits, m in ROWS:
        qs = [quantize_weight(w, bits=bits, group_size=128) for w in weights]
        x = torch.randn(m, K, device="cuda", dtype=torch.bfloat16)
        want = torch.matmul(x.float(), weights[0].float())
        ours = [lambda x=x, q=q: gemm_wq(x, q) for q in qs]
        theirs = [lambda x=x, w=w: torch.matmul(x, w) for w in weights]
        times: dict[str, list[float]] = {}
        regs: dict[str, str] = {}
        errors: dict[str, float] = {}
        for _ in range(3):
            for cap in CAPS:
                cap_registers(cap)
                name = str(cap)
                got = gemm_wq(x, qs[0]).float()
                errors[name] = ((got - want).norm() / want.norm()).item()
                regs[name] = registers(x, qs[0])
                times.setdefault(name, []).append(graph_ms(ours))
            times.setdefault("torch", []).append(graph_ms(theirs))
        base = statistics.median(times["torch"])
        for cap in CAPS:
            name = str(cap)
            ms = statistics.median(times[name])
            rows.append({"bits": bits, "m": m, "maxnreg": cap, "ms": ms, "torch_ms": base,
                         "vs_torch": base / ms, "samples_ms": times[name], "binaries": regs[name],
                         "rel_err_vs_bf16_weights": errors[name]})
            print(f"W{bits}A16 M={m:<3} maxnreg {name:>5}: {ms * 1e3:6.1f} us  {base / ms:.2f}x torch "
                  f"({base * 1e3:.1f} us)  err {errors[name]:.1e}  [{regs[name]}]", flush=True)
    cap_registers(None)
    write_result(sys.argv[1], {**run_record("python benchmarks/wq_maxnreg.py OUT.json"), "rows": rows})


if __name__ == "__main__":
    main()
