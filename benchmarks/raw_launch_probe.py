"""Where a replayed launch with three host tensor descriptors spends its host time (Triton 3.6, GPU).

Times apart, in loops of back-to-back calls (``per_call_us``, 5 rounds, median): the replay as
``compiled.run`` takes it, its steps (the replay's descriptor copies, Triton's
``make_tensordesc_arg``, the ``fill_tma_descriptor`` C call), and the kernel's C launcher called
directly with the expanded arguments ready (``launch.raw_launcher``; without a cache, then with
maps kept by address), beside torch.add and repeat ``gemm`` / torch.matmul calls for the host's
speed; then a cProfile of repeat bf16 1024³ calls. The kernel is ``descriptor_host.py``'s. This
probe led to ``launch.RawLauncher`` (docs/architecture.md, "A replay calls its kernel's C
launcher"); measured on an H100 at f5d5475 in an ad-hoc first form, before it existed
(``results/raw-launch-h100-21707d3/probe-f5d5475.json``), and in this form at 64bd95d and 43e8d6d
(``results/raw-launch-h100-43e8d6d/probe-*.json``). Usage: python benchmarks/raw_launch_probe.py OUT.json
"""

from __future__ import annotations

import cProfile
import io
import json
import pstats
import statistics
import sys
from collections.abc import Callable

import torch
import triton
from descriptor_host import BLOCK, _args, _host_descriptors, _pointers, _scratch

from tessera._core import launch
from tessera._core.timing import per_call_us, run_record, write_result
from tessera.blas import gemm

ROWS: list[dict[str, object]] = []


def row(case: str, fn: Callable[[], object], calls: int = 3000) -> None:
    rounds = [per_call_us(fn, calls=calls) for _ in range(5)]
    ROWS.append({"case": case, "host_us_per_call": statistics.median(rounds), "rounds_us": rounds})
    print(json.dumps(ROWS[-1]), flush=True)


def replay_of(kernel: object, kind: str, operands: tuple[torch.Tensor, ...]) -> launch.Replay:
    launcher = launch.Launcher(kernel)
    with launch.recording() as calls:
        launcher((1,), _args(kind, *operands), {"BLOCK": BLOCK}, 4, 1)
    replay = launch.Replay.of(calls, operands)
    assert replay is not None, kind
    replay(operands)
    return replay


def main() -> None:
    from triton.backends.nvidia import driver as nvidia

    a, b = (torch.randn(256, 256, device="cuda").to(torch.bfloat16) for _ in range(2))
    d = torch.empty_like(a)
    operands = (a, b, d)
    triton.set_allocator(_scratch)
    descriptors = replay_of(_host_descriptors, "host", operands)
    pointers = replay_of(_pointers, "pointers", operands)
    torch.cuda.synchronize()
    row("torch.add(out=)", lambda: torch.add(a, b, out=d))
    row("replay, host descriptors", lambda: descriptors(operands))
    row("replay, pointers", lambda: pointers(operands))
    assert descriptors.compiled is not None
    compiled, device = descriptors.compiled
    raw = launch.raw_launcher(compiled)
    assert raw is not None, "not Triton 3.6's launcher layout"
    built = [launch._with_base(descriptors.bound[i], t) for i, t in enumerate(operands)]
    row("the replay's descriptor copies (_with_base x3)",
        lambda: [launch._with_base(descriptors.bound[i], t) for i, t in enumerate(operands)])
    row("Triton's make_tensordesc_arg x3", lambda: [raw.expand(i, x) for i, x in enumerate(built)])
    meta, utils = raw.descriptors[0], triton.runtime.driver.active.utils

    def fills() -> None:
        for x in built:
            utils.fill_tma_descriptor(x.base.data_ptr(), meta["swizzle"], meta["elem_size"],
                                      nvidia.TMA_DTYPE_DEVICE_TO_HOST[meta["elem_type"]], meta["block_size"],
                                      x.shape, x.strides, 0)

    row("fill_tma_descriptor x3 (the C encoding alone)", fills)
    stream = launch._triton_runtime()[1].active.get_current_stream(device)
    row("compiled.run with the descriptors built",
        lambda: launch.run_compiled(compiled, (1,), (*built, BLOCK), device))
    expanded = [arg for i, x in enumerate(built) for arg in raw.expand(i, x)] + [BLOCK]
    d.zero_()
    raw((1,), stream, expanded)
    torch.cuda.synchronize()
    right = torch.equal(d[:BLOCK, :BLOCK], (a[:BLOCK, :BLOCK].float() + b[:BLOCK, :BLOCK].float()).bfloat16())
    print(f"the C launcher's result right: {right}", flush=True)
    row("C launcher, expanded arguments ready", lambda: raw((1,), stream, expanded))
    row("replay through the C launcher (maps kept by address)", lambda: descriptors(operands))
    for n in (1024, 256):
        x, y = (torch.randn(n, n, device="cuda").bfloat16() for _ in range(2))
        gemm(x, y)
        torch.cuda.synchronize()
        row(f"torch.matmul bf16 {n}^3", lambda x=x, y=y: torch.matmul(x, y), calls=2000)
        row(f"tessera gemm bf16 {n}^3 (repeat)", lambda x=x, y=y: gemm(x, y), calls=2000)
    x, y = (torch.randn(1024, 1024, device="cuda").bfloat16() for _ in range(2))
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(3000):
        gemm(x, y)
    profiler.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(25)
    print(text.getvalue())
    write_result(sys.argv[1], {**run_record("python benchmarks/raw_launch_probe.py OUT.json"), "rows": ROWS,
                               "c_launcher_right": right})


if __name__ == "__main__":
    main()
