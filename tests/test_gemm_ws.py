"""The warp-specialized Gluon GEMM family (``gemm_ws``): who may take it, its shipped logic rows,
its offline compile for sm_90 (Triton's interpreter cannot run Gluon), and on the H200 its
results against an fp64 reference over edge tiles, odd sizes and both layouts of B."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
import yaml

from child import precompile
from tessera import InvalidArgumentError
from tessera._core.device import DeviceInfo, device_info
from tessera._core.launch import building_for, capture, recording
from tessera.blas import explain, gemm, space
from tessera.blas.kernels import gemm_ws
from tessera.blas.kernels.gemm_ws import WsConfig, ws_shared_memory, ws_supported
from tessera.cli import main
from tessera.tuning import logic, packs

H200 = DeviceInfo(arch="sm_90", backend="cuda", name="NVIDIA H200", multiprocessors=132, warp_size=32,
                  shared_memory_per_block=232448, peak_tflops={}, memory_bandwidth_tbs=None)
SHIPPED = Path(__file__).resolve().parents[1] / "tessera" / "logic" / "sm_90"


@pytest.mark.parametrize("fields", [dict(num_warps=2), dict(block_n=512), dict(block_k=256),
                                    dict(block_m=64, num_warps=8), dict(num_stages=1), dict(block_n=96),
                                    dict(group_m=0)], ids=str)
def test_config_rules(fields: dict) -> None:
    """wgmma's accumulator (16 rows a warp, at most 256 columns) and B's layout read from its
    descriptor block (block_k < block_n) bound the configurations."""
    with pytest.raises(InvalidArgumentError, match="gemm_ws takes 4 or 8 warps"):
        WsConfig(**fields)
    assert WsConfig().short() == "gemm_ws 128x256x64 g8 w8 s3"


def test_shared_memory_of_the_shipped_tile_fits_the_h200() -> None:
    """Three 128×256×64 bf16 stages (144 KiB) and D's tile (64 KiB): under the H200's 227 KiB,
    as the offline compile measured (213052 bytes with the barriers and the layout scratch)."""
    assert ws_shared_memory(WsConfig()) == 3 * (128 + 256) * 64 * 2 + 128 * 256 * 2
    assert ws_shared_memory(WsConfig()) < 232448
    assert ws_shared_memory(WsConfig(num_stages=4)) > 232448


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
    assert not ws_supported(a.float(), b_row.float(), None, d.float(), 1.0)  # fp32
    narrow = torch.empty(48, 36, dtype=torch.bfloat16)[:, :30]  # rows of 30 elements: not 16-byte multiples
    assert not ws_supported(a, narrow, None, torch.empty(64, 30, dtype=torch.bfloat16), 1.0)
    assert space.ws_capable(H200)
    assert not space.ws_capable(DeviceInfo("sm_100", "cuda", "B200", 148, 32, 232448, {}, None))
    assert not space.ws_capable(DeviceInfo("gfx942", "hip", "MI300X", 304, 64, 65536, {}, None))


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


def test_a_call_off_the_gpu_never_takes_it(device: str) -> None:
    """Off an sm_90 GPU (the interpreter, CI) gemm never picks the family, forced or not."""
    if device == "cuda" and space.ws_capable(device_info()):
        pytest.skip("this GPU takes the family")
    a = torch.randn(40, 24, device=device)
    with space.forced(WsConfig()):
        assert not isinstance(explain(a.half(), a.t().half()).config, WsConfig)


@pytest.mark.parametrize("b_col_major", [False, True], ids=["b-row-major", "x@W.t()"])
@pytest.mark.parametrize("shape", [(8192, 8192, 8192), (4000, 12000, 1000)], ids=str)
def test_pack_launches_are_a_real_calls(b_col_major: bool, shape: tuple[int, int, int]) -> None:
    """A large call's launch has the key of one of the launches a pack precompiles for the family
    (``representative_launch``), so an installed pack serves it without compiling."""
    config = WsConfig()
    with capture() as representative, building_for("cuda", "sm_90"):
        gemm_ws.representative_launch("gemm", config, "bf16", 132)
    m, n, k = shape
    a = torch.empty(m, k, dtype=torch.bfloat16)
    b = torch.empty(n, k, dtype=a.dtype).t() if b_col_major else torch.empty(k, n, dtype=a.dtype)
    with capture() as real, building_for("cuda", "sm_90"):
        gemm_ws.launch_gemm_ws(a, b, torch.empty(m, n, dtype=torch.bfloat16), num_sms=132, config=config)
    assert real[0].key() in {call.key() for call in representative}


def test_compiles_offline_for_sm90() -> None:
    """A pack build for sm_90 compiles the family's 16 representative launches (B row- and
    column-major; M, N, K multiples of 16 or only of 8) with the running Triton — 3.9 in CI,
    whose Gluon renamed the TMA copies and the barrier (the aliases in gemm_ws)."""
    job = {"library": "blas", "op": "gemm", "kernel": "gemm_ws", "dtype": "bf16",
           "config": {"block_m": 128, "block_n": 256, "block_k": 64, "group_m": 8, "num_warps": 8,
                      "num_stages": 3}}
    with tempfile.TemporaryDirectory() as out:
        [result] = precompile("sm_90", [job], out)
        assert result["status"] == "ok", result
        sidecars = [json.loads((Path(out) / f).read_text()) for f in result["files"]
                    if f.endswith(".launch.json")]
        assert len(sidecars) == 16 and all(s["function"].endswith(":_gemm_ws_kernel") for s in sidecars)
        metadata = json.loads((Path(out) / sidecars[0]["metadata"]).read_text())
        assert metadata["num_warps"] == 12  # 8 multiplying warps, the loader warp's group
    [refused] = precompile("gfx942", [job], "/nonexistent")
    assert refused["status"] == "failed"


@pytest.mark.gpu
@pytest.mark.parametrize("config", [WsConfig(), WsConfig(128, 128, 64, 8, 4, 4),
                                    WsConfig(256, 128, 32, 4, 8, 6)], ids=lambda c: c.short())
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
                          text=True, env=dict(os.environ, PYTHONPATH=str(script.parents[1])), timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(next(line[7:] for line in done.stdout.splitlines() if line.startswith("RESULT ")))
    assert result["kernel"] == WsConfig().short(), result
    assert result["triton_compiles"] == 0 and result["pack_loads"] >= 1, result
    assert result["relative_error"] < 1e-2, result
