"""Child processes that compile kernels, for tests that compile offline (as a pack build does)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def compiler_env() -> dict[str, str]:
    """This process's environment without ``TRITON_INTERPRET`` (conftest sets it for CPU runs, and
    the interpreter patches Triton's language process-wide, so compiling needs a child without it)
    and with the repository importable."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def precompile(arch: str, jobs: list[dict], out: str | Path) -> list[dict]:
    """The pack builder's offline compiler (``tessera.tuning.precompile``) run in a child on
    ``jobs`` for ``arch``: its result row per job."""
    done = subprocess.run([sys.executable, "-m", "tessera.tuning.precompile"], text=True, env=compiler_env(),
                          input=json.dumps({"arch": arch, "out": str(out), "jobs": jobs}),
                          capture_output=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.strip().splitlines()[-len(jobs):]]


_PTX_CHILD = r"""
import importlib
import json
import sys
import tempfile
from pathlib import Path

import torch
import triton

from tessera._core.launch import building_for, capture
from tessera.tuning import precompile

kept = []
compile_ = triton.compile


def keep(*args, **kwargs):
    compiled = compile_(*args, **kwargs)
    kept.append(compiled.asm["ptx"])
    return compiled


triton.compile = keep  # the pack builder's own compile call, its PTX kept
out = {}
with tempfile.TemporaryDirectory() as tmp:
    for name, (module, op, config_class, fields, dtype, index) in json.loads(sys.argv[1]).items():
        family = importlib.import_module(module)
        config = getattr(family, config_class)(**fields)
        with capture() as calls, building_for("cuda", "sm_90"):
            if isinstance(op, list):  # [launch function, M, N, K]: its launch for A (M, K) @ B (K, N)
                launch, m, n, k = op
                element = getattr(torch, dtype)
                getattr(family, launch)(torch.empty(m, k, dtype=element), torch.empty(k, n, dtype=element),
                                        torch.empty(m, n, dtype=element), num_sms=132, config=config)
            else:
                family.representative_launch(op, config, dtype, 132)
        kept.clear()
        precompile.compile_call(calls[index], precompile._target("sm_90", 32), Path(tmp))
        out[name] = kept[0]
print(json.dumps(out))
"""


def sm90_ptx(launches: dict[str, tuple[str, str, str, dict, str, int]]) -> dict[str, str]:
    """The sm_90 PTX of chosen launches, compiled in a child as a pack build compiles them (with
    the running Triton): name → (family module, op, config class, its fields, dtype, which of
    the family's representative launches), or → (module, [launch function, M, N, K], config
    class, fields, torch dtype name, 0) for the launch of one A (M, K) @ B (K, N) call."""
    done = subprocess.run([sys.executable, "-c", _PTX_CHILD, json.dumps(launches)], capture_output=True,
                          text=True, env=compiler_env(), timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


_SWAPPED_LAYOUTS_CHILD = r"""
import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource

from tessera.blas.kernels import gemm_ws


@gluon.constexpr_function
def swizzled_as_listed(linear, rows, cols):
    return [list(b) for b in linear.offset_bases] == gemm_ws._swizzled_bases(rows, cols)


@gluon.jit
def swapped_layouts(x, BN: gl.constexpr, BM: gl.constexpr, CHECK_BASES: gl.constexpr):
    layout: gl.constexpr = gemm_ws._accumulator_layout(BN, BM, gl.num_warps(), gl.float32)
    operand: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=layout, k_width=1)
    swizzled: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)
    piece = gl.zeros([BN, 8], gl.float32, operand)
    plain = gl.allocate_shared_memory(gl.float32, [8, BN], swizzled)
    ordered = gl.allocate_shared_memory(gl.float32, [8, BN], gemm_ws._row_order_layout(swizzled, 8, BN))
    gl.static_assert(gl.bank_conflicts(piece.type, plain.permute((1, 0)).type) == 1)
    gl.static_assert(gl.bank_conflicts(piece.type, ordered.permute((1, 0)).type) == 0)
    tile = gl.zeros([BN, BM], gl.float32, layout).permute((1, 0))
    d_view = gl.allocate_shared_memory(gl.float32, [BM, BN], gemm_ws._row_order_layout(swizzled, BM, BN))
    gl.static_assert(gl.bank_conflicts(tile.type, d_view.type) <= 1)
    if CHECK_BASES:
        gl.static_assert(swizzled_as_listed(gl.to_linear_layout(swizzled, [8, BN]), 8, BN))
        gl.static_assert(swizzled_as_listed(gl.to_linear_layout(swizzled, [BM, BN]), BM, BN))


block_m, block_n, warps = (int(v) for v in sys.argv[1:4])
check_bases = tuple(int(v) for v in triton.__version__.split(".")[:2]) >= (3, 9)
source = GluonASTSource(swapped_layouts, {"x": "*fp32"},
                        {"BN": block_n, "BM": block_m, "CHECK_BASES": check_bases}, {})
triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
print("ok")
"""


def swapped_layouts_compile(block_m: int, block_n: int, warps: int) -> subprocess.CompletedProcess:
    """Compile, in a child for sm_90, a Gluon kernel that asserts at trace time the bank conflicts
    of ``gemm_ws``'s swapped tf32 tile (block_m × block_n on ``warps`` warps): Bᵀ's register
    reads in the plain swizzle (1) and in the reordered view (0), D's stores through it (≤ 1);
    and, with Triton 3.9 or newer, that ``_swizzled_bases`` is Triton's linear form of the
    swizzle. The process's result (stdout ends with "ok" when every assertion held)."""
    return compile_script(_SWAPPED_LAYOUTS_CHILD, str(block_m), str(block_n), str(warps))


_FMA_LAYOUTS_CHILD = r"""
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource

from tessera.blas.kernels import gemm_fma


@gluon.jit
def fma_layouts(x, BK: gl.constexpr):
    warps: gl.constexpr = gl.num_warps()
    row: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])  # a K row of a step's tile
    b_row = gl.allocate_shared_memory(gl.float32, [1, gemm_fma.TILE], row)
    b = gl.zeros([1, gemm_fma.TILE], gl.float32, gemm_fma.accumulator_layout(warps))
    a = gl.zeros([1, gemm_fma.TILE], gl.float32, gemm_fma.a_row_layout(warps))
    gl.static_assert(gl.bank_conflicts(b.type, b_row.type) == 0)
    gl.static_assert(gl.bank_conflicts(a.type, b_row.type) == 0)
    together: gl.constexpr = gl.BlockedLayout([8, 8], [4, 8], [4, 2], [1, 0])  # 8 columns a thread
    if warps == 8:
        gl.static_assert(gl.bank_conflicts(gl.zeros([1, gemm_fma.TILE], gl.float32, together).type,
                                           b_row.type) == 1)
    # A's step tile as loaded, stored transposed into its (BK, 128) buffer
    a_buf = gl.allocate_shared_memory(gl.float32, [BK, gemm_fma.TILE], row)
    a_tile = gl.zeros([gemm_fma.TILE, BK], gl.float32, gemm_fma.a_load_layout(BK, warps))
    gl.static_assert(gl.bank_conflicts(gl.permute(a_tile, (1, 0)).type, a_buf.type) == 0)
    across: gl.constexpr = gl.BlockedLayout([1, 4], [32 // (BK // 4), BK // 4], [8, 1], [1, 0])  # before
    if warps == 8:
        a_across = gl.zeros([gemm_fma.TILE, BK], gl.float32, across)
        gl.static_assert(gl.bank_conflicts(gl.permute(a_across, (1, 0)).type, a_buf.type) == BK // 4 - 1)


for warps in gemm_fma.WARPS:
    for block_k in gemm_fma.BLOCK_KS:
        source = GluonASTSource(fma_layouts, {"x": "*fp32"}, {"BK": block_k}, {})
        triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
print("ok")
"""


def fma_layouts_compile() -> subprocess.CompletedProcess:
    """Compile, in a child for sm_90, a Gluon kernel that asserts at trace time the bank conflicts
    of ``gemm_fma``'s shared-memory accesses on 4 and 8 warps: a K row of B and of A's transposed
    tile read in the kernel's layouts (0), and B's with a thread's 8 columns together (1: 2-way, the
    layout before the fifty-second session); A's step tile stored transposed, for every block_k, as
    loaded (0) and as loaded before the fifty-third session, a warp across K groups (2-, 4-, 8-way).
    The process's result (stdout ends with "ok" when all held)."""
    return compile_script(_FMA_LAYOUTS_CHILD)


def compile_script(text: str, *args: str) -> subprocess.CompletedProcess:
    """Run ``text`` as a script in a child (a jit function's source must be in a file) with
    ``args``, for the compiler (:func:`compiler_env`), with a Triton cache of its own: a cached
    binary is not traced again, so its ``static_assert`` would not run (a layout read from another
    module is not in the cache key)."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "child_compile.py"
        script.write_text(text)
        return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                              env=dict(compiler_env(), TRITON_CACHE_DIR=str(Path(tmp) / "triton")),
                              timeout=600, check=False)
