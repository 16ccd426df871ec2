"""An IEEE float32 GEMM on the FMA units written in Gluon, to see whether explicit layouts beat the
tile family's 0.87-0.89x cuBLAS SGEMM (not part of the library; a probe for the next device call).

Why: the tile family's sm_90 SASS (``benchmarks/sass_mix.py blas gemm gemm_tile fp32 …``) shows
its best tile, 64x128x32 on 8 warps, issuing 1024 FFMA a K step against 96 LDS.128 (a 4x8
thread tile: 2.7 FMAs per float read from shared memory), and 128x128x32 holding 188 registers (one
program a multiprocessor). Here each thread owns an 8x8 block of C (128x128 on 8 warps), A is kept
M-contiguous in shared memory (stored transposed), and the K step is walked one column at a time
as outer products (a thread's 8 values of A's column and 8 of B's row, 2 LDS.128 each, then 64
FFMA; ``gl.dot_fma`` takes only K >= 16, whose operands would not fit the registers): 4 FMAs per
float read, and registers for two programs a multiprocessor if the compiler keeps to it.

Offline with Triton 3.6 and 3.9 (sm_90): BK 8 holds 128 registers (two programs a
multiprocessor) and its loop is 512 FFMA, 32 LDS.128, 8 global loads (scalar offline, where the
JIT's divisibility of K is unknown), 4 STS, 2 barriers; BK 16 136 registers. FFMA are ~88 % of
the loop in both kernels, so this wins only if shared-memory reads (not FMA issue) hold the tile
family back — what the GPU run answers.

Double-buffered (``--buffers 2``, fortieth session): the next step's tiles are stored into a
second pair of buffers while this step's are read, one barrier a step instead of two.

Usage: python benchmarks/sgemm_gluon_probe.py --sass [--bk 8,16,32] [--buffers 1,2]      (offline, sm_90)
       python benchmarks/sgemm_gluon_probe.py OUT.json [--sizes 2048,4096,8192] [--bk 8,16] [--buffers 1,2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

# a CTA-wide barrier: 3.9's gl.barrier, 3.6's gl.thread_barrier
from tessera.blas.kernels.gluon_names import cta_barrier as _barrier

BM, BN, WARPS = gl.constexpr(128), gl.constexpr(128), 8


@gluon.jit
def _outer_products(a_buf, b_buf, acc, a_row: gl.constexpr, acc_layout: gl.constexpr, BK: gl.constexpr):
    """acc + the step's BK outer products: a column of A (a thread's 8 rows) times a row of B."""
    for kk in gl.static_range(BK):
        a = gl.permute(a_buf.slice(kk, 1, dim=0).load(a_row), (1, 0))
        b = b_buf.slice(kk, 1, dim=0).load(acc_layout)  # a thread's 8 columns
        acc = acc + gl.convert_layout(a, acc_layout) * b
    return acc


@gluon.jit
def _sgemm_kernel(a_ptr, b_ptr, d_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_dm,
                  stride_dn, BK: gl.constexpr, BUFFERS: gl.constexpr):
    # C: 8x8 a thread, 4x8 threads a warp, 4x2 warps: 128x128
    acc_layout: gl.constexpr = gl.BlockedLayout([8, 8], [4, 8], [4, 2], [1, 0])
    # one K row of A's transposed tile (1, BM) spread as acc's rows are: a thread's 8 rows
    a_row: gl.constexpr = gl.BlockedLayout([1, 8], [8, 4], [2, 4], [0, 1])
    # global loads: A's rows K-contiguous (4 floats a thread), B's rows N-contiguous
    a_load: gl.constexpr = gl.BlockedLayout([1, 4], [32 // (BK // 4), BK // 4], [8, 1], [1, 0])
    b_load: gl.constexpr = gl.BlockedLayout([1, 4], [1, 32], [8, 1], [1, 0])
    # both stored one K row after another, M (N) contiguous: a thread's 8 values of one k are
    # 2 LDS.128, shared by the threads of its row (column) group
    unswizzled: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])  # of each buffer
    a_smem = gl.allocate_shared_memory(gl.float32, [BUFFERS, BK, BM], unswizzled)
    b_smem = gl.allocate_shared_memory(gl.float32, [BUFFERS, BK, BN], unswizzled)

    pid = gl.program_id(0)
    tiles_n = gl.cdiv(N, BN)
    off_m = (pid // tiles_n) * BM
    off_n = (pid % tiles_n) * BN
    rm = off_m + gl.arange(0, BM, layout=gl.SliceLayout(1, a_load))
    ka = gl.arange(0, BK, layout=gl.SliceLayout(0, a_load))
    kb = gl.arange(0, BK, layout=gl.SliceLayout(1, b_load))
    rn = off_n + gl.arange(0, BN, layout=gl.SliceLayout(0, b_load))
    a_ptrs = a_ptr + rm[:, None] * stride_am + ka[None, :] * stride_ak
    b_ptrs = b_ptr + kb[:, None] * stride_bk + rn[None, :] * stride_bn

    acc = gl.zeros([BM, BN], gl.float32, acc_layout)
    a_next = gl.load(a_ptrs, mask=(rm[:, None] < M) & (ka[None, :] < K), other=0.0)
    b_next = gl.load(b_ptrs, mask=(kb[:, None] < K) & (rn[None, :] < N), other=0.0)
    if BUFFERS == 1:  # two barriers a step: the store waits for every read of the last step
        for k0 in range(0, K, BK):
            _barrier()  # every thread is done reading the previous step
            a_smem.index(0).store(gl.permute(a_next, (1, 0)))
            b_smem.index(0).store(b_next)
            _barrier()
            # the next step's loads in flight while this one multiplies (masked past K: zeros)
            k1 = k0 + BK
            a_next = gl.load(a_ptrs + k1 * stride_ak, mask=(rm[:, None] < M) & (k1 + ka[None, :] < K),
                             other=0.0)
            b_next = gl.load(b_ptrs + k1 * stride_bk, mask=(k1 + kb[:, None] < K) & (rn[None, :] < N),
                             other=0.0)
            acc = _outer_products(a_smem.index(0), b_smem.index(0), acc, a_row, acc_layout, BK)
    else:  # two buffers, one barrier a step: the next step is stored beside the one being read
        a_smem.index(0).store(gl.permute(a_next, (1, 0)))
        b_smem.index(0).store(b_next)
        _barrier()
        for k0 in range(0, K, BK):
            cur = (k0 // BK) % 2
            k1 = k0 + BK
            a_next = gl.load(a_ptrs + k1 * stride_ak, mask=(rm[:, None] < M) & (k1 + ka[None, :] < K),
                             other=0.0)
            b_next = gl.load(b_ptrs + k1 * stride_bk, mask=(k1 + kb[:, None] < K) & (rn[None, :] < N),
                             other=0.0)
            acc = _outer_products(a_smem.index(cur), b_smem.index(cur), acc, a_row, acc_layout, BK)
            # the other buffer was last read in the previous step, which every thread finished
            # before the barrier that ended it
            a_smem.index(1 - cur).store(gl.permute(a_next, (1, 0)))
            b_smem.index(1 - cur).store(b_next)
            _barrier()

    dm = off_m + gl.arange(0, BM, layout=gl.SliceLayout(1, acc_layout))
    dn = off_n + gl.arange(0, BN, layout=gl.SliceLayout(0, acc_layout))
    gl.store(d_ptr + dm[:, None] * stride_dm + dn[None, :] * stride_dn, acc,
             mask=(dm[:, None] < M) & (dn[None, :] < N))


def launch(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, bk: int, buffers: int) -> None:
    m, k = a.shape
    n = b.shape[1]
    grid = (triton.cdiv(m, BM.value) * triton.cdiv(n, BN.value),)
    _sgemm_kernel[grid](a, b, d, m, n, k, *a.stride(), *b.stride(), *d.stride(), BK=bk, BUFFERS=buffers,
                        num_warps=WARPS)


def sass(variants: list[tuple[int, int]]) -> None:
    """Compile for sm_90 without a GPU and print registers and the main loop's opcode mix."""
    import collections
    import dataclasses
    import tempfile
    from pathlib import Path

    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.experimental.gluon._runtime import GluonASTSource

    sys.path.insert(0, str(Path(__file__).parent))
    from sass_mix import cuobjdump, instructions, main_loop

    target = GPUTarget("cuda", 90, 32)
    signature = {name: "*fp32" for name in ("a_ptr", "b_ptr", "d_ptr")}
    signature |= {name: "i32" for name in ("M", "N", "K", "stride_am", "stride_ak", "stride_bk",
                                           "stride_bn", "stride_dm", "stride_dn")}
    for bk, buffers in variants:
        # unit strides as the JIT specializes them for contiguous operands
        constexprs = {"BK": bk, "BUFFERS": buffers, "stride_ak": 1, "stride_bn": 1, "stride_dn": 1}
        options = make_backend(target).parse_options({"num_warps": WARPS})
        try:
            source = GluonASTSource(_sgemm_kernel, signature | dict.fromkeys(constexprs, "constexpr"),
                                    constexprs)
            compiled = triton.compile(source, target=target, options=dataclasses.asdict(options))
        except Exception as error:  # noqa: BLE001 - a probe: report and go on
            print(f"BK {bk} x{buffers}: failed: {str(error)[-400:]}")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            cubin = Path(tmp) / "k.cubin"
            cubin.write_bytes(compiled.asm["cubin"])
            text = cuobjdump("-sass", str(cubin))
            usage = cuobjdump("-res-usage", str(cubin))
        loop = collections.Counter(main_loop(instructions(text)))
        registers = usage.split("REG:")[1].split()[0] if "REG:" in usage else "?"
        top = "  ".join(f"{count} {op}" for op, count in loop.most_common(8))
        print(f"BK {bk} x{buffers}: {registers} registers, shared {compiled.metadata.shared}; loop: {top}")


def measure(out: str, sizes: list[int], variants: list[tuple[int, int]]) -> None:
    """Check each configuration against fp64 and time it beside torch's SGEMM (CUDA graphs over
    cold copies, interleaved rounds)."""
    from tessera._core.timing import cold_copies, graph_rounds, run_record

    torch.backends.cuda.matmul.allow_tf32 = False
    rows = []
    for n in sizes:
        a, b = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
        copies = cold_copies((a, b))
        outs = [torch.empty(n, n, device="cuda") for _ in copies]
        exact = a.double() @ b.double()
        scale = a.double().abs() @ b.double().abs()
        cases = {"sgemm": [lambda x=x, y=y: torch.matmul(x, y) for x, y in copies]}
        errors = {"sgemm": float(((torch.matmul(a, b).double() - exact).abs() / scale).max())}
        for bk, buffers in variants:
            name = f"gluon 128x128 BK{bk} x{buffers}"
            try:
                launch(a, b, outs[0], bk, buffers)
                torch.cuda.synchronize()
            except Exception as error:  # noqa: BLE001 - a probe: report and go on
                print(name, "failed:", str(error)[-300:])
                continue
            errors[name] = float(((outs[0].double() - exact).abs() / scale).max())
            cases[name] = [lambda x=x, y=y, o=o, bk=bk, buffers=buffers: launch(x, y, o, bk, buffers)
                           for (x, y), o in zip(copies, outs, strict=True)]
        times = graph_rounds(cases, 3)
        vendor = statistics.median(times["sgemm"])
        for name, samples in times.items():
            ms = statistics.median(samples)
            rows.append({"n": n, "case": name, "ms_graph": ms, "tflops": 2 * n**3 / ms / 1e9,
                         "vs_sgemm": vendor / ms, "max_rel_error": errors[name], "samples": samples})
            print(f"{n:6d} {name:24s} {ms:8.3f} ms {2 * n**3 / ms / 1e9:6.1f} TFLOP/s "
                  f"{vendor / ms:5.2f}x err {errors[name]:.2e}", flush=True)
    record = run_record("benchmarks/sgemm_gluon_probe.py " + " ".join(sys.argv[1:]))
    record["rows"] = rows
    with open(out, "w") as f:
        json.dump(record, f, indent=1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", nargs="?")
    parser.add_argument("--sass", action="store_true", help="compile for sm_90 offline, print the loop mix")
    parser.add_argument("--sizes", default="2048,4096,8192")
    parser.add_argument("--bk", default="8,16,32")
    parser.add_argument("--buffers", default="1,2", help="shared-memory buffers: 1 (two barriers a "
                        "step) or 2 (the next step stored beside the current one, one barrier)")
    args = parser.parse_args()
    variants = [(int(bk), int(buffers)) for bk in args.bk.split(",") for buffers in args.buffers.split(",")]
    if args.sass:
        sass(variants)
    elif args.out:
        measure(args.out, [int(v) for v in args.sizes.split(",")], variants)
    else:
        parser.error("give OUT.json (on the GPU) or --sass")


if __name__ == "__main__":
    main()
