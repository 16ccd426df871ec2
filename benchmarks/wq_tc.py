"""Weight-only GEMM on tensor cores at decode and small M: which ``gemm_wq`` tiles, and which code layout.

The ``gemm_wq`` family turns codes into exact 16-bit integers (code − z0) with bit operations and
one packed subtraction (no fp32 dequantization, no 16-bit round trip through shared memory) and
scales each group's fp32 sum once. This sweep times it forced to a set of tiles at M = 1 and 16
(N = K = 8192, group 128, bf16 activations, symmetric), on codes stored as ``quantize_weight``
stores them (columns contiguous, "n-major") and on the same codes with each column's K run
contiguous ("k-major", a transposed copy: the layout Triton's operand loads read in wider pieces),
beside bf16 torch.matmul and the shipped choice in the same run. Each configuration's result is
checked against x @ dequantize_weight(q) first. Timed from CUDA graphs cycling over four weight
copies (cold L2), median of three rounds.

``--exact-bytes``: 8-bit codes only, as stored, each tile twice — the fp32 dequantization
rounded to bf16 (the default) and ``exact_bytes`` (code − 128 made in fp32, exact in bf16).

``--warp-mma``: each 16-row tile also as two 8-row halves (``warp_mma``, per-warp MMAs).
``--byte-planes``: 8-bit codes as stored, each tile also as four byte planes (``byte_planes``:
the codes read as int32 words, one exact-integer MMA per byte plane).
``--planes-only``: with ``--byte-planes``, the byte-plane forms only (beside the shipped choice);
``--early-scales``: each byte-plane form also with its scales loaded a step ahead (``early_scales``).
``--decode "BN,BK,SPLIT,WARPS,STAGES;…"``: 8-bit codes, also these CUDA-core decode tiles
(``gemv_wq``, unit codes).
``--m M`` times that M only, ``--bits B`` those codes only, ``--stored`` the stored layout only,
``--tiles "BM,BN,BK,SPLIT,WARPS,STAGES;…"`` these tiles instead of the built-in list.

Usage: python benchmarks/wq_tc.py OUT.json [--quick] [--exact-bytes] [--warp-mma] [--byte-planes]
       [--planes-only] [--early-scales] [--decode LIST] [--m M] [--bits B] [--stored]
       [--tiles LIST]
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
from collections.abc import Callable

import torch

from tessera._core.device import device_info
from tessera._core.timing import graph_rounds, run_record, write_result
from tessera.blas import gemm_wq, quantize_weight, space
from tessera.blas.kernels.gemm_wq import WqConfig, WqGemvConfig
from tessera.blas.quantized import QuantizedWeight, dequantize_weight

N = K = 8192
COPIES = 4
ROUNDS = 3
DEVICE = "cuda"

# (BLOCK_M, BLOCK_N, BLOCK_K, split, warps, stages) per M: around the best of the first sweep
# (wq-tc-h200-909e193.json), with deeper K splits and wider tiles
TILES = {1: [(8, 128, 128, 8, 4, 3), (8, 128, 128, 16, 4, 3), (8, 64, 128, 8, 4, 3),
             (8, 64, 128, 16, 4, 3), (8, 128, 128, 8, 4, 4), (8, 256, 128, 8, 8, 3),
             (8, 128, 128, 4, 4, 3), (8, 64, 128, 4, 4, 4), (8, 32, 128, 16, 2, 3),
             (8, 128, 64, 8, 4, 4), (8, 256, 128, 16, 8, 3), (16, 128, 128, 8, 4, 3),
             (8, 256, 128, 8, 8, 4), (8, 256, 128, 4, 8, 4)],
         16: [(16, 128, 128, 4, 4, 3), (16, 256, 128, 4, 8, 3), (16, 256, 128, 8, 8, 3),
              (16, 128, 128, 8, 8, 3), (16, 128, 128, 4, 8, 4), (16, 256, 128, 2, 8, 4),
              (16, 128, 128, 16, 4, 3), (16, 64, 128, 8, 4, 4), (16, 128, 128, 8, 4, 3)]}


def k_major(q: QuantizedWeight) -> QuantizedWeight:
    """The same codes with each column's K run contiguous (a transposed copy, same indices)."""
    return dataclasses.replace(q, codes=q.codes.t().contiguous().t())


def checked(config: WqConfig, x: torch.Tensor, qs: list[QuantizedWeight], reference: torch.Tensor,
            magnitude: torch.Tensor) -> list[Callable[[], None]] | str:
    """Calls of gemm_wq forced to ``config``, one per weight copy, once its result on the first
    copy matches the reference; else why not (a configuration that fails is a result too)."""
    with space.forced(config):
        try:
            got = gemm_wq(x, qs[0]).float()
        except Exception as error:  # noqa: BLE001
            return f"{type(error).__name__}: {str(error)[:200]}"
    rel = ((got - reference).abs() / (magnitude + 1e-6)).max().item()
    if rel > 2e-2:
        return f"wrong result: max relative error {rel:.3g}"

    def call(q: QuantizedWeight) -> None:
        with space.forced(config):
            gemm_wq(x, q)
    return [lambda q=q: call(q) for q in qs]


def _option(name: str, default: tuple[int, ...]) -> tuple[int, ...]:
    """The integer after ``name`` on the command line, as a 1-tuple, else ``default``."""
    return (int(sys.argv[sys.argv.index(name) + 1]),) if name in sys.argv else default


def _tiles(m: int, quick: bool) -> list[tuple[int, ...]]:
    """The tiles to time at ``m``: ``--tiles`` if given, else the built-in list (its first three
    with ``--quick``)."""
    if "--tiles" in sys.argv:
        spec = sys.argv[sys.argv.index("--tiles") + 1]
        return [tuple(int(v) for v in tile.split(",")) for tile in spec.split(";") if tile.strip()]
    return TILES[m][:3] if quick else TILES[m]


def _decode_tiles() -> list[WqGemvConfig]:
    """``--decode "BN,BK,SPLIT,WARPS,STAGES;…"``: these ``gemv_wq`` tiles (8-bit codes), with unit
    codes (bf16 activations)."""
    spec = sys.argv[sys.argv.index("--decode") + 1]
    return [WqGemvConfig(*(int(v) for v in tile.split(",")), unit_codes=True)
            for tile in spec.split(";") if tile.strip()]


def main() -> None:
    out, quick, exact = sys.argv[1], "--quick" in sys.argv, "--exact-bytes" in sys.argv
    stored, ms = "--stored" in sys.argv, _option("--m", (1, 16))
    gen = torch.Generator(device=DEVICE).manual_seed(5)
    weights = [torch.randn(K, N, device=DEVICE, generator=gen).to(torch.bfloat16) * 0.02
               for _ in range(COPIES)]
    rows = []
    for bits in _option("--bits", (8,) if exact else (4, 8)):
        quantized = [quantize_weight(w, bits=bits, group_size=128) for w in weights]
        layouts = {"n-major": quantized} if exact or stored else {"n-major": quantized,
                                                         "k-major": [k_major(q) for q in quantized]}
        for m in ms:
            x = torch.randn(m, K, device=DEVICE, generator=gen).to(torch.bfloat16)
            reference = x.float() @ dequantize_weight(quantized[0], torch.float32)
            magnitude = x.float().abs() @ dequantize_weight(quantized[0], torch.float32).abs()
            problem = space.MnkProblem(m, N, K, f"int{bits}_bf16")
            shipped = space.select_mnk("gemm_wq", problem, device_info()).config
            cases = {("torch.matmul (bf16 weights)", "-"):
                     [lambda w=w, x=x: torch.matmul(x, w) for w in weights],
                     (f"shipped ({shipped.short()})", "n-major"):
                     [lambda q=q, x=x: gemm_wq(x, q) for q in quantized]}
            for layout, qs in layouts.items():
                tiles = [WqConfig(block_m, bn, bk, split, 8, warps, stages)
                         for block_m, bn, bk, split, warps, stages in _tiles(m, quick)]
                if exact:  # each tile rounded, then exact
                    tiles = [c for tile in tiles for c in (tile, dataclasses.replace(tile, exact_bytes=True))]
                if "--warp-mma" in sys.argv:  # each 16-row tile also in two 8-row halves
                    halves = [dataclasses.replace(t, warp_mma=True) for t in tiles if t.block_m == 16]
                    tiles = [*tiles, *halves]
                if "--byte-planes" in sys.argv and bits == 8 and layout == "n-major":  # also as byte planes
                    planes = [dataclasses.replace(t, byte_planes=True) for t in tiles]
                    if "--early-scales" in sys.argv:
                        planes += [dataclasses.replace(t, early_scales=True) for t in planes]
                    tiles = planes if "--planes-only" in sys.argv else [*tiles, *planes]
                if "--decode" in sys.argv and bits == 8 and layout == "n-major":  # CUDA-core decode tiles
                    tiles = [*tiles, *_decode_tiles()]
                for config in tiles:
                    calls = checked(config, x, qs, reference, magnitude)
                    if isinstance(calls, str):
                        rows.append({"bits": bits, "m": m, "case": config.short(), "layout": layout,
                                     "error": calls})
                    else:
                        cases[(config.short(), layout)] = calls
            times = graph_rounds(cases, ROUNDS)
            torch_us = 1e3 * statistics.median(times[("torch.matmul (bf16 weights)", "-")])
            for (name, layout), samples in times.items():
                us = 1e3 * statistics.median(samples)
                rows.append({"bits": bits, "m": m, "case": name, "layout": layout, "graph_us": us,
                             "vs_torch": torch_us / us})
                print(f"W{bits}A16 M={m:<3} {layout:<8} {name:<44} {us:8.2f} µs  {torch_us / us:5.2f}× torch",
                      flush=True)
    record = {**run_record(" ".join(["python benchmarks/wq_tc.py OUT.json", *sys.argv[2:]])),
              "n": N, "k": K, "group": 128, "rows": rows}
    write_result(out, record)


if __name__ == "__main__":
    main()
