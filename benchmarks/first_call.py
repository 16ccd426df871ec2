"""First-call latency of a bf16 GEMM (4096³ unless ``--size``) in fresh processes: torch.matmul vs Tessera.

Each measurement is a new Python process that creates the CUDA context and the operands first
(not timed), then times the first call and a second one (synchronized, wall clock). Tessera runs
(a) with the installed pack (precompiled kernels: the call must compile nothing), (b) without a
pack but with Tessera's kernel cache filled by an earlier process (``binaries.remember``), and
(c) without either (``TESSERA_KERNEL_CACHE=0``), with Triton's cache as it is and with an empty
one (a cold JIT compile). Triton compilations
are counted by wrapping ``triton.compile`` in the child. ``--b-col-major``: B is a transposed view
(a linear layer's x @ W.t()). ``--size 8192`` takes the shipped sm_90 logic's ``gemm_ws`` row.
``--dtype tf32``: float32 operands with TF32 allowed (torch.backends.cuda.matmul.allow_tf32,
``precision="tf32"``); on Hopper Tessera copies B K-major first, a second kernel the pack holds.
Usage: python benchmarks/first_call.py OUT.json [--repeats N] [--b-col-major] [--size N] [--dtype tf32]
       (child: ... --child MODE)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

MODES = ("torch", "tessera")


DTYPES = ("bf16", "tf32")


def child(mode: str, profile: bool = False, b_col_major: bool = False, size: int = 4096,
          dtype: str = "bf16") -> None:
    import cProfile
    import pstats

    import torch
    import triton.compiler as front
    import triton.compiler.compiler as back

    compiles = [0]
    original = back.compile

    def counting(*args, **kwargs):
        compiles[0] += 1
        return original(*args, **kwargs)

    front.compile = back.compile = counting
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    elements = torch.bfloat16 if dtype == "bf16" else torch.float32
    a = torch.randn(size, size, device="cuda", dtype=elements)
    b = torch.randn(size, size, device="cuda", dtype=elements)
    b = b.t() if b_col_major else b
    precision = "tf32" if dtype == "tf32" else "ieee"
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    if mode == "torch":
        op = torch.matmul
    else:
        import tessera.blas as blas

        def op(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return blas.gemm(a, b, precision=precision)
    torch.cuda.synchronize()
    times = []
    profiler = cProfile.Profile() if profile else None
    imported_before = set(sys.modules)
    for i in range(2):
        if profiler is not None and i == 0:
            profiler.enable()
        start = time.perf_counter()
        out = op(a, b)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
        if profiler is not None and i == 0:
            profiler.disable()
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)
            print("imported by the first call:", sorted(set(sys.modules) - imported_before))
    from triton.testing import do_bench

    steady = do_bench(lambda: op(a, b))  # the loaded binary runs as fast as a JIT-built one
    reference = a.double() @ b.double()
    error = ((out.float() - reference).abs().max() / reference.abs().max()).item()
    result = {"first_ms": times[0], "second_ms": times[1], "steady_ms": steady,
              "triton_compiles": compiles[0], "relative_error": error}
    if mode == "tessera":
        from tessera.blas.kernels import copy, gemm_splitk, gemm_streamk, gemm_tile, gemm_tma, gemm_ws

        launchers = [k._launch for k in (gemm_tma, gemm_tile, gemm_ws, gemm_streamk, copy)]
        result["pack_loads"] = sum(launcher.pack_loads
                                   for launcher in (*launchers, gemm_splitk._partial, gemm_splitk._reduce))
        result["kernel"] = blas.explain(a, b, precision=precision).config.short()
    print("RESULT " + json.dumps(result), flush=True)


def run_child(mode: str, env: dict[str, str], b_col_major: bool = False, size: int = 4096,
              dtype: str = "bf16") -> dict:
    flags = ["--size", str(size), "--dtype", dtype] + (["--b-col-major"] if b_col_major else [])
    done = subprocess.run([sys.executable, __file__, "--child", mode, *flags], capture_output=True, text=True,
                          env=env, timeout=600, check=False)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"child {mode} failed: {done.stderr[-2000:]}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", nargs="?")
    parser.add_argument("--child", choices=MODES)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="child: print a cProfile of the first call")
    parser.add_argument("--b-col-major", action="store_true", help="B a transposed view (x @ W.t())")
    parser.add_argument("--size", type=int, default=4096, help="M = N = K")
    parser.add_argument("--dtype", choices=DTYPES, default="bf16")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.profile, args.b_col_major, args.size, args.dtype)
        return
    from tessera.tuning.packs import list_packs

    base = dict(os.environ)
    empty_home = tempfile.mkdtemp(prefix="tessera-nopack-")
    setups = {"torch.matmul": ("torch", base)}
    if any(p.current for p in list_packs()):
        # the pack alone: a kernel the pack lacks must be compiled, not found in the kernel cache
        setups["tessera, pack installed"] = ("tessera", {**base, "TESSERA_KERNEL_CACHE": "0"})
    else:  # a row named "pack installed" must have had one
        print("no pack installed (tessera pack list): the pack row is left out")
    cached_home = tempfile.mkdtemp(prefix="tessera-kernel-cache-")
    with_cache = {**base, "TESSERA_HOME": cached_home, "TESSERA_KERNEL_CACHE": "1"}
    filled = run_child("tessera", with_cache, args.b_col_major, args.size,
                       args.dtype)  # untimed: fills the kernel cache, as any first use does
    print(f"kernel cache filled by a first process ({filled['triton_compiles']} Triton compiles)")
    setups["tessera, no pack, kernel cache warm"] = ("tessera", with_cache)
    no_cache = {**base, "TESSERA_HOME": empty_home, "TESSERA_KERNEL_CACHE": "0"}
    setups["tessera, no pack, Triton cache warm"] = ("tessera", no_cache)
    rows = []
    for name, (mode, env) in setups.items():
        runs = [run_child(mode, env, args.b_col_major, args.size, args.dtype) for _ in range(args.repeats)]
        rows.append({"setup": name, "runs": runs,
                     "first_ms": statistics.median(r["first_ms"] for r in runs)})
    cold = [run_child("tessera", {**no_cache, "TRITON_CACHE_DIR": tempfile.mkdtemp(prefix="triton-cold-")},
                      args.b_col_major, args.size, args.dtype)
            for _ in range(args.repeats)]
    rows.append({"setup": "tessera, no pack, Triton cache empty", "runs": cold,
                 "first_ms": statistics.median(r["first_ms"] for r in cold)})
    torch_ms = rows[0]["first_ms"]
    for row in rows:
        row["vs_torch"] = row["first_ms"] / torch_ms
        compiles = [r["triton_compiles"] for r in row["runs"]]
        steady = statistics.median(r["steady_ms"] for r in row["runs"])
        print(f"{row['setup']:<40} first call {row['first_ms']:9.1f} ms  ({row['vs_torch']:5.2f}× torch)  "
              f"steady {steady:.3f} ms  Triton compiles {compiles}  "
              f"loads {[r.get('pack_loads') for r in row['runs']]}")
    if args.out:
        from tessera._core.device import device_info
        from tessera._core.timing import git_revision, write_result

        info = device_info()
        write_result(args.out, {"device": info.name, "arch": info.arch, "versions": info.versions,
                                "git": git_revision(),
                                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                "problem": f"{args.dtype} {args.size}x{args.size}x{args.size}"
                                           + (", B column-major" if args.b_col_major else ""),
                                "rows": rows})


if __name__ == "__main__":
    main()
