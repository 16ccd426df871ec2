"""BLAS levels 1 and 2 against the reference BLAS's loops (written here in fp64 NumPy, index for index)
and against scipy.linalg.blas: increments of any sign, zero increments, n = 0, strided tensors, every
real dtype, complex dot/dotc, nrm2 without overflow, and the errors."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import scipy.linalg.blas as sblas
import torch
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from child import compiler_env, precompile
from reference import EPS, close, f64, positions
from tessera import InvalidArgumentError, UnsupportedError, device_info
from tessera._core import launch
from tessera.blas import (
    asum,
    axpy,
    copy,
    dot,
    dotc,
    gemv,
    ger,
    iamax,
    iamin,
    nrm2,
    repeat,
    rot,
    scal,
    space,
    swap,
    symv,
    trsv,
)
from tessera.blas.kernels import level2 as k2
from tessera.blas.kernels.level1 import VectorConfig
from tessera.blas.kernels.level2 import GemvConfig, GemvGemmConfig, GerConfig, SymvConfig, TrsvConfig
from tessera.cli import main
from tessera.tuning import load_logic, logic

DTYPES = list(EPS)


def make(length: int, dtype: torch.dtype, device: str, seed: int, stride: int = 1) -> torch.Tensor:
    """A 1-D tensor of ``length`` elements with tensor stride ``stride`` (a view into a bigger one)."""
    gen = torch.Generator().manual_seed(seed)
    base = torch.randn(length * stride, generator=gen, dtype=torch.float64)
    return base.to(dtype).to(device)[::stride]


# ------------------------------------------------------------------------------------------ level 1

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,incx,incy,stride",
                         [(1000, 1, 1, 1), (333, 2, -3, 1), (257, -1, 1, 2), (0, 1, 1, 1)])
def test_axpy_scal_copy_swap_rot(dtype: torch.dtype, n: int, incx: int, incy: int, stride: int,
                                 device: str) -> None:
    lx, ly = max(1, (n - 1) * abs(incx) + 1), max(1, (n - 1) * abs(incy) + 1)
    x, y = make(lx, dtype, device, 1, stride), make(ly, dtype, device, 2)
    px, py = positions(n, incx), positions(n, incy)
    xs, ys = f64(x), f64(y)

    want = ys.copy()
    want[py] = 0.5 * xs[px] + ys[py]
    close(axpy(0.5, x, y.clone(), n=n, incx=incx, incy=incy), want, dtype, 3)

    want = xs.copy()
    if incx > 0:
        want[px] = -2.0 * xs[px]
    close(scal(-2.0, x.clone(), n=n, incx=incx), want, dtype, 4)

    want = ys.copy()
    want[py] = xs[px]
    assert np.array_equal(f64(copy(x, y.clone(), n=n, incx=incx, incy=incy)), want)

    got_x, got_y = swap(x.clone(), y.clone(), n=n, incx=incx, incy=incy)
    wx, wy = xs.copy(), ys.copy()
    wx[px], wy[py] = ys[py], xs[px]
    assert np.array_equal(f64(got_x), wx) and np.array_equal(f64(got_y), wy)

    c, s = 0.6, 0.8
    got_x, got_y = rot(x.clone(), y.clone(), c, s, n=n, incx=incx, incy=incy)
    wx[px], wy[py] = c * xs[px] + s * ys[py], c * ys[py] - s * xs[px]
    close(got_x, wx, dtype, 6)
    close(got_y, wy, dtype, 6)


@pytest.mark.parametrize("incx,incy,batch", [(1, 1, 0), (2, -3, 0), (1, 1, 3)])
def test_element_wise_repeat_calls_replay_and_still_check(incx: int, incy: int, batch: int,
                                                          device: str) -> None:
    """A repeat axpy / scal / copy / swap / rot call with the layout, n, increments and scalars of
    an earlier one replays its launch (one recipe a routine and signature): on new vectors, each
    result is the reference's; a repeat call whose vectors share elements, or whose written one
    requires a gradient, is refused as the first call would be, the vectors untouched; the
    written vectors' version counters go up."""

    n, dtype = 301, torch.float32
    lx, ly = (n - 1) * abs(incx) + 1, (n - 1) * abs(incy) + 1
    shape = (lambda length: (batch, length)) if batch else (lambda length: (length,))

    def fresh(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        gen = torch.Generator().manual_seed(seed)
        return (torch.randn(shape(lx), generator=gen, dtype=torch.float64).to(dtype).to(device),
                torch.randn(shape(ly), generator=gen, dtype=torch.float64).to(dtype).to(device))

    def rows(t: torch.Tensor) -> list[np.ndarray]:
        return [f64(r) for r in (t if batch else t[None])]

    px, py = positions(n, incx), positions(n, incy)
    c, s = 0.6, 0.8
    calls = {
        "axpy": (lambda x, y: axpy(0.5, x, y, incx=incx, incy=incy),
                 lambda xs, ys: (xs, _put(ys, py, 0.5 * xs[px] + ys[py]))),
        "scal": (lambda x, y: scal(-2.0, x, incx=abs(incx)), None),
        "copy": (lambda x, y: copy(x, y, incx=incx, incy=incy), lambda xs, ys: (xs, _put(ys, py, xs[px]))),
        "swap": (lambda x, y: swap(x, y, incx=incx, incy=incy),
                 lambda xs, ys: (_put(xs.copy(), px, ys[py]), _put(ys.copy(), py, xs[px]))),
        "rot": (lambda x, y: rot(x, y, c, s, incx=incx, incy=incy),
                lambda xs, ys: (_put(xs.copy(), px, c * xs[px] + s * ys[py]),
                                _put(ys.copy(), py, c * ys[py] - s * xs[px]))),
    }
    repeat._RECIPES.clear()
    for round_ in range(3):  # the first call records, the next two replay on new vectors
        for name, (call, want) in calls.items():
            x, y = fresh(10 * round_ + len(name))
            before = [t._version for t in (x, y)]
            xs, ys = rows(x), rows(y)
            call(x, y)
            if want is None:  # scal: x only, with |incx|
                sx = positions(n, abs(incx))
                for got, ref in zip(rows(x), xs, strict=True):
                    ref = ref.copy()
                    ref[sx] *= -2.0
                    close(torch.from_numpy(got), ref, dtype, 4)
                assert x._version > before[0]
                continue
            for gx, gy, rx, ry in zip(rows(x), rows(y), xs, ys, strict=True):
                wx, wy = want(rx.copy(), ry.copy())
                close(torch.from_numpy(gx), wx, dtype, 6)
                close(torch.from_numpy(gy), wy, dtype, 6)
            assert y._version > before[1]
        assert len(repeat._RECIPES) == len(calls), "one recipe a routine, kept across repeat calls"

    # a repeat call with the recorded layouts whose y shares elements with x: refused, y untouched
    for name in ("axpy", "copy", "swap", "rot"):
        buffer = torch.zeros((batch, lx + ly + 64) if batch else (lx + ly + 64,), dtype=dtype, device=device)
        x = buffer[..., :lx]
        y = buffer[..., 4:4 + ly]  # 16 bytes on: the same alignment, so the same signature
        if x.stride() != fresh(0)[0].stride() or y.stride() != fresh(0)[1].stride():
            continue  # a batch's rows are buffer rows: another layout, the full path (tested elsewhere)
        kept = buffer.clone()
        with pytest.raises(InvalidArgumentError, match="overlaps"):
            calls[name][0](x, y)
        assert torch.equal(buffer, kept)
    x, y = fresh(99)
    with pytest.raises(InvalidArgumentError, match="overlaps"):
        rot(x, x, c, s, incx=incx, incy=incy)  # rot takes no vector twice (axpy and swap do)
    y.requires_grad_(True)
    with pytest.raises(InvalidArgumentError, match="requires a gradient"):
        axpy(0.5, x, y, incx=incx, incy=incy)
    assert len(repeat._RECIPES) == len(calls)


def _put(values: np.ndarray, where: np.ndarray, new: np.ndarray) -> np.ndarray:
    values[where] = new
    return values


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,incx,incy", [(3000, 1, 1), (1001, -2, 3), (1, 1, 1), (0, 1, 1), (17, 0, 1)])
def test_reductions(dtype: torch.dtype, n: int, incx: int, incy: int, device: str) -> None:
    x = make(max(1, (n - 1) * abs(incx) + 1), dtype, device, 3)
    y = make(max(1, (n - 1) * abs(incy) + 1), dtype, device, 4)
    xs, ys = f64(x)[positions(n, incx)], f64(y)[positions(n, incy)]
    size = max(n, 1)
    close(dot(x, y, n=n, incx=incx, incy=incy), float(xs @ ys), dtype, math.sqrt(size) * 4)
    close(dotc(x, y, n=n, incx=incx, incy=incy), float(xs @ ys), dtype, math.sqrt(size) * 4)
    close(nrm2(x, n=n, incx=incx), float(np.sqrt(xs @ xs)), dtype, math.sqrt(size) * 2)
    expect_asum = float(np.abs(xs).sum()) if incx > 0 else 0.0  # reference: 0 for incx ≤ 0
    close(asum(x, n=n, incx=incx), expect_asum, dtype, size * 2)
    magnitudes = np.abs(xs)
    expect_max = int(np.argmax(magnitudes)) if n and incx > 0 else -1
    expect_min = int(np.argmin(magnitudes)) if n and incx > 0 else -1
    assert iamax(x, n=n, incx=incx).item() == expect_max
    assert iamin(x, n=n, incx=incx).item() == expect_min


def test_iamax_takes_the_first_of_ties_across_programs(device: str) -> None:
    x = torch.zeros(20000, device=device)
    x[[5, 9000, 19000]] = -7.0
    x[[7, 12000]] = 1e-9
    assert iamax(x).item() == 5
    assert iamin(torch.ones(20000, device=device)).item() == 0


@pytest.mark.parametrize("where", [[69, 192, 700], [192, 767], [3, 2, 64 * 7 + 1]])
def test_iamax_first_of_ties_across_programs_and_steps(where: list[int], device: str) -> None:
    """Ties in different programs and steps, and a later step's lane below an earlier step's,
    give the first index (3 programs of 4 blocks)."""
    x = torch.ones(64 * 4 * 3, device=device)
    x[where] = 5.0
    with space.forced(VectorConfig(64, 4, 2)):
        assert iamax(x).item() == min(where)
        assert iamin(-x + 6.0).item() == min(where)


@pytest.mark.parametrize("programs", [[5, 1029], [1050, 40], [1050, 40, 1027]])
def test_iamax_finish_over_more_programs_than_its_lanes(programs: list[int], device: str) -> None:
    """1100 programs of 16 elements: the one finishing program (1024 lanes) sees two in some lanes.
    Ties in one lane at two steps (5, 1029), in two lanes at two steps (1050, 40); a later, larger
    value (1027: 9 after 5 at 1050 and 40) wins over them. Reference: NumPy's first arg-extreme."""
    x = torch.ones(16 * 1100, dtype=torch.float64)
    for rank, p in enumerate(programs):
        x[16 * p + 3] = 5.0 if rank < 2 else 9.0
    expect_max = int(np.argmax(x.numpy()))
    expect_min = int(np.argmin((1.0 / x).numpy()))  # the same places, as minima
    x = x.to(torch.float32).to(device)
    with space.forced(VectorConfig(16, 1, 1)):
        assert iamax(x).item() == expect_max
        assert iamin(1.0 / x).item() == expect_min


def reference_extreme(magnitudes: list[float], largest: bool) -> int:
    """The reference BLAS loop (IxAMAX / IxAMIN, 0-based): start from |x₀|, take a later element
    only when strictly more extreme (a NaN never is, and a NaN at x₀ is never beaten)."""
    best, where = magnitudes[0], 0
    for i, v in enumerate(magnitudes[1:], 1):
        if (v > best) if largest else (v < best):
            best, where = v, i
    return where


NAN = float("nan")


@pytest.mark.parametrize("values", [
    {3: NAN, 200: 9.0, 700: NAN},                  # NaNs in several programs: skipped
    {0: NAN, 500: 9.0},                            # a NaN first: the reference returns 0
    {i: NAN for i in range(768)},                  # all NaN
    {i: NAN for i in range(256, 512)} | {600: 0.5},  # a program of NaNs only, a later winner
    {5: float("inf"), 400: float("inf"), 9: NAN},  # ties at infinity: the first
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
def test_iamax_iamin_nan_and_inf_as_the_reference_loop(values: dict[int, float], dtype: torch.dtype,
                                                       device: str) -> None:
    """Three programs of four blocks (forced shape), values placed in several of them; complex
    elements carry the special value in the real part (|re| + |im|)."""
    x = torch.full((768,), 2.0, dtype=torch.float64)
    x[list(values)] = torch.tensor(list(values.values()), dtype=torch.float64)
    x[::7] += 1.0  # not all equal: iamin has a first minimum to find
    xs = x.clone()
    if dtype.is_complex:
        x = torch.complex(x, torch.full_like(x, 0.25))
    magnitudes = [abs(v) + (0.25 if dtype.is_complex else 0.0) for v in xs.tolist()]
    x = x.to(dtype).to(device)
    with space.forced(VectorConfig(64, 4, 2)):
        assert iamax(x).item() == reference_extreme(magnitudes, largest=True)
        assert iamin(x).item() == reference_extreme(magnitudes, largest=False)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_dot_dotc_nrm2_asum_iamax(dtype: torch.dtype, device: str) -> None:
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(2500, generator=gen, dtype=torch.complex128).to(dtype).to(device)
    y = torch.randn(2500, generator=gen, dtype=torch.complex128).to(dtype).to(device)
    xs, ys = f64(x), f64(y)
    eps = 2**-23 if dtype == torch.complex64 else 2**-52
    assert np.allclose(f64(dot(x, y)), np.sum(xs * ys), atol=400 * eps)
    assert np.allclose(f64(dotc(x, y)), np.vdot(xs, ys), atol=400 * eps)
    assert np.allclose(f64(dotc(x, y, incx=-2, n=1000)), np.vdot(xs[::2][:1000][::-1], ys[:1000]),
                       atol=400 * eps)
    assert np.isclose(f64(nrm2(x)), np.linalg.norm(xs), atol=100 * eps)
    assert np.isclose(f64(asum(x)), np.sum(np.abs(xs.real) + np.abs(xs.imag)), rtol=100 * eps)
    assert iamax(x).item() == int(np.argmax(np.abs(xs.real) + np.abs(xs.imag)))  # BLAS's |re| + |im|


def test_nrm2_neither_overflows_nor_underflows(device: str) -> None:
    for value in (1e30, 1e-30):
        x = torch.full((1000,), value, device=device)
        assert math.isclose(nrm2(x).item(), value * math.sqrt(1000), rel_tol=1e-6)
    x16 = torch.full((4096,), 200.0, dtype=torch.float16, device=device)  # Σx² is far beyond fp16
    assert math.isclose(nrm2(x16).item(), 200.0 * 64, rel_tol=1e-3)
    assert nrm2(torch.zeros(10, device=device)).item() == 0.0


NRM2_EXTREMES = {  # values whose squares overflow or underflow the dtype, mixed with ordinary ones
    torch.float32: [[3e38, 1.0], [1.7e38, 1.7e38], [1e-40] * 7, [1e20, 1e-20, 1.0, -3.0],
                    [1e-30, 1e-25, 2e-30], [1.2e-38 / 4, 1e-3], [2.0**52, 2.0**53, 1.0],
                    [2.0**-63, 2.0**-64, 3.0], [1e-30] * 3 + [1e30] * 2],
    torch.float64: [[1e308, 1.0], [8.9e307, 8.9e307], [1e-310] * 7, [1e200, 1e-200, 1.0],
                    [1e-300] * 100, [1e300] * 100, [2.0**486, 2.0**487], [2.0**-511, 2.0**-512, 3.0]],
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_nrm2_mixed_magnitudes_match_an_exact_hypot(dtype: torch.dtype, device: str) -> None:
    """Blue's three accumulators and their combination, against Python's correctly scaled hypot."""
    for values in NRM2_EXTREMES[dtype]:
        x = torch.tensor(values, dtype=dtype, device=device)
        want = math.hypot(*f64(x).tolist())
        assert math.isclose(nrm2(x).item(), want, rel_tol=2e-6), values
    assert math.isnan(nrm2(torch.tensor([1.0, math.nan, 2.0], device=device)).item())
    assert math.isinf(nrm2(torch.tensor([1.0, math.inf, 2.0], device=device)).item())
    z = torch.tensor([3e30 + 4e30j, 1e-30 + 0j], dtype=torch.complex64, device=device)
    assert math.isclose(nrm2(z).item(), 5e30, rel_tol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64])
@pytest.mark.parametrize("odd", ["huge", "tiny", "tiny_alone", "near_thresholds"])
def test_nrm2_programs_redo_their_own_blocks_with_blue(dtype: torch.dtype, odd: str, device: str) -> None:
    """nrm2 sums plain squares and a program redoes its blocks with Blue's sums only where those
    squares could have overflowed or underflowed: several programs (64 × 2 elements each), one
    block holding the odd values, the rest ordinary (or nothing but tiny values: ``tiny_alone``)."""
    gen = torch.Generator().manual_seed(41)
    xs = torch.randn(1000, generator=gen, dtype=torch.float64)
    real = torch.float64 if dtype == torch.float64 else torch.float32
    big, small = (1e200, 1e-200) if real == torch.float64 else (3e25, 1e-25)
    block = slice(64 * 5, 64 * 6)  # program 2's second block (P = 8 programs)
    if odd == "huge":
        xs[block] *= big
    elif odd == "tiny":
        xs[block] *= small
    elif odd == "tiny_alone":
        xs *= small
    else:  # squares just inside and just outside the range trusted without Blue
        xs[block] = 2.0**52 if real == torch.float32 else 2.0**486
        xs[block.start] = 2.0**53 if real == torch.float32 else 2.0**487
    peak = float(xs.abs().max())
    want = peak * float(np.linalg.norm(xs.numpy() / peak))  # scaled: the squares stay in range
    x = xs.to(real) if dtype != torch.complex64 else torch.complex(xs.to(real), xs.flip(0).to(real))
    if dtype == torch.complex64:
        want = math.sqrt(2) * want
    with space.forced(VectorConfig(64, 2, 2)):
        got = nrm2(x.to(device)).item()
    assert math.isclose(got, want, rel_tol=2e-6), (got, want)


def test_zero_output_increments_follow_the_sequential_reference(device: str) -> None:
    x = torch.arange(1.0, 6.0, dtype=torch.float64, device=device)  # 1 … 5
    y = torch.tensor([10.0, 20.0], dtype=torch.float64, device=device)
    assert f64(axpy(2.0, x, y.clone(), n=5, incy=0)).tolist() == [10.0 + 2 * 15, 20.0]
    assert f64(copy(x, y.clone(), n=5, incy=0)).tolist() == [5.0, 20.0]
    gx, gy = swap(x.clone(), torch.arange(6.0, 11.0, dtype=torch.float64, device=device), n=5, incx=0)
    # x0 ↔ y0, then x0 (now y0) ↔ y1, …
    assert f64(gx).tolist() == [10.0, 2, 3, 4, 5] and f64(gy).tolist() == [1.0, 6, 7, 8, 9]
    gx, gy = swap(x.clone(), y.clone(), n=3, incx=0, incy=0)  # three swaps of the same pair
    assert f64(gx)[0] == 10.0 and f64(gy)[0] == 1.0
    rx, ry = rot(x.clone(), y.clone(), 0.6, 0.8, n=2, incx=1, incy=0)
    a, b = 1.0, 10.0
    a, b = 0.6 * a + 0.8 * b, 0.6 * b - 0.8 * a
    c, d = 2.0, b
    c, d = 0.6 * c + 0.8 * d, 0.6 * d - 0.8 * c
    assert np.allclose(f64(rx)[:2], [a, c]) and np.isclose(f64(ry)[0], d)


def test_zero_increment_axpy_into_fp64_sums_in_fp64(device: str) -> None:
    """axpy into one fp64 element (incy = 0) from fp32 x sums αx in fp64, as the element-wise
    path computes in fp64 where either vector is: 1 + 2⁻³⁰ is 1 in fp32."""
    x = torch.tensor([1.0, 2.0**-30], dtype=torch.float32, device=device)
    y = torch.zeros(1, dtype=torch.float64, device=device)
    assert f64(axpy(1.0, x, y, n=2, incy=0)).tolist() == [1 + 2.0**-30]


@pytest.mark.parametrize("narrow", [torch.float16, torch.bfloat16])
def test_fp64_into_a_16bit_vector_rounds_as_torch_converts(narrow: torch.dtype, device: str) -> None:
    """fp64 data stored into a 16-bit vector or matrix (copy, axpy, gemv, ger with mixed dtypes) takes
    torch's conversion, through fp32: a value just above a 16-bit tie, whose fp32 rounding lands on
    the tie, rounds to even (1.0), where a direct conversion rounds it up. The interpreter's direct
    fp64 → bf16 conversion gave zeros and NaN here."""
    bits = 11 if narrow == torch.float16 else 8
    tie = 1 + 2.0**-bits + 2.0**-40  # rounds to 1 + 2^-bits in fp32: a 16-bit tie, to even
    values = torch.tensor([tie, -tie, 0.3, -2.5, 1e-3, 7.0], dtype=torch.float64)
    want = values.to(narrow)  # torch: through fp32
    assert want[0].item() == 1.0
    ulp = 2.0 ** (1 - bits) * want.double().abs()  # the interpreter truncates fp32 → bf16
    slack = ulp if narrow == torch.bfloat16 and device == "cpu" else 0 * ulp
    x = values.to(device)
    y = torch.zeros(6, dtype=narrow, device=device)

    def agrees(got: torch.Tensor) -> bool:
        return bool(((got.cpu().double() - want.double()).abs() <= slack).all())

    assert agrees(copy(x, y)), f64(y)
    assert agrees(axpy(1.0, x, y.zero_())), f64(y)
    eye = torch.eye(6, dtype=torch.float64, device=device)
    assert agrees(gemv(eye, x, y.zero_(), beta=0.0)), f64(y)
    a = torch.zeros(6, 1, dtype=narrow, device=device)
    one = torch.ones(1, dtype=torch.float64, device=device)
    assert agrees(ger(1.0, x, one, a)[:, 0]), f64(a)


def test_level1_matches_scipy_blas(device: str) -> None:
    x = make(301, torch.float64, device, 7)
    y = make(301, torch.float64, device, 8)
    xs, ys = f64(x), f64(y)
    assert np.allclose(f64(axpy(1.5, x, y.clone(), incx=3, incy=3, n=101)),
                       sblas.daxpy(xs, ys.copy(), n=101, a=1.5, incx=3, incy=3))
    assert np.isclose(f64(dot(x, y, n=150, incx=2, incy=-2)), sblas.ddot(xs, ys, n=150, incx=2, incy=-2))
    assert np.isclose(f64(nrm2(x, n=100, incx=3)), sblas.dnrm2(xs, n=100, incx=3))
    assert np.isclose(f64(asum(x, n=100, incx=3)), sblas.dasum(xs, n=100, incx=3))
    assert iamax(x, n=100, incx=3).item() == sblas.idamax(xs, n=100, incx=3)


def test_level1_errors(device: str) -> None:
    x = torch.ones(10, device=device)
    with pytest.raises(InvalidArgumentError, match=r"x.shape\[0\].*at least"):
        dot(x, x, n=6, incx=2)
    with pytest.raises(InvalidArgumentError, match=r"y.shape\[0\].*at least"):
        dot(x, torch.ones(5, device=device), n=10)
    assert dot(x, torch.ones(5, device=device)).item() == 5.0  # n defaults to the shorter vector
    with pytest.raises(InvalidArgumentError, match=r"1-D .* or 2-D"):
        nrm2(torch.ones(2, 2, 2, device=device))
    with pytest.raises(UnsupportedError, match="int32"):
        asum(torch.ones(3, dtype=torch.int32, device=device))
    with pytest.raises(UnsupportedError, match="complex64"):
        axpy(1.0, torch.ones(3, dtype=torch.complex64, device=device), torch.ones(3, dtype=torch.complex64,
                                                                                   device=device))
    with pytest.raises(InvalidArgumentError, match="alpha"):
        scal("2", x)
    with pytest.raises(InvalidArgumentError, match="incx"):
        scal(2.0, x, incx=1.5)
    with pytest.raises(InvalidArgumentError, match="dtype"):
        swap(x, torch.ones(10, dtype=torch.float64, device=device))


# ------------------------------------------------------------------------------------------ level 2

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("layout", ["row", "col", "slice"])
def test_gemv(dtype: torch.dtype, trans: bool, layout: str, device: str) -> None:
    gen = torch.Generator().manual_seed(11)
    big = torch.randn(90, 130, generator=gen, dtype=torch.float64)
    views = {"row": big[:70, :50], "col": big.T.contiguous().T[:70, :50], "slice": big[5:75, 10:110:2]}
    a64 = views[layout]
    a = a64.to(dtype).to(device)
    rows, cols = (50, 70) if trans else (70, 50)
    x = make(cols * 2, dtype, device, 12)
    y = make(rows, dtype, device, 13)
    op = f64(a).T if trans else f64(a)
    py = positions(rows, -1)
    want = f64(y)
    want[py] = 1.5 * op @ f64(x)[positions(cols, -2)] + 0.5 * want[py]
    got = gemv(a, x, y.clone(), alpha=1.5, beta=0.5, trans=trans, incx=-2, incy=-1)
    close(got, want, dtype, 4 * cols)
    close(gemv(a, x, trans=trans, incx=2), op @ f64(x)[positions(cols, 2)], dtype, 4 * cols)


def test_gemv_long_rows_split_the_columns(device: str) -> None:
    """Few rows, many columns: the column split and its fixed-order finish."""
    a = make(8 * 5000, torch.float32, device, 14).reshape(8, 5000)
    x = make(5000, torch.float32, device, 15)
    close(gemv(a, x), f64(a) @ f64(x), torch.float32, 4 * 5000)


def test_gemv_blas_quick_returns_and_beta_zero(device: str) -> None:
    a = torch.randn(4, 3, device=device)
    x, y = torch.randn(3, device=device), torch.full((4,), float("nan"), device=device)
    out = gemv(a, x, y.clone(), beta=0.0)  # β = 0: y's NaN is not read
    close(out, f64(a) @ f64(x), torch.float32, 12)
    y = torch.randn(4, device=device)
    assert torch.equal(gemv(torch.empty(4, 0, device=device), torch.empty(0, device=device), y.clone(),
                            beta=2.0), y)  # n = 0: returns at once (reference)
    a_nan = torch.full((4, 3), float("nan"), device=device)
    close(gemv(a_nan, x, y.clone(), alpha=0.0, beta=2.0), 2 * f64(y), torch.float32, 4)  # α = 0: A unread
    with pytest.raises(InvalidArgumentError, match="incx"):
        gemv(a, x, incx=0)
    with pytest.raises(InvalidArgumentError, match=r"x.shape\[0\]"):
        gemv(a, torch.ones(2, device=device))
    with pytest.raises(InvalidArgumentError, match="beta"):
        gemv(a, x, beta=1.0)
    with pytest.raises(InvalidArgumentError, match="incy must be 1 when y is None"):
        gemv(a, x, incy=2)  # the new y is contiguous: no spacing to write it with
    with pytest.raises(InvalidArgumentError, match="incy must be 1 when y is None"):
        symv(torch.eye(3, device=device), x, incy=-1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("lower", [False, True])
def test_symv_reads_one_triangle(dtype: torch.dtype, lower: bool, device: str) -> None:
    gen = torch.Generator().manual_seed(16)
    full = torch.randn(75, 75, generator=gen, dtype=torch.float64)
    sym = torch.tril(full) + torch.tril(full, -1).T if lower else torch.triu(full) + torch.triu(full, 1).T
    stored = full.clone()
    ones = torch.ones(75, 75, dtype=torch.bool)
    junk = torch.triu(ones, 1) if lower else torch.tril(ones, -1)
    stored[junk] = float("nan")  # the other triangle must not be read
    x = make(75, dtype, device, 17)
    y = make(75, dtype, device, 18)
    got = symv(stored.to(dtype).to(device), x, y.clone(), alpha=2.0, beta=-1.0, lower=lower)
    want = 2.0 * f64(sym.to(dtype)) @ f64(x) - f64(y)
    close(got, want, dtype, 4 * 75)
    assert np.allclose(f64(symv(sym.to(device), x.double(), lower=lower)),
                       sblas.dsymv(1.0, sym.numpy(), f64(x), lower=int(lower)))


@pytest.mark.gpu
@pytest.mark.parametrize("lower", [False, True])
def test_gpu_symv_many_block_rows(lower: bool) -> None:
    """5000 rows: 79 block rows of several programs each, the last block partial; the other
    triangle holds NaN and must not be read."""
    n = 5000
    gen = torch.Generator(device="cuda").manual_seed(9)
    full = torch.randn(n, n, device="cuda", generator=gen)
    sym = torch.tril(full) + torch.tril(full, -1).T if lower else torch.triu(full) + torch.triu(full, 1).T
    stored = full.clone()
    keep = torch.ones(n, n, dtype=torch.bool, device="cuda")
    stored[torch.triu(keep, 1) if lower else torch.tril(keep, -1)] = float("nan")
    x = torch.randn(n, device="cuda", generator=gen)
    want = (sym.double() @ x.double()).float()
    assert torch.allclose(symv(stored, x, lower=lower), want, atol=1e-3, rtol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("overlapped", [False, True], ids=["finish after", "finish overlapped"])
@pytest.mark.parametrize("mode", [launch.PDL_EARLY, launch.PDL_AT_EXIT])
def test_gpu_symv_dependent_launches(mode: int, overlapped: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """symv's two launches with programmatic dependent launch forced on: a chain of calls, each
    reading the vector the one before wrote (and writing the one it read) sees its output; also
    with the finish overlapping the walk (its programs waiting on row-block counts)."""
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("programmatic dependent launch needs sm_90")
    monkeypatch.setattr(launch, "_PDL", mode)
    n = 3000
    gen = torch.Generator(device="cuda").manual_seed(12)
    a = torch.randn(n, n, device="cuda", generator=gen) / n**0.5
    sym = (torch.triu(a) + torch.triu(a, 1).T).double()
    x = torch.randn(n, device="cuda", generator=gen)
    y = torch.empty_like(x)
    want = x.double()
    shape = dataclasses.replace(space.SYMV_HEURISTIC, overlap_finish=overlapped)
    with space.forced(shape):
        for _ in range(6):
            symv(a, x, y)  # reads x
            symv(a, y, x)  # reads y, just written; writes x, read before
            want = sym @ (sym @ want)
    torch.cuda.synchronize()
    assert torch.allclose(x.double(), want, rtol=1e-3, atol=1e-3 * want.abs().max().item())


@pytest.mark.parametrize("dtype", DTYPES)
def test_ger(dtype: torch.dtype, device: str) -> None:
    a = make(45 * 70, dtype, device, 19).reshape(45, 70)[:, 3:67]  # a strided view, updated in place
    x, y = make(90, dtype, device, 20), make(64, dtype, device, 21)
    want = f64(a) + 0.5 * np.outer(f64(x)[positions(45, -2)], f64(y))
    got = ger(0.5, x, y, a, incx=-2)
    assert got is a
    close(a, want, dtype, 4)
    assert np.allclose(f64(ger(2.0, x[:45].double(), y.double(), torch.zeros(45, 64, dtype=torch.float64,
                                                                             device=device))),
                       sblas.dger(2.0, f64(x[:45]), f64(y)))


@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("unit", [False, True])
def test_trsv(lower: bool, trans: bool, unit: bool, device: str) -> None:
    n = 150  # more than two diagonal blocks
    gen = torch.Generator().manual_seed(22)
    t = 0.05 * torch.randn(n, n, generator=gen, dtype=torch.float64) + torch.eye(n, dtype=torch.float64)
    b = torch.randn(2 * n, generator=gen, dtype=torch.float64)
    a = t.T.contiguous().T  # column-major storage, as Fortran callers pass it
    x = b.clone().to(device)
    trsv(a.to(device), x, lower=lower, trans=trans, unit_diagonal=unit, incx=-2)
    tri = torch.tril(t) if lower else torch.triu(t)
    if unit:
        tri = tri - torch.diag(torch.diag(tri)) + torch.eye(n, dtype=torch.float64)
    op = (tri.T if trans else tri).numpy()
    solution = f64(x)[positions(n, -2)]
    assert np.allclose(op @ solution, b.numpy()[positions(n, -2)], atol=1e-12)
    assert np.array_equal(f64(x)[1::2], b.numpy()[1::2])  # elements between the increments untouched
    ref = sblas.dtrsv(t.numpy(), b.numpy()[:n].copy(), lower=int(lower), trans=int(trans), diag=int(unit))
    assert np.allclose(f64(trsv(t.to(device), b[:n].clone().to(device), lower=lower, trans=trans,
                                unit_diagonal=unit)), ref, atol=1e-12)


@pytest.mark.gpu
@pytest.mark.parametrize("n,lower,trans", [(8192, False, False), (8192, True, True), (5000, True, False),
                                           (48000, False, True)])
def test_gpu_trsv_hands_blocks_on_in_one_launch(n: int, lower: bool, trans: bool) -> None:
    """Many more blocks than the GPU runs at once (48000: 750 programs of 8 warps) and every
    solve order: the solution's residual against fp64 arithmetic, and the fp32 result against
    torch's solve_triangular."""
    if 5 * 8 * n * n > torch.cuda.get_device_properties(0).total_memory:
        pytest.skip(f"{n}² needs about {5 * 8 * n * n / 2**30:.0f} GiB of GPU memory")
    gen = torch.Generator(device="cuda").manual_seed(5)
    a = torch.randn(n, n, device="cuda", generator=gen) / math.sqrt(n) + 4 * torch.eye(n, device="cuda")
    b = torch.randn(n, device="cuda", generator=gen)
    x = trsv(a, b.clone(), lower=lower, trans=trans)
    tri = torch.tril(a) if lower else torch.triu(a)
    op = tri.T if trans else tri
    residual = (op.double() @ x.double() - b.double()).abs().max().item()
    assert residual < 1e-4, residual
    ref = torch.linalg.solve_triangular(op, b[:, None], upper=lower == trans)[:, 0]
    assert torch.allclose(x, ref, atol=1e-5, rtol=1e-4)
    del a, tri, op


def test_level2_errors(device: str) -> None:
    a = torch.ones(3, 4, device=device)
    with pytest.raises(InvalidArgumentError, match="square"):
        trsv(a, torch.ones(3, device=device))
    with pytest.raises(InvalidArgumentError, match="square"):
        symv(a, torch.ones(4, device=device))
    with pytest.raises(InvalidArgumentError, match="2-D"):
        ger(1.0, torch.ones(3, device=device), torch.ones(4, device=device), torch.ones(12, device=device))
    with pytest.raises(UnsupportedError, match="int64"):
        gemv(torch.ones(3, 4, dtype=torch.int64, device=device), torch.ones(4, device=device))
    with pytest.raises(InvalidArgumentError, match="non-zero strides"):
        ger(1.0, torch.ones(3, device=device), torch.ones(4, device=device),
            torch.ones(3, 1, device=device).expand(3, 4))
    # NumPy integers are integers (as for torch), a NumPy bool is not
    x = torch.randn(10, device=device, dtype=torch.float64)
    assert torch.equal(nrm2(x, n=np.int64(5), incx=np.int32(2)), nrm2(x, n=5, incx=2))
    with pytest.raises(InvalidArgumentError, match="n must be an integer"):
        nrm2(x, n=np.bool_(True))
    # BLAS's letters are truthy strings: trans="N" would have transposed A
    square, v = torch.eye(3, device=device), torch.ones(3, device=device)
    for call, flag in ((lambda: gemv(a, torch.ones(4, device=device), trans="N"), "trans"),
                       (lambda: symv(square, v, lower="U"), "lower"),
                       (lambda: trsv(square, v, unit_diagonal=1), "unit_diagonal"),
                       (lambda: trsv(square, v, trans=None), "trans")):
        with pytest.raises(InvalidArgumentError, match=f"{flag} must be True or False"):
            call()


# gemv tiles through the logic files and the tuner

def _install_gemv_logic(dtype: str, solution: dict, rows: list[dict]) -> Path:
    """A gemv logic file in the installed pack (conftest gives each test a fresh TESSERA_HOME)."""
    arch = device_info().arch
    path = Path(os.environ["TESSERA_HOME"]) / "current" / "logic" / arch / f"blas.gemv.{dtype}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({
        "schema": 1, "arch": arch, "library": "blas", "op": "gemv", "problem": {"dtype": dtype},
        "solutions": [{"id": 0, **solution}], "table": [{**row, "solution": 0} for row in rows]}))
    logic.reload()
    return path


@pytest.mark.parametrize("trans", [False, True])
def test_gemv_selects_through_installed_logic_then_the_heuristic(trans: bool, device: str) -> None:
    """A gemv logic file for the layout decides the tile (seen in the launch), the result stays
    right; another layout or dtype keeps the heuristic."""
    from tessera._core.launch import capture

    info = device_info(device)
    key = space.gemv_dtype(torch.float32, trans)
    before = space.select_shape("gemv", (72, 40), key, info)
    assert "no installed pack logic" in before.reason
    path = _install_gemv_logic(key, {"kernel": "gemv", "block_m": 32, "block_n": 64, "num_warps": 4,
                                     "per_sm": 2}, [{"m": 72, "n": 40}])
    choice = space.select_shape("gemv", (72, 40), key, info)
    assert choice.config == GemvConfig(32, 64, 4, 2) and str(path) in choice.reason
    a = torch.randn((40, 72) if trans else (72, 40), device=device)
    x = torch.randn(40, device=device)
    with capture() as calls:
        gemv(a, x, trans=trans)
    assert calls[0].constexprs["BLOCK_M"] == 32 and calls[0].constexprs["BLOCK_N"] == 64
    y = gemv(a, x, trans=trans)
    want = (a.t() if trans else a).double().cpu() @ x.double().cpu()
    assert torch.allclose(y.double().cpu(), want, rtol=1e-5, atol=1e-5)
    for other in (space.gemv_dtype(torch.float32, not trans), space.gemv_dtype(torch.float64, trans)):
        assert space.select_shape("gemv", (72, 40), other, info).reason != choice.reason


@pytest.mark.parametrize("config", [GemvConfig(16, 32, 4, 1), GemvConfig(32, 16, 4, 8),
                                    GemvConfig(16, 64, 2, 4)], ids=lambda c: c.short())
@pytest.mark.parametrize("trans", [False, True])
def test_every_gemv_config_agrees_with_numpy(config: GemvConfig, trans: bool, device: str) -> None:
    gen = torch.Generator().manual_seed(11)
    a = torch.randn(37, 70, generator=gen)
    x = torch.randn(37 if trans else 70, generator=gen)
    y = torch.randn(70 if trans else 37, generator=gen)
    want = 0.5 * (a.t() if trans else a).double() @ x.double() + 2.0 * y.double()
    with space.forced(config):
        got = gemv(a.to(device), x.to(device), y.to(device), alpha=0.5, beta=2.0, trans=trans)
    assert torch.allclose(got.double().cpu(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("beta", [0.0, 2.0])
def test_gemv_as_a_gemm_agrees_with_numpy(dtype: torch.dtype, trans: bool, beta: float, device: str) -> None:
    """gemv as a one-row GEMM (forced): one GEMM launch, right for both layouts, α and β, and
    β = 0 never reads y (NaN there does not leak); a strided x falls back to the gemv kernel,
    still right."""
    from tessera._core import launch
    from tessera._core.launch import function_name

    gen = torch.Generator().manual_seed(13)
    a = torch.randn(37, 70, generator=gen, dtype=dtype)
    x = torch.randn(74 if trans else 140, generator=gen, dtype=dtype)  # used with incx 1 and 2
    y = torch.randn(70 if trans else 37, generator=gen, dtype=dtype)
    if beta == 0.0:
        y[3] = float("nan")
    op_a = (a.t() if trans else a).double()
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    for incx in (1, 2):
        xs = x.double()[:: incx][: op_a.shape[1]]
        want = 0.5 * op_a @ xs + (beta * y.double() if beta else 0.0)
        with space.forced(GemvGemmConfig()), launch.recording() as calls:
            got = gemv(a.to(device), x.to(device), y.clone().to(device), alpha=0.5, beta=beta, trans=trans,
                       incx=incx)
        assert torch.allclose(got.double().cpu(), want, rtol=tol, atol=tol)
        kernels = {function_name(call.launcher.kernel).rsplit(":", 1)[1] for call in calls}
        assert ("_gemv_kernel" in kernels) == (incx == 2) and len(calls) >= 1, kernels


@pytest.mark.parametrize("max_split", [3, 5, 7])
@pytest.mark.parametrize("beta", [0.0, -1.5])
def test_gemv_column_splits_finish_in_one_load(max_split: int, beta: float, device: str) -> None:
    """Column splits that are not a power of two (the finish loads a power-of-two block of parts,
    the extra ones masked) and a finish block smaller than the rows, against fp64."""
    gen = torch.Generator().manual_seed(12)
    m, n = 300, 900
    a = torch.randn(m, n, generator=gen, dtype=torch.float64)
    x = torch.randn(n, generator=gen, dtype=torch.float64)
    y = torch.randn(m, generator=gen, dtype=torch.float64)
    want = 0.5 * a @ x + beta * y
    out = y.clone().to(device)
    k2.launch_gemv(a.to(device), n, 1, m, n, (x.to(device), 0, 1), (out, 0, 1), 0.5, beta, fp64=True,
                   config=GemvConfig(16, 32, 4, 64), num_sms=4, max_split=max_split)
    assert torch.allclose(out.cpu(), want, rtol=1e-12, atol=1e-12)


def test_cli_tune_gemv_writes_logic(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    if torch.cuda.is_available():
        pytest.skip("the tiny space is for the interpreter; the GPU run uses real spaces")
    assert main(["tune", "gemv", "--dtype", "fp32_t", "--sizes", "tiny", "--space", "tiny", "--no-plot",
                 "--out", str(tmp_path)]) == 0
    assert "geometric-mean gain of tuned over the heuristic default" in capsys.readouterr().out
    lf = load_logic(tmp_path / "interpreter" / "blas.gemv.fp32_t.yaml")
    assert {row.sizes for row in lf.table} == {(40, 72), (24, 130)}
    assert {config.kernel for config in lf.solutions.values()} <= {"gemv", "gemv_gemm"}
    journal = (tmp_path / "interpreter" / "blas.gemv.fp32_t.journal.jsonl").read_text()
    assert journal.count('"status": "ok"') >= 8 and '"status": "incorrect"' not in journal
    assert 'gemv_gemm' in journal  # op(A)'s columns contiguous: the one-row GEMM is a candidate
    assert main(["tune", "gemv", "--dtype", "fp32", "--sizes", "4x5x6", "--out", str(tmp_path)]) == 2


def test_gemv_heuristic_logic_documents_load(tmp_path: Path) -> None:
    """What a pack ships for an untuned architecture validates and names the heuristic's tile."""
    from tessera._core.device import offline_device

    docs = space.shape_heuristic_logic("gemv")(offline_device("sm_90"))
    assert {doc["problem"]["dtype"] for doc in docs} == set(space.GEMV_DTYPES)
    for doc in docs:
        path = tmp_path / f"blas.gemv.{doc['problem']['dtype']}.yaml"
        path.write_text(yaml.safe_dump(doc))
        config = next(iter(load_logic(path).solutions.values()))
        assert config == space.GEMV_HEURISTIC[doc["problem"]["dtype"].endswith("_t")]


# level-1 launch shapes through the logic files and the tuner

def test_level1_selects_through_installed_logic_then_the_heuristic(device: str, tmp_path: Path) -> None:
    """A level1_reduce logic file decides nrm2's and dot's launch (seen in the launch); results stay
    right; another op or dtype keeps the heuristic. The wheel's logic folder is replaced by an
    empty one (sm_90 ships level-1 logic of its own)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(logic, "SHIPPED_LOGIC", tmp_path / "shipped")
        logic.reload()
        try:
            _level1_through_installed_logic(device)
        finally:
            patch.undo()
            logic.reload()  # no selection cached from the stand-in folder outlives the test


def _level1_through_installed_logic(device: str) -> None:
    from tessera._core.launch import capture

    info = device_info(device)
    before = space.select_shape("level1_reduce", (3000,), "fp32", info)
    assert before.config == space.LEVEL1_HEURISTIC and "no installed pack logic" in before.reason
    arch = info.arch
    path = Path(os.environ["TESSERA_HOME"]) / "current" / "logic" / arch / "blas.level1_reduce.fp32.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({
        "schema": 1, "arch": arch, "library": "blas", "op": "level1_reduce", "problem": {"dtype": "fp32"},
        "solutions": [{"id": 0, "kernel": "level1", "block": 128, "iters": 2, "num_warps": 2}],
        "table": [{"n": 3000, "solution": 0}]}))
    logic.reload()
    choice = space.select_shape("level1_reduce", (3000,), "fp32", info)
    assert choice.config == VectorConfig(128, 2, 2) and str(path) in choice.reason
    x, y = make(3000, torch.float32, device, 5), make(3000, torch.float32, device, 6)
    with capture() as calls:
        nrm2(x)
        dot(x, y)
    assert [(c.constexprs["BLOCK"], c.constexprs["ITERS"], c.num_warps) for c in calls
            if "ITERS" in c.constexprs] == [(128, 2, 2)] * 2
    xs, ys = f64(x), f64(y)
    close(nrm2(x), float(np.sqrt(xs @ xs)), torch.float32, 100)
    close(dot(x, y), float(xs @ ys), torch.float32, 200)
    assert space.select_shape("level1_extreme", (3000,), "fp32", info).config == space.LEVEL1_HEURISTIC
    assert space.select_shape("level1_reduce", (3000,), "fp64", info).config == space.LEVEL1_HEURISTIC
    # swap has a launch shape of its own: a level1_map file decides axpy / scal / copy / rot, not swap
    (path.parent / "blas.level1_map.fp32.yaml").write_text(yaml.safe_dump({
        "schema": 1, "arch": arch, "library": "blas", "op": "level1_map", "problem": {"dtype": "fp32"},
        "solutions": [{"id": 0, "kernel": "level1", "block": 256, "iters": 1, "num_warps": 2}],
        "table": [{"n": 3000, "solution": 0}]}))
    logic.reload()
    xw, yw = x.clone(), y.clone()
    with capture() as calls:
        for routine in (lambda: axpy(0.5, xw, yw), lambda: scal(2.0, xw), lambda: copy(xw, yw),
                        lambda: rot(xw, yw, 0.6, 0.8), lambda: swap(xw, yw)):
            routine()
    assert [(c.constexprs["BLOCK"], c.num_warps) for c in calls] == [(256, 2)] * 4 + [
        (space.LEVEL1_HEURISTIC.block, space.LEVEL1_HEURISTIC.num_warps)]


@pytest.mark.parametrize("config", [VectorConfig(64, 1, 2), VectorConfig(128, 4, 4), VectorConfig(512, 3, 1)],
                         ids=lambda c: c.short())
def test_every_level1_config_agrees_with_numpy(config: VectorConfig, device: str) -> None:
    """Every routine under a forced launch shape (programs of 64…1536 elements, tails, negative
    increments, complex) against NumPy in fp64."""
    n = 3001
    x, y = make(2 * n, torch.float32, device, 7), make(2 * n, torch.float32, device, 8)
    xs, ys = f64(x)[positions(n, -2)], f64(y)[positions(n, 1)]
    z = torch.complex(make(n, torch.float64, device, 9), make(n, torch.float64, device, 10))
    zs = f64(z.real) + 1j * f64(z.imag)
    with space.forced(config):
        close(axpy(0.5, x, y.clone(), n=n, incx=-2)[:n], 0.5 * xs + f64(y)[:n], torch.float32, 4)
        close(dot(x, y, n=n, incx=-2), float(xs @ ys), torch.float32, 4 * math.sqrt(n))
        close(asum(x, n=n, incx=2), float(np.abs(f64(x)[positions(n, 2)]).sum()), torch.float32, 2 * n)
        close(nrm2(x, n=n, incx=-2), float(np.linalg.norm(xs)), torch.float32, 2 * math.sqrt(n))
        assert iamax(x, n=n, incx=2).item() == int(np.argmax(np.abs(f64(x)[positions(n, 2)])))
        assert iamin(z).item() == int(np.argmin(np.abs(zs.real) + np.abs(zs.imag)))
        assert np.isclose(complex(dotc(z, z).item()), np.vdot(zs, zs), rtol=1e-12)


def test_cli_tune_level1_writes_logic(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    if torch.cuda.is_available():
        pytest.skip("the tiny space is for the interpreter; the GPU run uses real spaces")
    for op, dtype in (("map", "bf16"), ("swap", "fp32"), ("extreme", "complex64")):
        assert main(["tune", "level1", "--op", op, "--dtype", dtype, "--sizes", "tiny", "--space", "tiny",
                     "--no-plot", "--out", str(tmp_path)]) == 0
        assert "geometric-mean gain of tuned over the heuristic default" in capsys.readouterr().out
        lf = load_logic(tmp_path / "interpreter" / f"blas.level1_{op}.{dtype}.yaml")
        assert {row.sizes for row in lf.table} == {(3000,), (1023,)}
        assert {config.kernel for config in lf.solutions.values()} == {"level1"}
        journal = (tmp_path / "interpreter" / f"blas.level1_{op}.{dtype}.journal.jsonl").read_text()
        assert '"status": "ok"' in journal and '"status": "incorrect"' not in journal
    assert main(["tune", "level1", "--op", "map", "--dtype", "complex64", "--sizes", "tiny",
                 "--out", str(tmp_path)]) == 2  # axpy has no complex dtype


def test_level12_heuristic_logic_documents_load(tmp_path: Path) -> None:
    from tessera._core.device import offline_device

    for op, spec in space.SHAPE_OPS.items():
        docs = logic.registered_ops()[("blas", op)].heuristic(offline_device("gfx1103"))
        assert [doc["problem"]["dtype"] for doc in docs] == list(spec.dtypes)
        for doc in docs:
            path = tmp_path / f"blas.{op}.{doc['problem']['dtype']}.yaml"
            path.write_text(yaml.safe_dump(doc))
            assert list(load_logic(path).solutions.values()) == [spec.heuristic(doc["problem"]["dtype"],
                                                                                "hip").config]


def test_level1_compiles_offline_for_a_pack() -> None:
    """A pack build precompiles each level-1 op's routines for the target (one file set per distinct
    launch: the nrm2 finishing kernel, alike for both representative lengths, once)."""
    job = {"library": "blas", "op": "level1_reduce", "kernel": "level1", "dtype": "complex64",
           "config": dataclasses.asdict(VectorConfig(256, 2, 2))}
    with tempfile.TemporaryDirectory() as out:
        [result] = precompile("gfx1103", [job], out)
        assert result["status"] == "ok", result
        sidecars = [f for f in result["files"] if f.endswith(".launch.json")]
        # dot (plain and conjugated), asum, nrm2 for two lengths, and one nrm2 finish
        assert len(sidecars) == 9 and all(f.endswith(".hsaco") for f in result["files"][::3])


_PTX_CHILD = r"""
import json
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.runtime.jit import JITFunction
from tessera.blas.kernels.level1 import _reduce_kernel, _extreme_kernel
from tessera.blas.kernels.level2 import _symv_finish_kernel, _symv_kernel


def ptx(kernel, types, constexprs):
    jit = JITFunction(kernel.fn)  # compilable even where the interpreter was on
    signature = dict(zip(jit.arg_names, types)) | {name: "constexpr" for name in constexprs}
    compiled = triton.compile(ASTSource(jit, signature, constexprs), target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": 4, "num_stages": 3})
    return compiled.asm["ptx"]


reduce_types = ["*fp32", "*fp32", "*fp32"] + ["i32"] * 7  # n, starts, increments, batch steps
out = {}
for name, op in (("dot", 0), ("asum", 1), ("nrm2", 2)):
    out[name] = ptx(_reduce_kernel, reduce_types,
                    dict(OP=op, COMPLEX=False, CONJ=False, FP64=False, BLOCK=1024, ITERS=2))
out["iamax"] = ptx(_extreme_kernel, ["*fp32", "*fp32", "*i64"] + ["i32"] * 4,
                   dict(LARGEST=True, COMPLEX=False, FP64=False, BLOCK=1024, ITERS=2))
symv_types = ["*bf16", "*bf16", "*i32", "*i32", "*fp32", "*fp32", "*i32"] + ["i32"] * 8
for mode in (0, 1, 2):
    out[f"symv-pdl{mode}"] = ptx(_symv_kernel, symv_types[:6] + ["constexpr"] + symv_types[7:],
                                 dict(count_ptr=None, FP64=False, BS=64, STAGES=0, PDL=mode))
out["symv-counted"] = ptx(_symv_kernel, symv_types, dict(FP64=False, BS=64, STAGES=0, PDL=1))
finish_types = ["*fp32", "*fp32", "*i32", "*bf16"] + ["i32"] * 7 + ["fp64", "fp64"]
finish_constexprs = dict(BETA_ZERO=True, FP64=False, BS=64, ROWS=16, COLUMN=8, RIGHT=128, PDL=2)
out["finish-counted"] = ptx(_symv_finish_kernel, finish_types, finish_constexprs)
print(json.dumps(out))
"""


def test_measured_memory_hints_reach_the_sm90_code() -> None:
    """The choices timed on the H200 are in the code compiled for sm_90 (offline): asum's, nrm2's
    and iamax's loads of x carry L2 evict_first, dot's do not (slower flushed with it); symv's main
    kernel at exit lets its dependents launch once (after its tile walk), early once (at its start),
    off never."""
    done = subprocess.run([sys.executable, "-c", _PTX_CHILD], capture_output=True, text=True,
                          env=compiler_env(), timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    ptx = json.loads(done.stdout.strip().splitlines()[-1])
    for name in ("asum", "nrm2", "iamax"):
        assert "L2::evict_first" in ptx[name], name
    assert "evict_first" not in ptx["dot"]
    triggers = [ptx[f"symv-pdl{mode}"].count("griddepcontrol.launch_dependents") for mode in (0, 1, 2)]
    assert triggers == [0, 1, 1]
    at_exit = ptx["symv-pdl2"]
    assert at_exit.index("griddepcontrol.wait") < at_exit.index("griddepcontrol.launch_dependents")
    assert "L2::evict_first" in at_exit and "L2::evict_last" in at_exit  # A's tiles; the row sums
    assert ".gpu.release" not in at_exit  # no counting without the overlapped finish
    # the overlapped finish: the walk counts itself in (one release fence, then relaxed counts),
    # the finish waits on the count (acquire), reads the parts past L1 and waits for the walk's
    # grid only after its stores
    counted, finish = ptx["symv-counted"], ptx["finish-counted"]
    count = next(op for op in ("red.global.gpu.relaxed.add", "atom.global.gpu.relaxed.add") if op in counted)
    assert ".release" not in counted and counted.index("fence.acq_rel.gpu") < counted.index(count)
    assert "gpu.acquire" in finish and "ld.global.cg" in finish
    assert finish.index("st.global") < finish.index("griddepcontrol.wait")


@pytest.mark.parametrize("shape", [GerConfig(16, 32, 2), GerConfig(64, 16, 4)], ids=lambda c: c.short())
def test_every_ger_config_agrees_with_numpy(shape: GerConfig, device: str) -> None:
    a = make(45 * 70, torch.float64, device, 30).reshape(45, 70)
    x, y = make(45, torch.float64, device, 31), make(70, torch.float64, device, 32)
    want = f64(a) + 0.5 * np.outer(f64(x), f64(y))
    with space.forced(shape):
        ger(0.5, x, y, a)
    assert np.allclose(f64(a), want, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("blocks,per_program", [(1, 8), (5, 2), (9, 4), (17, 3)])
def test_symv_launch_order_covers_the_plan_longest_first(blocks: int, per_program: int) -> None:
    """The longest-first order is a permutation of the plan's rows, their tile counts never
    growing, block column order kept among equals; the plan's rows cover every stored tile
    (I ≤ J) once."""
    from tessera.blas.kernels.level2 import _symv_order, _symv_plan

    rows = _symv_plan(blocks, per_program, torch.device("cpu")).view(-1, 3).tolist()
    assert sorted((i, j) for j, i0, i1 in rows for i in range(i0, i1)) == sorted(
        (i, j) for j in range(blocks) for i in range(j + 1))
    assert _symv_order(blocks, per_program, False, torch.device("cpu")).tolist() == list(range(len(rows)))
    order = _symv_order(blocks, per_program, True, torch.device("cpu")).tolist()
    assert sorted(order) == list(range(len(rows)))
    counts = [rows[p][2] - rows[p][1] for p in order]
    assert counts == sorted(counts, reverse=True)
    assert all(p < q for p, q, c, d in zip(order, order[1:], counts, counts[1:], strict=False) if c == d)


@pytest.mark.parametrize("shape", [SymvConfig(16, 1, 2), SymvConfig(32, 3, 4), SymvConfig(16, 2, 4, True),
                                   SymvConfig(16, 3, 4, True, 3), SymvConfig(16, 2, 4, False, 3),
                                   SymvConfig(8, 3, 2), SymvConfig(8, 4, 2, True),
                                   SymvConfig(16, 3, 4, True, 0, 4), SymvConfig(32, 2, 4, False, 3, 8)],
                         ids=lambda c: c.short())
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
def test_every_symv_config_agrees_with_numpy(shape: SymvConfig, dtype: torch.dtype, device: str) -> None:
    """Every form of the walk (register prefetch or stages, either order) in fp64 and fp32; 8-edge
    tiles give 10 block columns, so the finish's computed program ranges (⌈(J + 1) / per
    program⌉ programs a block column) are checked over several programs a column."""
    gen = torch.Generator().manual_seed(33)
    full = torch.randn(75, 75, generator=gen, dtype=torch.float64)
    sym = torch.triu(full) + torch.triu(full, 1).T
    x, y = make(75, torch.float64, device, 34), make(75, torch.float64, device, 35)
    with space.forced(shape):
        got = symv(full.to(dtype).to(device), x.to(dtype), y.clone().to(dtype), alpha=2.0, beta=-1.0)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    assert np.allclose(f64(got), 2.0 * sym.numpy() @ f64(x) - f64(y), rtol=tol, atol=tol)


@pytest.mark.parametrize("shape", [SymvConfig(8, 3, 2, overlap_finish=True),
                                   SymvConfig(16, 3, 4, True, 0, 4, True),
                                   SymvConfig(32, 2, 4, False, 3, 8, True)],
                         ids=lambda c: c.short())
def test_symv_overlapped_finish_counts_its_parts(shape: SymvConfig, device: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The overlapped finish waits for row block I's count to reach (blocks − I) + ⌈(I + 1) / per
    program⌉: the main launch alone must count exactly that (checked first, so that a wrong
    count fails here instead of leaving the finish waiting); then whole calls agree with numpy,
    twice in a row and batched (each call's finish leaves the counts zeroed for the next)."""
    n, blocks = 75, -(-75 // shape.tile)
    kept: list[torch.Tensor] = []
    counted = k2.scratch

    def scratch(*args: object) -> torch.Tensor:
        buffer = counted(*args)
        if args[0] == "symv counts":
            kept.append(buffer)
        return buffer

    gen = torch.Generator().manual_seed(36)
    full = torch.randn(n, n, generator=gen, dtype=torch.float64)
    sym = torch.triu(full) + torch.triu(full, 1).T
    x, y = make(n, torch.float64, device, 37), make(n, torch.float64, device, 38)
    with monkeypatch.context() as patch:
        patch.setattr(k2, "scratch", scratch)
        patch.setattr(k2, "symv_finish_launch", lambda *args: None)
        with space.forced(shape):
            symv(full.to(device), x)
    counts = kept[0][:2 * blocks].tolist()
    kept[0].zero_()  # no finish ran to zero them
    want = [blocks - i + i // shape.per_program + 1 for i in range(blocks)]
    assert counts == want + [0] * blocks
    with space.forced(shape):
        for _ in range(2):
            got = symv(full.to(device), x, y.clone(), alpha=2.0, beta=-1.0)
            assert np.allclose(f64(got), 2.0 * sym.numpy() @ f64(x) - f64(y), rtol=1e-12, atol=1e-12)
        stack = full.to(device).expand(3, n, n)
        got = symv(stack, x.expand(3, n).clone())
    assert np.allclose(f64(got), np.tile(sym.numpy() @ f64(x), (3, 1)), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("rows", [3, -1, 128])
def test_symv_finish_rows_must_divide_the_tile(rows: int) -> None:
    with pytest.raises(InvalidArgumentError, match="finish_rows must divide the tile 64"):
        SymvConfig(64, 8, 4, finish_rows=rows)


@pytest.mark.parametrize("shape", [TrsvConfig(16, 4), TrsvConfig(32, 2)], ids=lambda c: c.short())
def test_every_trsv_config_agrees_with_numpy(shape: TrsvConfig, device: str) -> None:
    n = 100
    gen = torch.Generator().manual_seed(36)
    t = 0.05 * torch.randn(n, n, generator=gen, dtype=torch.float64) + torch.eye(n, dtype=torch.float64)
    b = torch.randn(n, generator=gen, dtype=torch.float64)
    for lower in (False, True):
        x = b.clone().to(device)
        with space.forced(shape):
            trsv(t.to(device), x, lower=lower)
        tri = (torch.tril(t) if lower else torch.triu(t)).numpy()
        assert np.allclose(tri @ f64(x), b.numpy(), rtol=1e-12, atol=1e-12)


def test_level2_shapes_select_through_installed_logic(device: str) -> None:
    """ger/symv/trsv logic files decide their launches (seen in the launch)."""
    from tessera._core.launch import capture

    arch = device_info(device).arch
    solutions = {"ger": ({"kernel": "ger", "block_m": 16, "block_n": 16, "num_warps": 2}, {"m": 40, "n": 40}),
                 "symv": ({"kernel": "symv", "tile": 16, "per_program": 1, "num_warps": 2}, {"n": 40}),
                 "trsv": ({"kernel": "trsv", "block": 16, "num_warps": 2}, {"n": 40})}
    for op, (solution, size) in solutions.items():
        path = Path(os.environ["TESSERA_HOME"]) / "current" / "logic" / arch / f"blas.{op}.fp32.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump({
            "schema": 1, "arch": arch, "library": "blas", "op": op, "problem": {"dtype": "fp32"},
            "solutions": [{"id": 0, **solution}], "table": [{**size, "solution": 0}]}))
    logic.reload()
    a = torch.eye(40, device=device) + 0.01 * make(1600, torch.float32, device, 37).reshape(40, 40)
    x = make(40, torch.float32, device, 38)
    with capture() as calls:
        ger(1.0, x, x, a.clone())
        symv(a, x)
        trsv(a, x.clone())
    shapes = {call.launcher.kernel.fn.__name__: (call.constexprs.get("BLOCK_M"), call.constexprs.get("BS"),
                                                 call.num_warps) for call in calls}
    assert shapes["_ger_kernel"] == (16, None, 2)
    assert shapes["_symv_kernel"] == (None, 16, 2)
    assert shapes["_trsv_kernel"] == (None, 16, 2)
    assert space.select_shape("trsv", (40,), "fp64", device_info(device)).config == TrsvConfig()


def test_level2_compiles_offline_for_a_pack() -> None:
    """trsv's four variants (upper/lower, unit diagonal or not) and symv with and without β compile
    for a pack's target; gemv as a GEMM has no kernel of its own (the GEMM logic's solutions bring
    theirs)."""
    jobs = [{"library": "blas", "op": "trsv", "kernel": "trsv", "dtype": "fp32",
             "config": dataclasses.asdict(TrsvConfig())},
            {"library": "blas", "op": "symv", "kernel": "symv", "dtype": "bf16",
             "config": dataclasses.asdict(SymvConfig())},
            {"library": "blas", "op": "gemv", "kernel": "gemv_gemm", "dtype": "bf16_t",
             "config": dataclasses.asdict(GemvGemmConfig())}]
    with tempfile.TemporaryDirectory() as out:
        results = precompile("sm_90", jobs, out)
        assert [r["status"] for r in results] == ["ok", "ok", "ok"], results
        counts = [sum(f.endswith(".cubin") for f in r["files"]) for r in results]
        assert counts == [4, 3, 0]  # trsv: 4 variants; symv: the kernel, then the finish with β = 0 and ≠ 0


def test_cli_tune_level2_writes_logic(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    if torch.cuda.is_available():
        pytest.skip("the tiny space is for the interpreter; the GPU run uses real spaces")
    for op, sizes in (("ger", {(40, 72), (24, 130)}), ("symv", {(40,), (75,)}), ("trsv", {(40,), (100,)})):
        assert main(["tune", "level2", "--op", op, "--dtype", "fp32", "--sizes", "tiny", "--space", "tiny",
                     "--no-plot", "--out", str(tmp_path)]) == 0
        assert "geometric-mean gain of tuned over the heuristic default" in capsys.readouterr().out
        lf = load_logic(tmp_path / "interpreter" / f"blas.{op}.fp32.yaml")
        assert {row.sizes for row in lf.table} == sizes
        assert {config.kernel for config in lf.solutions.values()} == {op}
        journal = (tmp_path / "interpreter" / f"blas.{op}.fp32.journal.jsonl").read_text()
        assert '"status": "ok"' in journal and '"status": "incorrect"' not in journal
    assert main(["tune", "level2", "--op", "ger", "--sizes", "4x5x6", "--out", str(tmp_path)]) == 2


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(0, 2000), incx=st.sampled_from([-3, -1, 0, 1, 2]), incy=st.sampled_from([-2, 1, 3]),
       dtype=st.sampled_from([torch.float32, torch.float64, torch.bfloat16]),
       shape=st.sampled_from([VectorConfig(64, 1, 2), VectorConfig(128, 3, 4), VectorConfig(256, 2, 2)]),
       seed=st.integers(0, 2**16))
def test_level1_fuzz_against_the_reference_blas(n: int, incx: int, incy: int, dtype: torch.dtype,
                                                shape: VectorConfig, seed: int, device: str) -> None:
    """Random lengths, increments (zero and negative included), dtypes and launch shapes against
    NumPy in fp64 with the reference BLAS's rules."""
    x = make(max(1, (n - 1) * abs(incx) + 1), dtype, device, seed)
    y = make(max(1, (n - 1) * abs(incy) + 1), dtype, device, seed + 1)
    xs, ys = f64(x)[positions(n, incx)], f64(y)[positions(n, incy)]
    size = max(n, 1)
    with space.forced(shape):
        close(dot(x, y, n=n, incx=incx, incy=incy), float(xs @ ys), dtype, 4 * math.sqrt(size))
        close(nrm2(x, n=n, incx=incx), float(np.sqrt(xs @ xs)), dtype, 2 * math.sqrt(size))
        close(asum(x, n=n, incx=incx), float(np.abs(xs).sum()) if incx > 0 else 0.0, dtype, 2 * size)
        for find, pick in ((iamax, np.argmax), (iamin, np.argmin)):
            assert find(x, n=n, incx=incx).item() == (int(pick(np.abs(xs))) if n and incx > 0 else -1)
        got = f64(axpy(0.75, x, y.clone(), n=n, incx=incx, incy=incy))
    want = f64(y)
    want[positions(n, incy)] = 0.75 * xs + ys
    close(got, want, dtype, 4)
