"""Probe: Triton's Hopper warp specialization (autoWS) on persistent 16-bit and fp8 GEMMs.

Triton 3.6 warp-specializes a loop marked ``warp_specialize=True`` on sm_90 only when the kernel
has 4 warps and builds its TMA descriptors on the device (``tl.make_tensor_descriptor``): it then
adds a producer warp group and runs two consumer warp groups (12 warps, ``setmaxnreg``). With 8
warps the mark changes nothing, and host-built descriptors fail in the pass (offline sm_90
compiles, docs/architecture.md). This times such kernels beside the vendor (torch.matmul; for
fp8 e4m3 ``torch._scaled_mm`` with fast accumulation, B column-major, bf16 out) and the shipped
``gemm``, each result checked against the vendor's first, graph-replayed over cold operand
copies, the cases interleaved per round. Measured at 636e8d3 and dropped
(``benchmarks/results/ws-probe-h200-636e8d3/``: no configuration beat the shipped kernels, and
the specialized ones with pointer stores returned wrong results).

A configuration is ``BMxBNxBK:stages:group:split:ws`` — split 1 or 2: D stored through a
descriptor whole or in column halves, 0: pointer stores; ws 1: 4 warps, specialized; 0: 8 warps.

Usage: python benchmarks/gemm_ws_probe.py OUT.json [--sizes 8192,4096,MxNxK] [--dtypes bf16,fp16,fp8]
       [--rounds 3] [--configs CONFIG,...]
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Iterator

import torch
import triton
import triton.language as tl

from tessera._core.timing import cold_copies, graph_rounds, run_record, write_result
from tessera.blas import explain, gemm
from tessera.blas.space import Choice


@triton.jit
def _ws_gemm_kernel(a_ptr, b_ptr, d_ptr, scale_ptr, M, N, K, NUM_SMS: tl.constexpr, BM: tl.constexpr,
                    BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, SPLIT: tl.constexpr,
                    WS: tl.constexpr, B_KMAJOR: tl.constexpr, SCALED: tl.constexpr, PTR_STORE: tl.constexpr):
    """D = A·B, A (M, K) row-major, B (K, N) row-major or (B_KMAJOR) stored as (N, K) rows, D
    row-major stored in SPLIT column slices (or with pointer stores); SCALED: D = s·A·B with s
    at scale_ptr (fp8's per-tensor scales folded); persistent programs walking grouped tiles
    NUM_SMS apart, descriptors built here."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    if B_KMAJOR:
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    else:
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BK, BN])
    d_desc = tl.make_tensor_descriptor(d_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN // SPLIT])
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    k_steps = tl.cdiv(K, BK)
    for tile in tl.range(tl.program_id(0), num_m * num_n, NUM_SMS, warp_specialize=WS):
        per_group = GROUP_M * num_n
        first_m = (tile // per_group) * GROUP_M
        rows = min(num_m - first_m, GROUP_M)
        off_m = (first_m + (tile % per_group) % rows) * BM
        off_n = ((tile % per_group) // rows) * BN
        acc = tl.zeros((BM, BN), tl.float32)
        for ki in range(k_steps):
            if B_KMAJOR:
                acc = tl.dot(a_desc.load([off_m, ki * BK]), b_desc.load([off_n, ki * BK]).T, acc)
            else:
                acc = tl.dot(a_desc.load([off_m, ki * BK]), b_desc.load([ki * BK, off_n]), acc)
        if SCALED:
            acc = acc * tl.load(scale_ptr)
        out = acc.to(d_desc.dtype)
        if PTR_STORE:
            rm = off_m + tl.arange(0, BM)
            rn = off_n + tl.arange(0, BN)
            tl.store(d_ptr + rm[:, None] * N + rn[None, :], out, mask=(rm[:, None] < M) & (rn[None, :] < N))
        elif SPLIT == 1:
            d_desc.store([off_m, off_n], out)
        else:
            left, right = tl.reshape(out, (BM, 2, BN // 2)).permute(0, 2, 1).split()
            d_desc.store([off_m, off_n], left)
            d_desc.store([off_m, off_n + BN // 2], right)


def _alloc(size: int, alignment: int, stream: int | None) -> torch.Tensor:
    """Global scratch for the descriptors the kernel builds (``triton.set_allocator``)."""
    return torch.empty(size, dtype=torch.int8, device="cuda")


def ws_gemm(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, cfg: tuple[int, ...], num_sms: int,
            scale: torch.Tensor | None = None) -> torch.Tensor:
    """D = A·B (times ``scale``) with ``cfg`` = (BM, BN, BK, stages, GROUP_M, split, ws); split 0:
    pointer stores; b is (K, N) row-major, or its transpose's (N, K) rows when it is column-major."""
    bm, bn, bk, stages, group, split, ws = cfg
    m, k = a.shape
    n = b.shape[1]
    kmajor = b.stride(0) == 1
    tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
    grid = (min(num_sms, tiles),)
    _ws_gemm_kernel[grid](a, b.t() if kmajor else b, d, d if scale is None else scale, m, n, k,
                          NUM_SMS=grid[0], BM=bm, BN=bn, BK=bk, GROUP_M=group, SPLIT=max(split, 1),
                          WS=bool(ws), B_KMAJOR=kmajor, SCALED=scale is not None, PTR_STORE=split == 0,
                          num_warps=4 if ws else 8, num_stages=stages)
    return d


def dims(size: int | str) -> tuple[int, int, int]:
    """(M, N, K) of a probe size: n for n³, or "MxNxK"."""
    if isinstance(size, int):
        return size, size, size
    m, n, k = (int(v) for v in size.split("x"))
    return m, n, k


def timed_rows(cases: dict[str, list], rounds: int, dtype_name: str, size: int | str) -> list[dict]:
    """Each case's median graph-replayed time (the cases interleaved over ``rounds``) and its ratio
    to the ``torch`` case, for a GEMM of ``size`` (:func:`dims`): result rows, each also printed."""
    times = graph_rounds(cases, rounds)
    m, n, k = dims(size)
    flops = 2 * m * n * k
    vendor = statistics.median(times["torch"])
    rows = []
    for name, samples in times.items():
        ms = statistics.median(samples)
        rows.append({"dtype": dtype_name, "size": size, "case": name, "ms_graph": ms, "samples": samples,
                     "tflops": flops / ms / 1e9, "vs_torch": vendor / ms})
        print(f"{dtype_name} {size} {name:32s} {ms * 1e3:9.1f} us {flops / ms / 1e9:7.1f} TF/s "
              f"{vendor / ms:6.3f}x torch", flush=True)
    return rows


def _parse(text: str) -> tuple[int, ...]:
    tile, stages, group, split, ws = text.split(":")
    bm, bn, bk = (int(v) for v in tile.split("x"))
    return bm, bn, bk, int(stages), int(group), int(split), int(ws)


DEFAULT = ("256x128x64:3:8:1:1,256x128x64:4:8:2:1,128x256x64:3:8:1:1,128x256x64:4:8:2:1,"
           "128x128x64:4:8:1:1,128x128x64:5:8:1:1,256x128x64:3:8:1:0,128x256x64:3:8:1:0")


def shipped_row(dtype_name: str, size: int | str, choice: Choice | None) -> dict:
    """The row naming what ``gemm`` chose for the problem (``explain``'s choice)."""
    return {"dtype": dtype_name, "size": size, "case": "shipped kernel",
            "kernel": None if choice is None else choice.config.short()}


def vendor_cases(dtype: torch.dtype, size: int | str, one: torch.Tensor,
                 b_col_major: bool = False) -> tuple:
    """(a, b, the vendor's fp32 result, cold operand copies, {"torch", "shipped"} call lists) for a
    GEMM of ``size`` (:func:`dims`): 16-bit and tf32 against torch.matmul, B row-major or (with
    ``b_col_major``, as x @ W.t()) column-major; fp8 e4m3 (B column-major, what 8-bit tensor cores
    and ``torch._scaled_mm`` take; per-tensor scales of one, bf16 out) against ``torch._scaled_mm``
    with fast accumulation, the shipped ``gemm`` in the same mode."""
    m, n, k = dims(size)
    a = torch.randn(m, k, device="cuda").to(dtype)
    b = (torch.randn(n, k, device="cuda").to(dtype).t() if b_col_major
         else torch.randn(k, n, device="cuda").to(dtype))
    if dtype.itemsize == 1:
        b = torch.randn(n, k, device="cuda").to(dtype).t()
        want = torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.float32)
        pairs = cold_copies((a, b))
        scaled = {"scale_a": one, "scale_b": one}
        return a, b, want, pairs, {
            "torch": [lambda x=x, y=y: torch._scaled_mm(x, y, **scaled, out_dtype=torch.bfloat16,
                                                         use_fast_accum=True) for x, y in pairs],
            "shipped": [lambda x=x, y=y: gemm(x, y, **scaled, fast_accum=True) for x, y in pairs]}
    pairs = cold_copies((a, b))
    precision = precision_for(a)
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"  # torch.matmul's float32 as gemm's
    return a, b, torch.matmul(a, b).float(), pairs, {
        "torch": [lambda x=x, y=y: torch.matmul(x, y) for x, y in pairs],
        "shipped": [lambda x=x, y=y: gemm(x, y, precision=precision) for x, y in pairs]}


DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.float8_e4m3fn, "tf32": torch.float32}


def precision_for(a: torch.Tensor) -> str:
    """The probes' float32 is tf32 (``--dtypes tf32``: torch.matmul with TF32 allowed beside it)."""
    return "tf32" if a.dtype == torch.float32 else "ieee"


def probe_arguments(default_configs: str, script: str) -> tuple[argparse.Namespace, dict]:
    """The GEMM probes' command line (OUT.json, sizes, dtypes, rounds, configurations) and the
    result file's opening fields (``run_record``)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--sizes", default="8192,4096")
    parser.add_argument("--dtypes", default="bf16,fp16")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--configs", default=default_configs)
    args = parser.parse_args()
    return args, run_record(f"python {script} " + " ".join(
        f"--{k} {v}" for k, v in vars(args).items() if k != "out"))


def problems(args: argparse.Namespace, one: torch.Tensor) -> Iterator[tuple]:
    """Per dtype and size of the command line (n for n³, or MxNxK): (dtype name, fp8?, size, a, b,
    the vendor's result, its largest magnitude, cold operand copies, the vendor's and the shipped
    call lists)."""
    for dtype_name in args.dtypes.split(","):
        for size in (s if "x" in s else int(s) for s in args.sizes.split(",")):
            a, b, want, pairs, cases = vendor_cases(DTYPES[dtype_name], size, one)
            yield dtype_name, dtype_name == "fp8", size, a, b, want, float(want.abs().max()), pairs, cases


def main() -> None:
    args, record = probe_arguments(DEFAULT, "benchmarks/gemm_ws_probe.py")
    triton.set_allocator(_alloc)
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    configs = [_parse(c) for c in args.configs.split(",")]
    rows = []
    one = torch.ones((), device="cuda")
    for dtype_name, fp8, size, a, b, want, scale, pairs, cases in problems(args, one):
        out_dtype = torch.bfloat16 if fp8 else a.dtype
        sets = [(x, y, torch.empty(*dims(size)[:2], device="cuda", dtype=out_dtype)) for x, y in pairs]
        product_scale = one if fp8 else None
        errors = {}
        for cfg in configs:
            store = f"split{cfg[5]}" if cfg[5] else "ptr"
            warps = "ws" if cfg[6] else "w8"
            name = "x".join(map(str, cfg[:3])) + f" s{cfg[3]} g{cfg[4]} {store} {warps}"
            d = torch.empty(*dims(size)[:2], device="cuda", dtype=out_dtype)
            try:
                got = ws_gemm(a, b, d, cfg, num_sms, product_scale).float()
            except Exception as exc:  # noqa: BLE001 - a probe reports what failed and goes on
                errors[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                continue
            err = float((got - want).abs().max()) / scale
            if err > 0.02:
                errors[name] = f"wrong: max |diff| {err:.3g} of max |torch|"
                continue
            cases[name] = [lambda x=x, y=y, z=z, cfg=cfg, s=product_scale:
                           ws_gemm(x, y, z, cfg, num_sms, s) for x, y, z in sets]
        rows += timed_rows(cases, args.rounds, dtype_name, size)
        for name, why in errors.items():
            rows.append({"dtype": dtype_name, "size": size, "case": name, "error": why})
            print(f"{dtype_name} {size} {name:32s} {why}", flush=True)
        choice = explain(a, b, scale_a=one, scale_b=one, fast_accum=True) if fp8 else explain(a, b)
        rows.append(shipped_row(dtype_name, size, choice))
    write_result(args.out, {**record, "rows": rows})


if __name__ == "__main__":
    main()
