"""Quantized GEMM. Weight-only (W4A16, W8A16): the documented packing against an independent NumPy
quantizer, the GEMM against x @ dequantized weight in fp64. fp8/int8 operands with scales: exact
int32 products against NumPy int64, scaled results against fp64. Bad input for both."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
import triton

from child import precompile
from shipped import shipped_solutions
from tessera import InvalidArgumentError, UnsupportedError
from tessera._core.launch import building_for, nvidia_target, recording
from tessera.blas import QuantizedWeight, dequantize_weight, explain, gemm, gemm_wq, quantize_weight, space
from tessera.blas.accuracy import FP8_ACCUMULATION, FP8_FAST_ACCUMULATION
from tessera.blas.kernels import gemm_scaled
from tessera.blas.kernels import gemm_wq as gemm_wq_kernels
from tessera.blas.kernels.gemm_scaled import ScaledTmaConfig
from tessera.blas.kernels.gemm_wq import WqConfig, WqDequantConfig, WqGemvConfig, code_words


def numpy_codes(w: np.ndarray, bits: int, group: int, symmetric: bool) -> tuple[np.ndarray, np.ndarray,
                                                                                np.ndarray]:
    """(codes (K, N), scales, zeros) of the documented quantization of float32 weights, written
    without torch: the scale in float64, rounded up to float32, the codes against that."""
    k, n = w.shape
    g = w.reshape(k // group, group, n).astype(np.float32)
    top = 2**bits - 1

    def rounded_up(scale: np.ndarray) -> np.ndarray:
        scale = np.where(scale > 0, scale, 1.0)
        single = scale.astype(np.float32)
        return np.where(single < scale, np.nextafter(single, np.float32(np.inf)), single)

    if symmetric:
        half = 2 ** (bits - 1)
        scale = rounded_up(np.abs(g).max(axis=1).astype(np.float64) / (half - 1))
        codes = np.clip(np.round(g / scale[:, None, :]), -half, half - 1) + half
        zero = np.full_like(scale, half)
    else:
        low, high = np.minimum(g.min(axis=1), 0), np.maximum(g.max(axis=1), 0)  # 0 in the range
        scale = rounded_up((high.astype(np.float64) - low) / top)
        zero = np.clip(np.round(-low / scale), 0, top)
        codes = np.clip(np.round(g / scale[:, None, :]) + zero[:, None, :], 0, top)
    return codes.reshape(k, n).astype(np.uint8), scale, zero


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("symmetric", [True, False])
def test_packing_layout_and_round_trip(bits: int, symmetric: bool) -> None:
    gen = torch.Generator().manual_seed(bits + symmetric)
    w = torch.randn(128, 40, generator=gen, dtype=torch.float32)
    w[:32, 3] = 0.0  # an all-zero group: scale 1, codes at the zero point
    q = quantize_weight(w, bits=bits, group_size=32, symmetric=symmetric)
    codes, scale, zero = numpy_codes(w.numpy(), bits, 32, symmetric)
    stored = q.codes.numpy()
    if bits == 4:  # the documented layout: runs of 32 rows interleaved (see nibble_rows); column-major
        assert stored.shape == (64, 40) and q.codes.stride() == (1, 64)
        low, high = nibble_rows(64)
        assert np.array_equal(stored & 0xF, codes[low]) and np.array_equal(stored >> 4, codes[high])
    else:  # row-major
        assert q.codes.stride() == (40, 1)
        assert np.array_equal(stored, codes)
    assert np.allclose(q.scales.numpy(), scale, rtol=1e-6)
    assert (q.zeros is None) == symmetric
    if not symmetric:
        assert np.array_equal(q.zeros.numpy(), zero)
    want = (codes.astype(np.float64) - np.repeat(zero, 32, axis=0)) * np.repeat(scale, 32, axis=0)
    assert np.allclose(dequantize_weight(q).double().numpy(), want, rtol=1e-6, atol=1e-7)
    step = np.repeat(scale, 32, axis=0)
    assert np.all(np.abs(want - w.numpy()) <= 0.5 * step * (1 + 1e-5) + 1e-7)  # within half a step


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("symmetric", [True, False])
def test_groups_of_one_sign_stay_within_half_a_step(bits: int, symmetric: bool) -> None:
    """Groups all positive, all negative, constant, or a narrow range far from 0: every weight is
    within half a step of its dequantized value (the asymmetric range holds 0, so the zero point
    is a code; with the group's own min … max it was clamped, and weights in [1, 2] all came
    back as 1.0)."""
    columns = [torch.rand(64) + 1, -torch.rand(64) - 1, torch.full((64,), 20.0),
               torch.full((64,), -0.4), torch.rand(64) * 1e-3 + 10, torch.full((64,), 1e-30),
               torch.randn(64)]
    w = torch.stack(columns, dim=1)
    q = quantize_weight(w, bits=bits, group_size=32, symmetric=symmetric)
    error = (dequantize_weight(q, torch.float64) - w.double()).abs()
    step = q.scales.double().repeat_interleave(32, dim=0)
    slack = 2.0**-22 * w.double().abs()  # w / scale is rounded in fp32 before its code is
    assert bool((error <= 0.5 * step + slack).all()), error.amax(dim=0)
    # the documented packing, read independently, gives the same weight (up to fp32 products)
    assert np.allclose(dequantize_weight(q, torch.float64).numpy(), exact_weight(q), rtol=1e-6, atol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("symmetric", [True, False])
def test_16bit_weights_stay_within_half_a_step_of_the_stored_scale(dtype: torch.dtype, bits: int,
                                                                   symmetric: bool) -> None:
    """The scales are stored in the weight's dtype: codes taken against the unrounded scale were
    off by the rounding times the code (bf16 8-bit: up to 1.09 steps). Every weight, a group's
    largest included, is within half a stored step of its dequantized value."""
    gen = torch.Generator().manual_seed(bits + 2 * symmetric)
    w = (torch.randn(256, 96, generator=gen) * 0.02 + (0.0 if symmetric else 0.01)).to(dtype)
    q = quantize_weight(w, bits=bits, group_size=64, symmetric=symmetric)
    assert q.scales.dtype == dtype
    error = (dequantize_weight(q, torch.float64) - w.double()).abs()
    step = q.scales.double().repeat_interleave(64, dim=0)
    assert bool((error <= 0.5 * step * (1 + 2.0**-20)).all()), float((error / step).max())


def test_weights_dequantizing_past_the_largest_value_are_refused() -> None:
    """fp16 weights at 65504: the scale rounded up to fp16 times the top code is past 65504, so
    the quantized weight would dequantize to inf; such a weight is refused, and one a step below
    the limit dequantizes finite."""
    for symmetric in (True, False):
        with pytest.raises(InvalidArgumentError, match="too close to float16's largest value"):
            quantize_weight(torch.full((64, 8), 65504.0, dtype=torch.float16), bits=4, symmetric=symmetric,
                            group_size=32)
    w = torch.full((64, 8), 50000.0, dtype=torch.float16)
    assert bool(torch.isfinite(dequantize_weight(quantize_weight(w, bits=4, group_size=32))).all())


def test_quantize_weight_refuses_a_weight_without_values() -> None:
    with pytest.raises(UnsupportedError, match="meta device"):
        quantize_weight(torch.empty(64, 8, device="meta"), group_size=32)


def nibble_rows(code_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """The weight rows the low and the high nibbles of each code row hold, as the quantized
    module's docstring documents them: byte 4q + 2h + t of a run of 16 code rows (32 weight rows)
    holds row 16t + 2q + h of the run (low nibble) and that + 8 (high)."""
    r = np.arange(code_rows)
    byte = r % 16
    low = 32 * (r // 16) + 16 * (byte % 2) + 2 * (byte // 4) + (byte // 2) % 2
    return low, low + 8


def exact_weight(q: QuantizedWeight) -> np.ndarray:
    """(code − zero) · scale in fp64, unrounded, from the documented packing."""
    codes = q.codes.cpu().numpy().astype(np.float64)
    if q.bits == 4:  # interleaved runs of 32 rows (nibble_rows)
        unpacked = np.empty(q.shape)
        low, high = nibble_rows(codes.shape[0])
        unpacked[low], unpacked[high] = codes % 16, codes // 16
        codes = unpacked
    scale = q.scales.double().cpu().numpy()
    zero = (q.zeros.double().cpu().numpy() if q.zeros is not None
            else np.full_like(scale, 2 ** (q.bits - 1)))
    return (codes - np.repeat(zero, q.group_size, 0)) * np.repeat(scale, q.group_size, 0)


@contextlib.contextmanager
def _replayed_only(validator: str) -> Iterator[None]:
    """Calls inside must take their recipe: validating (``quantized.<validator>``) or selecting
    again fails."""
    from tessera.blas import quantized

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(quantized, validator, None)
        patch.setattr(space, "select_mnk", None)
        yield


def _check(x: torch.Tensor, q: QuantizedWeight, y: torch.Tensor) -> None:
    """y against x @ W in fp64 — W the dequantized weight either rounded to 16 bits (as
    dequantize_weight and the tensor-core paths round it) or exact (the decode path): the output's
    rounding plus fp32 accumulation. Each output must match one of the two."""
    xd = x.double().cpu().reshape(-1, q.shape[0])
    got = y.double().cpu().reshape(xd.shape[0], q.shape[1])
    unit = 2.0**-8 if x.dtype == torch.bfloat16 else 2.0**-11
    ok = torch.zeros_like(got, dtype=torch.bool)
    for wd in (dequantize_weight(q).double().cpu(), torch.from_numpy(exact_weight(q))):
        ref, magnitude = xd @ wd, xd.abs() @ wd.abs()
        ok |= (got - ref).abs() <= unit * ref.abs() + 1e-5 * magnitude + 1e-6
    assert torch.all(ok), (~ok).nonzero()[:5]


@pytest.mark.parametrize("bits,group,symmetric", [(4, 128, True), (4, 32, False), (8, 64, True),
                                                  (8, 32, False)])
@pytest.mark.parametrize("m", [1, 5, 33])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gemm_wq_against_dequantized_fp64(bits: int, group: int, symmetric: bool, m: int,
                                          dtype: torch.dtype, device: str) -> None:
    if dtype == torch.bfloat16 and device == "cpu":
        pytest.skip("Triton's interpreter truncates fp32 → bf16 casts (the GPU rounds): bf16 on the GPU")
    gen = torch.Generator().manual_seed(m * bits)
    k, n = 256, 72  # 72: a partial column tile; K 256 splits in the interpreter's configuration
    w = torch.randn(k, n, generator=gen).to(dtype)
    q = quantize_weight(w.to(device), bits=bits, group_size=group, symmetric=symmetric)
    x = torch.randn(m, k, generator=gen).to(dtype).to(device)
    _check(x, q, gemm_wq(x, q))


@pytest.mark.parametrize("config", [WqGemvConfig(32, 64, 2, 4), WqGemvConfig(64, 32, 1, 4),
                                    WqGemvConfig(32, 16, 4, 1, 2),  # K slices of 48 rows cut the groups
                                    WqConfig(16, 32, 64, 2, 4, 4, 1),
                                    WqConfig(16, 32, 64, 2, 4, 4, 1, warp_mma=True),
                                    WqConfig(16, 32, 64, 2, 4, 4, 1, byte_planes=True),
                                    WqConfig(16, 32, 64, 2, 4, 4, 1, warp_mma=True, byte_planes=True),
                                    WqConfig(16, 32, 64, 2, 4, 4, 1, byte_planes=True, early_scales=True),
                                    WqDequantConfig(8, 32, 4)],
                         ids=lambda c: c.short())
@pytest.mark.parametrize("bits,symmetric", [(4, True), (8, False)])
def test_gemm_wq_every_family(config: object, bits: int, symmetric: bool, device: str) -> None:
    """Each family (CUDA-core decode, fused tensor-core tiles, dequantize-then-GEMM) forced on a
    problem with partial tiles, 3 rows and 1, on codes in the layout quantize_weight stores and in
    the other one (the CUDA-core family reads 4-bit codes only when they are row-major)."""
    gen = torch.Generator().manual_seed(bits)
    k, n = 192, 40
    w = torch.randn(k, n, generator=gen).to(torch.float16)
    q = quantize_weight(w.to(device), bits=bits, group_size=64, symmetric=symmetric)
    other = q.codes.contiguous() if bits == 4 else q.codes.t().contiguous().t()
    x = torch.randn(3, k, generator=gen).to(torch.float16).to(device)
    for stored in (q, dataclasses.replace(q, codes=other)):
        with space.forced(config):
            _check(x, stored, gemm_wq(x, stored))
            _check(x[:1], stored, gemm_wq(x[:1], stored))


@pytest.mark.parametrize("symmetric", [True, False])
def test_gemv_wq_unit_codes(symmetric: bool, device: str) -> None:
    """``unit_codes`` (1 + code·2^-15 multiplied as it is, Σx and the zero point taken off once a
    group) launches for 8-bit codes with bf16 activations only, and matches the exact dequantized
    weight in fp64 within one bf16 ulp of the output (the interpreter truncates bf16 stores)
    plus 1e-5 of Σ|x·w|: 3 rows and 1, K slices of 48 rows that cut the groups, a partial
    column tile. fp16 activations and (row-major) 4-bit codes launch the exact subtraction."""
    gen = torch.Generator().manual_seed(5)
    k, n = 192, 40
    w = torch.randn(k, n, generator=gen)
    config = WqGemvConfig(32, 16, 4, 1, 2, unit_codes=True)
    for bits, dtype in ((8, torch.bfloat16), (8, torch.float16), (4, torch.bfloat16)):
        q = quantize_weight(w.to(dtype).to(device), bits=bits, group_size=64, symmetric=symmetric)
        if bits == 4:  # the decode family reads 4-bit codes row-major only
            q = dataclasses.replace(q, codes=q.codes.contiguous())
        exact = torch.from_numpy(exact_weight(q))
        x = torch.randn(3, k, generator=gen).to(dtype).to(device)
        for rows in (x, x[:1]):
            with space.forced(config), recording() as calls:
                got = gemm_wq(rows, q).double().cpu()
            decode = [call for call in calls if call.launcher is gemm_wq_kernels._launch_gemv]
            assert [call.constexprs["UNIT"] for call in decode] == [bits == 8 and dtype == torch.bfloat16]
            ref = rows.double().cpu() @ exact
            magnitude = rows.double().cpu().abs() @ exact.abs()
            bound = 2.0**-7 * ref.abs() + 1e-5 * magnitude + 1e-6
            assert torch.all((got - ref).abs() <= bound), (bits, dtype)


@pytest.mark.parametrize("bits,symmetric,exact_bytes",
                         [(4, True, False), (4, False, False), (8, False, True)])
@pytest.mark.parametrize("m", [11, 33])
def test_gemm_wq_warp_mma_halves(bits: int, symmetric: bool, exact_bytes: bool, m: int, device: str) -> None:
    """``warp_mma`` computes a 16-row tile as two 8-row halves: rows in both halves and in a
    partial last row tile (11: the second half partly masked; 33: three row tiles, the last with
    one row) match the fp64 reference, fp16 and (on the GPU) bf16 activations."""
    gen = torch.Generator().manual_seed(m + bits)
    k, n = 256, 72
    for dtype in (torch.float16, torch.bfloat16) if device != "cpu" else (torch.float16,):
        w = torch.randn(k, n, generator=gen).to(dtype)
        q = quantize_weight(w.to(device), bits=bits, group_size=64, symmetric=symmetric)
        x = torch.randn(m, k, generator=gen).to(dtype).to(device)
        with space.forced(WqConfig(16, 32, 64, 2, 4, 4, 1, exact_bytes=exact_bytes, warp_mma=True)):
            _check(x, q, gemm_wq(x, q))


def test_weight_only_heuristic_on_an_h200() -> None:
    """Without logic, an H200 (sm_90, 132 multiprocessors) gets the families measured best there:
    4-bit codes on tensor cores, one 8-bit row on CUDA cores (unit codes with bf16 activations,
    K split 64), 2–16 rows of 8-bit codes with bf16 activations as byte planes with early scales
    (16×128×128 on 4 warps, K split 4 at 8192 columns), fp16 activations and more rows the other
    tiles."""
    pick = space.MNK_HEURISTICS["gemm_wq"]

    def config(m: int, dtype: str) -> object:
        return pick(space.MnkProblem(m, 8192, 8192, dtype), "cuda", 132).config

    assert isinstance(config(1, "int4_bf16"), WqConfig) and not config(1, "int4_bf16").byte_planes
    assert config(1, "int8_bf16") == WqGemvConfig(512, 16, 64, 1, 2, unit_codes=True)
    assert isinstance(config(1, "int8_fp16"), WqGemvConfig) and not config(1, "int8_fp16").unit_codes
    planes = WqConfig(16, 128, 128, 4, 8, 4, 3, byte_planes=True, early_scales=True)
    for m in (2, 9, 16):
        assert config(m, "int8_bf16") == planes, m
    assert not config(16, "int8_fp16").byte_planes and not config(17, "int8_bf16").byte_planes
    assert not config(16, "int4_bf16").byte_planes


@pytest.mark.parametrize("exact_bytes,byte_planes", [(True, False), (False, False), (False, True)])
@pytest.mark.parametrize("symmetric", [True, False])
def test_gemm_wq_exact_bytes_bf16(exact_bytes: bool, byte_planes: bool, symmetric: bool, device: str) -> None:
    """8-bit codes with bf16 activations in the tensor-core family: with ``exact_bytes`` (or as
    ``byte_planes``) the codes enter the MMA as exact integers, so the result is the exact
    dequantized weight's to within fp32 sums and the output's last bit (the interpreter truncates
    its bf16 output: one bit more); otherwise each weight is rounded to bf16 first, which that
    bound does not admit."""
    gen = torch.Generator().manual_seed(21)
    k, n = 192, 40
    w = torch.randn(k, n, generator=gen).to(torch.bfloat16)
    q = quantize_weight(w.to(device), bits=8, group_size=64, symmetric=symmetric)
    x = torch.randn(3, k, generator=gen).to(torch.bfloat16).to(device)
    unit = 2.0**-7 if device == "cpu" else 2.0**-8
    wd = torch.from_numpy(exact_weight(q))
    within = []
    for rows in (x, x[:1]):
        with space.forced(WqConfig(16, 32, 64, 2, 4, 4, 1, exact_bytes=exact_bytes, byte_planes=byte_planes)):
            got = gemm_wq(rows, q).double().cpu()
        xd = rows.double().cpu()
        ref, magnitude = xd @ wd, xd.abs() @ wd.abs()
        within.append(bool(((got - ref).abs() <= unit * ref.abs() + 1e-5 * magnitude + 1e-6).all()))
    assert all(within) == (exact_bytes or byte_planes), within


@pytest.mark.parametrize("config", [WqGemvConfig(64, 32, 2, 4), WqConfig(16, 32, 64, 2, 4, 4, 1),
                                    WqConfig(16, 32, 64, 1, 4, 4, 1),
                                    WqConfig(16, 32, 64, 2, 4, 4, 1, byte_planes=True, early_scales=True)],
                         ids=lambda c: c.short())
@pytest.mark.parametrize("symmetric", [True, False])
def test_gemm_wq_repeat_calls_replay_their_launches(config: object, symmetric: bool, device: str) -> None:
    """A repeat call of a fused family (same signature) replays the first call's launches — the
    K split's slice sum included — on the new call's x, weight and the kept workspace: right for
    new data, with no validation or selection; another signature gets its own recipe."""
    from tessera.blas import quantized

    gen = torch.Generator().manual_seed(11)
    k, n = 128, 40
    weights = [quantize_weight(torch.randn(k, n, generator=gen).to(torch.float16).to(device), bits=8,
                               group_size=64, symmetric=symmetric) for _ in range(2)]
    quantized._RECIPES.clear()
    with space.forced(config):
        x = torch.randn(2, 3, k, generator=gen).to(torch.float16).to(device)
        _check(x, weights[0], gemm_wq(x, weights[0]))
        (recipe,) = quantized._RECIPES.recipes()
        assert len(recipe.replays) == (2 if config.split_k > 1 else 1)  # the slice sum replayed too
        repeats = []
        with _replayed_only("_check_quantized"):
            for q in weights:
                fresh = torch.randn(2, 3, k, generator=gen).to(torch.float16).to(device)
                repeats.append((fresh, q, gemm_wq(fresh, q)))
        for fresh, q, y in repeats:  # checked after: the reference (dequantize_weight) validates
            _check(fresh, q, y)
        _check(x[0], weights[1], gemm_wq(x[0], weights[1]))  # 2-D x: another signature
    assert len(quantized._RECIPES) == 2


@pytest.mark.parametrize("config", [WqGemvConfig(64, 32, 2, 4), WqConfig(16, 32, 64, 2, 4, 4, 1)],
                         ids=lambda c: c.short())
def test_gemm_wq_repeat_calls_into_out_replay_and_still_check_out(config: object, device: str) -> None:
    """A call with ``out`` keeps a recipe too (out's layout in its signature): repeat calls into
    other buffers replay without validation or selection, right, bump out's version and return
    it; one whose out shares memory with x, or requires a gradient under grad mode, is refused
    as on the full path."""
    from tessera.blas import quantized

    gen = torch.Generator().manual_seed(17)
    k = n = 128
    q = quantize_weight(torch.randn(k, n, generator=gen).to(torch.float16).to(device), bits=4, group_size=64)

    def fresh() -> torch.Tensor:
        return torch.randn(4, k, generator=gen).to(torch.float16).to(device)

    quantized._RECIPES.clear()
    with space.forced(config):
        x, y = fresh(), torch.empty(4, n, dtype=torch.float16, device=device)
        assert gemm_wq(x, q, out=y) is y
        _check(x, q, y)
        (recipe,) = quantized._RECIPES.recipes()
        assert recipe.extents is not None
        repeats = []
        with _replayed_only("_check_quantized"):
            for _ in range(2):
                x, y = fresh(), torch.full((4, n), float("nan"), dtype=torch.float16, device=device)
                version = y._version
                assert gemm_wq(x, q, out=y) is y and y._version > version
                repeats.append((x, y))
            with pytest.raises(InvalidArgumentError, match="out"):
                gemm_wq(x, q, out=x)  # out is x: the same layout, so the same recipe
            held = torch.empty(4, n, dtype=torch.float16, device=device, requires_grad=True)
            with pytest.raises(InvalidArgumentError, match="gradient"):
                gemm_wq(x, q, out=held)
        for x, y in repeats:
            _check(x, q, y)
    assert len(quantized._RECIPES) == 1


@pytest.mark.parametrize(("dtype", "config"), shipped_solutions("blas", "gemm_wq"),
                         ids=lambda v: v.short() if hasattr(v, "short") else str(v))
def test_every_shipped_weight_only_solution_replays(dtype: str, config: object, device: str) -> None:
    """Each fused family the shipped logic chooses keeps a recipe on its first call, so eager
    repeat calls skip validation and selection (byte planes once kept none: the recipe named
    the codes where the launch took their int32 words, and every eager call paid ~180 µs)."""
    from tessera.blas import quantized

    if isinstance(config, WqDequantConfig):
        pytest.skip("dequantize-then-GEMM: its GEMM keeps its own recipe")
    bits, activations = int(dtype[3]), {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype.split("_")[1]]
    if device == "cpu":
        activations = torch.float16  # the interpreter's tl.dot on bf16 is wrong; the launch is what counts
    gen = torch.Generator().manual_seed(13)
    k, n = 256, 128
    w = torch.randn(k, n, generator=gen).to(activations).to(device)
    q = quantize_weight(w, bits=bits, group_size=128)
    x = torch.randn(3, k, generator=gen).to(activations).to(device)
    quantized._RECIPES.clear()
    with space.forced(config):
        _check(x, q, gemm_wq(x, q))
        assert len(quantized._RECIPES) == 1, config.short()
        _check(x, q, gemm_wq(x, q))  # replayed


@pytest.mark.gpu
@pytest.mark.parametrize(("bits", "m", "config"), [
    (4, 1, WqConfig(8, 256, 128, 2, 8, 8, 3)),  # gemm_wq and its slice sum: PDL at exit
    (4, 16, WqConfig(16, 128, 128, 2, 8, 4, 3)),
    (4, 16, WqConfig(16, 256, 128, 2, 8, 8, 3, warp_mma=True)),
    (8, 16, WqConfig(16, 128, 128, 2, 8, 4, 3)),
    (8, 1, WqGemvConfig(512, 8, 4, 1)),  # gemv_wq and its slice sum: early
], ids=lambda v: v.short() if hasattr(v, "short") else str(v))
def test_weight_only_dependent_launches_see_the_previous_kernel(bits: int, m: int, config: object) -> None:
    """A chain of weight-only products, each reading the one before (and writing the x the one
    before read), through the K split's two launches: with PDL each may start while the previous
    finishes and must still see its output and not overwrite its input early."""
    from tessera._core import launch

    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("programmatic dependent launch needs sm_90")
    gen = torch.Generator(device="cuda").manual_seed(7)
    n = 1024
    w = torch.randn(n, n, device="cuda", generator=gen) / n ** 0.5
    q = quantize_weight(w.to(torch.bfloat16), bits=bits, group_size=128)
    exact = dequantize_weight(q, torch.float64)
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16, generator=gen)
    want = x.double()
    y = torch.empty_like(x)
    with space.forced(config):
        for _ in range(8):
            gemm_wq(x, q, out=y)  # reads x
            gemm_wq(y, q, out=x)  # reads y, just written; writes x, read before
            for _ in range(2):  # each product's result is rounded to bf16, as the kernels' are
                want = (want @ exact).to(torch.bfloat16).double()
        torch.cuda.synchronize()
        with launch.recording() as calls:
            gemm_wq(x, q)
    main = gemm_wq_kernels._launch_gemv if isinstance(config, WqGemvConfig) else gemm_wq_kernels._launch
    assert [call.launcher for call in calls] == [main, gemm_wq_kernels._launch_sum_slices]
    for call in calls:
        found = call.launcher.compiled_for(call)
        assert found is not None and found[0].metadata.launch_pdl
    # a stale or early-overwritten operand is off by the order of the result; 16 products, each
    # rounded to bf16 (8-bit weights at M = 16 rounded too), stayed under 0.09 in the interpreter,
    # whose conversions truncate
    rel = ((x.double() - want).norm() / want.norm()).item()
    assert rel < 0.1, rel


def test_gemv_wq_reads_words_or_falls_back(device: str) -> None:
    """The decode family reads codes as int32 words; codes that cannot be viewed so (N not a
    multiple of 4, or a column slice) go to the tensor-core family, still correct; byte planes
    forced on them read the codes byte-wise instead."""
    gen = torch.Generator().manual_seed(5)
    w = torch.randn(128, 38, generator=gen).to(torch.float16)
    q = quantize_weight(w.to(device), bits=8, group_size=32)
    assert code_words(q.codes) is None and q.words is None
    assert quantize_weight(torch.randn(128, 40).to(torch.float16), bits=8).words.shape == (128, 10)
    assert quantize_weight(torch.randn(128, 40).to(torch.float16), bits=4).words is None  # column-major
    assert code_words(torch.zeros(4, 40, dtype=torch.uint8)).shape == (4, 10)
    assert code_words(torch.zeros(4, 40, dtype=torch.uint8)[:, 1:37]) is None
    x = torch.randn(2, 128, generator=gen).to(torch.float16).to(device)
    with space.forced(WqGemvConfig(32, 32, 1, 4)):
        _check(x, q, gemm_wq(x, q))
    with space.forced(WqConfig(16, 32, 64, 2, 4, 4, 1, byte_planes=True)), recording() as calls:
        _check(x, q, gemm_wq(x, q))
    assert calls[0].constexprs["BYTE_PLANES"] is False


def test_gemm_wq_leading_dimensions_fp16_and_out(device: str) -> None:
    gen = torch.Generator().manual_seed(3)
    w = torch.randn(64, 48, generator=gen).to(torch.float16)
    q = quantize_weight(w.to(device), bits=4, group_size=32)
    x = torch.randn(2, 3, 64, generator=gen).to(torch.float16).to(device)
    out = torch.empty(2, 3, 48, dtype=torch.float16, device=device)
    assert gemm_wq(x, q, out=out) is out
    _check(x, q, out)
    assert gemm_wq(x[:, :0], q).shape == (2, 0, 48)


def test_bad_input(device: str) -> None:
    w = torch.randn(64, 16, device=device)
    with pytest.raises(UnsupportedError, match="bits=3"):
        quantize_weight(w, bits=3)
    with pytest.raises(UnsupportedError, match="group_size=48"):
        quantize_weight(w, group_size=48)
    with pytest.raises(InvalidArgumentError, match="multiple of group_size=128"):
        quantize_weight(w, group_size=128)
    bad = w.clone()
    bad[0, 0] = float("inf")
    with pytest.raises(InvalidArgumentError, match="inf or NaN"):
        quantize_weight(bad, group_size=32)
    q = quantize_weight(w.half(), group_size=32)
    with pytest.raises(UnsupportedError, match="float32"):
        gemm_wq(torch.randn(2, 64, device=device), q)
    with pytest.raises(InvalidArgumentError, match=r"expected \(…, 64\)"):
        gemm_wq(torch.randn(2, 32, device=device, dtype=torch.float16), q)
    with pytest.raises(InvalidArgumentError, match="QuantizedWeight"):
        gemm_wq(torch.randn(2, 64, device=device, dtype=torch.float16), w)
    broken = QuantizedWeight(q.codes[:-1], q.scales, None, 4, 32, (64, 16))
    with pytest.raises(InvalidArgumentError, match=r"codes\.shape"):
        gemm_wq(torch.randn(2, 64, device=device, dtype=torch.float16), broken)
    with pytest.raises(InvalidArgumentError, match=r"codes\.shape"):
        dequantize_weight(broken)
    with pytest.raises(InvalidArgumentError, match="bits 4 or 8"):
        gemm_wq(torch.randn(2, 64, device=device, dtype=torch.float16),
                QuantizedWeight(q.codes, q.scales, None, 3, 32, (64, 16)))
    empty = quantize_weight(torch.zeros(0, 16, device=device, dtype=torch.float16), group_size=32)
    assert gemm_wq(torch.randn(2, 0, device=device, dtype=torch.float16), empty).eq(0).all()  # K = 0


def test_bad_arguments_of_the_weight_calls(device: str) -> None:
    """Arguments of the wrong type, weights put together by hand that quantize_weight would not
    make, and an output over the activations: each refused with its reason (a float group size
    used to reach reshape's TypeError, a string dtype torch's RuntimeError, and an ``out`` that
    is ``x`` was written while other programs still read x)."""
    w = torch.randn(64, 16, device=device, dtype=torch.float16)
    for kwargs in ({"bits": 4.0}, {"bits": True}, {"group_size": 32.0}, {"group_size": True}):
        with pytest.raises(UnsupportedError, match="the int"):
            quantize_weight(w, **kwargs)
    with pytest.raises(InvalidArgumentError, match="symmetric"):
        quantize_weight(w, group_size=32, symmetric="no")
    q = quantize_weight(w, group_size=32, symmetric=False)
    for dtype in (torch.int32, "bf16"):
        with pytest.raises(InvalidArgumentError, match=r"floating-point torch\.dtype"):
            dequantize_weight(q, dtype)
    x = torch.randn(2, 64, device=device, dtype=torch.float16)
    for broken, field in ((dataclasses.replace(q, scales=q.scales.double(), zeros=q.zeros.double()),
                           r"scales\.dtype"),
                          (dataclasses.replace(q, zeros=q.zeros.float()), r"zeros\.dtype"),
                          (dataclasses.replace(q, scales=None), r"scales must be a torch\.Tensor"),
                          (dataclasses.replace(q, group_size=32.0), "int group_size"),
                          (dataclasses.replace(q, shape=[64, 16]), "shape a"),
                          (dataclasses.replace(q, shape=(64, 16.0)), "shape a")):
        with pytest.raises(InvalidArgumentError, match=field):
            gemm_wq(x, broken)
    square = quantize_weight(torch.randn(64, 64, device=device, dtype=torch.float16), group_size=32)
    x = torch.randn(2, 64, device=device, dtype=torch.float16)
    before = x.clone()
    with pytest.raises(InvalidArgumentError, match="overlaps input x"):
        gemm_wq(x, square, out=x)
    narrow = quantize_weight(torch.randn(32, 2, device=device, dtype=torch.float16), group_size=32)
    with pytest.raises(InvalidArgumentError, match=r"overlaps input qweight\.scales"):
        gemm_wq(x[:1, :32], narrow, out=narrow.scales)  # (1, 2): the output's shape and dtype
    assert torch.equal(x, before)


@pytest.mark.gpu
@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("m", [1, 16, 300])
def test_gpu_gemm_wq_llm_shapes(bits: int, m: int) -> None:
    """Decode and prefill sizes on 4096 × 4096 (split K at small M, several tiles elsewhere)."""
    gen = torch.Generator(device="cuda").manual_seed(m + bits)
    w = torch.randn(4096, 4096, device="cuda", generator=gen, dtype=torch.bfloat16) * 0.02
    q = quantize_weight(w, bits=bits, group_size=128)
    x = torch.randn(m, 4096, device="cuda", generator=gen, dtype=torch.bfloat16)
    _check(x, q, gemm_wq(x, q))


# ---------------------------------------------------------------------------------------------
# fp8 / int8 operands through gemm(…, scale_a=, scale_b=)

def test_int8_gemm_is_exact_int32(device: str) -> None:
    gen = torch.Generator().manual_seed(1)
    a = torch.randint(-128, 128, (37, 300), generator=gen, dtype=torch.int8)
    b = torch.randint(-128, 128, (300, 45), generator=gen, dtype=torch.int8)
    want = a.numpy().astype(np.int64) @ b.numpy().astype(np.int64)
    got = gemm(a.to(device), b.to(device))
    assert got.dtype == torch.int32 and np.array_equal(got.cpu().numpy(), want)
    bt = b.t().contiguous().to(device)  # B stored column-major: the transposed view, no copy
    assert np.array_equal(gemm(a.to(device), bt, trans_b=True).cpu().numpy(), want)
    choice = explain(a.to(device), b.to(device))
    assert choice is not None and choice.config.kernel == "gemm_scaled"


@pytest.mark.parametrize("dtype", [torch.int8, torch.float8_e4m3fn, torch.float8_e5m2])
@pytest.mark.parametrize("per_row", [False, True])
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float32])
def test_scaled_gemm_against_fp64(dtype: torch.dtype, per_row: bool, out_dtype: torch.dtype,
                                  device: str) -> None:
    gen = torch.Generator().manual_seed(2)
    m, k, n = 33, 96, 50
    if dtype == torch.int8:
        a = torch.randint(-100, 100, (m, k), generator=gen, dtype=torch.int8)
        b = torch.randint(-100, 100, (k, n), generator=gen, dtype=torch.int8)
    else:
        a, b = torch.randn(m, k, generator=gen).to(dtype), torch.randn(k, n, generator=gen).to(dtype)
    sa = torch.rand(m if per_row else 1, generator=gen) + 0.5
    sb = torch.rand(n if per_row else 1, generator=gen) + 0.5
    bias = torch.randn(n, generator=gen).to(out_dtype)
    got = gemm(a.to(device), b.to(device), scale_a=sa.to(device), scale_b=sb.to(device), bias=bias.to(device),
               out_dtype=out_dtype)
    assert got.dtype == out_dtype and got.shape == (m, n)
    product = a.double() @ b.double()  # fp8 and int8 values are exact in fp64
    want = product * sa.double()[:, None] * sb.double()[None, :] + bias.double()[None, :]
    # bf16 output: half an ulp when rounded (GPU), a whole one in the interpreter (it truncates)
    unit = (2.0**-7 if device == "cpu" else 2.0**-8) if out_dtype == torch.bfloat16 else 2.0**-23
    magnitude = (a.double().abs() @ b.double().abs()) * sa.double()[:, None] * sb.double()[None, :]
    err = (got.double().cpu() - want).abs()
    # fp8 on a GPU: Hopper's tensor cores sum up to 128 products in a narrower accumulator (accuracy.py)
    accumulation = FP8_ACCUMULATION if dtype != torch.int8 and device != "cpu" else 1e-5
    assert bool((err <= unit * want.abs() + accumulation * magnitude + 1e-6).all()), (err / magnitude).max()


@pytest.mark.parametrize("dtype", [torch.int8, torch.float8_e4m3fn])
def test_scaled_repeat_calls_replay_their_launches(dtype: torch.dtype, device: str) -> None:
    """A repeat fp8/int8 call (same signature: operands, scales, bias, which of them share memory)
    replays the first call's launch on the new tensors, with no validation or selection: right for
    new values; one scale object for both scales, or B row-major, is another signature."""
    from tessera.blas import quantized

    gen = torch.Generator().manual_seed(12)
    m, k, n = 40, 64, 48

    def operands() -> tuple[torch.Tensor, ...]:
        if dtype == torch.int8:
            a, bt = (torch.randint(-100, 100, s, generator=gen, dtype=torch.int8) for s in ((m, k), (n, k)))
        else:
            a, bt = (torch.randn(s, generator=gen).to(dtype) for s in ((m, k), (n, k)))
        sa, sb = torch.rand(m, generator=gen) + 0.5, torch.rand(1, generator=gen) + 0.5
        bias = torch.randn(n, generator=gen).to(torch.bfloat16)
        return tuple(t.to(device) for t in (a, bt.t(), sa, sb, bias))  # B column-major: read as it is

    def check(a: torch.Tensor, b: torch.Tensor, sa: torch.Tensor, sb: torch.Tensor, bias: torch.Tensor,
              got: torch.Tensor) -> None:
        want = (a.double() @ b.double()) * sa.double()[:, None] * sb.double() + bias.double()
        magnitude = (a.double().abs() @ b.double().abs()) * sa.double()[:, None] * sb.double()
        accumulation = FP8_ACCUMULATION if dtype != torch.int8 and device != "cpu" else 1e-5
        bound = 2.0**-7 * want.abs() + accumulation * magnitude + 1e-6
        assert bool(((got.double() - want).abs() <= bound).all())

    quantized.SCALED_RECIPES.clear()
    first = operands()
    a, b, sa, sb, bias = first
    check(*first, gemm(a, b, scale_a=sa, scale_b=sb, bias=bias))
    assert len(quantized.SCALED_RECIPES) == 1
    with _replayed_only("plan_scaled"):
        for _ in range(2):
            a, b, sa, sb, bias = fresh = operands()
            check(*fresh, gemm(a, b, scale_a=sa, scale_b=sb, bias=bias))
    one = torch.ones(1, device=device)
    check(a, b, one.expand(m), one, bias, gemm(a, b, scale_a=one, scale_b=one, bias=bias))  # shared scale
    assert len(quantized.SCALED_RECIPES) == 2
    row_major = b.contiguous()  # another signature (M < 128: read as it is, no K-major copy)
    check(a, row_major, sa, sb, bias, gemm(a, row_major, scale_a=sa, scale_b=sb, bias=bias))
    assert len(quantized.SCALED_RECIPES) == 3


def test_scaled_calls_into_out_keep_a_recipe_and_still_check_out(device: str) -> None:
    """An fp8 call with ``out`` keeps a recipe (out's layout in its signature): repeat calls into
    other buffers replay without validation or selection, right, bump out's version; an out that
    holds the bias or a scale (read while out is written: a race) is refused on the first call's
    full path and in a recipe's call alike, as is an out requiring a gradient."""
    from tessera.blas import quantized

    gen = torch.Generator().manual_seed(19)
    m, k, n = 40, 64, 48
    dtype = torch.float8_e4m3fn

    def operands() -> tuple[torch.Tensor, ...]:
        a, bt = (torch.randn(s, generator=gen).to(dtype) for s in ((m, k), (n, k)))
        sa, sb = torch.rand(m, generator=gen) + 0.5, torch.rand(n, generator=gen) + 0.5
        return tuple(t.to(device) for t in (a, bt.t(), sa, sb))  # B column-major: read as it is

    def want(a: torch.Tensor, b: torch.Tensor, sa: torch.Tensor, sb: torch.Tensor) -> torch.Tensor:
        return (a.double() @ b.double()) * sa.double()[:, None] * sb.double()[None, :]

    def check(got: torch.Tensor, expected: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
        accumulation = FP8_ACCUMULATION if device != "cpu" else 1e-5
        magnitude = (a.double().abs() @ b.double().abs()).abs() * 2.25
        assert bool(((got.double() - expected).abs() <= 2.0**-22 * expected.abs() + accumulation * magnitude
                     + 1e-6).all())

    quantized.SCALED_RECIPES.clear()
    a, b, sa, sb = operands()
    out = torch.empty(m, n, device=device)
    assert gemm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.float32, out=out) is out
    check(out, want(a, b, sa, sb), a, b)
    (recipe,) = quantized.SCALED_RECIPES.recipes()
    assert recipe.extents is not None
    done = []
    with _replayed_only("plan_scaled"):
        for _ in range(2):
            a, b, sa, sb = fresh = operands()
            out = torch.full((m, n), float("nan"), device=device)
            version = out._version
            assert gemm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.float32, out=out) is out
            assert out._version > version
            done.append((out, want(*fresh), a, b))
        held_scale = torch.empty(m, n, device=device)  # out's layout; its row 0 is scale_b
        with pytest.raises(InvalidArgumentError, match="out"):  # the recipe's call refuses it
            gemm(a, b, scale_a=sa, scale_b=held_scale[0], out_dtype=torch.float32, out=held_scale)
        held = torch.empty(m, n, device=device, requires_grad=True)
        with pytest.raises(InvalidArgumentError, match="gradient"):
            gemm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.float32, out=held)
    for got, expected, a, b in done:
        check(got, expected, a, b)
    with pytest.raises(InvalidArgumentError, match="out"):  # the full path: the bias inside out
        bias_out = torch.empty(m, n, dtype=torch.bfloat16, device=device)
        gemm(a, b, scale_a=sa, scale_b=sb, bias=bias_out[3], out=bias_out)


@pytest.mark.parametrize("config", [ScaledTmaConfig(32, 32, 32, 2, 4, 1),
                                    ScaledTmaConfig(32, 32, 32, 2, 4, 1, False, 2, True),
                                    ScaledTmaConfig(32, 64, 32, 2, 4, 1, False, 4)],
                         ids=["plain", "flat", "quarters"])
def test_scaled_tma_family_against_fp64(config: ScaledTmaConfig, device: str, monkeypatch: pytest.MonkeyPatch
                                        ) -> None:
    """The persistent descriptor family forced on K-major operands with edge tiles and more tiles
    than programs (int8 exact; fp8 per-row scales and bias), and on a row-major B, which it does
    not take: the pointer family runs instead, with the same result."""
    tma_launches = []
    real = gemm_scaled._launch_tma
    monkeypatch.setattr(gemm_scaled, "_launch_tma", lambda *args: (tma_launches.append(1), real(*args)))
    gen = torch.Generator().manual_seed(5)
    m, k, n = 70, 96, 40  # 3 × 2 tiles of 32, the last row and column partial
    a = torch.randint(-128, 128, (m, k), generator=gen, dtype=torch.int8)
    b = torch.randint(-128, 128, (n, k), generator=gen, dtype=torch.int8).t()  # column-major
    want = a.numpy().astype(np.int64) @ b.numpy().astype(np.int64)
    with space.forced(config):
        got = gemm(a.to(device), b.to(device))
        assert np.array_equal(got.cpu().numpy(), want)
        assert len(tma_launches) == 1
        a8, b8 = torch.randn(m, k, generator=gen).to(torch.float8_e4m3fn), torch.randn(n, k, generator=gen)
        b8 = b8.to(torch.float8_e4m3fn).t()
        sa, sb, bias = torch.rand(m, generator=gen) + 0.5, torch.rand(n, generator=gen) + 0.5, torch.randn(n)
        want8 = (a8.double() @ b8.double()) * sa.double()[:, None] * sb.double()[None, :] + bias.double()
        magnitude = (a8.double().abs() @ b8.double().abs()) * sa.double()[:, None] * sb.double()[None, :]
        accumulation = FP8_ACCUMULATION if device != "cpu" else 1e-5
        for b_layout in (b8, b8.contiguous()):  # a row-major B: the pointer family
            got8 = gemm(a8.to(device), b_layout.to(device), scale_a=sa.to(device), scale_b=sb.to(device),
                        bias=bias.to(device), out_dtype=torch.float32).double().cpu()
            bound = 2.0**-23 * want8.abs() + accumulation * magnitude + 1e-6
            assert bool(((got8 - want8).abs() <= bound).all())
    assert len(tma_launches) == 2  # the row-major B is not copied K-major for 70 rows of A


def test_scaled_tma_layout_rules_see_the_k_major_copy() -> None:
    """Planning on CUDA: a row-major B is judged as the K-major copy the launch will make (a meta
    stand-in of its dtype: 8-bit rows of 100 bytes are not 16-byte aligned, of 128 bytes are)."""
    from tessera.blas.kernels.gemm_scaled import k_major, scaled_tma_supported

    d = torch.empty(256, 192, dtype=torch.bfloat16)
    for k, supported in ((100, False), (128, True)):
        a, b = torch.empty(256, k, dtype=torch.int8), torch.empty(k, 192, dtype=torch.int8)  # B row-major
        with building_for("cuda"):
            a_k, b_k = k_major(a, b, materialize=False)
        assert b_k.is_meta and b_k.dtype == torch.int8 and b_k.stride() == (1, k)  # column-major
        assert scaled_tma_supported(a_k, b_k, d) == supported


def test_scaled_gemm_bad_input(device: str) -> None:
    a8 = torch.zeros(4, 8, dtype=torch.float8_e4m3fn, device=device)
    one = torch.ones(1, device=device)
    with pytest.raises(InvalidArgumentError, match="float32 scales for fp8"):
        gemm(a8, a8.t())
    with pytest.raises(InvalidArgumentError, match="only one given"):
        gemm(a8, a8.t(), scale_a=one)
    with pytest.raises(InvalidArgumentError, match=r"scale_a\.shape"):
        gemm(a8, a8.t(), scale_a=torch.ones(3, device=device), scale_b=one)
    with pytest.raises(InvalidArgumentError, match=r"scale_b\.dtype"):
        gemm(a8, a8.t(), scale_a=one, scale_b=one.double())
    with pytest.raises(UnsupportedError, match="one dtype"):
        gemm(a8, a8.t().to(torch.float8_e5m2), scale_a=one, scale_b=one)
    with pytest.raises(UnsupportedError, match="not alpha, beta or c"):
        gemm(a8, a8.t(), scale_a=one, scale_b=one, alpha=2.0)
    i8 = torch.zeros(4, 8, dtype=torch.int8, device=device)
    with pytest.raises(UnsupportedError, match="exact"):
        gemm(i8, i8.t(), out_dtype=torch.bfloat16)
    with pytest.raises(UnsupportedError, match="2-D"):
        gemm(i8[None], i8.t()[None])
    # found by fuzzing: these reached the layout code (IndexError) or compared a tensor alpha
    with pytest.raises(InvalidArgumentError, match=r"b\.dim\(\)"):
        gemm(i8, i8[0])
    with pytest.raises(InvalidArgumentError, match=r"a\.dim\(\)"):
        explain(a8[0, 0], a8.t(), scale_a=one, scale_b=one)
    with pytest.raises(InvalidArgumentError, match="alpha must be a real"):
        gemm(i8, i8.t(), alpha=torch.ones(3, device=device))
    with pytest.raises(InvalidArgumentError, match="apply to fp8/int8"):
        gemm(torch.ones(2, 2, device=device), torch.ones(2, 2, device=device), scale_a=one, scale_b=one)
    with pytest.raises(InvalidArgumentError, match="fast_accum"):
        gemm(torch.ones(2, 2, device=device), torch.ones(2, 2, device=device), fast_accum=True)
    with pytest.raises(InvalidArgumentError, match=r"fast_accum.*int8"):
        gemm(i8, i8.t(), fast_accum=True)
    with pytest.raises(InvalidArgumentError, match="fast_accum"):
        explain(a8, a8.t(), scale_a=one, scale_b=one, fast_accum="yes")
    assert gemm(i8[:, :0], i8.t()[:0]).eq(0).all()  # K = 0: zeros
    with pytest.raises(InvalidArgumentError, match="no expand"):
        gemm(i8, i8.t(), out=torch.empty(4, 1, dtype=torch.int32, device=device).expand(4, 4))
    memory = torch.zeros(64, dtype=torch.int8, device=device)
    with pytest.raises(InvalidArgumentError, match="overlap"):  # out would write over a
        gemm(memory[:32].view(4, 8), i8.t(), out=memory.view(torch.int32).view(4, 4))
    with pytest.raises(InvalidArgumentError, match="out"):
        gemm(i8, i8.t(), out=torch.empty(4, 4, dtype=torch.int32, device="meta"))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.int8, torch.float8_e4m3fn, torch.float8_e5m2])
def test_gpu_scaled_gemm_large(dtype: torch.dtype) -> None:
    """4096 × 2048 × 4096, per-row scales, B column-major (the layout torch._scaled_mm and _int_mm
    want) and row-major (copied K-major first); fp8 in both accumulation modes."""
    gen = torch.Generator(device="cuda").manual_seed(4)
    m, k, n = 4096, 2048, 4096
    if dtype == torch.int8:
        a = torch.randint(-128, 128, (m, k), device="cuda", generator=gen, dtype=torch.int8)
        b = torch.randint(-128, 128, (n, k), device="cuda", generator=gen, dtype=torch.int8).t()
        exact = gemm(a, b)
        assert torch.equal(exact, torch._int_mm(a, b))
        assert torch.equal(gemm(a, b.contiguous()), exact)  # row-major B
        assert torch.equal(gemm(a.t().contiguous(), b, trans_a=True), exact)  # column-major A
    a = torch.randn(m, k, device="cuda", generator=gen).to(dtype)
    b = torch.randn(n, k, device="cuda", generator=gen).to(dtype).t()
    sa, sb = torch.rand(m, 1, device="cuda") + 0.5, torch.rand(1, n, device="cuda") + 0.5
    want = (a.double() @ b.double()) * sa * sb
    magnitude = (a.double().abs() @ b.double().abs()) * sa * sb
    bounds = {False: FP8_ACCUMULATION, True: FP8_FAST_ACCUMULATION} if dtype != torch.int8 else {False: 1e-6}
    tma = ScaledTmaConfig(128, 256, 128, 8, 8, 4, False, 2, True)  # 4 stages fit a bf16 D, 3 an fp32 one
    for config in (None, tma, dataclasses.replace(tma, flatten=False, epilogue_split=1, num_stages=2),
                   dataclasses.replace(tma, flatten=False, warp_specialize=True),
                   dataclasses.replace(tma, epilogue_split=4)):  # D in quarters: 4 stages fit an fp32 D
        for fast, bound in bounds.items():
            for b_layout in (b, b.contiguous()):
                with space.forced(config):
                    got = gemm(a, b_layout, scale_a=sa, scale_b=sb, out_dtype=torch.float32, fast_accum=fast)
                rel = ((got.double() - want).abs() / magnitude).max().item()
                assert rel <= bound, (config, fast, b_layout.stride(), rel)


@pytest.mark.parametrize("kernel,config,key", [
    # 4-bit codes step whole runs of 32 interleaved rows: BLOCK_K 16 launches as 32
    ("gemv_wq", WqGemvConfig(512, 16, 64, 1), "(4, 128, False, {prmt}, 512, 32, 3, False, {pdl})"),
    # BLOCK_N 128, BLOCK_K 64 on 4 warps: LLVM's AMDGPU backend took 136 s (cold cache, CI's 2
    # cores) on BLOCK_N 256, BLOCK_K 128 on 8 warps, 17 s on this; the target-dependent code is the same
    ("gemm_wq", WqConfig(8, 128, 64, 8, 8, 4, 3),
     "(4, 128, False, False, {prmt}, False, False, False, False, 8, 128, 64, 8, {pdl})")])
def test_wq_kernels_compile_offline_for_the_pack_target(kernel: str, config: object, key: str,
                                                       tmp_path: Path) -> None:
    """A pack build compiles the weight-only kernels for its target, not for the CPU it runs on:
    inline PTX (byte permutes; the exact-integer codes) for sm_90, shifts and masks for gfx1103
    (PRMT in the launch key), and programmatic dependent launch for sm_90 only (PDL, last in the
    key, and ``launch_pdl`` in the binary's metadata), the main kernel letting its slice sum
    launch (PREEXIT: gemv_wq at its start, gemm_wq after its K loop)."""
    job = {"library": "blas", "op": "gemm_wq", "kernel": kernel, "dtype": "int4_bf16",
           "config": dataclasses.asdict(config)}
    for arch, prmt, suffix in (("sm_90", True, "cubin"), ("gfx1103", False, "hsaco")):
        out = tmp_path / arch
        out.mkdir()
        [result] = precompile(arch, [job], out)
        assert result["status"] == "ok", result
        sidecar_name = next(f for f in result["files"] if f.endswith(".launch.json"))
        sidecar = json.loads((out / sidecar_name).read_text())
        # each kernel's measured mode on sm_90 (gemv_wq early, gemm_wq at exit), off on AMD
        pdl = (1 if kernel == "gemv_wq" else 2) if prmt else 0
        assert key.format(prmt=prmt, pdl=pdl) in sidecar["launch_key"], sidecar["launch_key"]
        metadata = json.loads((out / sidecar["metadata"]).read_text())
        assert metadata.get("launch_pdl", False) == bool(pdl), metadata.get("launch_pdl")
        assert any(f.endswith(suffix) for f in result["files"])
        if suffix == "cubin":
            tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
            cubin = out / sidecar_name.replace(".launch.json", ".cubin")
            sass = subprocess.run([str(tool), "-sass", str(cubin)], capture_output=True, text=True,
                                  check=True).stdout
            assert "PREEXIT" in sass


def _launch_keys(calls: list) -> set:
    """The Launcher keys of captured launches (what a pack's binaries are found by)."""
    return {c.key() for c in calls}


@pytest.mark.parametrize("bits,config", [(4, WqConfig(8, 256, 128, 8, 8, 8, 3)),
                                         (4, WqConfig(16, 128, 64, 8, 8, 4, 3, warp_mma=True)),
                                         (8, WqConfig(16, 128, 128, 4, 8, 8, 3)),
                                         (8, WqConfig(16, 128, 128, 4, 8, 4, 3, byte_planes=True)),
                                         (4, WqDequantConfig(32, 128, 4))], ids=lambda v: str(v))
def test_wq_pack_launches_are_the_calls_launches(bits: int, config: object, device: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The launches a pack precompiles for a weight-only family (``representative_launch``) have
    the launch keys of a real call on ``quantize_weight``'s output of that size (4-bit codes are
    stored column-major: a pack compiled for row-major ones would never be used)."""
    from tessera._core.launch import capture
    from tessera.blas import quantized

    monkeypatch.setattr(quantized, "interpreter_enabled", lambda: False)  # a GPU process's call

    _, n, k = gemm_wq_kernels.REPRESENTATIVE
    with building_for("cuda", "sm_90"), capture() as packed:
        gemm_wq_kernels.representative_launch("gemm_wq", config, f"int{bits}_bf16", 132)
    q = quantize_weight(torch.randn(k, n).to(torch.bfloat16).to(device), bits=bits, group_size=128)
    for m in (256, 37, 1):  # aligned, a token count, decode
        with building_for("cuda", "sm_90"), capture() as called, space.forced(config):
            gemm_wq(torch.randn(m, k).to(torch.bfloat16).to(device), q)  # recorded, not run
        main_launchers = (gemm_wq_kernels._launch, gemm_wq_kernels._launch_dequantize)
        called = [c for c in called if c.launcher in main_launchers]
        assert called and _launch_keys(called) <= _launch_keys(packed), m


@pytest.mark.parametrize("dtype", ["int8", "fp8e4m3"])
@pytest.mark.parametrize("config", [gemm_scaled.ScaledConfig(128, 128, 64, 8, 8, 3),
                                    ScaledTmaConfig(128, 256, 128, 8, 8, 4, False, 2, True)], ids=str)
def test_scaled_pack_launches_are_the_calls_launches(dtype: str, config: object, device: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A pack's precompiled scaled-GEMM launches have the keys of real calls: B column-major,
    M aligned and a token count, per-tensor scales with a bf16 result, and int8 unscaled to int32
    (on an H200's 132 multiprocessors, as the pack is built: the persistent grid is an argument)."""
    from tessera._core.launch import capture
    from tessera.blas import quantized

    real = quantized.device_info
    monkeypatch.setattr(quantized, "device_info",
                        lambda *d: dataclasses.replace(real(*d), multiprocessors=132))

    elem = gemm_scaled.element_dtype(dtype)[0]
    with building_for("cuda", "sm_90"), capture() as packed:
        gemm_scaled.representative_launch("gemm_scaled", config, dtype, 132)
    rows, n, k = gemm_scaled.representative_sizes(config, 132)
    b = torch.zeros(n, k).to(elem).to(device).t()
    scale = torch.ones(1, device=device)
    for m in (rows, rows + 8, rows - 40):  # aligned, token counts
        a = torch.zeros(m, k).to(elem).to(device)
        with building_for("cuda", "sm_90"), capture() as called, space.forced(config):
            gemm(a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)  # recorded, not run
            if elem == torch.int8:
                gemm(a, b)
        assert called and _launch_keys(called) <= _launch_keys(packed), m


def test_nvidia_target_follows_the_pack_build() -> None:
    cpu = torch.empty(1)
    assert not nvidia_target(cpu)
    with building_for("cuda"):
        assert nvidia_target(cpu)
    with building_for("hip"):
        assert not nvidia_target(cpu)
