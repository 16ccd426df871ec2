"""Wave quantization, and stream-K against the data-parallel kernels on the shapes it hurts.

Without a GPU (``--shapes``): for each candidate bf16 shape, the configuration the sm_90 heuristic
picks, its tile count and the fraction of the last wave's multiprocessors left idle (132 SMs).
On a GPU: what `gemm` selects unforced (the shipped logic), the best of a few data-parallel configs (pointer
tiles and persistent TMA), and stream-K configs (descriptor loads), each checked
against torch.matmul and then timed beside it in one run two ways: eagerly with do_bench (median,
L2 flushed: the launch path's host work included) and replayed from a CUDA graph over copies of
the operands larger than L2 (kernel time, cold operands, as the tuner times). Every configuration
is timed once per round, rounds interleaved, and the median over rounds is reported (stream-K's
eager times swing between measurements seconds apart; each round's figures are kept in
``samples_ms`` and ``graph_samples_ms``).
Usage: python benchmarks/streamk.py --shapes | OUT.json [--rounds N]   (default 3)
"""

from __future__ import annotations

import contextlib
import json
import math
import statistics
import sys
import time

import torch

from tessera._core.device import offline_device
from tessera.blas import space
from tessera.blas.kernels.gemm_streamk import StreamKConfig
from tessera.blas.kernels.gemm_tile import TileConfig
from tessera.blas.kernels.gemm_tma import TmaConfig
from tessera.blas.tune import SIZE_PRESETS

SMS = 132
# the tuner's wave preset: square-ish bf16 problems whose 128x128 tile grids overshoot one or two
# waves of 132 by a few tiles, and nearly full grids as controls
SHAPES = [(m, n, k) for m, n, k, _ in SIZE_PRESETS["wave"]]


def grid_facts(m: int, n: int, k: int) -> dict:
    """What the sm_90 heuristic picks for bf16 (m, n, k) and how its tiles fill waves of 132."""
    device = offline_device("sm_90")
    choice = space.heuristic(space.GemmProblem(m, n, k, 1, "bf16", True), device)
    config = choice.config
    tiles = -(-m // config.block_m) * -(-n // config.block_n)
    waves = -(-tiles // SMS)
    return {"m": m, "n": n, "k": k, "config": config.short(), "tiles": tiles, "waves": waves,
            "idle_in_last_wave": 1 - (tiles - (waves - 1) * SMS) / SMS, "efficiency": tiles / (waves * SMS)}


def main() -> None:
    if sys.argv[1:] == ["--shapes"]:
        for facts in map(lambda s: grid_facts(*s), SHAPES):
            print(f"{facts['m']}x{facts['n']}x{facts['k']}: {facts['config']}, {facts['tiles']} tiles = "
                  f"{facts['waves']} waves, {facts['efficiency']:.0%} of the SM-waves busy")
        return
    import triton

    from tessera._core.timing import cold_copies, flushed_ms, git_revision, graph_ms
    from tessera.blas import explain, gemm

    out_path, rounds = sys.argv[1], 3
    if sys.argv[2:3] == ["--rounds"]:
        rounds = int(sys.argv[3])
    candidates = {"tile": [TileConfig(128, 128, 64, 8, 8, 3), TileConfig(128, 256, 64, 8, 8, 3),
                           TmaConfig(128, 128, 64, 8, 4, 4), TmaConfig(128, 256, 64, 8, 8, 3),
                           TmaConfig(64, 128, 64, 8, 4, 4), TmaConfig(256, 128, 64, 8, 8, 4, False, 2)],
                  "streamk": [StreamKConfig(128, 128, 64, 0, 4, 4, True),
                              StreamKConfig(128, 128, 64, 0, 8, 4, True),
                              StreamKConfig(128, 256, 64, 0, 8, 3, True)]}
    rows = []
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        selected = explain(a, b)
        row: dict = {**grid_facts(m, n, k), "selected": selected.config.short(),
                     "selected_reason": selected.reason, "rounds": rounds}
        reference = torch.matmul(a, b).float()
        timed: dict[str, object] = {"torch_ms": None, "selected_ms": None}  # key → forced config
        for configs in candidates.values():
            for config in configs:
                with space.forced(config):
                    got = gemm(a, b).float()
                error = float((got - reference).abs().max() / reference.abs().max())
                if error > 1e-2:  # a wrong result is recorded, never timed
                    row[config.short()] = None
                    row[f"{config.short()} error"] = error
                else:
                    timed[config.short()] = config
        samples: dict[str, list[float]] = {key: [] for key in timed}
        graph_samples: dict[str, list[float]] = {key: [] for key in timed}
        operand_sets = cold_copies([a, b])
        for _ in range(rounds):  # interleaved: drift and swings hit every candidate alike
            for key, config in timed.items():
                call = torch.matmul if key == "torch_ms" else gemm
                with space.forced(config) if config is not None else contextlib.nullcontext():
                    samples[key].append(flushed_ms(lambda a=a, b=b, call=call: call(a, b)))
                    calls = [lambda s=s, call=call: call(*s) for s in operand_sets]
                    graph_samples[key].append(graph_ms(calls))
        row.update({key: statistics.median(values) for key, values in samples.items()})
        row["samples_ms"] = samples
        row["graph_ms"] = {key: statistics.median(values) for key, values in graph_samples.items()}
        row["graph_samples_ms"] = graph_samples
        for suffix, medians in (("", row), ("_graph", row["graph_ms"])):
            data_parallel = [medians.get(c.short()) or math.inf for c in candidates["tile"]]
            if not isinstance(selected.config, StreamKConfig):
                data_parallel.append(medians["selected_ms"])
            best_dp = min(data_parallel)
            best_sk = min(medians.get(c.short()) or math.inf for c in candidates["streamk"])
            row[f"streamk_vs_best_data_parallel{suffix}"] = best_dp / best_sk
            row[f"selected_vs_best_data_parallel{suffix}"] = best_dp / medians["selected_ms"]
        graph = row["graph_ms"]
        print(f"{m}x{n}x{k}: torch {row['torch_ms'] * 1e3:.0f} us, stream-K vs best data-parallel "
              f"{row['streamk_vs_best_data_parallel']:.2f}x eager, "
              f"{row['streamk_vs_best_data_parallel_graph']:.2f}x in graphs; the logic's choice "
              f"{selected.config.short()} {row['selected_ms'] * 1e3:.0f} us "
              f"eager ({row['selected_vs_best_data_parallel']:.2f}x), {graph['selected_ms'] * 1e3:.0f} us "
              f"in graphs ({row['selected_vs_best_data_parallel_graph']:.2f}x)")
        rows.append(row)
    with open(out_path, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "git": git_revision(),
                   "versions": {"torch": torch.__version__, "triton": triton.__version__},
                   "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "command": f"python benchmarks/streamk.py OUT.json --rounds {rounds}", "rows": rows},
                  f, indent=1)


if __name__ == "__main__":
    main()
