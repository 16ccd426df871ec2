"""Host cost of a launch with tensor descriptors built on the host, against descriptors the kernel
builds itself (``tl.make_tensor_descriptor``), against plain pointers.

Repeat ``gemm`` calls replay their launch (``launch.Replay``); for the descriptor families that
launch still encodes three TMA descriptors on the host per call (host-overhead: 15.5 against
8.6 µs for the pointer tile family's launch, and the eager 1024³/2048³ grid rows are host-bound on
slow host days). A descriptor made in the kernel needs only the pointer, sizes and strides as
arguments and a global scratch buffer for the 128-byte descriptors, which Triton asks of the
allocator set with ``triton.set_allocator`` at each launch: here a new buffer from torch's caching
allocator, or one kept buffer (what ``launch.scratch`` would give).

Three one-program kernels (a 64×64 tile of A plus B stored to D, bf16) are each launched through a
recorded ``Replay`` (what a repeat ``gemm`` call does) in loops of back-to-back calls; the host
time per call is the loop's wall time over its calls (the GPU work is a few µs). Each kernel's
result is checked first. Usage: python benchmarks/descriptor_host.py OUT.json

Measured on the H200 at 2e01e32 (two runs; torch.add 8.2–8.3 µs a call): host-made descriptors
18.5–19.0 µs a launch, kernel-made ones 15.7–16.6 with a new buffer from torch per launch and
11.2–11.7 with one kept buffer, pointers 10.5–10.8. Then ``gemm_tma`` itself made its
descriptors (457f99f, ``descriptor-gemm-h200-457f99f.json``, bf16, shipped logic): back-to-back
1024³ calls went from 34.6 to 20.6 µs (torch 15.8), but the kernel got slower by 2.5–4 µs at every
size in CUDA graphs (1024³ 5.5 → 8.1 µs, 2048³ 23.9 → 26.4, 4096³ 196.8 → 200.8; each program
writes and fences its descriptors before its first load), and eager flushed calls lost too
(1024³ 11.6 → 13.1 µs). Dropped: the kernel switch is not kept.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from tessera._core import launch
from tessera._core.timing import per_call_us, run_record, write_result

DEVICE = "cuda"
BLOCK = 64


@triton.jit
def _host_descriptors(a_desc, b_desc, d_desc, BLOCK: tl.constexpr):
    d_desc.store([0, 0], a_desc.load([0, 0]) + b_desc.load([0, 0]))


@triton.jit
def _device_descriptors(a_ptr, b_ptr, d_ptr, rows, cols, stride, BLOCK: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, [rows, cols], [stride, 1], [BLOCK, BLOCK])
    b_desc = tl.make_tensor_descriptor(b_ptr, [rows, cols], [stride, 1], [BLOCK, BLOCK])
    d_desc = tl.make_tensor_descriptor(d_ptr, [rows, cols], [stride, 1], [BLOCK, BLOCK])
    d_desc.store([0, 0], a_desc.load([0, 0]) + b_desc.load([0, 0]))


@triton.jit
def _pointers(a_ptr, b_ptr, d_ptr, rows, cols, stride, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    offsets = r[:, None] * stride + r[None, :]
    tl.store(d_ptr + offsets, tl.load(a_ptr + offsets) + tl.load(b_ptr + offsets))


def _scratch(size: int, alignment: int, stream: object) -> torch.Tensor:
    return torch.empty(size, dtype=torch.int8, device=DEVICE)


_KEPT: list[torch.Tensor] = []


def _kept_scratch(size: int, alignment: int, stream: object) -> torch.Tensor:
    """One buffer for every launch (stream-ordered reuse, as ``launch.scratch`` keeps buffers)."""
    if not _KEPT or _KEPT[0].numel() < size:
        _KEPT[:] = [torch.empty(size, dtype=torch.int8, device=DEVICE)]
    return _KEPT[0]


def _args(kind: str, a: torch.Tensor, b: torch.Tensor, d: torch.Tensor) -> tuple:
    if kind.startswith("host"):
        return tuple(TensorDescriptor(t, list(t.shape), list(t.stride()), [BLOCK, BLOCK]) for t in (a, b, d))
    return (a, b, d, a.shape[0], a.shape[1], a.stride(0))


def _host_rounds(fn: Callable[[], object], rounds: int = 5) -> dict[str, object]:
    """Host µs per call in ``rounds`` loops of 3000 back-to-back calls, and their median."""
    per_round = [per_call_us(fn, calls=3000) for _ in range(rounds)]
    return {"host_us_per_call": statistics.median(per_round), "rounds_us": per_round}


def main() -> None:
    out = sys.argv[1]
    a, b = (torch.randn(256, 256, device=DEVICE).to(torch.bfloat16) for _ in range(2))
    d = torch.empty_like(a)
    rows = []
    for kind, kernel, allocator in (
            ("host descriptors", _host_descriptors, _scratch),
            ("device descriptors", _device_descriptors, _scratch),
            ("device descriptors, one kept scratch buffer", _device_descriptors, _kept_scratch),
            ("pointers", _pointers, _scratch)):
        triton.set_allocator(allocator)
        launcher = launch.Launcher(kernel)
        with launch.recording() as calls:
            launcher((1,), _args(kind, a, b, d), {"BLOCK": BLOCK}, 4, 1)
        replay = launch.Replay.of(calls, (a, b, d))
        assert replay is not None, kind
        d.zero_()
        replay((a, b, d))
        torch.cuda.synchronize()
        want = (a[:BLOCK, :BLOCK].float() + b[:BLOCK, :BLOCK].float()).to(torch.bfloat16)
        rows.append({"case": kind, "right": bool(torch.equal(d[:BLOCK, :BLOCK], want)),
                     **_host_rounds(lambda replay=replay: replay((a, b, d)))})
        print(json.dumps(rows[-1]), flush=True)
    rows.append({"case": "torch.add(out=) (a torch launch, for the host's speed)",
                 **_host_rounds(lambda: torch.add(a, b, out=d))})
    print(json.dumps(rows[-1]), flush=True)
    write_result(out, {**run_record("python benchmarks/descriptor_host.py OUT.json"), "rows": rows})


if __name__ == "__main__":
    main()
