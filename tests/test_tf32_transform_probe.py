"""The tf32 transform probe (``benchmarks/tf32_transform_probe.py``): its offline sm_90 compile
with the running Triton (3.9 in CI; 3.6 on the GPU image, checked by hand), and the bank conflicts
of its block layout. Its exact checks and timing run on the device."""

from __future__ import annotations

import json
import subprocess
import sys

from benchmarks import tf32_transform_probe
from child import ROOT, compile_script, compiler_env

_BLOCK_LAYOUT_CHILD = r"""
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource

from benchmarks import tf32_transform_probe as probe


@gluon.jit
def block_layouts(x, PLAIN_CONFLICTS: gl.constexpr):
    swizzled: gl.constexpr = gl.NVMMASharedLayout.get_default_for([32, 32], gl.float32)
    block = gl.allocate_shared_memory(gl.float32, [32, 32], swizzled)
    read = gl.zeros([32, 32], gl.float32, probe._block_registers(gl.num_warps()))
    gl.static_assert(gl.bank_conflicts(read.type, block.type) == 0)
    gl.static_assert(gl.bank_conflicts(read.permute((1, 0)).type, block.type) == 0)
    rows: gl.constexpr = gl.BlockedLayout([1, 4], [4, 8], [gl.num_warps(), 1], [1, 0])  # rows read whole
    plain = gl.zeros([32, 32], gl.float32, rows)
    gl.static_assert(gl.bank_conflicts(plain.type, block.type) == 0)
    gl.static_assert(gl.bank_conflicts(plain.permute((1, 0)).type, block.type) == PLAIN_CONFLICTS)


for warps, plain_conflicts in ((4, 3), (8, 3)):
    source = GluonASTSource(block_layouts, {"x": "*fp32"}, {"PLAIN_CONFLICTS": plain_conflicts}, {})
    triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
print("ok")
"""


def test_block_layout_reads_and_writes_transposed_without_bank_conflicts() -> None:
    """A 32 × 32 float32 block under the 128-byte swizzle, in the register layout of a warp group
    (the producer) and of two (the multiplying warps): read and written back transposed with no
    bank conflicts (Gluon's count); the plain layout (rows read whole, 4 columns a thread) writes
    transposed with 3 (4-way)."""
    done = compile_script(_BLOCK_LAYOUT_CHILD)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_compiles_offline_without_spills() -> None:
    """Compiled for sm_90 with the running Triton (no GPU), each mode: the shipped tile's four
    wgmma a K step, 168 registers (8 multiplying warps beside the producer's 4 or the loader
    warp), no spills, shared memory within a Hopper program's (the transform works in place: no
    buffer added); the rounded modes read A's tile too."""
    command = [sys.executable, "benchmarks/tf32_transform_probe.py", "--offline"]
    done = subprocess.run(command, cwd=ROOT, env=compiler_env(), capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {row["mode"]: row for row in map(json.loads, filter(lambda line: line.startswith("{"),
                                                                 done.stdout.splitlines()))}
    assert list(rows) == [mode.name for mode in tf32_transform_probe.MODES]
    for row in rows.values():
        counts = (row["wgmma"], row["registers"], row["spill loads"], row["spill stores"])
        assert counts == (4, 168, 0, 0), row
        assert row["shared memory"] <= 232448, row  # what an H100/H200 program may have
    for place in ("", ", in the multiplier"):
        rounded, plain = rows[f"transposed, rounded{place}"], rows[f"transposed{place}"]
        assert rounded["shared loads"] > plain["shared loads"]
