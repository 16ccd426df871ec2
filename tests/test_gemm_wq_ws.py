"""The warp-specialized weight-only decode kernel (``gemm_wq_ws``, Gluon, sm_90; 4- and 8-bit
codes): its configuration and the calls it takes (CPU), its selection (only where it takes the
call), its offline sm_90 build with the running Triton, and on the GPU its results against
x @ dequantized weight in fp64 — directly, through ``gemm_wq`` and replayed."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from devices import H200

from child import compile_script, precompile, sm90_ptx
from tessera import InvalidArgumentError
from tessera._core import launch
from tessera._core.device import device_info
from tessera._core.launch import building_for, capture, recording
from tessera.blas import dequantize_weight, gemm_wq, quantize_weight, space
from tessera.blas.kernels import gemm_wq_ws
from tessera.blas.kernels.gemm_wq_ws import WqWsConfig, fitting_stages, wq_ws_supported


def test_config_rules_and_names() -> None:
    assert WqWsConfig().short() == "gemm_wq_ws s6 c3"
    assert WqWsConfig(4, 2).short() == "gemm_wq_ws s4 c2"
    assert WqWsConfig(9, 3, 2).short() == "gemm_wq_ws s9 c3 k/2"
    for stages, consumers, split in ((1, 3, 1), (33, 3, 1), (8, 1, 1), (8, 5, 1), (9, 3, 3), (9, 3, 8)):
        with pytest.raises(InvalidArgumentError, match="gemm_wq_ws takes 2 to 32 stages"):
            WqWsConfig(stages, consumers, split)


@pytest.mark.parametrize("stages,consumers,advice", [(8, 3, "Use 6 or 9 stages"), (4, 3, "Use 3 or 6 stages"),
                                                     (2, 3, "Use 3 stages"), (6, 4, "Use 4 or 8 stages"),
                                                     (7, 2, "Use 6 or 8 stages")])
def test_each_stage_serves_one_warp_group(stages: int, consumers: int, advice: str) -> None:
    """Step i takes stage i mod stages and group i mod consumers; unless the stages are a multiple
    of the groups, two groups share a stage, and one can pass the stage's barrier a phase early
    (a parity names the phase) — the W4A16 fault of 8 stages and 3 groups. Refused, with the two
    nearest stage counts that are safe."""
    with pytest.raises(InvalidArgumentError, match=f"multiple of its warp groups.*{advice}"):
        WqWsConfig(stages, consumers)
    for stages in range(2, 33):
        for consumers in (2, 3, 4):
            if stages % consumers == 0:
                config = WqWsConfig(stages, consumers)
                owners = {}
                for step in range(4 * stages):
                    assert owners.setdefault(step % stages, step % consumers) == step % consumers, config


def _weight(k: int, n: int, bits: int = 4, group: int = 128, symmetric: bool = True,
            dtype: torch.dtype = torch.bfloat16, device: str = "cpu", seed: int = 3) -> object:
    gen = torch.Generator().manual_seed(seed)
    w = (torch.randn(k, n, generator=gen) * 0.05).to(dtype).to(device)
    return quantize_weight(w, bits=bits, group_size=group, symmetric=symmetric)


def _takes(x: torch.Tensor, q: object) -> bool:
    return wq_ws_supported(x, q.codes, q.scales, q.zeros, q.bits, q.group_size)


def test_which_calls_it_takes() -> None:
    """Symmetric codes in quantize_weight's layouts (4-bit column-major, 8-bit row-major), group
    64 or 128, 1 … 32 rows of 16-bit activations with 16-byte rows, N a multiple of 64, K of 256
    — nothing else."""
    q = _weight(512, 192)
    for m in (1, 7, 16, 32):
        assert _takes(torch.zeros(m, 512, dtype=torch.bfloat16), q), m
        assert _takes(torch.zeros(m, 512, dtype=torch.bfloat16), _weight(512, 192, bits=8)), m
    assert _takes(torch.zeros(4, 512, dtype=torch.float16), _weight(512, 192, dtype=torch.float16, group=64))
    assert _takes(torch.zeros(4, 512, dtype=torch.float16),
                  _weight(512, 192, bits=8, dtype=torch.float16, group=64))
    x = torch.zeros(4, 512, dtype=torch.bfloat16)
    assert not _takes(torch.zeros(33, 512, dtype=torch.bfloat16), q)  # more than 32 rows
    for bits in (4, 8):
        assert not _takes(x, _weight(512, 192, bits=bits, symmetric=False)), bits
        assert not _takes(x, _weight(512, 192, bits=bits, group=32)), bits
    eight = _weight(512, 192, bits=8)
    col_major = type(eight)(eight.codes.t().contiguous().t(), eight.scales, None, 8, 128, (512, 192))
    assert not _takes(x, col_major)  # 8-bit codes stored column-major
    wide = torch.zeros(512, 200, dtype=torch.uint8)[:, :192]
    assert not _takes(x, type(eight)(wide, eight.scales, None, 8, 128, (512, 192)))  # rows of 200 bytes
    assert not _takes(x, _weight(512, 96))  # N not a multiple of 64
    assert not _takes(torch.zeros(4, 384, dtype=torch.bfloat16), _weight(384, 192))  # K not of 256
    assert not _takes(torch.zeros(4, 512, dtype=torch.float16), q)  # scales in another dtype
    assert not _takes(torch.zeros(512, 4, dtype=torch.bfloat16).t(), q)  # x column-major
    assert not _takes(torch.zeros(4, 513, dtype=torch.bfloat16)[:, 1:], q)  # rows not 16-byte aligned
    row_major = _weight(512, 192)
    row_major = type(row_major)(row_major.codes.contiguous(), row_major.scales, None, 4, 128, (512, 192))
    assert not _takes(x, row_major)  # 4-bit codes stored row-major


def test_stages_fit_the_shared_memory() -> None:
    """A stage holds a step's codes (8 KiB of 4-bit ones, 16 KiB of 8-bit) and four (M_PAD × 64)
    activation boxes; the warp groups' sums sit beside them. 8 stages of 4-bit codes fit the H200
    up to 32 rows, of 8-bit ones up to 16; a smaller memory takes fewer, still a multiple of the
    warp groups (each stage serves one), never fewer than one a group."""
    config = WqWsConfig(8, 4)
    for m in (1, 16, 32):
        assert fitting_stages(config, m, 232448) == 8, m
    assert fitting_stages(config, 32, None) == 8
    assert fitting_stages(config, 16, 232448, bits=8) == 8
    assert fitting_stages(config, 32, 232448, bits=8) == 4  # (232448 − 3·64·32·4 − 1024) // 32 KiB = 6
    assert fitting_stages(WqWsConfig(8, 2), 32, 101376) == 2  # (101376 − 64·32·4 − 1024) // 24 KiB = 3
    assert fitting_stages(config, 32, 16384) == 4  # never fewer than one a group
    nine = WqWsConfig(9, 3)
    assert fitting_stages(nine, 8, 232448) == 9
    assert fitting_stages(nine, 32, 232448) == 6  # (232448 − 2·64·32·4 − 1024) // 24 KiB = 8


def test_selected_only_where_it_takes_the_call() -> None:
    """The heuristic takes it for 1–32 rows where the call fits (ws_ok), the other families
    otherwise; a forced gemm_wq_ws configuration or a logic row naming it never reaches a call it
    does not take."""
    pick = space.MNK_HEURISTICS["gemm_wq"]
    for m in (1, 9, 16, 32):
        for dtype, config in (("int4_bf16", WqWsConfig(6, 3)), ("int8_bf16", WqWsConfig(6, 3)),
                              ("int8_fp16", WqWsConfig(6, 3))):
            assert pick(space.MnkProblem(m, 8192, 8192, dtype, ws_ok=True), "cuda", 132).config == config, m
            assert not isinstance(pick(space.MnkProblem(m, 8192, 8192, dtype), "cuda", 132).config,
                                  WqWsConfig)
    # K split while (column block, slice) programs fit one wave of 132, in whole steps of 256 rows
    for n, k, split in ((4096, 14336, 2), (4096, 4096, 2), (2048, 8192, 4), (4096, 3840, 1), (4096, 256, 1),
                        (14336, 4096, 1), (8256, 8192, 1)):
        problem = space.MnkProblem(16, n, k, "int4_bf16", ws_ok=True)
        assert pick(problem, "cuda", 132).config == WqWsConfig(6, 3, split), (n, k)
    with space.forced(WqWsConfig(4, 2)):
        problem = space.MnkProblem(16, 8192, 8192, "int4_bf16")
        assert not isinstance(space.select_mnk("gemm_wq", problem, H200).config, WqWsConfig)
        problem = space.MnkProblem(16, 8192, 8192, "int4_bf16", ws_ok=True)
        assert space.select_mnk("gemm_wq", problem, H200).config == WqWsConfig(4, 2)
    # the shipped logic's rows name it (sm_90) …
    for dtype in ("int4_bf16", "int4_fp16", "int8_bf16", "int8_fp16"):
        assert isinstance(space.select_mnk("gemm_wq", space.MnkProblem(16, 8192, 8192, dtype, ws_ok=True),
                                           H200).config, WqWsConfig), dtype
        for m in (1, 16, 32):  # … and are taken only where ws_ok
            choice = space.select_mnk("gemm_wq", space.MnkProblem(m, 8192, 8192, dtype), H200)
            assert not isinstance(choice.config, WqWsConfig), (dtype, m, choice)


def test_compiles_offline_for_sm90() -> None:
    """A pack build for sm_90 compiles the family's 6 representative launches (M_PAD 8, 16, 32;
    groups 128 and 64) for 4- and 8-bit codes with the running Triton — 3.9 in CI, 3.6 on the
    H200 — the stages fitted to the H200's shared memory, one loader warp's group beside 2 to 4
    multiplying groups."""
    jobs = [{"library": "blas", "op": "gemm_wq", "kernel": "gemm_wq_ws", "dtype": dtype,
             "config": {"num_stages": 12, "consumers": consumers}}
            for dtype, consumers in (("int4_bf16", 4), ("int4_fp16", 3), ("int4_bf16", 2), ("int8_bf16", 3),
                                     ("int8_fp16", 2))]
    with tempfile.TemporaryDirectory() as out:
        results = precompile("sm_90", jobs, out)
        for job, result, warps in zip(jobs, results, (20, 16, 12, 16, 12), strict=True):
            assert result["status"] == "ok", (job, result)
            sidecars = [json.loads((Path(out) / f).read_text()) for f in result["files"]
                        if f.endswith(".launch.json")]
            assert len(sidecars) == 6 and all(s["function"].endswith(":_gemm_wq_ws_kernel") for s in sidecars)
            for sidecar in sidecars:
                metadata = json.loads((Path(out) / sidecar["metadata"]).read_text())
                assert metadata["num_warps"] == warps, job
                assert metadata["shared"] <= 232448, job
    [refused] = precompile("gfx942", jobs[:1], "/nonexistent")
    assert refused["status"] == "failed"
    unsafe = [{**jobs[1], "config": {"num_stages": 8, "consumers": 3}}]  # a row of a pre-fix logic file
    [refused] = precompile("sm_90", unsafe, "/nonexistent")
    assert refused["status"] == "failed" and "multiple of its warp groups" in refused["reason"], refused


# A child (compiling needs Triton without its interpreter): a real launch captured, its stage count
# then set to one the configuration refuses, compiled for sm_90 — the kernel's own guard must stop it.
_UNSAFE_RING = """
import torch
from triton.backends.compiler import GPUTarget
from tessera._core.launch import building_for, capture
from tessera.blas import quantize_weight
from tessera.blas.kernels import gemm_wq_ws
from tessera.tuning.precompile import compile_for
q = quantize_weight(torch.randn(1024, 256) * 0.05, bits=4, group_size=128)
x, y = torch.zeros(1, 1024, dtype=torch.bfloat16), torch.zeros(1, 256, dtype=torch.bfloat16)
with capture() as calls, building_for("cuda", "sm_90"):
    gemm_wq_ws.launch_gemm_wq_ws(x, q.codes, q.scales, 4, 128, y, gemm_wq_ws.WqWsConfig(6, 3))
[call] = calls
target = GPUTarget("cuda", 90, 32)
compile_for(call, target)  # the legal ring compiles
call.constexprs["STAGES"] = 8
try:
    compile_for(call, target)
except Exception as exc:
    print("refused:", str(exc)[-400:].replace(chr(10), " "))
else:
    print("compiled")
"""


def test_the_kernel_itself_refuses_a_ring_whose_stages_two_groups_share() -> None:
    """Besides ``WqWsConfig``'s check, the kernel asserts at compile time that its stages are a
    multiple of its warp groups, so no other path (a hand-made launch, a stale pack build) can
    compile the ring that faulted."""
    done = compile_script(_UNSAFE_RING)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "refused:" in done.stdout, done.stdout[-2000:]
    assert "each stage serves one warp group" in done.stdout, done.stdout[-2000:]


def test_a_packs_binaries_carry_the_pdl_mode_of_their_configuration() -> None:
    """A pack build for sm_90 compiles each configuration with its main launch's PDL mode (a
    constexpr: one binary a mode): the code width's measured one when the configuration names
    none (4-bit early, 8-bit at exit), else the one it names, so an installed pack's binaries
    are the ones a call launches."""
    cases = [("int4_bf16", "", launch.PDL_EARLY), ("int8_bf16", "", launch.PDL_AT_EXIT),
             ("int8_bf16", "off", launch.PDL_OFF), ("int4_bf16", "exit", launch.PDL_AT_EXIT)]
    jobs = [{"library": "blas", "op": "gemm_wq", "kernel": "gemm_wq_ws", "dtype": dtype,
             "config": {"num_stages": 6, "consumers": 3, **({"pdl": pdl} if pdl else {})}}
            for dtype, pdl, _ in cases]
    with tempfile.TemporaryDirectory() as out:
        for (dtype, pdl, mode), result in zip(cases, precompile("sm_90", jobs, out), strict=True):
            assert result["status"] == "ok", (dtype, pdl, result)
            for name in result["files"]:
                if name.endswith(".launch.json"):
                    sidecar = json.loads((Path(out) / name).read_text())
                    where = list(sidecar["signature"]).index("PDL")
                    assert [where, mode] in [[i[0], v] for i, v in sidecar["constants"]], (dtype, pdl)


def test_pdl_mode_is_the_measured_one_per_code_width_and_forced_for_comparisons(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The main launch takes programmatic dependent launch early with 4-bit codes and at exit with
    8-bit ones (the modes timed fastest on the H200, ``WQ_WS_PDL``), and the mode ``TESSERA_PDL``
    forces (here: ``launch._PDL``) for the A/B that decides it."""
    x = torch.empty(16, 512, dtype=torch.bfloat16)
    y = torch.empty(16, 128, dtype=torch.bfloat16)
    for bits, measured in ((4, launch.PDL_EARLY), (8, launch.PDL_AT_EXIT)):
        q = _weight(512, 128, bits=bits)
        modes = []
        for forced in (None, launch.PDL_OFF, launch.PDL_AT_EXIT, launch.PDL_EARLY):
            monkeypatch.setattr(launch, "_PDL", forced)
            with capture() as calls, building_for("cuda", "sm_90"):
                gemm_wq_ws.launch_gemm_wq_ws(x, q.codes, q.scales, bits, 128, y, WqWsConfig(9, 3))
            modes.append(calls[0].constexprs["PDL"])
        assert modes == [measured, launch.PDL_OFF, launch.PDL_AT_EXIT, launch.PDL_EARLY], bits


def test_a_configuration_names_its_own_pdl_mode_which_the_override_still_beats(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``WqWsConfig.pdl`` (a tuned parameter: the best mode differs by GPU) replaces the code
    width's measured mode; ``TESSERA_PDL`` still forces every launch site for an A/B; a name
    that is no mode is refused."""
    x = torch.empty(16, 512, dtype=torch.bfloat16)
    y = torch.empty(16, 128, dtype=torch.bfloat16)
    q = _weight(512, 128, bits=4)
    for name, mode in (("off", launch.PDL_OFF), ("early", launch.PDL_EARLY), ("exit", launch.PDL_AT_EXIT)):
        for forced, expected in ((None, mode), (launch.PDL_OFF, launch.PDL_OFF)):
            monkeypatch.setattr(launch, "_PDL", forced)
            with capture() as calls, building_for("cuda", "sm_90"):
                gemm_wq_ws.launch_gemm_wq_ws(x, q.codes, q.scales, 4, 128, y, WqWsConfig(9, 3, pdl=name))
            assert calls[0].constexprs["PDL"] == expected, (name, forced)
    assert "pdl exit" in WqWsConfig(9, 3, pdl="exit").short()
    for bad in ("late", 1, None):
        with pytest.raises(InvalidArgumentError, match="pdl must be"):
            WqWsConfig(9, 3, pdl=bad)


def test_measured_code_reads_reach_the_sm90_code() -> None:
    """The code reads timed on the H200 are in the code compiled for sm_90 (offline, with the
    running Triton): 8-bit codes as 16-bit words through ``ldmatrix.trans`` (two a quarter for
    each of 3 warp groups' 4 quarters: 24), no byte loads of codes, and the exact conversions'
    constants; 4-bit codes as 32-bit words, a thread's four words of a quarter through one
    ``ldmatrix`` (3 warp groups' 4 quarters: 12), each word turned into four operand registers
    (48 word conversions: three shifts each with bf16, one with fp16), no byte loads of codes."""
    ptx = sm90_ptx({dtype: ("tessera.blas.kernels.gemm_wq_ws", "gemm_wq", "WqWsConfig",
                            {"num_stages": 6, "consumers": 3}, dtype, 2)  # M_PAD 16
                    for dtype in ("int4_bf16", "int4_fp16", "int8_bf16", "int8_fp16")})
    for dtype, constant in (("int8_bf16", "0x43804380"), ("int8_fp16", "0x64806480")):
        assert ptx[dtype].count("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16") == 24, dtype
        assert ptx[dtype].count("ld.shared.b8") + ptx[dtype].count("ld.shared.u8") <= 1, dtype  # not codes
        assert constant in ptx[dtype], dtype
    assert ptx["int4_bf16"].count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == 12
    assert ptx["int4_bf16"].count("ld.shared.b8") + ptx["int4_bf16"].count("ld.shared.u8") <= 1
    assert ptx["int4_bf16"].count("mov.b32 c, 0x43084308") == 3 * 4 * 4
    assert ptx["int4_bf16"].count("shr.b32 u, ") == 3 * 3 * 4 * 4  # three shifts a word
    # fp16 takes the nibbles at bits 4–7 as 1024 + 16·nibble: one shift and two FMAs a word
    assert ptx["int4_fp16"].count("ldmatrix.sync.aligned.m8n8.x4.shared.b16") == 12
    assert ptx["int4_fp16"].count("shr.b32 u, ") == 3 * 4 * 4
    assert ptx["int4_fp16"].count("fma.rn.f16x2 t, t, d, e") == 2 * 3 * 4 * 4


def _reference_check(x: torch.Tensor, q: object, y: torch.Tensor) -> None:
    """y against x @ W in fp64 (W the exact dequantized weight): the output's rounding plus fp32
    accumulation."""
    xd = x.double().cpu()
    wd = dequantize_weight(q, torch.float64).cpu()
    ref, magnitude = xd @ wd, xd.abs() @ wd.abs()
    unit = 2.0**-8 if x.dtype == torch.bfloat16 else 2.0**-11
    err = (y.double().cpu() - ref).abs()
    ok = err <= unit * ref.abs() + 1e-5 * magnitude + 1e-6
    assert bool(ok.all()), (err / magnitude.clamp_min(1e-9)).max()


def _gpu() -> None:
    if not torch.cuda.is_available() or not space.ws_capable(device_info()):
        pytest.skip("needs an sm_90 GPU (wgmma, TMA)")


@pytest.mark.gpu
@pytest.mark.parametrize("config", [WqWsConfig(8, 4), WqWsConfig(6, 3), WqWsConfig(9, 3), WqWsConfig(4, 2)],
                         ids=lambda c: c.short())
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("m,n,k,group", [(1, 64, 256, 128), (5, 192, 512, 64), (16, 4096, 1280, 64),
                                         (32, 320, 2048, 128), (9, 8192, 8192, 128)])
def test_gpu_results_against_fp64(config: WqWsConfig, dtype: torch.dtype, bits: int, m: int, n: int, k: int,
                                  group: int) -> None:
    """Every activation width (M_PAD 8, 16, 32), fewer steps than warp groups (K = 256, 512),
    odd step counts, both groups, code widths and activation dtypes, launched directly. The
    8-bit codes span 1 … 255 (each group's largest weight is one end), so both halves of the
    bf16 conversion (top bit set or not) are checked, with the kernel's column order and store."""
    _gpu()
    q = _weight(k, n, bits=bits, group=group, dtype=dtype, device="cuda")
    if bits == 8:
        assert (int(q.codes.min()), int(q.codes.max())) == (1, 255)
    x = torch.randn(m, k, generator=torch.Generator().manual_seed(m)).to(dtype).cuda()
    y = torch.full((m, n), float("nan"), dtype=dtype, device="cuda")
    gemm_wq_ws.launch_gemm_wq_ws(x, q.codes, q.scales, bits, group, y, config)
    _reference_check(x, q, y)


@pytest.mark.gpu
@pytest.mark.parametrize("config", [WqWsConfig(9, 3, 2), WqWsConfig(6, 3, 4)], ids=lambda c: c.short())
@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("m,n,k,group", [(1, 4096, 4096, 128), (16, 192, 2048, 64), (9, 320, 1024, 128),
                                         (5, 64, 768, 128)])
def test_gpu_split_k_against_fp64(config: WqWsConfig, bits: int, m: int, n: int, k: int, group: int) -> None:
    """K cut into slices (fp32 sums in scratch, added by ``sum_slices``): slices of one step and
    of fewer steps than warp groups (K = 1024 in 4), both code widths; a K the split does not
    divide into whole steps (768 = 3 steps) runs unsplit, one launch."""
    _gpu()
    q = _weight(k, n, bits=bits, group=group, device="cuda")
    x = torch.randn(m, k, generator=torch.Generator().manual_seed(m)).to(torch.bfloat16).cuda()
    y = torch.full((m, n), float("nan"), dtype=torch.bfloat16, device="cuda")
    with recording() as calls:
        gemm_wq_ws.launch_gemm_wq_ws(x, q.codes, q.scales, bits, group, y, config)
    split = config.split_k if k % (256 * config.split_k) == 0 else 1
    assert calls[0].grid == (n // 64, split)
    assert len(calls) == (2 if split > 1 else 1)
    _reference_check(x, q, y)


@pytest.mark.gpu
@pytest.mark.parametrize("config", [WqWsConfig(3, 3), WqWsConfig(6, 3, 2)], ids=lambda c: c.short())
def test_gpu_through_gemm_wq_and_replayed(config: WqWsConfig) -> None:
    """gemm_wq takes the kernel where it is forced and fits (a leading batch dimension, 3-D x),
    keeps a recipe, and its replay on new operands is right (with a K split: both launches, the
    slices in kept scratch); a call it does not take (asymmetric codes) runs another family under
    the same forced configuration."""
    from tessera.blas import quantized
    from tessera.blas.kernels import gemm_wq as gemm_wq_kernels

    _gpu()
    q = _weight(1024, 256, device="cuda")
    quantized._RECIPES.clear()
    with space.forced(config):
        for seed in (1, 2):
            gen = torch.Generator().manual_seed(seed)
            x = torch.randn(2, 6, 1024, generator=gen).to(torch.bfloat16).cuda()
            with recording() as calls:
                y = gemm_wq(x, q)
            _reference_check(x.reshape(12, 1024), q, y.reshape(12, 256))
            if seed == 1:
                sums = [gemm_wq_kernels._launch_sum_slices] if config.split_k > 1 else []
                assert [c.launcher for c in calls] == [gemm_wq_ws._launch, *sums]
        assert len(quantized._RECIPES) == 1
        asymmetric = _weight(1024, 256, symmetric=False, device="cuda")
        with recording() as calls:
            y = gemm_wq(x, asymmetric)
        assert gemm_wq_ws._launch not in [c.launcher for c in calls]
        _reference_check(x.reshape(12, 1024), asymmetric, y.reshape(12, 256))


@pytest.mark.gpu
@pytest.mark.parametrize("mode", [launch.PDL_EARLY, launch.PDL_AT_EXIT])
@pytest.mark.parametrize("bits", [4, 8])
def test_gpu_dependent_launches_read_what_the_previous_kernel_wrote(mode: int, bits: int,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """With programmatic dependent launch forced on (the A/B that decides its mode), each call
    reads the activations a copy kernel wrote just before it into the same buffer: every result
    is its own activations' product, not the previous ones'."""
    _gpu()
    monkeypatch.setattr(launch, "_PDL", mode)
    q = _weight(4096, 4096, bits=bits, group=128, device="cuda")
    gen = torch.Generator().manual_seed(21)
    sources = [torch.randn(16, 4096, generator=gen).to(torch.bfloat16).cuda() for _ in range(4)]
    x = torch.empty_like(sources[0])
    outs = [torch.empty(16, 4096, dtype=torch.bfloat16, device="cuda") for _ in sources]
    with recording() as calls:
        for source, y in zip(sources, outs, strict=True):
            x.copy_(source)  # written by the kernel just before the launch that reads it
            gemm_wq_ws.launch_gemm_wq_ws(x, q.codes, q.scales, bits, 128, y, WqWsConfig(9, 3))
    assert {c.constexprs["PDL"] for c in calls} == {mode}
    for source, y in zip(sources, outs, strict=True):
        _reference_check(source, q, y)


# A child process (a kernel fault leaves the CUDA context unusable): 20 rounds of a CUDA graph of
# torch.matmul replayed, then gemm_wq timed eagerly with the L2 flushed before each call — the
# pair after which the 4-bit kernel with 8 stages of 3 warp groups failed with `unspecified
# launch failure` (argv: code bits, then "shipped" or a forced STAGES,CONSUMERS).
_FLUSHED_AFTER_GRAPHS = """
import contextlib
import sys
import torch
from tessera._core.timing import flushed_ms, graph_ms
from tessera.blas import gemm_wq, quantize_weight, space
from tessera.blas.kernels.gemm_wq_ws import WqWsConfig
bits, ring = int(sys.argv[1]), sys.argv[2]
gen = torch.Generator().manual_seed(5)
weights = [(torch.randn(8192, 8192, generator=gen) * 0.02).to(torch.bfloat16).cuda() for _ in range(4)]
q = quantize_weight(weights[0], bits=bits, group_size=128)
x = torch.randn(1, 8192, generator=gen).to(torch.bfloat16).cuda()
shipped = ring == "shipped"
with contextlib.nullcontext() if shipped else space.forced(WqWsConfig(*map(int, ring.split(",")))):
    for _ in range(20):
        graph_ms([lambda w=w: torch.matmul(x, w) for w in weights])
        flushed_ms(lambda: gemm_wq(x, q))
torch.cuda.synchronize()
print("ok")
"""


@pytest.mark.gpu
@pytest.mark.parametrize("bits,ring", [(4, "shipped"), (8, "shipped"), (4, "3,3"), (4, "8,4")])
def test_gpu_flushed_eager_calls_after_graph_replays_do_not_fault(bits: int, ring: str) -> None:
    """The decode shape (M = 1, 8192²) timed eagerly with the L2 flushed, after CUDA graphs of
    torch.matmul, twenty times in a fresh process: every call completes — as shipped, and on the
    tightest legal ring (one stage a warp group). Before the stage rule (fiftieth session,
    ``benchmarks/results/wq-fault-h100-737601/``) 4-bit codes on 8 stages of 3 groups failed here
    in 5 of 6 H100 processes, and 4 stages of 3 groups in every one."""
    _gpu()
    done = subprocess.run([sys.executable, "-c", _FLUSHED_AFTER_GRAPHS, str(bits), ring], capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]
