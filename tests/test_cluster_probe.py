"""The cluster-of-two GEMM probe (``benchmarks/cluster_probe.py``): its PTX rewrite on a hand-made
kernel text, and its offline sm_90 compile with the running Triton (3.9 in CI: the rewrite must
still find what it rewrites in that Triton's PTX). Its GPU check and timing run on the device."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from benchmarks import cluster_probe
from child import ROOT, compiler_env

KERNEL = cluster_probe.KERNEL

COPY = "cp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes"
# the shapes of the PTX Triton 3.9 writes for this kernel (3.6: the copies' destination is
# shared::cluster and the maps' registers come by mov.b64 + cvta.param)
PTX = f"""
.visible .entry {KERNEL}(
\t.param .align 64 .b8 {KERNEL}_param_0[128],
\t.param .u32 {KERNEL}_param_1,
\t.param .align 64 .b8 {KERNEL}_param_5[128],
\t.param .align 64 .b8 {KERNEL}_param_10[128]
)
{{
// %bb.0:
\tmov.b32 \t%r101, {KERNEL}_param_5;
\tcvt.u64.u32 \t%rd5, %r101;
\tcvta.param.u64 \t%rd1, %rd5;
\tmov.b32 \t%r102, {KERNEL}_param_0;
\tcvt.u64.u32 \t%rd6, %r102;
\tcvta.param.u64 \t%rd7, %rd6;
\t@%p55 mbarrier.arrive.shared::cta.b64 _, [%r258];
\t@%p56 mbarrier.arrive.shared::cta.b64 _, [%r257];
\t@%p7 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r124], 49152;
\t@%p8 {COPY} [%r122], [%rd7, {{%r800, %r123}}], [%r124];
\t@%p10 {COPY} [%r135], [%rd1, {{%r800, %r136}}], [%r124];
\t@%p11 {COPY} [%r17], [%rd1, {{%r800, %r138}}], [%r124];
\tret;
}}
"""


def test_rewrite_multicasts_b_and_tells_the_peer() -> None:
    """The two copies through B's half-box map (the second map parameter, reached through mov,
    cvt and cvta) multicast to both programs, A's copy stays; each stage hand-back is followed by
    the same arrive on the peer's barrier (mapa to rank ^ 1); warps past the multiplying ones
    (8 warps: thread 256 on) arrive at the cluster barrier first thing."""
    out = cluster_probe.rewrite(PTX, num_warps=8)
    multicast = [line.strip() for line in out.splitlines() if ".multicast::cluster" in line]
    assert multicast == [
        f"@%p10 {cluster_probe._MULTICAST} [%r135], [%rd1, {{%r800, %r136}}], [%r124], %mc_mask;",
        f"@%p11 {cluster_probe._MULTICAST} [%r17], [%rd1, {{%r800, %r138}}], [%r124], %mc_mask;"]
    assert out.count("mov.b16 %mc_mask, 3;") == 2
    assert "[%r122], [%rd7, {%r800, %r123}], [%r124];" in out  # A's own copy, as it was
    assert out.count("mapa.shared::cluster.u32 %mc_addr, %r258, %mc_peer;") == 1
    assert out.count("mapa.shared::cluster.u32 %mc_addr, %r257, %mc_peer;") == 1
    assert out.count("@%p55 mbarrier.arrive.shared::cluster.b64 _, [%mc_addr];") == 1
    assert out.count("xor.b32 %mc_peer, %mc_peer, 1;") == 2
    assert "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r124], 49152;" in out
    entry = out.index("// %bb.0:")
    early = out[entry:out.index("mov.b32 \t%r101")]
    assert "setp.ge.u32 %mc_worker, %mc_tid, 256;" in early
    assert "@%mc_worker barrier.cluster.arrive.relaxed.aligned;" in early


def test_rewrite_leaves_other_kernels_and_refuses_unexpected_text() -> None:
    other = PTX.replace(KERNEL, "_gemm_ws_kernel")
    assert cluster_probe.rewrite(other, num_warps=8) == other
    with pytest.raises(RuntimeError, match="3 tensor-map parameters"):
        cluster_probe.rewrite(PTX.replace(f"\t.param .align 64 .b8 {KERNEL}_param_10[128]\n", ""), 8)
    with pytest.raises(RuntimeError, match="half-box map"):  # only one of the two programs' copies
        cluster_probe.rewrite(PTX.replace("[%r17], [%rd1,", "[%r17], [%rd7,"), 8)
    with pytest.raises(RuntimeError, match="hand-backs"):
        cluster_probe.rewrite(PTX.replace("@%p56 mbarrier.arrive.shared::cta.b64 _, [%r257];\n", ""), 8)


def test_compiles_offline_to_cluster_sass() -> None:
    """Compiled for sm_90 with the running Triton (no GPU), fp8 and bf16 with B column-major: two
    multicast copies of B's halves (one in each program's branch) beside A's own; bf16 with B
    row-major: four (a half is two 64-column boxes under the 128-byte swizzle). Each: two remote
    arrives (the loop's hand-back and the tile's last), the cluster barrier arrived at twice
    (idle warps first thing, multiplying warps after the barriers' set-up) and waited at once,
    no spills, shared memory within a Hopper program's."""
    command = [sys.executable, "benchmarks/cluster_probe.py", "--offline", "--configs", "128x256x64:3:8:8"]
    done = subprocess.run(command, cwd=ROOT, env=compiler_env(), capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [(row["dtype"], row["b"]) for row in rows] == [
        ("fp8", "column-major"), ("bf16", "column-major"), ("bf16", "row-major")]
    for row in rows:
        multicast = 2 if row["b"] == "column-major" else 4
        counts = (row["multicast copies"], row["copies"], row["remote arrives"])
        assert counts == (multicast, multicast + 1, 2), row
        assert (row["cluster arrives"], row["cluster waits"]) == (2, 1), row
        assert row["spill loads"] == row["spill stores"] == 0, row
        assert row["shared memory"] <= 232448, row  # what an H100/H200 program may have
