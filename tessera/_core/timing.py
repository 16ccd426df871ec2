"""Timing that is fair to both sides: medians, warm-up, and the vendor interleaved with Tessera.

On a GPU, ``flushed`` uses ``triton.testing.do_bench`` (median, L2 flushed before every run: the
cold-cache number) and ``back_to_back`` times a loop of launches between two events (sustained
throughput, caches warm, launch overhead included). In Triton's CPU interpreter both are wall-clock
medians and say nothing about GPU speed.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import torch

from tessera._core.device import device_info, interpreter_enabled
from tessera._core.files import write_atomically


def on_gpu() -> bool:
    return torch.cuda.is_available() and not interpreter_enabled()


def flushed_ms(fn: Callable[[], object]) -> float:
    """Median milliseconds per call with the L2 cache flushed before each call."""
    if not on_gpu():
        return _wall_ms(fn)
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))


def back_to_back_ms(fn: Callable[[], object], target_ms: float = 50.0, repeats: int = 5) -> float:
    """Median over ``repeats`` of the mean time per call in a loop of back-to-back launches."""
    if not on_gpu():
        return _wall_ms(fn)
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    calls = max(3, min(10_000, int(target_ms / max(start.elapsed_time(end), 1e-3))))
    per_call = []
    for _ in range(repeats):
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        per_call.append(start.elapsed_time(end) / calls)
    return statistics.median(per_call)


def warm_up(fn: Callable[[], object], ms: float = 100.0) -> None:
    """Run ``fn`` back to back for about ``ms`` milliseconds, untimed, before a series of timings,
    so that the first starts from a busy GPU, not an idle one (operands built, kernels compiled,
    graphs captured). Added because torch's first-round time in the logic A/Bs of the sixty-second
    to sixty-fourth sessions was up to 5 % under its second; with it (and ``graph_ms``'s untimed
    replays) round 1 still read 0.972–0.999 and round 3 0.964–1.002 on an H100: the bias follows
    the round's order more than the idle GPU (docs/architecture.md, "The first timing after an
    idle GPU"). Nothing off the GPU."""
    if on_gpu():
        back_to_back_ms(fn, target_ms=ms, repeats=1)


def per_call_us(fn: Callable[[], object], calls: int = 2000, warmup: int = 50) -> float:
    """Mean wall-clock µs per call over ``calls`` back-to-back calls after ``warmup`` ones (the GPU
    synchronized before and after): for calls whose GPU work is negligible, the host's cost."""
    for _ in range(warmup):
        fn()
    if on_gpu():
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    if on_gpu():
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1e6


def cold_copies(tensors: Sequence[torch.Tensor], nbytes: int | None = None) -> list[tuple[torch.Tensor, ...]]:
    """``tensors`` and enough clones of them that all sets together exceed twice the L2 cache (of
    ``nbytes`` per set, by default the tensors' own): what :func:`graph_ms` cycles over for a
    cold-cache time. One set off the GPU."""
    first = tuple(tensors)
    if not on_gpu():
        return [first]
    l2 = torch.cuda.get_device_properties(first[0].device).L2_cache_size
    size = nbytes if nbytes is not None else sum(t.numel() * t.element_size() for t in first)
    copies = max(1, min(32, math.ceil(2 * l2 / max(size, 1))))
    return [first] + [tuple(t.clone() for t in first) for _ in range(copies - 1)]


def copy_call(nbytes: int) -> tuple[Callable[[], object], int]:
    """A device-to-device copy moving (reading plus writing) at least ``nbytes`` and, on a GPU, at
    least four times the L2 cache (so a graph of it is cold too): the memory-bound ceiling, and
    the bytes it moves."""
    if on_gpu():
        nbytes = max(nbytes, 4 * torch.cuda.get_device_properties(0).L2_cache_size)
    source = torch.empty(max(nbytes // 8, 1), dtype=torch.float32, device="cuda" if on_gpu() else "cpu")
    dest = torch.empty_like(source)
    return (lambda: dest.copy_(source)), 8 * source.numel()


def graph_ms(calls: Sequence[Callable[[], object]], target_ms: float = 20.0, repeats: int = 5,
             warmup_replays: int = 2) -> float:
    """Median milliseconds per call of launches replayed from one CUDA graph: no host overhead in
    the number (what a serving engine that captures graphs sees). The graph cycles through
    ``calls``: give several that touch different copies of the operands, together larger than the
    L2 cache, for a cold-cache number (a graph cannot hold do_bench's per-call flush fairly). The
    graph replays ``warmup_replays`` times untimed first (~``target_ms`` each), so that what ran
    before it — another kernel, or nothing while the host worked — does not tilt the number
    (benchmarks/order_probe.py: ±3–5 % on single cases; docs/architecture.md, "The first timing
    after an idle GPU")."""
    if not on_gpu():
        return _wall_ms(calls[0])
    estimate = back_to_back_ms(calls[0], target_ms=5.0, repeats=1)
    for call in calls:
        call()  # compile and allocate outside the capture
    count = len(calls) * max(1, int(target_ms / max(estimate, 1e-3) / len(calls)))
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        for i in range(count):
            calls[i % len(calls)]()
    torch.cuda.synchronize()
    for _ in range(warmup_replays):
        graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    per_call = []
    for _ in range(repeats):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        per_call.append(start.elapsed_time(end) / count)
    return statistics.median(per_call)


Key = TypeVar("Key", bound=Hashable)


def graph_rounds(cases: Mapping[Key, Sequence[Callable[[], object]]], rounds: int,
                 before: Callable[[Key], object] | None = None,
                 warmup_ms: float = 100.0) -> dict[Key, list[float]]:
    """Each case's :func:`graph_ms` once a round for ``rounds`` rounds, the cases interleaved (so
    the clock drift of a GPU at its power limit spreads over all of them) and every round in the
    reverse order of the one before (a time can depend on the kernel that ran just before it:
    benchmarks/order_probe.py): the samples per case. ``before(key)``, when given, runs ahead of
    each timing, outside it (e.g. to put in place the logic a case's calls select by). The first
    case runs ``warmup_ms`` untimed before the first round (:func:`warm_up`; 0: none)."""
    times: dict[Key, list[float]] = {key: [] for key in cases}
    order = list(cases)
    for index in range(rounds):
        for key in order:
            if before is not None:
                before(key)
            if warmup_ms and index == 0 and key == order[0]:
                warm_up(cases[key][0], warmup_ms)
            times[key].append(graph_ms(cases[key]))
        order.reverse()
    return times


def _wall_ms(fn: Callable[[], object], repeats: int = 3) -> float:
    fn()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def git_revision() -> str | None:
    """The source revision results were measured with (``TESSERA_GIT_REV`` wins, for copies
    of the tree without ``.git``); ``+dirty`` when the work tree has uncommitted changes."""
    if os.environ.get("TESSERA_GIT_REV"):
        return os.environ["TESSERA_GIT_REV"]
    root = Path(__file__).resolve().parents[2]
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=5, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return rev + ("+dirty" if dirty else "")


def launch_settings() -> dict[str, str]:
    """The environment settings, where set, that change which binaries run or how they launch
    (``TESSERA_PDL``, ``TESSERA_DIRECT_LAUNCH``, ``TESSERA_RAW_LAUNCH``): recorded with every
    benchmark result."""
    return {name: os.environ[name] for name in ("TESSERA_PDL", "TESSERA_DIRECT_LAUNCH", "TESSERA_RAW_LAUNCH")
            if name in os.environ}


def run_record(command: str) -> dict[str, object]:
    """The fields every benchmark result JSON opens with: the device's name and architecture, the
    source revision, torch's and Triton's versions, the creation time (UTC), the command and the
    launch settings."""
    import triton

    info = device_info()
    return {"device": info.name, "arch": info.arch, "git": git_revision(),
            "versions": {"torch": torch.__version__, "triton": triton.__version__},
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "command": command,
            "settings": launch_settings()}


def write_result(path: str | Path, result: object) -> None:
    """A benchmark's result as indented JSON, written whole (a temporary file renamed over
    ``path``): a run killed mid-write, as a device call at its time limit is, leaves the file
    before, never a truncated one."""
    write_atomically(Path(path), json.dumps(result, indent=1))
