"""Probe: ``gemm_ws`` on clusters of two programs that share B's tile by TMA multicast.

cuBLAS's Hopper GEMMs run on clusters of two CTAs (its fp8 8192³ kernel too, docs/history.md);
ours do not. At 8192³ both run the H200 at its power limit (1.14–1.53 GHz), where what a FLOP
costs in energy sets the clock, and every byte a program reads from L2 costs some: two programs
stacked along M (a 2·BM × BN cluster tile) need the same B tile, so each loads one half of it and
TMA writes that half into both programs' shared memory (``.multicast::cluster``): B's L2 reads
halve (fp8 128×256×128: 48 → 32 KiB a program a K step).

Triton 3.6's Gluon has no multicast copy, no remote mbarrier arrive and no cluster launch, so
this kernel is Gluon plus a rewrite of its PTX (a stages-inspection hook, the documented
``knobs.runtime.add_stages_inspection_hook``), done on this kernel only:
- the B-half copies (the only ones through the half-box descriptor) get ``.multicast::cluster``
  with both programs in the mask;
- each stage hand-back (``mbarrier.arrive`` on ``empty``, the kernel's only plain arrive) is
  followed by the same arrive on the peer's barrier (``mapa``, then an arrive on the
  ``shared::cluster`` address, as CUTLASS's ``ClusterBarrier::arrive``; ``.release.cluster``
  there put a ``MEMBAR.ALL.GPU`` into every K step): a stage is free only when both programs'
  wgmma are done with it, ``empty`` counting two arrivals;
- the loader and idle warps arrive at the cluster barrier first thing (they never run the
  kernel's top-level code), and the multiplying warps arrive after initializing the barriers and
  wait there, so no copy or arrive reaches a peer's barrier before the peer has made it;
- the loader drains at the end (waits until both programs are done with its last stages), so a
  program exits only after the last remote arrive aimed at it.
The launch passes ``num_ctas`` 2 to Triton's launcher (clusters of two along the grid), the kernel
compiled as an ordinary one-program kernel.

Usage: python benchmarks/cluster_probe.py OUT.json [--sizes 8192,MxNxK] [--dtypes fp8,bf16,fp16]
       [--rounds 3] [--configs BMxBNxBK:stages:warps:group[:split],...]
       (GPU: fp8 with B column-major, 16-bit with B row-major (NN, the grid's) and column-major
       (NT, x @ W.t()); each configuration checked against the vendor, then timed from CUDA graphs
       beside torch, the shipped gemm and the same configuration without clusters (gemm_ws forced),
       interleaved; without --configs each dtype's DEFAULTS; --rounds 0: the checks only)
       python benchmarks/cluster_probe.py --offline [--configs ...] [--keep DIR]   (no GPU: compile
       for sm_90 with the running Triton, 3.6 or 3.9, and print, a JSON line a binary, the SASS's
       registers and what the rewrite put there; DIR keeps the SASS listings)
"""

from __future__ import annotations

import hashlib
import re
import sys
import zlib
from pathlib import Path

import torch
from triton import knobs
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    mbarrier,
    tma,
    warpgroup_mma_init,
    warpgroup_mma_wait,
)

from tessera._core.launch import cdiv
from tessera.blas.kernels.gemm_ws import (
    LOADER_REGISTERS,
    WsConfig,
    _accumulator_layout,
    _b_col_major,
    _hand_back,
    _mac_step,
    _scaled,
    _store,
    block_descriptor,
    grouped_tile_origin,
)
from tessera.blas.kernels.gluon_names import tma_load

KERNEL = "_gemm_mc_kernel"
# Triton 3.6 keeps the rewrite out of its cache key: the kernel takes this file's checksum as a
# constexpr (REWRITE), so no binary of another version of the rewrite is ever reused
REWRITE = zlib.crc32(Path(__file__).read_bytes())


@gluon.jit
def _cluster_barrier_after_init():
    """The multiplying warps, after initializing the barriers: publish them to the cluster
    (``fence.mbarrier_init``), arrive at the cluster barrier and wait for every thread of both
    programs (the other warps arrived first thing, by the rewrite)."""
    gl.inline_asm_elementwise("fence.mbarrier_init.release.cluster;\n\tbarrier.cluster.arrive.release.aligned;"
                              "\n\tbarrier.cluster.wait.acquire.aligned;\n\tmov.u32 $0, 0;", "=r", [],
                              dtype=gl.int32, is_pure=False, pack=1)


@gluon.constexpr_function
def _half_width(bh_desc, block_k):
    """The columns of B's tile each program loads: B's half-box descriptor's block is (half, BK)
    column-major (K-major), (BK, half) row-major (``gemm_ws._b_col_major`` tells them apart)."""
    return bh_desc.block_type.shape[0] if _b_col_major(bh_desc, block_k) else bh_desc.block_type.shape[1]


@gluon.jit
def _load_half(bh_desc, k, off_n, rank, bar, b_stage, HALF: gl.constexpr, B_COL_MAJOR: gl.constexpr):
    """Program ``rank``'s half of B's tile (columns ``off_n + rank·HALF`` on) into its half of the
    stage (a static slice each: the rank picks the branch)."""
    if B_COL_MAJOR:
        if rank == 0:
            tma_load(bh_desc, [off_n, k], bar, b_stage.slice(0, HALF, dim=0))
        else:
            tma_load(bh_desc, [off_n + HALF, k], bar, b_stage.slice(HALF, HALF, dim=0))
    else:
        if rank == 0:
            tma_load(bh_desc, [k, off_n], bar, b_stage.slice(0, HALF, dim=1))
        else:
            tma_load(bh_desc, [k, off_n + HALF], bar, b_stage.slice(HALF, HALF, dim=1))


@gluon.jit
def _mc_loader(a_desc, bh_desc, a_bufs, b_bufs, ready, empty, M, N, K, GROUP_M, STAGES):
    """The loader warp of program ``rank`` of its cluster: for every K step of the cluster's
    tiles, once both programs are done with the stage, A's tile (its own rows) and its half of
    B's tile (multicast by the rewrite into both programs), completing on ``ready``, which
    expects A and both halves. Then it waits until both programs are done with its last stages."""
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BK: gl.constexpr = a_desc.block_type.shape[1]
    HALF: gl.constexpr = _half_width(bh_desc, BK)
    B_COL_MAJOR: gl.constexpr = _b_col_major(bh_desc, BK)
    rank = gl.program_id(0) % 2
    num_m = gl.cdiv(M, 2 * BM)
    num_n = gl.cdiv(N, 2 * HALF)
    step = 0
    for tile in range(gl.program_id(0) // 2, num_m * num_n, gl.num_programs(0) // 2):
        off_m, off_n = grouped_tile_origin(tile, num_m, num_n, 2 * BM, 2 * HALF, GROUP_M)
        for k in range(0, K, BK):
            s = step % STAGES
            mbarrier.wait(empty.index(s), ((step // STAGES) & 1) ^ 1)  # a fresh stage passes at once
            mbarrier.expect(ready.index(s), a_desc.block_type.nbytes + 2 * bh_desc.block_type.nbytes)
            tma_load(a_desc, [off_m + rank * BM, k], ready.index(s), a_bufs.index(s))
            _load_half(bh_desc, k, off_n, rank, ready.index(s), b_bufs.index(s), HALF, B_COL_MAJOR)
            step += 1
    for _ in range(STAGES):
        s = step % STAGES
        mbarrier.wait(empty.index(s), ((step // STAGES) & 1) ^ 1)
        step += 1


@gluon.jit
def _mc_multiplier(a_desc, bh_desc, d_desc, a_bufs, b_bufs, ready, empty, epilogue, M, N, K, GROUP_M, STAGES):
    """``gemm_ws``'s multiplying partition on the cluster's tiles: this program's BM rows of
    each 2·BM × BN cluster tile (B either way), one wgmma in flight, the stage handed back (to
    both programs, by the rewrite), the tile (fp8: scaled) stored through D."""
    BM: gl.constexpr = a_desc.block_type.shape[0]
    BN: gl.constexpr = 2 * _half_width(bh_desc, a_desc.block_type.shape[1])
    B_COL_MAJOR: gl.constexpr = _b_col_major(bh_desc, a_desc.block_type.shape[1])
    layout: gl.constexpr = _accumulator_layout(BM, BN, gl.num_warps(), a_desc.dtype)
    b_registers: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=layout, k_width=1)
    SCALED: gl.constexpr = a_desc.dtype.primitive_bitwidth == 8
    d_smem = gl.allocate_shared_memory(d_desc.dtype, d_desc.block_type.shape, d_desc.layout)
    rank = gl.program_id(0) % 2
    num_m = gl.cdiv(M, 2 * BM)
    num_n = gl.cdiv(N, BN)
    step = 0
    for tile in range(gl.program_id(0) // 2, num_m * num_n, gl.num_programs(0) // 2):
        off_m, off_n = grouped_tile_origin(tile, num_m, num_n, 2 * BM, BN, GROUP_M)
        off_m += rank * BM
        acc = warpgroup_mma_init(gl.zeros((BM, BN), gl.float32, layout))
        for k in range(0, K, a_desc.block_type.shape[1]):
            acc = _mac_step(a_bufs, b_bufs, ready, empty, acc, step, k, STAGES, False, B_COL_MAJOR,
                            b_registers)
            step += 1
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc,))
        _hand_back(empty, step % STAGES, STAGES)  # the tile's last stage
        if SCALED:
            acc = _scaled(acc, off_m, off_n, M, N, epilogue, layout, BM, BN)
        _store(d_desc, d_smem, d_smem, acc.to(d_desc.dtype), off_m, off_n, BM, BN)
    tma.store_wait(pendings=0)


@gluon.jit
def _gemm_mc_kernel(a_desc, bh_desc, d_desc, sa_ptr, sb_ptr, bias_ptr, stride_sa, stride_sb, M, N, K,
                    GROUP_M: gl.constexpr, STAGES: gl.constexpr, REWRITE: gl.constexpr):
    """D = A·B (fp8: scaled, plus a bias unless None) on clusters of two programs: the stage ring
    (B's stage both halves, ``empty`` counting both programs' hand-backs), the cluster barrier,
    then the loader warp beside the multiplying warps. ``REWRITE``: the rewrite's version (unused
    here; part of the binary's cache key)."""
    dtype: gl.constexpr = a_desc.dtype
    a_bufs = gl.allocate_shared_memory(dtype, [STAGES] + a_desc.block_type.shape, a_desc.layout)  # noqa: RUF005
    BK: gl.constexpr = a_desc.block_type.shape[1]
    HALF: gl.constexpr = _half_width(bh_desc, BK)
    B_SHAPE: gl.constexpr = [STAGES, 2 * HALF, BK] if _b_col_major(bh_desc, BK) else [STAGES, BK, 2 * HALF]
    b_bufs = gl.allocate_shared_memory(dtype, B_SHAPE, bh_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=2)
    _cluster_barrier_after_init()
    epilogue = (sa_ptr, sb_ptr, bias_ptr, stride_sa, stride_sb)
    multiplier = (a_desc, bh_desc, d_desc, a_bufs, b_bufs, ready, empty, epilogue, M, N, K, GROUP_M, STAGES)
    loader = (a_desc, bh_desc, a_bufs, b_bufs, ready, empty, M, N, K, GROUP_M, STAGES)
    gl.warp_specialize([(_mc_multiplier, multiplier), (_mc_loader, loader)], [1], [LOADER_REGISTERS])


# --- the PTX rewrite -------------------------------------------------------------------------

_MAP_PARAM = re.compile(rf"\.param \.align 64 \.b8 ({KERNEL}_param_\d+)\[128\]")
_LOAD = re.compile(r"^(\s*)(@%p\d+ )?cp\.async\.bulk\.tensor\.2d\.shared::(?:cta|cluster)\.global\.mbarrier::"
                   r"complete_tx::bytes (\[%r\d+\]), \[(%rd\d+), (\{[^}]*\})\], (\[%r\d+\]);$", re.M)
_COPY = re.compile(r"^\s*(?:mov|cvt|cvta)\.[\w.]+\s+(%\w+), (%?\w+);$", re.M)
_ARRIVE = re.compile(r"^(\s*)(@%p\d+ )?mbarrier\.arrive\.shared::cta\.b64 _, \[(%r\d+)\];$", re.M)
_ENTRY = "// %bb.0:"
_MULTICAST = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"


def rewrite(ptx: str, num_warps: int) -> str:
    """This kernel's PTX made a cluster kernel (module docstring); other kernels' unchanged.
    Raises RuntimeError when the PTX does not have the shape the rewrite expects."""
    if f".entry {KERNEL}(" not in ptx:
        return ptx
    maps = _MAP_PARAM.findall(ptx)
    if len(maps) != 3:
        raise RuntimeError(f"expected 3 tensor-map parameters (A, B's half, D), found {maps}")
    half_map = maps[1]
    registers = {half_map}  # and every register a mov, cvt or cvta.param carries it into
    copies = _COPY.findall(ptx)
    while True:
        more = {dest for dest, source in copies if source in registers} - registers
        if not more:
            break
        registers |= more
    loads = 0

    def multicast(m: re.Match) -> str:
        nonlocal loads
        if m[4] not in registers:
            return m[0]
        loads += 1
        pad, pred = m[1], m[2] or ""
        return "\n".join(f"{pad}{line}" for line in (
            "{", ".reg .b16 %mc_mask;", "mov.b16 %mc_mask, 3;",  # both programs of the cluster
            f"{pred}{_MULTICAST} {m[3]}, [{m[4]}, {m[5]}], {m[6]}, %mc_mask;", "}"))

    ptx = _LOAD.sub(multicast, ptx)
    if loads < 2 or loads % 2:
        raise RuntimeError(f"expected copies through B's half-box map ({half_map}: {registers}) in both "
                           f"programs' branches, found {loads}")
    arrives = 0

    def also_the_peer(m: re.Match) -> str:
        nonlocal arrives
        arrives += 1
        pad, pred = m[1], m[2] or ""
        return m[0] + "".join(f"\n{pad}{line}" for line in (
            "{", ".reg .b32 %mc_peer, %mc_addr;", "mov.u32 %mc_peer, %cluster_ctarank;",
            "xor.b32 %mc_peer, %mc_peer, 1;", f"mapa.shared::cluster.u32 %mc_addr, {m[3]}, %mc_peer;",
            f"{pred}mbarrier.arrive.shared::cluster.b64 _, [%mc_addr];", "}"))

    ptx = _ARRIVE.sub(also_the_peer, ptx)
    if arrives < 2:
        raise RuntimeError(f"expected the multiplier's stage hand-backs (2 arrives), found {arrives}")
    if ptx.count(_ENTRY) != 1:
        raise RuntimeError(f"expected one {_ENTRY!r} (the entry block)")
    early = (f"{_ENTRY}\n\t{{\n\t.reg .pred %mc_worker;\n\t.reg .b32 %mc_tid;\n\tmov.u32 %mc_tid, %tid.x;\n"
             f"\tsetp.ge.u32 %mc_worker, %mc_tid, {32 * num_warps};\n"
             f"\t@%mc_worker barrier.cluster.arrive.relaxed.aligned;\n\t}}")
    return ptx.replace(_ENTRY, early)


def _hook(*args):
    """Triton's stages-inspection hook: wrap the PTX stage of every compile so that this kernel's
    PTX is rewritten (others pass unchanged). Triton 3.9 also calls it without arguments for a
    part of every binary's cache key; 3.6 does not (``REWRITE`` keys this kernel's binaries)."""
    if not args:
        return "cluster-probe-rewrite", hashlib.sha256(str(REWRITE).encode()).hexdigest()
    _backend, stages, options, _language, _capability = args
    make_ptx = stages["ptx"]

    def ptx_stage(src, metadata):
        return rewrite(make_ptx(src, metadata), options.num_warps)

    stages["ptx"] = ptx_stage
    return None


def install_rewrite() -> None:
    """Install the hook (process-wide: only the probe's own processes call this)."""
    if knobs.runtime.add_stages_inspection_hook not in (None, _hook):
        raise RuntimeError("another stages-inspection hook is installed; the probe would replace it")
    knobs.runtime.add_stages_inspection_hook = _hook


# --- the launch -------------------------------------------------------------------------------

def _parse(text: str, fp8: bool) -> WsConfig:
    """A configuration as the Gluon probe writes it (``gemm_gluon_probe.parse_config``); the
    cluster kernel has no ping-pong form."""
    from benchmarks.gemm_gluon_probe import parse_config

    config = parse_config(text, fp8)
    if config.pingpong:
        raise ValueError(f"configuration {text!r}: clusters take the cooperative tile (no :pp)")
    return config


def launch_arguments(a: torch.Tensor, b: torch.Tensor, d: torch.Tensor, config: WsConfig,
                     scales: tuple[torch.Tensor, torch.Tensor] | None) -> tuple[tuple, dict]:
    """The kernel's runtime arguments and constexprs for D = A·B, B (K, N) column-major (K-major:
    the descriptor of its transpose, boxes of half the tile's columns by BK) or row-major (boxes
    of BK rows by half the columns)."""
    m, k = a.shape
    n = b.shape[1]
    half = config.block_n // 2
    b_half = (block_descriptor(b.t(), [half, config.block_k]) if b.stride(0) == 1
              else block_descriptor(b, [config.block_k, half]))
    sa, sb = scales if scales is not None else (d, d)
    strides = [0 if t.numel() == 1 else t.stride(0) for t in (sa, sb)] if scales is not None else [0, 0]
    d_block = [config.block_m, config.block_n // config.epilogue_split]
    args = (block_descriptor(a, [config.block_m, config.block_k]),
            b_half,
            block_descriptor(d, d_block), sa, sb, None, *strides, m, n, k)
    return args, {"GROUP_M": config.group_m, "STAGES": config.num_stages, "REWRITE": REWRITE}


class ClusterGemm:
    """D = A·B on clusters of two: compiled once (Triton's JIT, never launched by it: a plain
    launch would run the cluster code without a cluster), then launched as clusters, as many as
    the GPU holds at once (``cuOccupancyMaxActiveClusters``) or the cluster tiles, fewer."""

    def __init__(self, config: WsConfig) -> None:
        self.config = config
        self.compiled = None
        self.clusters = 0  # the most clusters resident at once (after the first call)

    def __call__(self, a: torch.Tensor, b: torch.Tensor, d: torch.Tensor,
                 scales: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        from triton.runtime.driver import driver

        args, constexprs = launch_arguments(a, b, d, self.config, scales)
        if self.compiled is None:
            install_rewrite()
            self.compiled = _gemm_mc_kernel.warmup(*args, grid=(1,), **constexprs,
                                                   num_warps=self.config.num_warps, num_stages=1)
            run = self.compiled.run  # loads the binary: its function handle is known from here on
            self.clusters = driver.active.utils.cuOccupancyMaxActiveClusters(
                self.compiled.function, self.compiled.packed_metadata[2], 2)
            assert run is not None
        compiled = self.compiled
        m, n = d.shape
        tiles = cdiv(m, 2 * self.config.block_m) * cdiv(n, self.config.block_n)
        num_warps, _, shared = compiled.packed_metadata
        stream = driver.active.get_current_stream(d.device.index)
        compiled.run(max(1, min(self.clusters, tiles)), 1, 1, stream, compiled.function,
                     (num_warps, 2, shared), None, None, None, *args, *constexprs.values())
        return d


# --- offline ----------------------------------------------------------------------------------

SASS_COUNTS = {"multicast copies": r"UTMALDG\.2D\.MULTICAST", "copies": r"UTMALDG\b",
               "remote arrives": r"SYNCS\.ARRIVE\.TRANS64\.RED", "cluster arrives": "UCGABAR_ARV",
               "cluster waits": "UCGABAR_WAIT", "wgmma": "GMMA", "memory barriers": "MEMBAR",
               "spill loads": r"\bLDL\b", "spill stores": r"\bSTL\b"}


def offline(configs: str, keep: str | None) -> list[dict]:
    """Compile each configuration (fp8; bf16 with B column- and row-major) for sm_90 without a
    GPU, as a pack build does, and return (and print, a JSON line each) its shared memory, its
    SASS's registers and what the rewrite put there (``SASS_COUNTS``); ``keep``: a folder for the
    SASS listings."""
    import json

    from benchmarks.sass_mix import compiled_offline, sass_counts
    from tessera._core.launch import Launcher, building_for, capture

    install_rewrite()
    launcher = Launcher(_gemm_mc_kernel)
    rows = []
    for dtype, element, b_col_major in (("fp8", torch.float8_e4m3fn, True), ("bf16", torch.bfloat16, True),
                                        ("bf16", torch.bfloat16, False)):
        for text in (DEFAULTS[dtype] if configs == DEFAULT else configs).split(","):
            config = _parse(text, dtype == "fp8")
            a = torch.empty(8192, 8192, dtype=element)
            b = torch.empty(8192, 8192, dtype=element)
            b = b.t() if b_col_major else b
            d, one = torch.empty(8192, 8192, dtype=torch.bfloat16), torch.ones(())
            with capture() as calls, building_for("cuda", "sm_90"):
                args, constexprs = launch_arguments(a, b, d, config, (one, one) if dtype == "fp8" else None)
                launcher((66,), args, constexprs, config.num_warps, 1)
            sass, used, shared = compiled_offline(calls[0])
            if keep:
                Path(keep).mkdir(parents=True, exist_ok=True)
                layout = "col" if b_col_major else "row"
                (Path(keep) / f"{dtype}-{layout}-{text.replace(':', '_')}.sass").write_text(sass)
            row = {"dtype": dtype, "b": "column-major" if b_col_major else "row-major",
                   "config": config.short(), "shared memory": shared, "registers": used,
                   **sass_counts(sass, SASS_COUNTS)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def main() -> None:
    if "--offline" in sys.argv:
        def option(name: str) -> str | None:
            return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else None

        offline(option("--configs") or DEFAULT, option("--keep"))
        return
    run_on_gpu()


DEFAULTS = {"fp8": "128x256x128:3:8:8,128x256x128:4:8:8:2", "bf16": "128x256x64:3:8:8,128x256x64:4:8:8:2"}
DEFAULT = "default"  # each dtype's DEFAULTS entry


def _cases(dtype_name: str, size: int | str, one: torch.Tensor, b_col_major: bool) -> tuple:
    """``gemm_ws_probe.vendor_cases`` (fp8 e4m3 with B column-major against ``torch._scaled_mm``,
    16-bit with B either way against torch.matmul), then gemm's keyword arguments for it."""
    from benchmarks.gemm_ws_probe import DTYPES, vendor_cases

    fp8 = dtype_name == "fp8"
    kwargs = {"scale_a": one, "scale_b": one, "fast_accum": True} if fp8 else {}
    return (*vendor_cases(DTYPES[dtype_name], size, one, b_col_major or fp8), kwargs)


def _checked(run: ClusterGemm, a: torch.Tensor, b: torch.Tensor, want: torch.Tensor, out_dtype: torch.dtype,
             scales: tuple[torch.Tensor, torch.Tensor] | None) -> str | None:
    """Why ``run``'s product is not to be timed (wrong, or two calls differ), or None."""
    try:
        got = run(a, b, torch.empty(want.shape, device="cuda", dtype=out_dtype), scales)
        again = run(a, b, torch.empty_like(got), scales)
        err = float((got.float() - want).abs().max()) / float(want.abs().max())
    except Exception as exc:  # noqa: BLE001 - a probe reports what failed and goes on
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300]}"
    if err > 0.02:
        return f"wrong: max |diff| {err:.3g} of max |torch|"
    return None if torch.equal(again, got) else "not deterministic: two calls differ"


def run_on_gpu() -> None:
    """Check each configuration against the vendor, then time it beside torch, the shipped gemm
    and the same configuration without clusters (gemm_ws forced), interleaved from CUDA graphs."""
    import json

    from benchmarks.gemm_gluon_probe import forced_fp8, forced_gemm
    from benchmarks.gemm_ws_probe import probe_arguments, shipped_row, timed_rows
    from tessera.blas import explain

    args, record = probe_arguments(DEFAULT, "benchmarks/cluster_probe.py")
    one = torch.ones((), device="cuda")
    rows = []
    problems = [(dtype_name, b_col_major, s if "x" in s else int(s)) for dtype_name in args.dtypes.split(",")
                for b_col_major in ((True,) if dtype_name == "fp8" else (False, True))
                for s in args.sizes.split(",")]
    for dtype_name, b_col_major, size in problems:
        a, b, want, pairs, cases, kwargs = _cases(dtype_name, size, one, b_col_major)
        fp8 = dtype_name == "fp8"
        label = f"{dtype_name} {'NT' if b_col_major else 'NN'}"
        scales, out_dtype = ((one, one), torch.bfloat16) if fp8 else (None, a.dtype)
        listed = DEFAULTS.get(dtype_name, DEFAULTS["bf16"]) if args.configs == DEFAULT else args.configs
        for text in listed.split(","):
            config = _parse(text, fp8)
            run = ClusterGemm(config)
            name = f"cluster2 {config.short()}"
            why = _checked(run, a, b, want, out_dtype, scales)
            if why is not None or args.rounds == 0:
                rows.append({"dtype": label, "size": size, "case": name, "error": why} if why else
                            {"dtype": label, "size": size, "case": name, "checked": True,
                             "clusters": run.clusters})
                print(label, size, name, why or f"right ({run.clusters} clusters resident)", flush=True)
                continue
            outs = [torch.empty(want.shape, device="cuda", dtype=out_dtype) for _ in pairs]
            cases[name] = [lambda x=x, y=y, z=z, r=run, s=scales: r(x, y, z, s)
                           for (x, y), z in zip(pairs, outs, strict=True)]
            cases[f"plain {config.short()}"] = [(lambda x=x, y=y, c=config: forced_fp8(c, x, y, one)) if fp8
                                                else (lambda x=x, y=y, c=config: forced_gemm(c, x, y))
                                                for x, y in pairs]
            cases[f"plain {config.short()}"][0]()  # compiled before the timing
        if args.rounds:
            rows += timed_rows(cases, args.rounds, label, size)
            rows.append(shipped_row(label, size, explain(a, b, **kwargs)))
        with open(args.out, "w") as f:  # after each problem: a call cut short keeps what it measured
            json.dump({**record, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
