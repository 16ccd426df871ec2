"""Probe: a warp-specialized persistent Hopper GEMM written in Gluon, beside cuBLAS.

Triton's automatic warp specialization gave no gain on the H200 (``gemm_ws_probe.py``). Gluon
(``triton.experimental.gluon``, in Triton 3.6 and 3.9) states the partitions explicitly: here one
loader warp issues every TMA copy of A and B into a ring of ``STAGES`` shared-memory stages
(``ready``/``empty`` mbarriers a stage), and the default partition's warp groups (4 or 8 warps)
run the asynchronous wgmma on each stage and hand it back, then store their tile through TMA —
so the next tile's loads run during this tile's epilogue, as in cuBLAS's warp-specialized
kernels. Persistent programs walk the output tiles grouped GROUP_M rows at a time. 16-bit A
(M, K) and B (K, N) row-major, D row-major, fp32 accumulation.

Each configuration is checked against torch.matmul first (not timed if wrong), then timed with
torch.matmul and the shipped ``gemm`` from CUDA graphs over cold operand copies, the cases
interleaved per round (``graph_rounds``).

Written for Triton 3.6's Gluon (the GPU's): 3.9 renamed the TMA copies (``async_load``,
``async_store``) and the partition barrier, so it does not compile there.

Usage: python benchmarks/gemm_gluon_probe.py OUT.json [--sizes 8192,4096] [--dtypes bf16,fp16]
       [--rounds 3] [--configs BMxBNxBK:stages:warps:group[:in_flight],...] [--compile-only]
(``--compile-only``: compile each configuration for sm_90 with the running Triton, no GPU needed)
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_init,
        warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

GL_DTYPES = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}
# a barrier across the partition's warps: ``thread_barrier`` in Triton 3.6, ``barrier`` in 3.9
_partition_barrier = getattr(gl, "barrier", None) or gl.thread_barrier


@gluon.constexpr_function
def accumulator_layout(block_m, block_n, num_warps):
    """The wgmma accumulator's register layout: warp groups stacked along M (4 warps a group,
    16 rows a warp per instruction), one instruction as wide as the tile (N ≤ 256)."""
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                     instr_shape=[16, block_n, 16])


@gluon.jit
def _tile_origin(tile, num_m, num_n, BM: gl.constexpr, BN: gl.constexpr, GROUP_M: gl.constexpr):
    """(row, column) of output tile ``tile`` in grouped order (GROUP_M tile rows share B)."""
    per_group = GROUP_M * num_n
    first_m = (tile // per_group) * GROUP_M
    rows = gl.minimum(num_m - first_m, GROUP_M)
    return (first_m + (tile % per_group) % rows) * BM, ((tile % per_group) // rows) * BN


@gluon.jit
def _loader(a_desc, b_desc, d_desc, a_bufs, b_bufs, ready, empty, M, N, K, NUM_SMS: gl.constexpr,
            GROUP_M: gl.constexpr, STAGES: gl.constexpr, IN_FLIGHT: gl.constexpr):
    """The loader warp: for every K step of every tile of this program, wait until the stage is
    free (``empty``), then copy A's and B's tiles into it, completing on ``ready``."""
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    num_m = gl.cdiv(M, BM)
    num_n = gl.cdiv(N, BN)
    step = 0
    for tile in range(gl.program_id(0), num_m * num_n, NUM_SMS):
        off_m, off_n = _tile_origin(tile, num_m, num_n, BM, BN, GROUP_M)
        for k in range(0, K, BK):
            s = step % STAGES
            mbarrier.wait(empty.index(s), ((step // STAGES) & 1) ^ 1)  # a fresh stage passes at once
            mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(a_desc, [off_m, k], ready.index(s), a_bufs.index(s))
            tma.async_copy_global_to_shared(b_desc, [k, off_n], ready.index(s), b_bufs.index(s))
            step += 1


@gluon.jit
def _hand_back(acc, a_bufs, b_bufs, s, empty, previous, STAGES: gl.constexpr, ISSUE: gl.constexpr):
    """Give the previous step's stage back to the loader (when there was one: every warp group's
    wgmma on it has finished), then, with ISSUE, start this step's wgmma on stage s."""
    if previous:
        _partition_barrier()
        mbarrier.arrive(empty.index((s + STAGES - 1) % STAGES), count=1)
    if ISSUE:
        acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s), acc, is_async=True)
    return acc


@gluon.jit
def _multiplier(a_desc, b_desc, d_desc, a_bufs, b_bufs, ready, empty, M, N, K, NUM_SMS: gl.constexpr,
                GROUP_M: gl.constexpr, STAGES: gl.constexpr, IN_FLIGHT: gl.constexpr):
    """The default partition: wgmma on each stage as it arrives, IN_FLIGHT (0 or 1) of them left
    running when the next is issued, a stage handed back once its wgmma has finished reading it;
    the tile stored through D's descriptor (the store overlaps the next tile's first steps)."""
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = b_desc.block_type.shape[1]
    layout: gl.constexpr = accumulator_layout(BM, BN, gl.num_warps())
    d_smem = gl.allocate_shared_memory(d_desc.dtype, d_desc.block_type.shape, d_desc.layout)
    num_m = gl.cdiv(M, BM)
    num_n = gl.cdiv(N, BN)
    step = 0
    for tile in range(gl.program_id(0), num_m * num_n, NUM_SMS):
        off_m, off_n = _tile_origin(tile, num_m, num_n, BM, BN, GROUP_M)
        acc = warpgroup_mma_init(gl.zeros((BM, BN), gl.float32, layout))
        for k in range(0, K, BK):
            s = step % STAGES
            mbarrier.wait(ready.index(s), (step // STAGES) & 1)
            if IN_FLIGHT == 0:  # the last wgmma finishes before this one is issued
                acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
                acc = _hand_back(acc, a_bufs, b_bufs, s, empty, k > 0, STAGES, True)
            else:  # this one queued behind the last, then wait for the last only
                acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s), acc, is_async=True)
                acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
                acc = warpgroup_mma_init(_hand_back(acc, a_bufs, b_bufs, s, empty, k > 0, STAGES, False))
            step += 1
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        _partition_barrier()  # every warp group's last wgmma has read its stage
        mbarrier.arrive(empty.index((step + STAGES - 1) % STAGES), count=1)
        tma.store_wait(pendings=0)  # the previous tile's store has left d_smem
        d_smem.store(acc.to(d_desc.dtype))
        fence_async_shared()
        tma.async_copy_shared_to_global(d_desc, [off_m, off_n], d_smem)
    tma.store_wait(pendings=0)


@gluon.jit
def _gluon_gemm_kernel(a_desc, b_desc, d_desc, M, N, K, NUM_SMS: gl.constexpr, GROUP_M: gl.constexpr,
                       STAGES: gl.constexpr, IN_FLIGHT: gl.constexpr):
    """D = A·B: the stage ring and its barriers, then the loader warp beside the multiplying warps."""
    dtype: gl.constexpr = a_desc.dtype
    a_bufs = gl.allocate_shared_memory(dtype, [STAGES] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(dtype, [STAGES] + b_desc.block_type.shape, b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    args = (a_desc, b_desc, d_desc, a_bufs, b_bufs, ready, empty, M, N, K, NUM_SMS, GROUP_M, STAGES, IN_FLIGHT)
    gl.warp_specialize([(_multiplier, args), (_loader, args)], [1], [24])


def _descriptors(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, bm: int, bn: int,
                 bk: int) -> tuple[TensorDescriptor, TensorDescriptor, TensorDescriptor]:
    dtype = GL_DTYPES[a.dtype]

    def make(t: torch.Tensor, block: list[int]) -> TensorDescriptor:
        return TensorDescriptor.from_tensor(t, block, gl.NVMMASharedLayout.get_default_for(block, dtype))
    return make(a, [bm, bk]), make(b, [bk, bn]), make(d, [bm, bn])


def gluon_gemm(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, cfg: tuple[int, ...], num_sms: int) -> None:
    """d = a @ b with ``cfg`` = (BM, BN, BK, stages, warps, GROUP_M, wgmma left in flight)."""
    bm, bn, bk, stages, warps, group, in_flight = cfg
    m, k = a.shape
    n = b.shape[1]
    grid = (min(num_sms, triton.cdiv(m, bm) * triton.cdiv(n, bn)),)
    _gluon_gemm_kernel[grid](*_descriptors(a, b, d, bm, bn, bk), m, n, k, NUM_SMS=grid[0], GROUP_M=group,
                             STAGES=stages, IN_FLIGHT=in_flight, num_warps=warps)


def _parse(text: str) -> tuple[int, ...]:
    tile, stages, warps, group, *in_flight = text.split(":")
    return (*(int(v) for v in tile.split("x")), int(stages), int(warps), int(group), int((in_flight or ["0"])[0]))


def compile_only(configs: list[tuple[int, ...]]) -> None:
    """Compile each configuration for sm_90 with the running Triton (no GPU): shared memory and
    warps of the binary, or why it failed."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.experimental.gluon._runtime import GluonASTSource

    from tessera._core.launch import jit_specialization

    target = GPUTarget("cuda", 90, 32)
    for cfg in configs:
        bm, bn, bk, stages, warps, group, in_flight = cfg
        a, b, d = torch.empty(8192, 8192, dtype=torch.bfloat16), torch.empty(8192, 8192, dtype=torch.bfloat16), \
            torch.empty(8192, 8192, dtype=torch.bfloat16)
        args = (*_descriptors(a, b, d, bm, bn, bk), 8192, 8192, 8192)
        try:
            signature, constants, attrs, options = jit_specialization(
                _gluon_gemm_kernel, args, {"NUM_SMS": 132, "GROUP_M": group, "STAGES": stages,
                                                  "IN_FLIGHT": in_flight}, warps, 3,
                make_backend(target))
            compiled = triton.compile(GluonASTSource(_gluon_gemm_kernel, signature, constants, attrs),
                                      target=target, options=options.__dict__)
            print(cfg, "ok: shared", compiled.metadata.shared, "warps", compiled.metadata.num_warps, flush=True)
        except Exception as exc:  # noqa: BLE001 - a probe reports each configuration's failure
            print(cfg, "failed:", str(exc).strip()[:1500], flush=True)


DEFAULT = "256x128x64:3:8:8,128x256x64:3:8:8,128x128x64:4:4:8"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--sizes", default="8192,4096")
    parser.add_argument("--dtypes", default="bf16,fp16")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--configs", default=DEFAULT)
    parser.add_argument("--compile-only", action="store_true")
    args = parser.parse_args()
    configs = [_parse(c) for c in args.configs.split(",")]
    if args.compile_only:
        compile_only(configs)
        return

    from tessera._core.timing import cold_copies, graph_rounds, run_record
    from tessera.blas import explain, gemm

    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    record = run_record("python benchmarks/gemm_gluon_probe.py " + " ".join(
        f"--{k} {v}" for k, v in vars(args).items() if k not in ("out", "compile_only")))
    rows = []
    for dtype_name in args.dtypes.split(","):
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype_name]
        for size in (int(s) for s in args.sizes.split(",")):
            a = torch.randn(size, size, device="cuda").to(dtype)
            b = torch.randn(size, size, device="cuda").to(dtype)
            want = torch.matmul(a, b).float()
            scale = float(want.abs().max())
            sets = cold_copies((a, b, torch.empty_like(a)))
            cases = {"torch": [lambda x=x, y=y: torch.matmul(x, y) for x, y, _ in sets],
                     "shipped": [lambda x=x, y=y: gemm(x, y) for x, y, _ in sets]}
            for cfg in configs:
                name = "gluon " + "x".join(map(str, cfg[:3])) + f" s{cfg[3]} w{cfg[4]} g{cfg[5]} f{cfg[6]}"
                d = torch.empty_like(a)
                try:
                    gluon_gemm(a, b, d, cfg, num_sms)
                    err = float((d.float() - want).abs().max()) / scale
                except Exception as exc:  # noqa: BLE001 - a probe reports what failed and goes on
                    rows.append({"dtype": dtype_name, "size": size, "case": name,
                                 "error": f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300]}"})
                    print(dtype_name, size, name, rows[-1]["error"], flush=True)
                    continue
                if err > 0.02:
                    rows.append({"dtype": dtype_name, "size": size, "case": name,
                                 "error": f"wrong: max |diff| {err:.3g} of max |torch|"})
                    print(dtype_name, size, name, rows[-1]["error"], flush=True)
                    continue
                cases[name] = [lambda x=x, y=y, z=z, cfg=cfg: gluon_gemm(x, y, z, cfg, num_sms) for x, y, z in sets]
            times = graph_rounds(cases, args.rounds)
            flops = 2 * size**3
            vendor = statistics.median(times["torch"])
            for name, samples in times.items():
                ms = statistics.median(samples)
                rows.append({"dtype": dtype_name, "size": size, "case": name, "ms_graph": ms, "samples": samples,
                             "tflops": flops / ms / 1e9, "vs_torch": vendor / ms})
                print(f"{dtype_name} {size} {name:32s} {ms * 1e3:9.1f} us {flops / ms / 1e9:7.1f} TF/s "
                      f"{vendor / ms:6.3f}x torch", flush=True)
            choice = explain(a, b)
            rows.append({"dtype": dtype_name, "size": size, "case": "shipped kernel",
                         "kernel": None if choice is None else choice.config.short()})
    with open(args.out, "w") as f:
        json.dump({**record, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
