"""Probe: tf32 on ``gemm_ws`` with a transform warp group — B transposed K-major in shared memory
(no copy before the call) and both operands rounded to nearest, as cuBLAS rounds them.

Two gaps of tf32 on Hopper meet here (docs/status.md, "Ideas not yet timed"):
- wgmma reads 32-bit operands from shared memory K-major only, so ``gemm`` copies a row-major B
  K-major in a launch of its own before the GEMM (~4 % of a tf32 8192³ call) or multiplies it
  swapped (its Bᵀ through registers, ~6 % slower);
- the tensor cores truncate float32 operands to TF32, cuBLAS rounds them to nearest: over a long
  K of same-sign products Tessera's results lean toward zero ~50× more than cuBLAS's
  (``tf32_rounding_probe.py``, ``gpu-session-h100-abbde37/``).

Two forms. The producer form: ``gemm_ws``'s multiplying warps as shipped beside a producer warp
group (4 warps) that issues the TMA copies STAGES − 1 steps ahead and, for each stage TMA has
filled (``landed``), rounds A's tile in place (``cvt.rna.tf32.f32``) and turns B's row-major
(BK × BN) box into the (BN × BK) K-major tile the multiplier reads, in the same bytes: both are
BN / 32 swizzled 32 × 32 float32 blocks of 4 KiB (``gemm_ws._swizzled_bases``), row k of block j
in the box holding what column k of block j holds in the K-major tile, so each block is read
whole into registers, the group waits for its warps, and the block is written back transposed
(rounded or not); then a fence for the async proxy and the arrive on the stage's ``ready`` the
multiplier waits for as it waited for TMA's. On an H100 (429cd79): exact, cuBLAS's bias when
rounded, 0.47–0.54× torch — the producer's serial work per stage is the limit. The multiplier's
form: ``gemm_ws``'s loader warp as shipped, and the multiplying warps (twice the threads)
transform each landed stage themselves before queueing its wgmma, while the previous stage's
wgmma is still in flight. With B column-major (x @ W.t()) only the rounding runs. Shared memory
is as shipped in both; the producer form's multiplier is ``gemm_ws._multiplier`` as it is, shown
B's K-major tile through a descriptor of that shape (never loaded from).

What shared memory allows (eighty-fourth session, a count, not a measurement). An SM's shared
memory serves 128 bytes a clock; the tensor cores do 2048 tf32 FLOP a clock (H100 and H200), so a
32-deep K step of a 128 × 256 tile is 1024 clocks of wgmma. Each wgmma instruction reads its
shared-memory operands itself: 128 × 256 on 8 warps is one m64n256k8 a warp group a piece of 8,
2 + 8 KiB, so 80 KiB a step (62.5 % of the bandwidth; the same share as bf16's 128 × 256 × 64);
256 × 128 is two m64n128k8 a warp group a piece, 2 + 4 KiB each, 96 KiB (75 %). Transposing B
in place reads and writes its tile: 64 KiB a step at 128 × 256 (80 + 64 = 144 KiB, 112 % of the
bandwidth: at best ~0.89× the kernel alone), 32 KiB at 256 × 128 (128 KiB, 100 %); rounding A
in place adds twice A's tile (32 or 64 KiB). Only a run shows whether wgmma's reads cost what
the count says; if the multiplier's form lands near those ceilings, no in-kernel transform can
remove tf32's copy, and rounding as cuBLAS does costs at least a pass over the operands.

Checks before timing, exact: transposed and not rounded, D equals ``gemm_ws`` (the same
configuration) on a K-major copy of B bit for bit (the same tiles and K loop); rounded, D equals
it on operands rounded to nearest beforehand. Then the bias (uniform [0, 1) operands, 2048³:
mean signed error relative to fp64) of each beside torch's and the shipped call's. Timed from
CUDA graphs, interleaved with torch.matmul (TF32 on), the shipped call (B row-major and K-major)
and ``gemm_ws`` alone on a K-major B.

Usage: python benchmarks/tf32_transform_probe.py OUT.json [--sizes 4096,8192] [--rounds 3]
           [--configs BMxBNxBK:stages:warps:group[:split],...]          (GPU)
       python benchmarks/tf32_transform_probe.py --offline [--configs ...]   (no GPU: compile each
           mode for sm_90 with the running Triton and print shared memory, registers and spills)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from typing import NamedTuple

import torch
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

from benchmarks.gemm_gluon_probe import parse_config
from benchmarks.tf32_rounding_probe import nearest
from tessera._core.launch import Launcher, cdiv
from tessera.blas.kernels.gemm_tma import fitting_stages, is_col_major
from tessera.blas.kernels.gemm_ws import (
    LOADER_REGISTERS,
    WsConfig,
    _accumulator_layout,
    _hand_back,
    _loader,
    _multiplier,
    _store,
    block_descriptor,
    grouped_tile_origin,
    stage_barriers,
)
from tessera.blas.kernels.gluon_names import cta_barrier, reinterpret, tma_load

PRODUCER_WARPS = gl.constexpr(4)
PRODUCER_REGISTERS = gl.constexpr(168)  # the launch's own (64 Ki over 12 warps): no setmaxnreg dance
DEFAULT = "128x256x32:3:8:8:2"  # the tf32 NT file's 4096³ row (gemm_ws), the 8192³ tile


@gluon.jit
def _nearest(x):
    """x rounded to TF32 (10 fraction bits), ties away from zero, as cuBLAS's TF32 GEMMs take
    float32 operands (``cvt.rna``; the tensor cores would cut the low 13 bits instead)."""
    return gl.inline_asm_elementwise("cvt.rna.tf32.f32 $0, $1;", "=r,r", [x], dtype=gl.float32,
                                     is_pure=True, pack=1)


@gluon.constexpr_function
def _block_registers(num_warps):
    """A 32 × 32 float32 block in registers, read and written back transposed with no bank
    conflicts under the 128-byte swizzle (Gluon's ``bank_conflicts``, Triton 3.9). A warp group:
    each thread 2 rows × 4 columns (a 16-byte read a row), transposed 4 rows × 2 columns (8-byte
    writes); 16 threads down the rows, 2 across. Two (the multiplying warps): 2 × 2 a thread, 8
    threads down, 4 across, the warps 2 × 4. The plain 1 × 4 a thread, 8 threads a row, reads
    without conflicts but writes transposed with 3 (4-way)."""
    if num_warps == 4:
        return gl.BlockedLayout([2, 4], [16, 2], [1, 4], [1, 0])
    assert num_warps == 8, "one or two warp groups"
    return gl.BlockedLayout([2, 2], [8, 4], [2, 4], [1, 0])


@gluon.jit
def _transform_stage(a_tile, b_tile, BN: gl.constexpr, ROUND: gl.constexpr, TRANSPOSE: gl.constexpr):
    """One landed stage made what wgmma reads, by the calling partition's warps: A's (BM × 32)
    tile rounded in place (``ROUND``); B's (32 × BN) box turned into its K-major (BN × 32) tile
    block by block (``TRANSPOSE``; each 4 KiB block read whole, the warps waited for, then written
    back transposed, rounded with ``ROUND``), or B's K-major tile rounded in place; then the
    writes fenced for the async proxy and the warps waited for."""
    BM: gl.constexpr = a_tile.type.shape[0]
    regs: gl.constexpr = _block_registers(gl.num_warps())
    swizzled: gl.constexpr = a_tile.type.layout  # a 32-column float32 tile's swizzle, B's blocks' too
    if ROUND:
        a_blocks = reinterpret(a_tile, gl.float32, [BM // 32, 32, 32], swizzled)
        for i in gl.static_range(BM // 32):
            a_blocks.index(i).store(_nearest(a_blocks.index(i).load(regs)))
    b_blocks = reinterpret(b_tile, gl.float32, [BN // 32, 32, 32], swizzled)
    for j in gl.static_range(BN // 32):
        block = b_blocks.index(j).load(regs)
        if ROUND:
            block = _nearest(block)
        if TRANSPOSE:
            cta_barrier()  # every warp has read block j before any overwrites it
            b_blocks.index(j).store(block.permute((1, 0)))
        elif ROUND:
            b_blocks.index(j).store(block)
    fence_async_shared()  # the writes, made through the generic proxy, seen by wgmma
    cta_barrier()


@gluon.jit
def _issue(p, a_desc, b_desc, a_bufs, b_bufs, landed, empty, num_m, num_n, k_steps, GROUP_M, STAGES):
    """The TMA copies of this program's ``p``-th K step (tiles in ``gemm_ws``'s grouped order)
    into stage p mod STAGES, once the multiplier has handed that stage back."""
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    TRANSPOSE: gl.constexpr = b_desc.block_type.shape[0] == BK  # a (BK, BN) box
    BN: gl.constexpr = b_desc.block_type.shape[1] if TRANSPOSE else b_desc.block_type.shape[0]
    tile = gl.program_id(0) + (p // k_steps) * gl.num_programs(0)
    off_m, off_n = grouped_tile_origin(tile, num_m, num_n, BM, BN, GROUP_M)
    k = (p % k_steps) * BK
    s = p % STAGES
    mbarrier.wait(empty.index(s), ((p // STAGES) & 1) ^ 1)  # a fresh stage passes at once
    mbarrier.expect(landed.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
    tma_load(a_desc, [off_m, k], landed.index(s), a_bufs.index(s))
    if TRANSPOSE:
        tma_load(b_desc, [k, off_n], landed.index(s), b_bufs.index(s))
    else:
        tma_load(b_desc, [off_n, k], landed.index(s), b_bufs.index(s))


@gluon.jit
def _producer(a_desc, b_desc, a_bufs, b_bufs, landed, ready, empty, M, N, K, GROUP_M, STAGES,
              ROUND: gl.constexpr, TRANSPOSE: gl.constexpr):
    """The loading and transforming warp group: the copies of STAGES − 1 K steps ahead, then for
    each step, once TMA has filled its stage: A's tile rounded in place (``ROUND``), B's (BK × BN)
    box turned into its K-major (BN × BK) tile block by block (``TRANSPOSE``; rounded too with
    ``ROUND``) or B's K-major tile rounded in place; the writes fenced for the async proxy, the
    group's warps waited for, ``ready`` arrived on; then the step STAGES − 1 ahead copied (its
    stage is the previous step's, which the multiplier hands back once this step is ready — so
    the copies are issued after the arrive, never before)."""
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    gl.static_assert(BK == 32, "the 32 × 32 blocks are one K step of 32 float32")
    BN: gl.constexpr = b_desc.block_type.shape[1] if TRANSPOSE else b_desc.block_type.shape[0]
    num_m = gl.cdiv(M, BM)
    num_n = gl.cdiv(N, BN)
    k_steps = gl.cdiv(K, BK)
    steps = gl.cdiv(num_m * num_n - gl.program_id(0), gl.num_programs(0)) * k_steps
    for p in range(0, gl.minimum(STAGES - 1, steps)):
        _issue(p, a_desc, b_desc, a_bufs, b_bufs, landed, empty, num_m, num_n, k_steps, GROUP_M, STAGES)
    for step in range(0, steps):
        s = step % STAGES
        mbarrier.wait(landed.index(s), (step // STAGES) & 1)
        _transform_stage(a_bufs.index(s), b_bufs.index(s), BN, ROUND, TRANSPOSE)
        mbarrier.arrive(ready.index(s), count=1)
        if step + STAGES - 1 < steps:
            _issue(step + STAGES - 1, a_desc, b_desc, a_bufs, b_bufs, landed, empty, num_m, num_n, k_steps,
                   GROUP_M, STAGES)


@gluon.jit
def _transforming_multiplier(a_desc, kmajor_desc, d_desc, a_bufs, b_bufs, kmajor, landed, empty, M, N, K,
                             GROUP_M, STAGES, ROUND: gl.constexpr, TRANSPOSE: gl.constexpr):
    """``gemm_ws``'s multiplier (one partition, B K-major) that transforms each stage itself
    once it has landed (:func:`_transform_stage`, on all its warps) and then queues its wgmma:
    the transform of step i runs while step i − 1's wgmma is still in flight (one is left in
    flight), and the loader warp, a partition of its own, keeps its STAGES steps ahead."""
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    BN: gl.constexpr = kmajor_desc.block_type.shape[0]
    layout: gl.constexpr = _accumulator_layout(BM, BN, gl.num_warps(), gl.float32)
    d_smem = gl.allocate_shared_memory(d_desc.dtype, d_desc.block_type.shape, d_desc.layout)
    num_m = gl.cdiv(M, BM)
    num_n = gl.cdiv(N, BN)
    step = 0
    for tile in range(gl.program_id(0), num_m * num_n, gl.num_programs(0)):
        off_m, off_n = grouped_tile_origin(tile, num_m, num_n, BM, BN, GROUP_M)
        acc = warpgroup_mma_init(gl.zeros((BM, BN), gl.float32, layout))
        for k in range(0, K, BK):
            s = step % STAGES
            mbarrier.wait(landed.index(s), (step // STAGES) & 1)
            _transform_stage(a_bufs.index(s), b_bufs.index(s), BN, ROUND, TRANSPOSE)
            acc = warpgroup_mma(a_bufs.index(s), kmajor.index(s).permute((1, 0)), acc, is_async=True)
            acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc,))
            if k > 0:
                _hand_back(empty, s, STAGES)
            acc = warpgroup_mma_init(acc)
            step += 1
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        _hand_back(empty, step % STAGES, STAGES)  # the tile's last stage
        _store(d_desc, d_smem, d_smem, acc.to(d_desc.dtype), off_m, off_n, BM, BN)
    tma.store_wait(pendings=0)


@gluon.jit
def _gemm_tf_kernel(a_desc, b_desc, kmajor_desc, d_desc, M, N, K, GROUP_M: gl.constexpr,
                    STAGES: gl.constexpr, ROUND: gl.constexpr, IN_MULTIPLIER: gl.constexpr):
    """D = A·B in tf32: ``gemm_ws``'s multiplier beside the producer warp group (``landed``: TMA's
    stages; ``ready``: the transformed ones), or with ``IN_MULTIPLIER`` the transforming
    multiplier beside ``gemm_ws``'s loader warp. ``kmajor_desc`` has the K-major tile's block and
    layout (B's own descriptor where B is column-major)."""
    TRANSPOSE: gl.constexpr = b_desc.block_type.shape[0] == a_desc.block_type.shape[1]  # a (BK, BN) box
    BN: gl.constexpr = kmajor_desc.block_type.shape[0]
    BK: gl.constexpr = kmajor_desc.block_type.shape[1]
    a_bufs = gl.allocate_shared_memory(gl.float32, [STAGES] + a_desc.block_type.shape, a_desc.layout)  # noqa: RUF005
    b_bufs = gl.allocate_shared_memory(gl.float32, [STAGES] + b_desc.block_type.shape, b_desc.layout)  # noqa: RUF005
    kmajor = b_bufs
    if TRANSPOSE:
        kmajor_layout: gl.constexpr = kmajor_desc.layout
        kmajor = reinterpret(b_bufs, gl.float32, [STAGES, BN, BK], kmajor_layout)
    landed, empty = stage_barriers(STAGES)
    if IN_MULTIPLIER:
        loads = (a_desc, b_desc, d_desc, a_bufs, b_bufs, landed, empty, M, N, K, GROUP_M, STAGES, 0)
        gl.warp_specialize([(_transforming_multiplier, (a_desc, kmajor_desc, d_desc, a_bufs, b_bufs, kmajor,
                                                        landed, empty, M, N, K, GROUP_M, STAGES, ROUND,
                                                        TRANSPOSE)),
                            (_loader, loads)], [1], [LOADER_REGISTERS])
        return
    # the producer form: gemm_ws's multiplier waits on ``ready`` (the transformed stages) and needs
    # its ``turns`` barriers and an epilogue tuple (unscaled: never read)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
    turns = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2):
        mbarrier.init(turns.index(i), count=1)
    epilogue = (M, M, None, M, M)
    ring = (a_desc, kmajor_desc, d_desc, a_bufs, kmajor, ready, empty, turns, epilogue, M, N, K, GROUP_M,
            STAGES)
    first, groups, pdl = 0, 1, 0
    # 8 multiplying warps and the producer's 4 make 12, 168 registers a thread (as gemm_ws's 8 + 1,
    # padded to a warp group); 16 warps (a loader warp of its own beside 4 transforming ones) leave
    # 128, too few for the 128-register accumulator (ptxas C7602). ROUND and TRANSPOSE are passed
    # inline, so that they stay constants (gemm_ws._gemm_ws_kernel says why).
    gl.warp_specialize([(_multiplier, (ring, first, groups, 0, False, pdl)),
                        (_producer, (a_desc, b_desc, a_bufs, b_bufs, landed, ready, empty, M, N, K, GROUP_M,
                                     STAGES, ROUND, TRANSPOSE))],
                       [PRODUCER_WARPS], [PRODUCER_REGISTERS])


_launch = Launcher(_gemm_tf_kernel)


def launch_transformed(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, config: WsConfig, round_: bool,
                       num_sms: int, in_multiplier: bool = False) -> None:
    """D = A·B (float32, tf32 tensor cores; A and D row-major, B either way) on ``config`` with
    each stage transformed in shared memory (by the producer warp group, or by the multiplying
    warps ``in_multiplier``): B row-major transposed K-major, both operands rounded to nearest
    with ``round_``."""
    if config.block_k != 32 or config.pingpong or config.halves or config.num_warps != 8:
        raise ValueError(f"{config.short()}: the probe takes 32-deep K steps and one multiplying partition "
                         f"of 8 warps")
    m, k = a.shape
    n = b.shape[1]
    if is_col_major(b):
        b_desc = kmajor_desc = block_descriptor(b.t(), [config.block_n, config.block_k])
    else:
        b_desc = block_descriptor(b, [config.block_k, config.block_n])
        shape_only = torch.empty(config.block_n, config.block_k, device=b.device)  # never loaded from
        kmajor_desc = block_descriptor(shape_only, [config.block_n, config.block_k])
    tiles = cdiv(m, config.block_m) * cdiv(n, config.block_n)
    d_desc = block_descriptor(d, [config.block_m, config.block_n // config.epilogue_split])
    _launch((min(num_sms, tiles),),
            (block_descriptor(a, [config.block_m, config.block_k]), b_desc, kmajor_desc, d_desc, m, n, k),
            dict(GROUP_M=config.group_m, STAGES=fitting_stages(config, 4, 4, d), ROUND=round_,
                 IN_MULTIPLIER=in_multiplier),
            config.num_warps, 1)


class Mode(NamedTuple):
    name: str
    in_multiplier: bool  # the multiplying warps transform each stage, not a producer warp group
    rounded: bool
    b_col_major: bool  # B K-major already: only the rounding runs


MODES = tuple(Mode(f"{what}{', in the multiplier' if inside else ''}", inside, rounded, b_col)
              for inside in (False, True)
              for what, rounded, b_col in (("transposed", False, False), ("transposed, rounded", True, False),
                                           ("rounded, B column-major", True, True)))


SASS_COUNTS = {"spill loads": r"\bLDL\b", "spill stores": r"\bSTL\b", "shared loads": r"\bLDS\b",
               "shared stores": r"\bSTS\b", "wgmma": "HGMMA"}


def offline(configs: str) -> list[dict]:
    """Compile every mode of each configuration for sm_90 without a GPU (as a pack build does) and
    print, a JSON line each, its shared memory, its SASS's registers, spills and shared-memory
    accesses."""
    from benchmarks.sass_mix import compiled_offline, sass_counts
    from tessera._core.launch import building_for, capture

    rows = []
    for text in configs.split(","):
        config = parse_config(text, fp8=False)
        for mode in MODES:
            a = torch.empty(4096, 4096)
            b = torch.empty(4096, 4096).t() if mode.b_col_major else torch.empty(4096, 4096)
            with capture() as calls, building_for("cuda", "sm_90"):
                d = torch.empty(4096, 4096)
                launch_transformed(a, b, d, config, mode.rounded, 132, mode.in_multiplier)
            sass, used, shared = compiled_offline(calls[0])
            row = {"config": config.short(), "mode": mode.name, "shared memory": shared, "registers": used,
                   **sass_counts(sass, SASS_COUNTS)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def _forced(config: WsConfig, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``gemm_ws`` with ``config`` as ``gemm`` runs it (B K-major: no transform)."""
    from tessera import blas
    from tessera.blas import space

    with space.forced(config):
        return blas.gemm(a, b, precision="tf32")


def _transformed(config: WsConfig, a: torch.Tensor, b: torch.Tensor, mode: Mode) -> torch.Tensor:
    d = torch.empty(a.shape[0], b.shape[1], device=a.device)
    programs = torch.cuda.get_device_properties(a.device).multi_processor_count
    launch_transformed(a, b, d, config, mode.rounded, programs, mode.in_multiplier)
    return d


def _bias(product: torch.Tensor, exact: torch.Tensor) -> float:
    """Mean signed error of ``product`` relative to the exact one (positive entries)."""
    return float(((product.double() - exact) / exact).mean())


def checks(configs: list[WsConfig]) -> dict[str, dict]:
    """Each mode against ``gemm_ws`` on a K-major B (on operands rounded first where the mode
    rounds): bit for bit, since the tiles and K loop are the same; and the bias of each beside
    torch's and the shipped call's, at 2048³ on uniform [0, 1) operands."""
    from tessera import blas
    from tessera._core.device import torch_matmul_tf32_as

    torch.manual_seed(0)
    a, b = torch.rand(2048, 2048, device="cuda"), torch.rand(2048, 2048, device="cuda")
    b_kmajor = b.t().contiguous().t()
    exact = a.double() @ b.double()
    with torch_matmul_tf32_as(True):
        found = {"torch.matmul tf32": {"bias": _bias(torch.matmul(a, b), exact)},
                 "shipped call": {"bias": _bias(blas.gemm(a, b, precision="tf32"), exact)}}
    for config in configs:
        for mode in MODES:
            label = f"{config.short()} {mode.name}"
            try:
                got = _transformed(config, a, b_kmajor if mode.b_col_major else b, mode)
                # rounded first, B kept K-major, so that gemm runs the same kernel on it
                want = (_forced(config, nearest(a), nearest(b).t().contiguous().t()) if mode.rounded
                        else _forced(config, a, b_kmajor))
                found[label] = {"equal to gemm_ws on a K-major B (operands rounded first where rounded)":
                                bool(torch.equal(got, want)), "max |diff|": float((got - want).abs().max()),
                                "bias": _bias(got, exact)}
            except Exception as exc:  # noqa: BLE001 - a probe reports what failed and goes on
                found[label] = {"error": f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300]}"}
            print(label, found[label], flush=True)
    return found


def timed(size: int, configs: list[WsConfig], usable: set[str], rounds: int) -> list[dict]:
    """Each case at ``size``³ (randn operands) from CUDA graphs, interleaved: torch.matmul with TF32,
    the shipped call (B row-major: copied K-major first, or swapped; and B K-major), ``gemm_ws``
    alone on a K-major B and each mode in ``usable``."""
    from tessera import blas
    from tessera._core.device import torch_matmul_tf32_as
    from tessera._core.timing import graph_rounds
    from tessera.blas.kernels.gemm_ws import launch_gemm_ws

    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    a, b = torch.randn(size, size, device="cuda"), torch.randn(size, size, device="cuda")
    b_kmajor = b.t().contiguous().t()
    d = torch.empty(size, size, device="cuda")
    cases: dict[str, list[Callable[[], object]]] = {
        "torch": [lambda: torch.matmul(a, b, out=d)],
        "shipped call": [lambda: blas.gemm(a, b, out=d, precision="tf32")],
        "shipped call, K-major B": [lambda: blas.gemm(a, b_kmajor, out=d, precision="tf32")],
    }
    for config in configs:
        cases[f"{config.short()} alone, K-major B"] = [
            lambda c=config: launch_gemm_ws(a, b_kmajor, d, num_sms=num_sms, config=c)]
        for mode in MODES:
            if f"{config.short()} {mode.name}" in usable:
                cases[f"{config.short()} {mode.name}"] = [lambda c=config, m=mode: launch_transformed(
                    a, b_kmajor if m.b_col_major else b, d, c, m.rounded, num_sms, m.in_multiplier)]
    with torch_matmul_tf32_as(True):
        times = graph_rounds(cases, rounds)
    vendor = statistics.median(times["torch"])
    rows = []
    for name, samples in times.items():
        ms = statistics.median(samples)
        rows.append({"size": size, "case": name, "ms": ms, "samples_ms": samples,
                     "tflops": 2.0 * size**3 / ms / 1e9, "vs_torch": vendor / ms})
        print(f"{size} {name:<52} {ms:8.4f} ms {2.0 * size**3 / ms / 1e9:7.1f} TFLOP/s "
              f"{vendor / ms:6.3f}x torch", flush=True)
    return rows


def run_on_gpu(args: argparse.Namespace) -> None:
    from tessera._core.timing import run_record, write_result

    configs = [parse_config(t, fp8=False) for t in args.configs.split(",")]
    found = checks(configs)
    usable = {label for label, check in found.items() if "error" not in check}
    rows = [row for size in args.sizes.split(",") for row in timed(int(size), configs, usable, args.rounds)]
    record = run_record("python benchmarks/tf32_transform_probe.py OUT.json " + " ".join(
        f"--{k} {v}" for k, v in (("sizes", args.sizes), ("rounds", args.rounds), ("configs", args.configs))))
    write_result(args.out, {**record, "checks": found, "rows": rows})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", nargs="?")
    parser.add_argument("--offline", action="store_true")
    parser.add_argument("--sizes", default="4096,8192")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--configs", default=DEFAULT)
    args = parser.parse_args()
    if args.offline:
        offline(args.configs)
    elif args.out:
        run_on_gpu(args)
    else:
        sys.exit("give OUT.json (GPU) or --offline")


if __name__ == "__main__":
    main()
