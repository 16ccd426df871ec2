"""The warp-specialized Gluon GEMM family (``gemm_ws``, and its scaled fp8 use ``gemm_scaled_ws``):
who may take it, its shipped logic rows, its offline compile for sm_90 (Triton's interpreter
cannot run Gluon), and on the H200 its results against an fp64 reference over edge tiles, odd
sizes, both layouts of B, D in halves, and fp8 scales per tensor, row and column with a bias."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
import yaml
from devices import H200
from triton.experimental.gluon import language as gl

from child import precompile, sm90_ptx, swapped_layouts_compile
from reference import assert_gemm_close
from tessera import InvalidArgumentError
from tessera._core import launch
from tessera._core.device import DeviceInfo, device_info
from tessera._core.launch import building_for, capture, recording
from tessera.blas import explain, gemm, space
from tessera.blas.accuracy import FP8_FAST_ACCUMULATION
from tessera.blas.kernels import gemm_scaled, gemm_ws
from tessera.blas.kernels.gemm_scaled import launch_gemm_scaled
from tessera.blas.kernels.gemm_tma import TmaConfig, shared_memory_bytes
from tessera.blas.kernels.gemm_ws import ScaledWsConfig, WsConfig, scaled_ws_supported, ws_supported
from tessera.cli import main
from tessera.tuning import logic, packs

SHIPPED = Path(__file__).resolve().parents[1] / "tessera" / "logic" / "sm_90"


@pytest.mark.parametrize("fields", [dict(num_warps=2), dict(block_n=512), dict(block_k=512),
                                    dict(block_m=64, num_warps=8), dict(num_stages=1), dict(block_n=96),
                                    dict(group_m=0), dict(epilogue_split=4), dict(pingpong=True),
                                    dict(block_n=128, num_warps=4, halves=True)], ids=str)
def test_config_rules(fields: dict) -> None:
    """wgmma's accumulator (16 rows a warp, at most 256 columns), B's layout read from its
    descriptor block (block_k < block_n) and D whole or in halves bound the configurations."""
    with pytest.raises(InvalidArgumentError, match="gemm_ws takes 4 or 8 warps"):
        WsConfig(**fields)
    with pytest.raises(InvalidArgumentError, match="gemm_scaled_ws takes 4 or 8 warps"):
        ScaledWsConfig(**fields)
    assert WsConfig().short() == "gemm_ws 128x256x64 g8 w8 s3"
    halves = ScaledWsConfig(num_stages=4, epilogue_split=2)
    assert halves.short() == "gemm_scaled_ws 128x256x128 g8 w8 s4 split2"
    square = ScaledWsConfig(128, 128, 128, 8, 4, 5, pingpong=True)  # fp8's B is K-major: block_k = block_n
    assert square.short() == "gemm_scaled_ws 128x128x128 g8 w4 s5 pingpong"
    with pytest.raises(InvalidArgumentError, match="block_k < block_n"):
        WsConfig(128, 128, 128, 8, 4, 5, pingpong=True)  # 16-bit B's layout would be ambiguous
    assert WsConfig(halves=True).short() == "gemm_ws 128x256x64 g8 w8 s3 halves"


def test_shared_memory_of_the_tiles_fits_the_h200() -> None:
    """Three 128×256×64 bf16 stages (144 KiB) and D's tile (64 KiB): under the H200's 227 KiB, as
    the offline compile measured (213052 bytes with the barriers); a fourth stage fits only with D
    in halves (229444 bytes), as for fp8's 128-deep steps."""
    def needed(config: WsConfig) -> int:
        return shared_memory_bytes(config, config.num_stages, 2 if config.block_k == 64 else 1, 2)

    assert needed(WsConfig()) == 3 * (128 + 256) * 64 * 2 + 128 * 256 * 2 < 232448
    pingpong = ScaledWsConfig(128, 128, 128, 8, 4, 5, pingpong=True)  # a D buffer each warp group
    assert needed(pingpong) == 5 * 256 * 128 + 2 * 128 * 128 * 2 < 232448 - 1024
    for family in (WsConfig, ScaledWsConfig):
        assert needed(family(num_stages=4)) > 232448 > needed(family(num_stages=4, epilogue_split=2)) + 1024


def test_who_the_family_takes() -> None:
    """16-bit A and D row-major, B either way, one dtype, 16-byte rows, no C, alpha 1."""
    a = torch.empty(64, 48, dtype=torch.bfloat16)
    b_row, b_col = torch.empty(48, 32, dtype=torch.bfloat16), torch.empty(32, 48, dtype=torch.bfloat16).t()
    d = torch.empty(64, 32, dtype=torch.bfloat16)
    assert ws_supported(a, b_row, None, d, 1.0) and ws_supported(a, b_col, None, d, 1.0)
    assert not ws_supported(a, b_row, d, d, 1.0)  # C
    assert not ws_supported(a, b_row, None, d, 2.0)  # alpha
    assert not ws_supported(a.t().contiguous().t(), b_row, None, d, 1.0)  # A column-major
    assert not ws_supported(a, b_row, None, d.float(), 1.0)  # another output dtype
    assert not ws_supported(a.float(), b_col.float(), None, d.float(), 1.0)  # fp32 IEEE
    assert ws_supported(a.float(), b_col.float(), None, d.float(), 1.0, "tf32")  # B K-major
    assert ws_supported(a.float(), b_row.float(), None, d.float(), 1.0, "tf32")  # multiplied swapped
    assert gemm_ws.swaps(b_row.float()) and not gemm_ws.swaps(b_col.float()) and not gemm_ws.swaps(b_row)
    assert not ws_supported(a.float(), b_col.float(), None, d.float(), 1.0, "tf32x3")  # no 3xTF32 in Gluon
    narrow = torch.empty(48, 36, dtype=torch.bfloat16)[:, :30]  # rows of 30 elements: not 16-byte multiples
    assert not ws_supported(a, narrow, None, torch.empty(64, 30, dtype=torch.bfloat16), 1.0)
    assert space.ws_capable(H200)
    assert not space.ws_capable(DeviceInfo("sm_100", "cuda", "B200", 148, 32, 232448, {}, None))
    assert not space.ws_capable(DeviceInfo("gfx942", "hip", "MI300X", 304, 64, 65536, {}, None))


@pytest.mark.parametrize("elem", [torch.float8_e4m3fn, torch.float8_e5m2], ids=str)
def test_who_the_scaled_use_takes(elem: torch.dtype) -> None:
    """fp8 with fast accumulation, A row-major and B column-major (wgmma reads 8-bit operands
    K-major only), D row-major bf16, fp16 or fp32, 16-byte rows; not int8, not the precise mode."""
    a, b = torch.empty(64, 48, dtype=elem), torch.empty(32, 48, dtype=elem).t()
    for out in (torch.bfloat16, torch.float16, torch.float32):
        assert scaled_ws_supported(a, b, torch.empty(64, 32, dtype=out), True)
    d = torch.empty(64, 32, dtype=torch.bfloat16)
    assert not scaled_ws_supported(a, b, d, False)  # the precise mode
    assert not scaled_ws_supported(a, b.contiguous(), d, True)  # B row-major
    assert not scaled_ws_supported(a.t().contiguous().t(), b, d, True)  # A column-major
    assert not scaled_ws_supported(a, b, torch.empty(64, 32, dtype=torch.int32), True)
    i8 = torch.empty(64, 48, dtype=torch.int8)
    assert not scaled_ws_supported(i8, torch.empty(32, 48, dtype=torch.int8).t(), d, True)


@pytest.mark.parametrize("dtype", ["fp8e4m3_fast", "fp8e5m2_fast"])
def test_scaled_selection_takes_the_family_only_where_it_fits(dtype: str) -> None:
    """The heuristic and the shipped logic give large fast-accumulation fp8 calls the family when
    it takes them (ws_ok), the descriptor family otherwise; a forced gemm_scaled_ws configuration
    on a call it does not take falls back to the selection."""
    for fits in (True, False):
        problem = space.MnkProblem(8192, 8192, 8192, dtype, True, fits)
        choice = space.select_mnk("gemm_scaled", problem, H200)
        assert isinstance(choice.config, ScaledWsConfig) == fits, choice.reason
        with space.forced(ScaledWsConfig(num_stages=4, epilogue_split=2)):
            forced = space.select_mnk("gemm_scaled", problem, H200)
        assert (forced.reason == "forced") == fits and isinstance(forced.config, ScaledWsConfig) == fits
    small = space.select_mnk("gemm_scaled", space.MnkProblem(64, 8192, 8192, dtype, True, True), H200)
    assert not isinstance(small.config, ScaledWsConfig), small.reason


def test_shipped_small_k_rows_take_the_ping_pong_tile_where_it_fits() -> None:
    """The shipped fp8 row at 8192²×1024 is the ping-pong tile (it won there, the cooperative one
    at 8192³); a call it does not take falls to the descriptor family; bf16 at 8192²×1024 gets
    its own gemm_ws row."""
    short_k = space.select_mnk("gemm_scaled", space.MnkProblem(8192, 8192, 1024, "fp8e4m3_fast", True, True),
                               H200)
    assert short_k.config == ScaledWsConfig(128, 128, 128, 8, 4, 6, 2, pingpong=True), short_k.reason
    full_k = space.select_mnk("gemm_scaled", space.MnkProblem(8192, 8192, 8192, "fp8e4m3_fast", True, True),
                              H200)
    assert isinstance(full_k.config, ScaledWsConfig) and not full_k.config.pingpong
    refused = space.select_mnk("gemm_scaled", space.MnkProblem(8192, 8192, 1024, "fp8e4m3_fast", True, False),
                               H200)
    assert not isinstance(refused.config, ScaledWsConfig), refused.reason
    bf16 = space.select(space.GemmProblem(8192, 8192, 1024, 1, "bf16", True, True), H200)
    assert bf16.config == WsConfig(128, 256, 64, 4, 8, 3), bf16.reason


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_shipped_rows_go_to_the_family_only_where_it_fits(dtype: str) -> None:
    """The sm_90 logic's 8192³ row names gemm_ws: a call the family takes gets it; one it does not
    (a C operand, alpha, A column-major: ws_ok false) gets the nearest other row, never gemm_ws —
    and a forced gemm_ws configuration falls back the same way."""
    assert (SHIPPED / f"blas.gemm.{dtype}.yaml").exists()
    fits = space.select(space.GemmProblem(8192, 8192, 8192, 1, dtype, True, True), H200)
    assert fits.config == WsConfig(128, 256, 64, 8, 8, 3), fits.reason
    other = space.select(space.GemmProblem(8192, 8192, 8192, 1, dtype, True, False), H200)
    assert not isinstance(other.config, WsConfig), other.reason
    with space.forced(WsConfig()):
        refused = space.select(space.GemmProblem(512, 512, 512, 1, dtype, True, False), H200)
        assert not isinstance(refused.config, WsConfig)
        assert space.select(space.GemmProblem(512, 512, 512, 1, dtype, True, True), H200).config == WsConfig()


def test_tf32_takes_only_configurations_with_128_byte_rows() -> None:
    """float32 rows of a K step must fit the 128-byte swizzle (block_k ≤ 32): a forced 64-deep
    configuration falls back on a tf32 call, a 32-deep one is taken; the tuner offers the tf32
    configurations to tf32 alone, and only those that fit the H200's shared memory."""
    from tessera.blas.tune import SPACES, _fits

    tf32 = space.GemmProblem(4096, 4096, 4096, 1, "tf32", True, True)
    with space.forced(WsConfig()):
        assert not isinstance(space.select(tf32, H200).config, WsConfig)
    with space.forced(space.WS_TF32_SPACE[0]):
        assert space.select(tf32, H200).reason == "forced"
    assert all(gemm_ws.row_fits(c, 4) for c in space.WS_TF32_SPACE)
    for dtype in ("tf32", "bf16", "fp16", "fp32", "tf32x3"):
        offered = [c for c in SPACES["default"] if isinstance(c, WsConfig)
                   and _fits(c, (4096, 4096, 4096, 1), dtype, H200)]
        if dtype == "tf32":
            assert offered == list(space.WS_TF32_SPACE)
        elif dtype in ("bf16", "fp16"):
            assert offered == list(space.WS_SPACE)
        else:
            assert not offered


def test_which_configurations_multiply_swapped() -> None:
    """A row-major tf32 B is multiplied as Dᵀ = Bᵀ·Aᵀ: the accumulator's rows are the tile's
    columns (block_n a multiple of 16 a warp), and ping-pong and halves are left out (with two
    multiplying partitions ptxas serializes the wgmma). A configuration that cannot is refused by
    the launcher with what to do, and selection does not give it a swapped call."""
    fits = [*space.WS_TF32_SPACE[:4], WsConfig(256, 64, 32, 8, 4, 3, 2)]
    misfits = [WsConfig(128, 64, 32, 8, 8, 3), WsConfig(128, 128, 32, 8, 4, 4, 2, pingpong=True),
               WsConfig(64, 32, 16, 8, 4, 3), WsConfig(256, 128, 32, 8, 8, 3, 2, halves=True)]
    assert all(map(gemm_ws.swap_fits, fits)) and not any(map(gemm_ws.swap_fits, misfits))
    assert space.WS_TF32_SPACE[4].pingpong  # the tf32 space's one misfit
    a, b, d = torch.empty(512, 256), torch.empty(256, 512), torch.empty(512, 512)
    with pytest.raises(InvalidArgumentError, match="cannot multiply a row-major float32 B"), \
            building_for("cuda", "sm_90"), capture():
        gemm_ws.launch_gemm_ws(a, b, d, num_sms=132, config=misfits[0])
    swapped = space.GemmProblem(4096, 4096, 4096, 1, "tf32", True, True, True)
    for config in fits[:3] + misfits[:2] + misfits[3:]:
        with space.forced(config):
            assert (space.select(swapped, H200).reason == "forced") == gemm_ws.swap_fits(config)
            assert space.select(dataclasses.replace(swapped, ws_swapped=False), H200).reason == "forced"


def test_the_shipped_tf32_row_runs_its_tile_exchanged_on_a_column_major_b() -> None:
    """The sm_90 tf32 logic's 2048³ row (tuned on A @ B, multiplied swapped) names gemm_ws
    256×128×32 split2: a row-major B gets it as it is; a column-major B (x @ W.t(), multiplied
    as it lies) gets block_m and block_n exchanged, the same accumulator (128×256, the best of that
    layout on the H200); a forced configuration is never exchanged; the exchange leaves square
    and ping-pong tiles alone; and a pack compiles both tiles for the column-major launches (so
    that call, too, loads a binary and compiles nothing, forced or not)."""
    swapped = space.GemmProblem(2048, 2048, 2048, 1, "tf32", True, True, True)
    row = space.select(swapped, H200)
    assert row.config == WsConfig(256, 128, 32, 8, 8, 3, 2), row.reason
    column = space.select(dataclasses.replace(swapped, ws_swapped=False), H200)
    assert column.config == WsConfig(128, 256, 32, 8, 8, 3, 2) and "exchanged" in column.reason
    with space.forced(row.config):
        assert space.select(dataclasses.replace(swapped, ws_swapped=False), H200).config == row.config
    square = WsConfig(128, 128, 32, 8, 4, 4, 2, pingpong=True)
    assert gemm_ws.unswapped(square) is square and gemm_ws.unswapped(space.WS_TF32_SPACE[2]) == \
        space.WS_TF32_SPACE[2]
    with building_for("cuda", "sm_90"), capture() as calls:
        gemm_ws.representative_launch("gemm", row.config, "tf32", 132)
    tiles = {(call.args[0].block_shape[0], call.args[1].block_shape[0] == 8) for call in calls
             if getattr(call.args[0], "block_shape", None) is not None}
    assert tiles == {(256, True), (128, False), (256, False)}  # column-major B: exchanged and forced


def test_a_tf32_row_tuned_on_a_column_major_b_is_taken_as_it_is(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A row of an NT layout file was timed on a column-major B, unswapped: it runs as tuned, where
    the same row in the dtype's file (timed on a row-major B, swapped) is exchanged for that B."""
    tall = WsConfig(256, 128, 32, 8, 8, 3, 2)
    row = {"schema": 1, "arch": "sm_90", "library": "blas", "op": "gemm", "problem": {"dtype": "tf32"},
           "solutions": [{"id": 0, "kernel": "gemm_ws", **dataclasses.asdict(tall)}],
           "table": [{"m": 4096, "n": 4096, "k": 4096, "batch": 1, "solution": 0}]}
    folder = tmp_path / "sm_90"
    folder.mkdir()
    (folder / "blas.gemm.tf32.yaml").write_text(yaml.safe_dump(row))
    monkeypatch.setattr(logic, "SHIPPED_LOGIC", tmp_path)
    logic.reload()
    try:
        column = space.GemmProblem(4096, 4096, 4096, 1, "tf32", True, True, False, layout="NT")
        assert space.select(column, H200).config == WsConfig(128, 256, 32, 8, 8, 3, 2)  # exchanged
        (folder / "blas.gemm.tf32.NT.yaml").write_text(yaml.safe_dump({**row, "problem": {"dtype": "tf32",
                                                                                          "layout": "NT"}}))
        logic.reload()
        choice = space.select(column, H200)
        assert choice.config == tall and "NT.yaml" in choice.reason
        assert "exchanged" not in choice.reason
    finally:
        monkeypatch.undo()
        logic.reload()


@pytest.mark.parametrize("trans_a", [False, True], ids=["A row-major", "A column-major"])
def test_tf32_calls_on_hopper_copy_only_what_the_kernel_cannot_read(trans_a: bool,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """On the H200 (faked: nothing launches) a tf32 call with a row-major B and a configuration
    that multiplies swapped reads both operands as they are; one that cannot (ping-pong), or
    ``gemm_tma``, has gemm copy B K-major first; x @ W.t() (B column-major) is never copied; and a
    column-major A (which the family reads only row-major) has both copied, unswapped."""
    from tessera.blas import api

    monkeypatch.setattr(api, "device_info", lambda device=None: H200)
    a = torch.empty(4096, 2048).t() if trans_a else torch.empty(2048, 4096)
    b_row, b_col = torch.empty(4096, 1024), torch.empty(1024, 4096).t()
    tma = TmaConfig(128, 256, 32, 8, 8, 3, epilogue_split=2)
    for config, b in itertools.product((space.WS_TF32_SPACE[0], space.WS_TF32_SPACE[4], tma), (b_row, b_col)):
        with space.forced(config):
            _, plan = api._plan(a, b, None, 1.0, 0.0, False, False, None, None, "tf32", allocate=False)
        assert plan is not None and plan.choice.config == config, plan
        swapped = not trans_a and b is b_row and config is space.WS_TF32_SPACE[0]
        assert plan.problem.ws_swapped == swapped and plan.k_major == (not swapped), config.short()
        assert (plan.op_b is b) == (swapped or b is b_col) and (plan.op_a is a) == (not trans_a)


def test_shipped_tf32_calls_at_4096_and_8192_select_by_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the shipped sm_90 logic on the H200 (faked): tf32 x @ W.t() at 4096³ and 8192³ takes the
    NT layout file's row (timed on that layout, not exchanged, nothing copied). A @ B with a
    row-major B takes the dtype file's row: at 4096³ the swapped ``gemm_ws`` 256×128×32, nothing
    copied (the fifty-second session's A/B on an H100: 0.95–1.00× torch in graphs against
    0.88–0.92× with B copied K-major); at 8192³ ``gemm_tma``, so B is copied K-major and the
    call selects again in the NT file (the two ways measured level there). 2048³ is beyond the
    NT file's max distance and keeps the dtype file's swapped row."""
    from tessera.blas import api

    monkeypatch.setattr(api, "device_info", lambda device=None: H200)
    logic.reload()
    swapped_row = WsConfig(256, 128, 32, 8, 8, 3, 2)
    for size in (4096, 8192):
        a, b_row, b_col = torch.empty(size, size), torch.empty(size, size), torch.empty(size, size).t()
        _, plan = api._plan(a, b_col, None, 1.0, 0.0, False, False, None, None, "tf32", allocate=False)
        assert "blas.gemm.tf32.NT.yaml" in plan.choice.reason and "exchanged" not in plan.choice.reason
        assert plan.op_b is b_col  # already K-major: not copied
        nt_choice = plan.choice.config
        _, plan = api._plan(a, b_row, None, 1.0, 0.0, False, False, None, None, "tf32", allocate=False)
        if size == 4096:
            assert plan.choice.config == swapped_row and plan.problem.ws_swapped, plan.choice
            assert plan.op_b is b_row and not plan.k_major
        else:
            assert plan.k_major and plan.op_b is not b_row and plan.choice.config == nt_choice, plan.choice
    small = torch.empty(2048, 2048)
    _, plan = api._plan(small, small, None, 1.0, 0.0, False, False, None, None, "tf32", allocate=False)
    assert plan.choice.config == swapped_row and plan.problem.ws_swapped
    assert "NT.yaml: no usable row within its max_distance" not in plan.choice.reason  # NN: not looked at


@pytest.mark.parametrize(("rows", "cols"), [(8, 64), (8, 256), (64, 128), (128, 256), (256, 128)], ids=str)
def test_the_reordered_view_moves_whole_columns(rows: int, cols: int) -> None:
    """The reordered view of a swizzled tile (``_row_order_layout``) sees every byte the plain
    swizzle does, in the same row, and its column r is one column n = p(r) whatever the row and
    the tile's height: so Bᵀ's pieces (8 rows) and D's tile (its rows) agree on which of D's
    columns an accumulator row holds, and the product lands where it belongs."""
    def coordinates(bases: list[list[int]]) -> list[tuple[int, int]]:
        out = []
        for offset in range(rows * cols):  # offset bit i adds bases[i], XOR-wise (a linear layout)
            row = col = 0
            for i, (r, c) in enumerate(bases):
                if offset >> i & 1:
                    row, col = row ^ r, col ^ c
            out.append((row, col))
        return out

    swizzled = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)
    plain = coordinates(gemm_ws._swizzled_bases(rows, cols))
    ordered = coordinates(gemm_ws._row_order_layout(swizzled, rows, cols).offset_bases)
    assert sorted(plain) == sorted(ordered) == [(r, c) for r in range(rows) for c in range(cols)]
    column = {}
    for (row, n), (row_seen, r) in zip(plain, ordered, strict=True):
        assert row == row_seen
        assert column.setdefault(r, n) == n  # one physical column a logical one, in every row
    reference = {r: (r & ~0b11100) | (r >> 3 & 1) << 2 | (r >> 4 & 1) << 3 | (r >> 2 & 1) << 4
                 for r in range(cols)}
    assert column == reference and sorted(column.values()) == list(range(cols))


@pytest.mark.parametrize(("block_m", "block_n", "warps"), [(128, 256, 8), (256, 128, 8), (128, 128, 8),
                                                          (128, 128, 4), (256, 64, 4)], ids=str)
def test_swapped_tiles_read_without_bank_conflicts(block_m: int, block_n: int, warps: int) -> None:
    """The swapped tile's layouts, compiled offline for sm_90 in a child (Gluon's
    ``bank_conflicts`` asserted at trace time): Bᵀ's register reads conflict-free in the reordered
    view (2-way in the plain swizzle), the epilogue's stores at most 2-way, and the swizzle's
    bases as Triton defines them (where Triton can convert a shared layout to its linear form:
    3.6 aborts on it)."""
    done = swapped_layouts_compile(block_m, block_n, warps)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_a_call_off_the_gpu_never_takes_it(device: str) -> None:
    """Off an sm_90 GPU (the interpreter, CI) gemm never picks the family, forced or not."""
    if device == "cuda" and space.ws_capable(device_info()):
        pytest.skip("this GPU takes the family")
    a = torch.randn(40, 24, device=device)
    with space.forced(WsConfig()):
        assert not isinstance(explain(a.half(), a.t().half()).config, WsConfig)


@pytest.mark.parametrize(("dtype", "b_col_major", "config"),
                         [("bf16", False, WsConfig()), ("bf16", True, WsConfig()),
                          ("tf32", False, space.WS_TF32_SPACE[0]), ("tf32", True, space.WS_TF32_SPACE[0]),
                          ("tf32", True, space.WS_TF32_SPACE[4]), ("bf16", False, WsConfig(halves=True)),
                          ("tf32", True, WsConfig(128, 256, 32, 8, 8, 4, halves=True))],
                         ids=["b-row-major", "x@W.t()", "tf32 swapped", "tf32 x@W.t()", "tf32 pingpong",
                              "halves", "tf32 halves"])
@pytest.mark.parametrize("shape", [(8192, 8192, 8192), (4000, 12000, 1000)], ids=str)
def test_pack_launches_are_a_real_calls(dtype: str, b_col_major: bool, config: WsConfig,
                                        shape: tuple[int, int, int]) -> None:
    """A large call's launch has the key of one of the launches a pack precompiles for the family
    (``representative_launch``), so an installed pack serves it without compiling (tf32: B
    row-major multiplied swapped, or column-major as it is or as gemm copies it; a configuration
    that cannot swap has no row-major launches)."""
    elem = torch.float32 if dtype == "tf32" else torch.bfloat16
    with capture() as representative, building_for("cuda", "sm_90"):
        gemm_ws.representative_launch("gemm", config, dtype, 132)
    # (bf16's also hold the bf16-product precisions' small GEMM, whose D is float32: emulated.SMALL_TILE)
    gemms = [c for c in representative if c.launcher is gemm_ws._launch and c.args[2].base.dtype == elem]
    exchanged = dtype == "tf32" and gemm_ws.swap_fits(config) and gemm_ws.unswapped(config) != config
    assert len(gemms) == (16 if dtype == "bf16" or gemm_ws.swap_fits(config) else 8) + (8 if exchanged else 0)
    m, n, k = shape
    a = torch.empty(m, k, dtype=elem)
    b = torch.empty(n, k, dtype=a.dtype).t() if b_col_major else torch.empty(k, n, dtype=a.dtype)
    with capture() as real, building_for("cuda", "sm_90"):
        gemm_ws.launch_gemm_ws(a, b, torch.empty(m, n, dtype=elem), num_sms=132, config=config)
    assert real[0].key() in {call.key() for call in representative}


@pytest.mark.parametrize("b_col_major", [False, True], ids=["b-row-major", "x@W.t()"])
@pytest.mark.parametrize("m,n", [(8192, 8192), (4000, 12008)], ids=str)
def test_scaled_pack_launches_are_a_real_calls(b_col_major: bool, m: int, n: int) -> None:
    """A large fp8 call with per-tensor scales (B column-major, or row-major and copied K-major
    first) launches with the key of one of the scaled use's representative launches."""
    config = ScaledWsConfig()
    with capture() as representative, building_for("cuda", "sm_90"):
        gemm_scaled.representative_launch("gemm_scaled", config, "fp8e4m3_fast", 132)
    assert len(representative) == 4
    a = torch.empty(m, 1024, dtype=torch.float8_e4m3fn)
    b = (torch.empty(n, 1024, dtype=a.dtype).t() if b_col_major
         else torch.empty(1024, n, dtype=a.dtype))
    one = torch.empty(1, dtype=torch.float32)
    with capture() as real, building_for("cuda", "sm_90"):
        launch_gemm_scaled(a, b, one, one, None, torch.empty(m, n, dtype=torch.bfloat16), config=config,
                           fast_accum=True, num_sms=132)
    assert real[-1].key() in {call.key() for call in representative}


def test_compiles_offline_for_sm90() -> None:
    """A pack build for sm_90 compiles the family's 16 representative launches (B row- and
    column-major; M, N, K multiples of 16 or only of 8; tf32's row-major B multiplied swapped, and
    its column-major B with the tile exchanged too: 24), D in halves on 4 stages, and the scaled
    fp8 use's 4 (M, N multiples of 16 or only of 8) with the running Triton — 3.9 in CI, whose
    Gluon renamed the TMA copies and the barrier (the aliases in gemm_ws); beside them the copies
    ``gemm`` makes of operands first and the bf16-product precisions' splits, promoted a₀·b₀
    GEMM and small-products GEMM (this family's tile with a float32 D), compiled once a build."""
    tile = {"block_m": 128, "block_n": 256, "block_k": 64, "group_m": 8, "num_warps": 8}
    jobs = [{"library": "blas", "op": "gemm", "kernel": "gemm_ws", "dtype": "bf16",
             "config": {**tile, "num_stages": 3}},
            {"library": "blas", "op": "gemm", "kernel": "gemm_ws", "dtype": "fp16",
             "config": {**tile, "num_stages": 4, "epilogue_split": 2}},
            {"library": "blas", "op": "gemm_scaled", "kernel": "gemm_scaled_ws", "dtype": "fp8e4m3_fast",
             "config": {**tile, "block_k": 128, "num_stages": 4, "epilogue_split": 2}},
            {"library": "blas", "op": "gemm_scaled", "kernel": "gemm_scaled_ws", "dtype": "fp8e4m3_fast",
             "config": {**tile, "block_n": 128, "block_k": 128, "num_warps": 4, "num_stages": 5,
                        "pingpong": True}},
            {"library": "blas", "op": "gemm", "kernel": "gemm_ws", "dtype": "tf32",
             "config": {**tile, "block_k": 32, "num_stages": 3, "epilogue_split": 2}}]
    with tempfile.TemporaryDirectory() as out:
        results = precompile("sm_90", jobs, out)
        for job, result, launches in zip(jobs, results, (16, 16, 4, 4, 24), strict=True):
            assert result["status"] == "ok", (job, result)
            sidecars = [json.loads((Path(out) / f).read_text()) for f in result["files"]
                        if f.endswith(".launch.json")]
            gemms = [s for s in sidecars if s["function"].endswith(":_gemm_ws_kernel")]
            copies = [s for s in sidecars if s["function"].endswith(":_copy_2d_kernel")]
            splits = [s for s in sidecars if s["function"].endswith(":_split_kernel")]
            promoted = [s for s in sidecars if s["function"].endswith(":_gemm_tma_kernel")]
            # the first bf16 job's also the bf16-product precisions' small GEMM (float32 D, 8)
            assert len(gemms) == launches + (8 if job is jobs[0] else 0)
            assert len(sidecars) == len(gemms) + len(copies) + len(splits) + len(promoted)
            assert len(copies) == (8 if job["dtype"] == "tf32" else 0)  # the K-major copies gemm makes first
            # bf16's splits of float32 operands and the promoted a₀·b₀ GEMM (the bf16-product
            # precisions): the first bf16 job's
            assert bool(splits) == (job is jobs[0])
            assert len(promoted) == (16 if job is jobs[0] else 0)
            for gemm in gemms:
                metadata = json.loads((Path(out) / gemm["metadata"]).read_text())
                assert metadata["num_warps"] == 12  # two multiplying warp groups, the loader's
                assert metadata["shared"] <= 232448, job  # the stages fit beside D's (half-sized) buffer
    [refused] = precompile("gfx942", jobs[:1], "/nonexistent")
    assert refused["status"] == "failed"


def test_launches_below_a_full_wave_let_the_next_kernel_start_early() -> None:
    """A grid of fewer tiles than multiprocessors (bf16 1024³ on 64×128 tiles: 128 of 132) launches
    with programmatic dependent launch early, and both partitions wait for the previous kernel
    before their first copy or store (sm_90 PTX, offline); a full wave launches with it off."""
    modes = {}
    for size, config in ((1024, WsConfig(64, 128, 64, 8, 4, 6)), (8192, WsConfig())):
        a = torch.empty(size, size, dtype=torch.bfloat16)
        with capture() as calls, building_for("cuda", "sm_90"):
            gemm_ws.launch_gemm_ws(a, a, torch.empty_like(a), num_sms=132, config=config)
        modes[size] = calls[0].constexprs["PDL"]
    assert modes == {1024: launch.PDL_EARLY, 8192: launch.PDL_OFF}
    call = ["launch_gemm_ws", 1024, 1024, 1024]
    fields = dataclasses.asdict(WsConfig(64, 128, 64, 8, 4, 6))
    launch_spec = ("tessera.blas.kernels.gemm_ws", call, "WsConfig", fields, "bfloat16", 0)
    ptx = sm90_ptx({"early": launch_spec})["early"]
    assert ptx.count("griddepcontrol.wait") == 2 and ptx.count("griddepcontrol.launch_dependents") == 2
    # a partition's wait leads its code, so the first in the text leads the first TMA copy (load or store)
    assert ptx.index("griddepcontrol.wait") < ptx.index("cp.async.bulk.tensor")


def test_halves_hand_stages_back_per_warp_group() -> None:
    """With halves, each multiplying warp group is a partition of its own, multiplying half of
    every tile's rows and arriving on a stage's ``empty`` barrier itself (counting two arrivals):
    in the sm_90 PTX (offline) no barrier spans the 8 multiplying warps, where the cooperative
    kernel has two a K step, and each of the two partitions issues its own wgmma."""
    call = ["launch_gemm_ws", 4096, 4096, 4096]
    ptx = sm90_ptx({name: ("tessera.blas.kernels.gemm_ws", call, "WsConfig", dataclasses.asdict(config),
                           "bfloat16", 0)
                    for name, config in (("cooperative", WsConfig()), ("halves", WsConfig(halves=True)))})
    across = re.compile(r"bar\.sync\s+\d+,\s*256;")  # a named barrier of 8 warps
    assert across.search(ptx["cooperative"]) and not across.search(ptx["halves"])
    counts = re.compile(r"mbarrier\.init\.shared(?:::cta)?\.b64\s+\[[^]]+\],\s*(\d+);")
    assert sorted(counts.findall(ptx["cooperative"])) == ["1"] * 8  # ready, empty (3 stages), turns
    assert sorted(counts.findall(ptx["halves"])) == ["1"] * 5 + ["2"] * 3  # empty: both halves arrive
    assert ptx["halves"].count("wgmma.mma_async") == 2 * ptx["cooperative"].count("wgmma.mma_async")


@pytest.mark.gpu
@pytest.mark.parametrize("mode", [launch.PDL_EARLY, launch.PDL_AT_EXIT])
def test_gpu_dependent_launches_see_the_previous_call(mode: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sub-wave calls with programmatic dependent launch, chained: each reads the matrix the call
    before wrote and writes the one that call read; the chain's result is the fp64 chain's
    (orthogonal factors keep it bounded, so a stale read would be off by the matrix's size)."""
    if not space.ws_capable(device_info()):
        pytest.skip("needs an sm_90 GPU")
    monkeypatch.setattr(launch, "_PDL", mode)
    gen = torch.Generator(device="cuda").manual_seed(13)
    q = [torch.linalg.qr(torch.randn(1024, 1024, device="cuda", generator=gen, dtype=torch.float64))[0]
         for _ in range(2)]
    factors = [f.to(torch.bfloat16) for f in q]
    x = torch.randn(1024, 1024, device="cuda", generator=gen).to(torch.bfloat16)
    y = torch.empty_like(x)
    want = x.double()
    with space.forced(WsConfig(64, 128, 64, 8, 4, 6)), recording() as calls:
        for _ in range(6):
            gemm(x, factors[0], out=y)  # reads x
            gemm(y, factors[1], out=x)  # reads y, just written; writes x, read before
            want = want @ factors[0].double() @ factors[1].double()
    torch.cuda.synchronize()
    assert {c.launcher for c in calls} == {gemm_ws._launch} and {c.constexprs["PDL"] for c in calls} == {mode}
    assert (x.double() - want).abs().max() < 0.1 * want.abs().max()


@pytest.mark.gpu
@pytest.mark.parametrize("config", [WsConfig(), WsConfig(128, 128, 64, 8, 4, 4),
                                    WsConfig(256, 128, 32, 4, 8, 6),
                                    WsConfig(128, 128, 64, 8, 4, 4, pingpong=True), WsConfig(halves=True),
                                    WsConfig(256, 128, 64, 8, 8, 4, 2, halves=True)], ids=lambda c: c.short())
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_gpu_results_against_fp64(config: WsConfig, dtype: torch.dtype) -> None:
    """Edge tiles in M and N, K not a multiple of the step (TMA's zero fill), a single tile, more
    tiles than programs, B row- and column-major; every result within the 16-bit output's
    rounding plus fp32 accumulation of the fp64 product, and each call through the family."""
    if not space.ws_capable(device_info()):
        pytest.skip("needs an sm_90 GPU")
    gen = torch.Generator(device="cuda").manual_seed(5)
    for m, n, k in ((300, 520, 136), (128, 256, 64), (1031, 2056, 1000), (4096, 4096, 512), (16, 16, 16)):
        a = torch.randn(m, k, device="cuda", generator=gen).to(dtype)
        for b in (torch.randn(k, n, device="cuda", generator=gen).to(dtype),
                  torch.randn(n, k, device="cuda", generator=gen).to(dtype).t()):
            with space.forced(config):
                with recording() as calls:
                    got = gemm(a, b)
                again = gemm(a, b)  # the replayed launch
            assert [c.launcher for c in calls] == [gemm_ws._launch], (m, n, k)
            want = a.double() @ b.double()
            bound = 2.0**-7 * want.abs() + 1e-5 * (a.double().abs() @ b.double().abs()) + 1e-6
            assert ((got.double() - want).abs() <= bound).all(), (m, n, k, b.stride())
            assert torch.equal(again, got)


@pytest.mark.gpu
@pytest.mark.parametrize("config", [*space.WS_TF32_SPACE, WsConfig(128, 256, 32, 8, 8, 4, halves=True)],
                         ids=lambda c: c.short())
def test_gpu_tf32_results_against_fp64(config: WsConfig) -> None:
    """float32 with TF32 allowed through the family (B row-major, multiplied swapped where the
    configuration can, else copied K-major first; or column-major as it is): edge tiles, K tails
    (a step's last 8-deep pieces zero), K under one step, more tiles than programs, within tf32's
    bound of the fp64 product; a repeat call (its recipe replaying the copy, if any) on a new B
    as right."""
    if not space.ws_capable(device_info()):
        pytest.skip("needs an sm_90 GPU")
    gen = torch.Generator(device="cuda").manual_seed(11)
    for m, n, k in ((300, 520, 136), (128, 256, 32), (200, 136, 24), (1031, 2056, 1000), (520, 300, 96),
                    (2048, 4096, 256)):  # the last: 256 tiles
        a = torch.randn(m, k, device="cuda", generator=gen)
        for layout in (lambda t: t, lambda t: t.t().contiguous().t()):
            b, fresh = (layout(torch.randn(k, n, device="cuda", generator=gen)) for _ in range(2))
            with space.forced(config):
                with recording() as calls:
                    got = gemm(a, b, precision="tf32")
                again = gemm(a, fresh, precision="tf32")
            launchers = [c.launcher for c in calls]
            assert gemm_ws._launch in launchers, (m, n, k)
            if gemm_ws.swaps(b) and gemm_ws.swap_fits(config):
                assert launchers == [gemm_ws._launch], (m, n, k)  # swapped: no copy of B
            assert_gemm_close(got, a, b, precision="tf32")
            assert_gemm_close(again, a, fresh, precision="tf32")


@pytest.mark.gpu
@pytest.mark.parametrize("config", [ScaledWsConfig(), ScaledWsConfig(num_stages=4, epilogue_split=2),
                                    ScaledWsConfig(128, 128, 64, 8, 4, 8),
                                    ScaledWsConfig(128, 128, 128, 8, 4, 5, pingpong=True),
                                    ScaledWsConfig(num_stages=4, epilogue_split=2, halves=True),
                                    ScaledWsConfig(64, 256, 128, 4, 4, 4, pingpong=True)],
                         ids=lambda c: c.short())
@pytest.mark.parametrize("elem", [torch.float8_e4m3fn, torch.float8_e5m2], ids=str)
def test_gpu_scaled_results_against_fp64(config: ScaledWsConfig, elem: torch.dtype) -> None:
    """fp8 with fast accumulation through ``gemm``: edge tiles, K tails, more tiles than programs;
    per-tensor scales, per-row / per-column ones with a bias, bf16 / fp16 / fp32 results, B
    column-major and row-major (copied K-major first); each within the output's rounding plus the
    fast accumulation's bound of the fp64 product, each call through the family, and a repeat
    call on a new A (its recipe's replay where B is read as it is) as right."""
    if not space.ws_capable(device_info()):
        pytest.skip("needs an sm_90 GPU")
    gen = torch.Generator(device="cuda").manual_seed(7)
    unit = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11, torch.float32: 2.0**-24}
    for m, n, k in ((300, 520, 144), (128, 256, 128), (1031, 2056, 1008), (4096, 4096, 512)):
        a = torch.randn(m, k, device="cuda", generator=gen).to(elem)
        b_col = torch.randn(n, k, device="cuda", generator=gen).to(elem).t()
        rows = torch.rand(m, device="cuda", generator=gen) + 0.5
        cols = torch.rand(n, device="cuda", generator=gen) + 0.5
        bias = torch.randn(n, device="cuda", generator=gen).to(torch.bfloat16)
        per_tensor = (torch.tensor([0.5], device="cuda"), torch.tensor(3.0, device="cuda"))
        cases = [(b_col, *per_tensor, None, torch.bfloat16), (b_col, rows, cols, bias, torch.float16),
                 (b_col.contiguous(), rows, cols, None, torch.float32)]
        fresh = torch.randn(m, k, device="cuda", generator=gen).to(elem)  # a repeat call's new A
        for b, sa, sb, bias_t, out_dtype in cases:
            args = dict(scale_a=sa, scale_b=sb, bias=bias_t, out_dtype=out_dtype, fast_accum=True)
            with space.forced(config):
                with recording() as calls:
                    got = gemm(a, b, **args)
                again = gemm(fresh, b, **args)  # replayed where its launch maps to the operands
            assert gemm_ws._launch in [c.launcher for c in calls], (m, n, k, out_dtype)
            scale = sa.double().reshape(-1, 1) * sb.double().reshape(1, -1)
            for x, y in ((a, got), (fresh, again)):
                want = (x.double() @ b.double()) * scale + (0 if bias_t is None else bias_t.double())
                magnitude = (x.double().abs() @ b.double().abs()) * scale
                bound = unit[out_dtype] * want.abs() + FP8_FAST_ACCUMULATION * magnitude + 1e-6
                assert ((y.double() - want).abs() <= bound).all(), (m, n, k, out_dtype, config.short())


@pytest.mark.gpu
def test_gpu_halves_of_d_are_right() -> None:
    """16-bit D stored in two column halves on 4 stages (edge tiles, both layouts of B)."""
    if not space.ws_capable(device_info()):
        pytest.skip("needs an sm_90 GPU")
    config = WsConfig(num_stages=4, epilogue_split=2)
    gen = torch.Generator(device="cuda").manual_seed(9)
    for m, n, k in ((300, 520, 136), (1031, 2056, 1000)):
        a = torch.randn(m, k, device="cuda", generator=gen).to(torch.bfloat16)
        for b in (torch.randn(k, n, device="cuda", generator=gen).to(a.dtype),
                  torch.randn(n, k, device="cuda", generator=gen).to(a.dtype).t()):
            with space.forced(config), recording() as calls:
                got = gemm(a, b)
            assert [c.launcher for c in calls] == [gemm_ws._launch]
            want = a.double() @ b.double()
            bound = 2.0**-7 * want.abs() + 1e-5 * (a.double().abs() @ b.double().abs()) + 1e-6
            assert ((got.double() - want).abs() <= bound).all(), (m, n, k, b.stride())


@pytest.mark.gpu
def test_gpu_shipped_logic_takes_it_at_8192() -> None:
    """On the H200 the shipped logic runs bf16 8192³ through the family, right."""
    if not space.ws_capable(device_info()):
        pytest.skip("needs an sm_90 GPU")
    logic.reload()
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    assert isinstance(explain(a, a).config, WsConfig)
    got, want = gemm(a, a).double(), a.double() @ a.double()
    assert ((got - want).abs() <= 2.0**-7 * want.abs() + 1e-5 * (a.double().abs() @ a.double().abs())).all()


@pytest.mark.gpu
@pytest.mark.parametrize("b_col_major", [False, True], ids=["b-row-major", "x@W.t()"])
def test_gpu_pack_serves_the_first_call_without_compiling(b_col_major: bool, tmp_path: Path) -> None:
    """A pack built from the shipped bf16 logic's gemm_ws row (8192³), installed: a fresh process's
    first 8192³ call loads the family's precompiled binary (zero Triton compilations, at least one
    pack load) and is right."""
    if not space.ws_capable(device_info()):
        pytest.skip("needs an sm_90 GPU")
    doc = yaml.safe_load((SHIPPED / "blas.gemm.bf16.yaml").read_text())
    [row] = [r for r in doc["table"] if (r["m"], r["n"], r["k"], r["batch"]) == (8192, 8192, 8192, 1)]
    [solution] = [s for s in doc["solutions"] if s["id"] == row["solution"]]
    assert solution["kernel"] == "gemm_ws", solution
    doc["solutions"], doc["table"] = [{**solution, "id": 0}], [{**row, "solution": 0}]
    (tmp_path / "logic").mkdir()
    (tmp_path / "logic" / "blas.gemm.bf16.yaml").write_text(yaml.safe_dump(doc))
    built = packs.build_pack("sm_90", tmp_path / "p.tar.gz", logic_dir=tmp_path / "logic", precompile=True)
    assert all(r["status"] == "ok" for r in built.manifest["support"]), built.manifest["support"]
    assert main(["pack", "install", str(built.path)]) == 0
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "first_call.py"
    flags = ["--size", "8192", *(["--b-col-major"] if b_col_major else [])]
    done = subprocess.run([sys.executable, str(script), "--child", "tessera", *flags], capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=str(script.parents[1]),
                                              TESSERA_KERNEL_CACHE="0"),  # the pack alone
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(next(line[7:] for line in done.stdout.splitlines() if line.startswith("RESULT ")))
    assert result["kernel"] == WsConfig().short(), result
    assert result["triton_compiles"] == 0 and result["pack_loads"] >= 1, result
    assert result["relative_error"] < 1e-2, result
