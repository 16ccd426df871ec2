"""Two stream-K designs side by side, and where the first one's time goes (bf16, H200).

``first``: the shipped kernel (data-parallel waves of whole tiles, then only the T mod P leftover
tiles' iterations shared, cut into up to eight pieces that the last contributor reads and adds).
``two-wave``: the last two waves shared (a tile has at most two contributors when T ≥ P; each
range walked from its last tile's head so every program starts at K = 0), the kernel of revision
6168d03. Variants patched into the source: ``nofix`` (the first design with the fixup skipped:
its wrong result is recorded, only its time is of interest), ``norot`` (two-wave with each range
walked in plain order), and ``MAX_PIECES`` 4 and 16. Since c6b2d0d the first design's counters
are a kept scratch buffer its last contributors leave zeroed (no torch fill before a launch:
what this script's ``reset`` variant patched in until then, never run on the GPU as a variant). Against
the persistent TMA data-parallel kernels on the wave-quantized shapes and two controls:
CUDA-graph time over operand copies larger than L2 and do_bench's flushed eager time, three
interleaved rounds, torch.profiler kernel times too.

Usage: git show 6168d03:tessera/blas/kernels/gemm_streamk.py > /tmp/two_wave.py
       python benchmarks/streamk_designs.py OUT.json /tmp/two_wave.py [--rounds N]
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch

import tessera.blas.kernels.gemm_streamk as shipped
from tessera._core.timing import cold_copies, flushed_ms, git_revision, graph_ms
from tessera.blas.kernels.gemm_streamk import StreamKConfig
from tessera.blas.kernels.gemm_tma import TmaConfig, launch_gemm_tma

SHAPES = [(1664, 1408, 8192), (1536, 1408, 8192), (1536, 1536, 8192), (2176, 1024, 8192), (3456, 3072, 4096)]
PATCHES = {"nofix": [("if done == last - first:", "if done == 1 << 30:"),
                     # its counters are never zeroed again: a buffer of its own, not the shipped one's
                     ('scratch("streamk counters"', 'scratch("streamk counters nofix"')],
           "norot": [("    head = tl.maximum(end - end % iters, start)", "    head = start")]}


def _variant(name: str, source: str, patch: str | None) -> ModuleType:
    """The kernel module ``source`` with ``PATCHES[patch]`` applied, imported under ``name``."""
    for old, new in PATCHES.get(patch or "", []):
        if old not in source:
            raise SystemExit(f"patch {patch!r} does not apply: {old!r} not in the source")
        source = source.replace(old, new)
    path = Path(f"/tmp/streamk_design_{name}.py")
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"streamk_design_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _tma(m: int, n: int, config: TmaConfig) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    def call(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        launch_gemm_tma(x, y, None, d, 1.0, 0.0, precision="ieee", num_sms=132, config=config)
        return d
    return call


def _streamk(m: int, n: int, module: ModuleType, config: StreamKConfig,
             pieces: int) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    def call(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        module.MAX_PIECES = pieces
        module.launch_gemm_streamk(x, y, None, d, 1.0, 0.0, precision="ieee", upcast=False, num_sms=132,
                                   config=config)
        return d
    return call


def _shape_row(m: int, n: int, k: int, designs: dict[str, ModuleType], rounds: int) -> dict:
    """Every candidate on (m, n, k): its error, graph and flushed medians, each round, kernel times."""
    from torch.profiler import ProfilerActivity, profile

    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    reference = a.float() @ b.float()
    candidates = {"tma 128x128 w4s4": _tma(m, n, TmaConfig(128, 128, 64, 8, 4, 4)),
                  "tma 128x256 w8s3": _tma(m, n, TmaConfig(128, 256, 64, 8, 8, 3)),
                  "tma 256x128 w8s4 split2": _tma(m, n, TmaConfig(256, 128, 64, 8, 8, 4, False, 2))}
    for warps in (4, 8):
        config = StreamKConfig(128, 128, 64, 0, warps, 4, True)
        for name, module in designs.items():
            for pieces in (4, 8, 16) if name == "first" else (8,):
                candidates[f"sk w{warps} {name} p{pieces}"] = _streamk(m, n, module, config, pieces)
    row: dict = {"m": m, "n": n, "k": k}
    for key, fn in candidates.items():
        row[key + " err"] = float((fn(a, b).float() - reference).abs().max() / reference.abs().max())
    operand_sets = cold_copies([a, b])
    samples: dict[str, dict[str, list[float]]] = {key: {"graph": [], "flushed": []} for key in candidates}
    for _ in range(rounds):
        for key, fn in candidates.items():
            calls = [lambda s=s, fn=fn: fn(*s) for s in operand_sets]
            samples[key]["graph"].append(graph_ms(calls) * 1e3)
            samples[key]["flushed"].append(flushed_ms(lambda fn=fn, a=a, b=b: fn(a, b)) * 1e3)
    for key in candidates:
        row[key] = {how: statistics.median(values) for how, values in samples[key].items()}
    row["samples_us"] = samples
    row["profile_us"] = {}
    for key in ("sk w4 first p8", "sk w4 two-wave p8", "tma 128x128 w4s4"):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                candidates[key](a, b)
            torch.cuda.synchronize()
        row["profile_us"][key] = {e.key: e.device_time_total / max(e.count, 1) for e in prof.key_averages()}
    print(m, n, k, {key: (round(row[key]["graph"], 1), round(row[key]["flushed"], 1)) for key in candidates},
          flush=True)
    return row


def main() -> None:
    import triton

    out_path, two_wave_path = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[4]) if sys.argv[3:4] == ["--rounds"] else 3
    first, two_wave = Path(shipped.__file__).read_text(), Path(two_wave_path).read_text()
    designs = {"first": _variant("first", first, None),
               "first nofix": _variant("first_nofix", first, "nofix"),
               "two-wave": _variant("two_wave", two_wave, None),
               "two-wave norot": _variant("two_wave_norot", two_wave, "norot")}
    rows = [_shape_row(m, n, k, designs, rounds) for m, n, k in SHAPES]
    with open(out_path, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "git": git_revision(),
                   "versions": {"torch": torch.__version__, "triton": triton.__version__},
                   "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "command": "python benchmarks/streamk_designs.py OUT.json TWO_WAVE.py", "rows": rows},
                  f, indent=1)


if __name__ == "__main__":
    main()
