"""Launch-configuration sweep of the rand kernels on the GPU (2^28 fp32 values each).

Prints GB/s of output for each (kernel, BLOCK, num_warps) beside the copy bandwidth of the same
run and writes JSON: the evidence behind the defaults in tessera/rand/kernels/.
Usage: python benchmarks/sweep_rand.py OUT.json [philox] [mrg] [sobol]   (default: all three)
"""

from __future__ import annotations

import functools
import json
import sys

import torch

from tessera._core.device import device_info
from tessera._core.timing import back_to_back_ms, git_revision
from tessera.rand.kernels.mrg import launch_mrg
from tessera.rand.kernels.philox import launch_stream
from tessera.rand.kernels.sobol import direction_numbers, launch_sobol

N = 1 << 28


def gbs(nbytes: int, fn, *args, **kwargs) -> float:
    return nbytes / back_to_back_ms(functools.partial(fn, *args, **kwargs)) / 1e6


def main() -> None:
    out = torch.empty(N, device="cuda")
    rows = []
    src = torch.empty(N, device="cuda")
    copy = gbs(2 * 4 * N, out.copy_, src)
    rows.append({"kernel": "copy", "gbs": copy})
    bf16 = torch.empty(N, device="cuda", dtype=torch.bfloat16)
    which = set(sys.argv[2:]) or {"philox", "mrg", "sobol"}
    for kind, name in ((1, "philox uniform"), (2, "philox normal")) if "philox" in which else ():
        for block in (128, 256, 512, 1024):
            for warps in (2, 4, 8):
                if block // (32 * warps) < 1:
                    continue
                rate = gbs(4 * N, launch_stream, out, kind, 1, 0, 0, 0.0, 1.0, block, warps)
                rows.append({"kernel": name, "block": block, "num_warps": warps, "gbs": rate})
                print(f"{name:16} BLOCK={block:5} warps={warps} {rate:7.0f} GB/s", flush=True)
    for block in (256, 512, 1024) if "philox" in which else ():
        for warps in (2, 4, 8):
            rate = gbs(2 * N, launch_stream, bf16, 2, 1, 0, 0, 0.0, 1.0, block, warps)
            rows.append({"kernel": "philox normal bf16", "block": block, "num_warps": warps, "gbs": rate})
            print(f"philox normal bf16 BLOCK={block:5} warps={warps} {rate:7.0f} GB/s", flush=True)
    for block in (64, 128, 256) if "mrg" in which else ():
        for chunk in (256, 1024, 4096):
            rate = gbs(4 * N, launch_mrg, out, 1, 1, 0, 0, 0.0, 1.0, block=block, chunk=chunk)
            rows.append({"kernel": "mrg uniform", "block": block, "chunk": chunk, "gbs": rate})
            print(f"mrg uniform BLOCK={block:4} chunk={chunk:5} {rate:7.0f} GB/s", flush=True)
    for dims in (1, 32, 1024) if "sobol" in which else ():
        points = torch.empty(N // dims, dims, device="cuda")
        table = torch.from_numpy(direction_numbers()[:dims].T.copy().view("int32")).cuda()
        for tile in (256, 1024, 2048):
            for steps in (4, 16, 64):
                pts = max(1, tile // min(dims, 32))
                rate = gbs(4 * N, launch_sobol, points, table, None, 0, 1, points=pts, steps=steps)
                rows.append({"kernel": "sobol uniform", "dims": dims, "points": pts, "steps": steps,
                             "gbs": rate})
                print(f"sobol d={dims:4} points={pts:5} steps={steps:3} {rate:7.0f} GB/s", flush=True)
    print(f"copy {copy:.0f} GB/s (read + write)")
    info = device_info()
    result = {"device": info.name, "arch": info.arch, "versions": info.versions, "git": git_revision(),
              "rows": rows}
    with open(sys.argv[1], "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
