"""The Gluon FMA family (``gemm_fma``: IEEE float32 on the FMA units): its configuration rules, who
may take it, selection through forced and logic-file configurations only, its offline compile for
sm_90 (Triton's interpreter cannot run Gluon) and, on an NVIDIA GPU, its results against fp64 over
edge tiles, odd sizes, K tails, C with alpha/beta and every configuration of its tuning space."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
import torch
from devices import H200

from child import fma_layouts_compile, precompile
from reference import assert_gemm_close
from tessera import InvalidArgumentError
from tessera._core.device import DeviceInfo, device_info
from tessera._core.launch import building_for, capture, recording
from tessera.blas import explain, gemm, space
from tessera.blas.kernels import gemm_fma
from tessera.blas.kernels.gemm_fma import FmaConfig, fma_supported
from tessera.blas.kernels.gemm_tile import TileConfig


@pytest.mark.parametrize("fields", [dict(block_k=4), dict(block_k=64), dict(buffers=3), dict(group_m=0),
                                    dict(max_registers=32), dict(max_registers=256), dict(num_warps=2),
                                    dict(num_warps=16)], ids=str)
def test_config_rules(fields: dict) -> None:
    """A step's A tile is loaded a row of 4 floats or more a thread (block_k 8, 16 or 32), its
    tiles stored in one or two buffers, a register cap is ptxas's range or none, and the layouts
    are written for 4 or 8 warps."""
    with pytest.raises(InvalidArgumentError, match="gemm_fma takes block_k"):
        FmaConfig(**fields)
    assert FmaConfig().short() == "gemm_fma 128x128x8 g8 w8 x2"
    assert FmaConfig(16, 1, 4, 168).short() == "gemm_fma 128x128x16 g4 w8 x1 r168"
    assert FmaConfig(num_warps=4).short() == "gemm_fma 128x128x8 g8 w4 x2"
    assert (FmaConfig.block_m, FmaConfig.block_n, FmaConfig().num_warps) == (128, 128, 8)


def test_who_the_family_takes() -> None:
    """IEEE float32, A and B row-major, C and D any strides, 32-bit offsets."""
    a, b, d = torch.empty(64, 48), torch.empty(48, 32), torch.empty(64, 32)
    assert fma_supported(a, b, None, d, "ieee") and fma_supported(a, b, d.t().contiguous().t(), d, "ieee")
    assert fma_supported(a, b, torch.empty(32).expand(64, 32), d.t().contiguous().t(), "ieee")  # a bias row
    assert not fma_supported(a, b, None, d, "tf32")
    assert not fma_supported(a.t().contiguous().t(), b, None, d, "ieee")  # A column-major
    assert not fma_supported(a, b.t().contiguous().t(), None, d, "ieee")  # x @ W.t()
    assert not fma_supported(a.double(), b.double(), None, d.double(), "ieee")
    assert not fma_supported(a.half(), b.half(), None, d.half(), "ieee")
    wide = torch.empty(2**16, 2**15 + 1, device="meta")  # its last element 2³¹ + 2¹⁶ − 1 from its first
    assert not fma_supported(wide, torch.empty(2**15 + 1, 8, device="meta"), None,
                             torch.empty(2**16, 8, device="meta"), "ieee")


def test_selection_takes_it_only_where_it_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The heuristic never picks it; forced (or in a logic file) it takes only the calls it fits,
    else selection falls back: a column-major B, tf32, a batch, float64, or a GPU of another
    vendor (faked here: nothing launches)."""
    from tessera.blas import api

    fits = space.GemmProblem(4096, 4096, 4096, 1, "fp32", True, fma_ok=True)
    assert not isinstance(space.heuristic(fits, H200).config, FmaConfig)
    with space.forced(FmaConfig()):
        assert space.select(fits, H200).reason == "forced"
        refused = space.select(space.GemmProblem(4096, 4096, 4096, 1, "fp32", True), H200)
        assert not isinstance(refused.config, FmaConfig) and "FMA config" in refused.reason
    monkeypatch.setattr(api, "device_info", lambda device=None: H200)
    a, b = torch.empty(1024, 512), torch.empty(512, 768)
    cases = (((a, b), {}, True), ((a, b, torch.empty(768)), dict(beta=1.0, alpha=2.0), True),
             ((a, b.t().contiguous().t()), {}, False), ((a, b), dict(precision="tf32"), False),
             ((a[None].expand(3, -1, -1), b), {}, False), ((a.double(), b.double()), {}, False))
    for args, kwargs, taken in cases:
        with space.forced(FmaConfig()):
            choice = explain(*args, **kwargs)
        assert isinstance(choice.config, FmaConfig) == taken, (kwargs, choice.reason)
    monkeypatch.setattr(api, "device_info",
                        lambda device=None: DeviceInfo("gfx942", "hip", "MI300X", 304, 64, 65536, {}, None))
    with space.forced(FmaConfig()):
        assert not isinstance(explain(a, b).config, FmaConfig)


def test_the_tuner_offers_it_to_fp32_on_nvidia_only() -> None:
    """``FMA_SPACE`` is in the tuner's spaces, offered for one 2-D IEEE float32 problem on CUDA."""
    from tessera.blas.tune import SPACES, _fits

    for dtype, batch, device, offered in (("fp32", 1, H200, True), ("tf32", 1, H200, False),
                                          ("bf16", 1, H200, False), ("fp32", 4, H200, False),
                                          ("fp32", 1, DeviceInfo("gfx942", "hip", "MI300X", 304, 64, 65536,
                                                                 {}, None), False)):
        mine = [c for c in SPACES["default"] if isinstance(c, FmaConfig)
                and _fits(c, (4096, 4096, 4096, batch), dtype, device)]
        assert mine == (list(space.FMA_SPACE) if offered else []), (dtype, batch, device.arch)


@pytest.mark.parametrize("shape", [(4096, 4096, 4096), (1000, 3000, 777), (4096, 50257, 4096),
                                   (1, 4096, 4096)], ids=str)
def test_pack_launches_are_a_real_calls(shape: tuple[int, int, int]) -> None:
    """A call's launch has the key of one of the launches a pack precompiles for the family: the
    grid is an argument, so one binary serves every size of the same alignment."""
    config = FmaConfig(8, 2, 16, 128)
    with capture() as representative, building_for("cuda", "sm_90"):
        gemm_fma.representative_launch("gemm", config, "fp32", 132)
    assert len(representative) == 9
    m, n, k = shape
    with capture() as real, building_for("cuda", "sm_90"):
        gemm_fma.launch_gemm_fma(torch.empty(m, k), torch.empty(k, n), None, torch.empty(m, n), 1.0, 0.0,
                                 config=config)
    assert real[0].key() in {call.key() for call in representative}


def test_shared_memory_accesses_are_free_of_bank_conflicts() -> None:
    """A K step's rows of A and B, read in the kernel's layouts, and A's tile stored transposed at
    every block_k have no bank conflicts (Gluon's ``bank_conflicts``, compiled for sm_90 in a
    child): a thread's columns are two runs of 4, 64 apart, where 8 together put two threads of
    each 8-thread phase of an ``LDS.128`` on one bank; a warp loads one K group of A's rows, where
    one spanning several stored them onto the same banks."""
    done = fma_layouts_compile()
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_compiles_offline_for_sm90() -> None:
    """A pack build for sm_90 compiles the family's 9 representative launches with the running
    Triton (3.9 in CI), a register cap passed to ptxas as the JIT would (``maxnreg``), on 8 warps
    and on 4 (8×16 of D a thread)."""
    jobs = [{"library": "blas", "op": "gemm", "kernel": "gemm_fma", "dtype": "fp32",
             "config": {"block_k": 8, "buffers": 2, "group_m": 8}},
            {"library": "blas", "op": "gemm", "kernel": "gemm_fma", "dtype": "fp32",
             "config": {"block_k": 16, "buffers": 1, "group_m": 8, "max_registers": 168}},
            {"library": "blas", "op": "gemm", "kernel": "gemm_fma", "dtype": "fp32",
             "config": {"block_k": 8, "buffers": 2, "group_m": 8, "num_warps": 4}}]
    with tempfile.TemporaryDirectory() as out:
        for job, result in zip(jobs, precompile("sm_90", jobs, out), strict=True):
            assert result["status"] == "ok", (job, result)
            metadata = [json.loads((Path(out) / f).read_text()) for f in result["files"]
                        if f.endswith(".json") and not f.endswith(".launch.json")]
            assert len(metadata) == 9
            assert {m["maxnreg"] for m in metadata} == {job["config"].get("max_registers") or None}
            assert {m["num_warps"] for m in metadata} == {job["config"].get("num_warps", 8)}


@pytest.mark.gpu
@pytest.mark.parametrize("config", space.FMA_SPACE, ids=lambda c: c.short())
def test_gpu_results_against_fp64(config: FmaConfig) -> None:
    """Edge tiles in M and N, K not a multiple of the step (and an odd number of steps, which the
    two-buffer form pads with a step of zeros), one row, more tiles than a wave, C with alpha and
    beta (a bias row too): every result within float32's bound of the fp64 product, each call
    through the family, and the replayed repeat call equal to the first."""
    if device_info().backend != "cuda":
        pytest.skip("needs an NVIDIA GPU")
    gen = torch.Generator(device="cuda").manual_seed(3)
    for m, n, k in ((300, 520, 136), (128, 128, 8), (1, 257, 1000), (1031, 2056, 1000), (2048, 2048, 24)):
        a = torch.randn(m, k, device="cuda", generator=gen)
        b = torch.randn(k, n, device="cuda", generator=gen)
        for c, alpha, beta in ((None, 1.0, 0.0), (torch.randn(m, n, device="cuda", generator=gen), 0.5, 2.0),
                               (torch.randn(n, device="cuda", generator=gen), 1.0, 1.0)):
            with space.forced(config):
                with recording() as calls:
                    got = gemm(a, b, c, alpha=alpha, beta=beta)
                again = gemm(a, b, c, alpha=alpha, beta=beta)
            assert [call.launcher for call in calls] == [gemm_fma._launch], (m, n, k)
            full_c = None if c is None else torch.broadcast_to(c, (m, n))
            assert_gemm_close(got, a, b, full_c, alpha=alpha, beta=beta)
            assert torch.equal(again, got)


def test_off_nvidia_the_tile_family_runs(device: str) -> None:
    """Off an NVIDIA GPU (the interpreter, CI) gemm never picks the family, forced or not."""
    if device == "cuda" and device_info().backend == "cuda":
        pytest.skip("this GPU takes the family")
    a = torch.randn(40, 24, device=device)
    with space.forced(FmaConfig()):
        assert isinstance(explain(a, a.t().contiguous()).config, TileConfig)
