"""Which step sequence makes ``gemm_wq``'s W4A16 decode call fail with ``unspecified launch
failure`` (the forty-eighth session saw it once; the forty-ninth repeats it: its ``loop`` variant
failed 5 of 6 processes on an H100, ``benchmarks/results/wq-fault-h100-737601/``; the fiftieth
found it — two warp groups sharing a stage of ``gemm_wq_ws``'s ring, 8 stages of 3 groups — and
the stage rule since refuses such rings, ``REPRO_WS`` among them). Each variant
runs in fresh processes (a fault leaves the CUDA context unusable); a process prints one JSON
line: ok (with the result's error against fp64), or the error, the step and the frames it
surfaced at. ``REPRO_BITS`` (4) and ``REPRO_M`` (1) choose the codes and the activation rows, and
``REPRO_WS=STAGES,CONSUMERS`` forces that ``gemm_wq_ws`` configuration, ``REPRO_TILE=1`` the
Triton tile family instead (any variant).

    python benchmarks/wq_fault_repro.py OUT.json [--runs N] [--variants a,b,…]
    python benchmarks/wq_fault_repro.py --child VARIANT   (one process)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

VARIANTS = {
    "rows": "graph(ours), graph(torch) ×3, then flushed(ours): the rows' sequence",
    "no-torch-graph": "graph(ours) ×3, then flushed(ours)",
    "no-graph": "flushed(ours) ×4",
    "graph-then-eager": "graph(ours), graph(torch) ×3, then back-to-back eager (no flush)",
    "graph-then-flush-sync": "the rows' sequence, each flushed call synchronized",
    "rows-torch-flushed": "the rows' graphs, then flushed(torch) instead of flushed(ours)",
    "torch-graphs-then-ours": "graph(torch) ×3 only, then flushed(ours)",
    "rows-blocking": "the rows' sequence with CUDA_LAUNCH_BLOCKING=1 (the failing launch named)",
    "rows-tile": "the rows' sequence with ours forced to gemm_wq's Triton tile (not gemm_wq_ws)",
    "loop": "graph(torch) then flushed(ours), 20 times (the failing pair repeated in one process)",
}


def child(variant: str) -> None:
    if variant == "rows-blocking":
        os.environ["CUDA_LAUNCH_BLOCKING"] = "1"  # read when CUDA starts, after this
    import contextlib

    import torch
    import triton.testing

    from tessera._core.timing import back_to_back_ms, flushed_ms, graph_ms
    from tessera.blas import dequantize_weight, gemm_wq, quantize_weight, space
    from tessera.blas.kernels.gemm_wq import WqConfig
    from tessera.blas.kernels.gemm_wq_ws import WqWsConfig

    n = k = 8192
    weights = [torch.randn(k, n, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(4)]
    bits = int(os.environ.get("REPRO_BITS", "4"))
    qs = [quantize_weight(w, bits=bits, group_size=128) for w in weights]
    m = int(os.environ.get("REPRO_M", "1"))
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    ws = os.environ.get("REPRO_WS")
    tile = variant == "rows-tile" or os.environ.get("REPRO_TILE") == "1"
    forced = (space.forced(WqConfig(16, 64, 64)) if tile
              else space.forced(WqWsConfig(*map(int, ws.split(",")))) if ws else contextlib.nullcontext())
    forced.__enter__()
    ours = [lambda q=q: gemm_wq(x, q) for q in qs]
    theirs = [lambda w=w: torch.matmul(x, w) for w in weights]
    step = "start"
    try:
        if variant == "loop":
            for r in range(20):
                step = f"loop graph torch {r}"
                graph_ms(theirs)
                step = f"loop flushed ours {r}"
                flushed_ms(ours[0])
        elif variant != "no-graph":
            for r in range(3):
                if variant != "torch-graphs-then-ours":
                    step = f"graph ours {r}"
                    graph_ms(ours)
                if variant != "no-torch-graph":
                    step = f"graph torch {r}"
                    graph_ms(theirs)
        if variant == "graph-then-eager":
            step = "back-to-back ours"
            back_to_back_ms(ours[0])
        elif variant == "graph-then-flush-sync":
            step = "flushed synchronized"
            triton.testing.do_bench(lambda: (ours[0](), torch.cuda.synchronize()), warmup=25, rep=100)
        elif variant in ("rows-torch-flushed", "loop"):
            if variant != "loop":
                step = "flushed torch"
                flushed_ms(theirs[0])
        else:
            for r in range(4 if variant == "no-graph" else 1):
                step = f"flushed ours {r}"
                flushed_ms(ours[0])
        step = "check"
        torch.cuda.synchronize()
        ref = (x.double() @ dequantize_weight(qs[0]).double())
        err = ((gemm_wq(x, qs[0]).double() - ref).abs().max() / ref.abs().max()).item()
        print(json.dumps({"variant": variant, "ok": err < 2e-2, "rel_err": err}))
    except Exception as exc:  # noqa: BLE001 - the point is to report it
        import traceback

        frames = [f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} {f.name}"
                  for f in traceback.extract_tb(exc.__traceback__)]
        print(json.dumps({"variant": variant, "ok": False, "step": step, "error": str(exc).splitlines()[0],
                          "frames": frames[-6:]}))


def main() -> None:
    if sys.argv[1] == "--child":
        child(sys.argv[2])
        return
    out = sys.argv[1]
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 6
    names = (sys.argv[sys.argv.index("--variants") + 1].split(",") if "--variants" in sys.argv
             else list(VARIANTS))
    results = []
    for name in names:
        for _ in range(runs):
            start = time.time()
            try:
                done = subprocess.run([sys.executable, __file__, "--child", name], capture_output=True,
                                      text=True, timeout=90)
                last = (done.stdout.strip().splitlines() or ["{}"])[-1]
                row = json.loads(last) if last.startswith("{") else {"variant": name, "ok": False,
                                                                      "error": done.stderr[-300:]}
            except subprocess.TimeoutExpired:
                row = {"variant": name, "ok": False, "error": "hung (killed after 90 s)"}
            row["seconds"] = round(time.time() - start, 1)
            results.append(row)
            print(json.dumps(row), flush=True)
            with open(out, "w") as f:
                json.dump({"variants": VARIANTS, "env": {k: v for k, v in os.environ.items()
                                                         if k.startswith(("TESSERA", "REPRO"))},
                           "runs": results}, f, indent=1)
    for name in names:
        rows = [r for r in results if r["variant"] == name]
        print(f"{name:<24} {sum(not r['ok'] for r in rows)} of {len(rows)} failed")


if __name__ == "__main__":
    main()
