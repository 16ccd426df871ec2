"""tessera.rand Philox4x32-10 against Random123's known answers, an independent Python model of
cuRAND's device-API stream, and statistical tests."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats
import torch

from tessera import InvalidArgumentError, UnsupportedError
from tessera.rand import Generator, philox4x32_10
from tessera.rand.kernels.mrg import launch_mrg
from tessera.rand.kernels.philox import launch_stream
from tessera.rand.kernels.sobol import direction_numbers, launch_sobol
from tessera.rand.space import MrgConfig, PhiloxConfig, SobolConfig

MASK = 0xFFFFFFFF
# Random123 tests/kat_vectors, "philox4x32 10" lines: counter, key, expected output.
KAT = [
    ("00000000 00000000 00000000 00000000", "00000000 00000000", "6627e8d5 e169c58d bc57ac4c 9b00dbd8"),
    ("ffffffff ffffffff ffffffff ffffffff", "ffffffff ffffffff", "408f276d 41c83b0e a20bc7c6 6d5451fd"),
    ("243f6a88 85a308d3 13198a2e 03707344", "a4093822 299f31d0", "d16cfe09 94fdcceb 5001e420 24126ea1"),
]


def reference_philox(ctr: list[int], key: list[int]) -> list[int]:
    """Philox4x32-10 written from Salmon et al. (SC'11), independently of the kernel."""
    c, k = list(ctr), list(key)
    for round_ in range(10):
        if round_:
            k = [(k[0] + 0x9E3779B9) & MASK, (k[1] + 0xBB67AE85) & MASK]
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & MASK, (p0 >> 32) ^ c[3] ^ k[1], p0 & MASK]
    return c


def reference_words(seed: int, subsequence: int, offset: int, n: int) -> list[int]:
    """cuRAND device API: curand_init(seed, subsequence, offset), then n × curand()."""
    words = []
    for p in range(offset, offset + n):
        block = p // 4
        ctr = [block & MASK, block >> 32, subsequence & MASK, subsequence >> 32]
        words.append(reference_philox(ctr, [seed & MASK, seed >> 32])[p % 4])
    return words


def as_signed(words: list[int]) -> torch.Tensor:
    return torch.tensor([w - (1 << 32) if w >= 1 << 31 else w for w in words], dtype=torch.int32)


def unsigned(t: torch.Tensor) -> list[int]:
    return [v & MASK for v in t.cpu().tolist()]


def test_known_answer_vectors(device: str) -> None:
    ctr = torch.stack([as_signed([int(x, 16) for x in c.split()]) for c, _, _ in KAT]).to(device)
    key = torch.stack([as_signed([int(x, 16) for x in k.split()]) for _, k, _ in KAT]).to(device)
    out = philox4x32_10(ctr, key)
    assert [" ".join(f"{w:08x}" for w in unsigned(row)) for row in out] == [e for _, _, e in KAT]
    for c, k, e in KAT:  # the reference itself must pass the published vectors
        got = reference_philox([int(x, 16) for x in c.split()], [int(x, 16) for x in k.split()])
        assert " ".join(f"{w:08x}" for w in got) == e


def test_bijection_random_inputs(device: str) -> None:
    rng = np.random.default_rng(7)
    ctr = rng.integers(0, 2**32, size=(37, 4), dtype=np.uint64).tolist()
    key = rng.integers(0, 2**32, size=(37, 2), dtype=np.uint64).tolist()
    out = philox4x32_10(torch.stack([as_signed(c) for c in ctr]).to(device),
                        torch.stack([as_signed(k) for k in key]).to(device))
    assert [unsigned(row) for row in out] == [reference_philox(c, k) for c, k in zip(ctr, key, strict=True)]


SEEDS = [(0, 0), (1234, 5), (2**40 + 3, 2**33 + 1), (2**64 - 1, 2**64 - 1)]


@pytest.mark.parametrize("seed,subsequence", SEEDS)
@pytest.mark.parametrize("offset", [0, 1, 2, 3, 6, 2**35 + 1, 4 * (2**32 - 2) + 1])  # the last: a
# draw across the block counter's 2^32 boundary (the high counter word changes between programs)
def test_stream_words_follow_curand_layout(seed: int, subsequence: int, offset: int, device: str) -> None:
    g = Generator(seed=seed, subsequence=subsequence, offset=offset, device=device)
    got = unsigned(g.integers32(11))
    assert got == reference_words(seed, subsequence, offset, 11)
    assert g.offset == offset + 11


def test_draws_continue_where_the_last_stopped(device: str) -> None:
    one = Generator(seed=99, device=device)
    parts = torch.cat([one.integers32(5), one.integers32(7), one.integers32(1)])
    whole = Generator(seed=99, device=device).integers32(13)
    assert torch.equal(parts, whole)
    a = Generator(seed=3, device=device)
    first, second = a.normal(6), a.normal(4)
    assert torch.equal(torch.cat([first, second]), Generator(seed=3, device=device).normal(10))
    b = Generator(seed=3, offset=1, device=device)  # bf16: a word per pair; 5 values use 3 words
    first, second = b.normal(5, dtype=torch.bfloat16), b.normal(4, dtype=torch.bfloat16)
    assert b.offset == 1 + 3 + 2
    whole = Generator(seed=3, offset=1, device=device).normal(10, dtype=torch.bfloat16)
    assert torch.equal(first, whole[:5]) and torch.equal(second, whole[6:])


@pytest.mark.parametrize("kind,offset", [(0, 5), (0, 149), (2, 6), (2, 150), (2, 7), (5, 6), (5, 149)])
# block kernel (programs start at multiples of the config's block, 149 // 4 is not one), group kernel
def test_launch_configuration_never_changes_the_bits(kind: int, offset: int, device: str) -> None:
    outs = []
    dtype = {0: torch.int32, 5: torch.bfloat16}.get(kind, torch.float32)
    for config in (PhiloxConfig(16, 1), PhiloxConfig(64, 2), PhiloxConfig(256, 4)):
        out = torch.empty(1001, dtype=dtype, device=device)
        launch_stream(out, kind, 42, 7, offset, 0.0, 1.0, config)
        outs.append(out)
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[1], outs[2])
    if kind == 0:
        assert unsigned(outs[0]) == reference_words(42, 7, offset, 1001)


def _f32_uniform(words: list[int]) -> np.ndarray:
    x = np.array(words, dtype=np.float64).astype(np.float32)
    return x * np.float32(2.3283064e-10) + np.float32(1.1641532e-10)


@pytest.mark.parametrize("offset", [0, 3])
def test_uniform_fp32_is_curands_transform(offset: int, device: str) -> None:
    got = Generator(seed=11, offset=offset, device=device).uniform(50).cpu().numpy()
    ref = _f32_uniform(reference_words(11, 0, offset, 50))
    assert np.all(np.abs(got - ref) <= np.spacing(ref))  # ≤ 1 ulp: the GPU may fuse into an FMA
    assert got.min() > 0 and got.max() <= 1


def test_uniform_fp64_53_bits(device: str) -> None:
    for offset in (0, 1):  # aligned and misaligned pair paths
        got = Generator(seed=5, offset=offset, device=device).uniform(9, torch.float64).cpu().tolist()
        w = reference_words(5, 0, offset, 18)
        ref = [(w[2 * i] ^ (w[2 * i + 1] << 21)) * 2.0**-53 + 2.0**-54 for i in range(9)]
        assert got == ref


@pytest.mark.parametrize("offset", [0, 1, 2])
def test_normal_is_box_muller_on_word_pairs(offset: int, device: str) -> None:
    g = Generator(seed=21, offset=offset, device=device)
    got = g.normal(7, mean=1.5, std=2.0).cpu().double()
    assert g.offset == offset + 8  # an odd count consumes the whole last pair
    w = reference_words(21, 0, offset, 8)
    ref = []
    for i in range(0, 8, 2):
        u = float(_f32_uniform([w[i]])[0])
        v = w[i + 1] * 1.4629181e-09 + 7.3145904e-10
        s = math.sqrt(-2 * math.log(u))
        ref += [s * math.sin(v), s * math.cos(v)]
    assert torch.allclose(got, 1.5 + 2.0 * torch.tensor(ref[:7], dtype=torch.float64), atol=2e-5, rtol=2e-5)


def bf16_normal_reference(words: np.ndarray) -> np.ndarray:
    """Philox bf16 normals in fp64 (``kernels/philox.py``, kind 5): word t → values 2t, 2t+1 from
    u = (top 20 bits + ½)·2⁻²⁰ and the angle 2π·(low 12 bits as a signed number + ½)·2⁻¹²."""
    w = words.astype(np.int64)
    u = ((w >> 12) + 0.5) * 2.0**-20
    angle = ((w & 0xFFF) - ((w & 0x800) << 1) + 0.5) * (2 * math.pi / 4096)
    radius = np.sqrt(-2 * np.log(u))
    ref = np.empty(2 * len(w))
    ref[0::2], ref[1::2] = radius * np.sin(angle), radius * np.cos(angle)
    return ref


@pytest.mark.parametrize("offset", [0, 1, 3])
def test_bf16_normal_is_box_muller_on_one_word(offset: int, device: str) -> None:
    g = Generator(seed=21, offset=offset, device=device)
    got = g.normal(13, mean=1.5, std=2.0, dtype=torch.bfloat16).cpu().double().numpy()
    assert g.offset == offset + 7  # an odd count consumes the whole last word
    ref = 1.5 + 2.0 * bf16_normal_reference(np.array(reference_words(21, 0, offset, 7)))[:13]
    # one bf16 unit (the interpreter truncates), plus the GPU log2's error where u is near 1
    assert np.all(np.abs(got - ref) <= 2.0**-7 * np.abs(ref) + 2.0 * 6.4e-4), got - ref


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_dtypes_shapes_and_out(dtype: torch.dtype, device: str) -> None:
    g = Generator(seed=8, device=device)
    u = g.uniform((3, 4, 5), dtype)
    assert u.shape == (3, 4, 5) and u.dtype == dtype and bool((u > 0).all() & (u <= 1).all())
    out = torch.empty(10, 6, dtype=dtype, device=device)[:, ::2]  # non-contiguous
    assert g.normal((10, 3), dtype=dtype, out=out) is out and torch.isfinite(out.float()).all()
    assert g.uniform((0, 3), dtype).shape == (0, 3)
    assert (g.lognormal(20, dtype=dtype) > 0).all()


def test_statistics(device: str) -> None:
    n = 1 << 15
    g = Generator(seed=2024, device=device)
    u = g.uniform(n).cpu().double().numpy()
    counts, _ = np.histogram(u, bins=64, range=(0, 1))
    assert scipy.stats.chisquare(counts).pvalue > 1e-4
    assert abs(np.corrcoef(u[:-1], u[1:])[0, 1]) < 0.03
    z = g.normal(n).cpu().double().numpy()
    assert scipy.stats.kstest(z, "norm").pvalue > 1e-4
    assert abs(np.corrcoef(z[0::2], z[1::2])[0, 1]) < 0.03  # the two halves of each Box–Muller pair
    h = g.normal(n, dtype=torch.bfloat16).cpu().double().numpy()  # one word per pair
    assert scipy.stats.kstest(h, "norm").pvalue > 1e-4
    assert abs(np.corrcoef(h[0::2], h[1::2])[0, 1]) < 0.03
    assert abs(np.corrcoef(h[0:-2:2], h[2::2])[0, 1]) < 0.03  # neighbouring words' pairs
    assert abs(np.corrcoef(h[:-1] ** 2, h[1:] ** 2)[0, 1]) < 0.03  # a pair shares its radius: no
    # more dependence than Box–Muller's own (the squares of a true pair are uncorrelated)
    ln = g.lognormal(n, mean=0.5, std=0.75).cpu().double().numpy()
    assert scipy.stats.kstest((np.log(ln) - 0.5) / 0.75, "norm").pvalue > 1e-4  # no args=: some
    # SciPy releases (the H200 image's) pass them to ndtr wrongly
    other = Generator(seed=2024, subsequence=1, device=device).uniform(n).cpu().double().numpy()
    assert abs(np.corrcoef(u, other)[0, 1]) < 0.03


def test_bad_input(device: str) -> None:
    g = Generator(device=device)
    with pytest.raises(InvalidArgumentError, match=r"shape must be an integer or a sequence of integers"):
        g.uniform((3, -1))
    for shape in (None, 2.5, True, 10**20, (2, 2**63)):  # not a shape; too large for any tensor
        with pytest.raises(InvalidArgumentError, match="shape must be"):
            g.normal(shape)
    with pytest.raises(UnsupportedError, match="int8 is not supported"):
        g.uniform(4, torch.int8)
    with pytest.raises(InvalidArgumentError, match="name must be one of"):
        Generator("xorwow")
    with pytest.raises(InvalidArgumentError, match=r"seed must be an integer in \[0, "):
        Generator(seed=-1)
    with pytest.raises(InvalidArgumentError, match="std must be non-negative"):
        g.normal(3, std=-1.0)
    for lam in (-1.0, math.inf, math.nan):
        with pytest.raises(InvalidArgumentError, match="lam must be a finite number"):
            g.poisson(3, lam)
    with pytest.raises(UnsupportedError, match="poisson from mrg32k3a"):
        Generator("mrg32k3a", device=device).poisson(3, 2.0)
    with pytest.raises(InvalidArgumentError, match=r"counter.shape must be \(n, 4\)"):
        philox4x32_10(torch.zeros(3, 3, dtype=torch.int32, device=device),
                      torch.zeros(3, 2, dtype=torch.int32, device=device))
    before = g.offset
    with pytest.raises(InvalidArgumentError, match="out must be"):
        g.uniform(4, out=torch.empty(5, device=device))
    with pytest.raises(InvalidArgumentError, match="out must be"):
        g.lognormal(4, out=torch.empty(4, dtype=torch.float64, device=device))
    assert g.offset == before, "a refused draw must not consume the stream"
    with pytest.raises(InvalidArgumentError, match="offset after skip"):
        Generator("sobol32", dimensions=2, offset=10, device=device).skip(2**32 - 5)
    assert Generator(device=device).skip(10).offset == 10


def test_bad_arguments_refused_before_drawing(device: str) -> None:
    """What fuzzing the generators found: each refused with Tessera's error and its reason, and the
    stream not consumed (a device torch cannot parse and a string dtype used to raise torch's
    errors, lognormal returned int32 or complex values, and an expanded ``out`` failed in torch's
    copy after the draw)."""
    for bad in ("gpu", 3.5, True):
        with pytest.raises(InvalidArgumentError, match="device must be"):
            Generator(device=bad)
    with pytest.raises(InvalidArgumentError, match="scramble must be True or False"):
        Generator("sobol32", dimensions=2, scramble="yes", device=device)
    g = Generator(device=device)
    for draw in (lambda: g.uniform(4, "float32"), lambda: g.normal(4, dtype=None),
                 lambda: g.lognormal(4, dtype="float32"), lambda: g.poisson(4, 1.0, dtype="int64")):
        with pytest.raises(InvalidArgumentError, match=r"dtype must be a torch\.dtype"):
            draw()
    for dtype in (torch.int32, torch.complex64):
        with pytest.raises(UnsupportedError, match="is not supported"):
            g.lognormal(4, dtype=dtype)
    expanded = torch.empty(1, 4, device=device).expand(3, 4)
    for draw in (lambda: g.uniform((3, 4), out=expanded), lambda: g.lognormal((3, 4), out=expanded),
                 lambda: g.poisson((3, 4), 2.0, out=torch.empty(1, 4, dtype=torch.int64, device=device)
                                   .expand(3, 4)),
                 lambda: Generator("sobol32", dimensions=4, device=device).uniform((3, 4), out=expanded)):
        with pytest.raises(InvalidArgumentError, match=r"out.stride\(\) must be non-zero strides"):
            draw()
    assert g.offset == 0, "a refused draw must not consume the stream"


def test_numpy_integers_are_integers(device: str) -> None:
    """Seeds, offsets, shapes and dimensions given as NumPy integers (as torch takes them) draw
    what the Python ints draw; a NumPy bool is no integer."""
    import numpy as np

    mine = Generator(seed=np.int64(5), subsequence=np.uint64(2), offset=np.int32(4), device=device)
    assert torch.equal(mine.uniform((np.int64(3), 2)),
                       Generator(seed=5, subsequence=2, offset=4, device=device).uniform((3, 2)))
    assert Generator("sobol32", dimensions=np.int64(3), device=device).uniform(np.int16(4)).shape == (4, 3)
    with pytest.raises(InvalidArgumentError, match="shape must be"):
        mine.uniform((np.bool_(True), 2))


def _cuda_include_dirs() -> list[str]:
    """Where curand_kernel.h and the CUDA runtime headers may be: the toolkit or pip nvidia-* wheels."""
    import glob
    import os
    import sys

    toolkit = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "include")
    found = [d for d in (toolkit, "/usr/local/cuda/include") if os.path.isdir(d)]
    for root in sys.path:
        found += sorted(glob.glob(os.path.join(root, "nvidia", "*", "include")))
    return found


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_gpu_normal_accuracy_on_a_large_sample(dtype: torch.dtype) -> None:
    """The hardware log2/sin/cos path against Box–Muller in fp64 on the same (verified) words,
    2^20 values, u near 0 and near 1 included (bf16: one word per pair). Half-precision outputs
    take the hardware log2 up to u = 1 (no series): an absolute error up to sqrt(4e-7) where the
    radius is that small."""
    n = 1 << 20
    words = Generator(seed=77).integers32(n).cpu().numpy().view(np.uint32).astype(np.float64)
    got = Generator(seed=77).normal(n, dtype=dtype).cpu().double().numpy()
    if dtype == torch.bfloat16:
        ref = bf16_normal_reference(words[: n // 2])
    else:
        u = (words[0::2] + 0.5) * 2.0**-32
        angle = (words[1::2] + 0.5) * 2.0**-32 * 2 * math.pi
        radius = np.sqrt(-2 * np.log(u))
        ref = np.empty(n)
        ref[0::2], ref[1::2] = radius * np.sin(angle), radius * np.cos(angle)
    rounding = {torch.float32: 0.0, torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}[dtype]
    near_one = 0.0 if dtype == torch.float32 else 6.4e-4
    bound = 4e-6 * (1 + np.abs(ref)) + rounding * np.abs(ref) + near_one
    assert np.all(np.abs(got - ref) <= bound), np.max(np.abs(got - ref) - bound)


@pytest.mark.gpu
def test_gpu_fp16_normals_are_the_rounded_fp32_normals() -> None:
    """fp16 normals (their own, shorter instruction path) round the fp32 normals of the same
    stream: they differ in a few values per 10^4, by one unit in the last place, or by the
    near-u = 1 error of the shorter path where the value is tiny."""
    n = 1 << 22
    rounded = Generator(seed=5).normal(n).to(torch.float16).double()
    half = Generator(seed=5).normal(n, dtype=torch.float16).double()
    differ = rounded != half
    excess = ((rounded - half).abs() - (2.0**-10 * rounded.abs() + 6.4e-4)).max().item()
    print(f"{differ.double().mean().item():.2e} of values differ; max excess {excess:.2e}")
    assert differ.double().mean() < 1e-3, differ.double().mean()
    assert excess <= 0, excess


@pytest.mark.gpu
def test_gpu_bf16_normal_tails() -> None:
    """2^26 bf16 normals: the fractions beyond 3, 4 and 5 (thresholds halfway between bf16
    values, so rounding moves no value across them) within 5 binomial σ of the normal's, and
    the largest |z| at the documented end of the tails, √(2·21·ln 2) = 5.396 → bf16 5.40625."""
    n = 1 << 26
    z = Generator(seed=31).normal(n, dtype=torch.bfloat16).float().abs()
    # beyond 5 the design's count may differ by up to 20 % more: the radius uniform's first cell
    # (probability 2⁻²⁰, radii past 5.27) sits at its midpoint, radius 5.40
    for t, slack in ((3.0078125, 0.0), (4.015625, 0.0), (5.015625, 0.2)):
        expected = n * math.erfc(t / math.sqrt(2))
        count = int((z > t).sum())
        assert abs(count - expected) <= 5 * math.sqrt(expected) + slack * expected, (t, count, expected)
    assert 5.0 <= z.max().item() <= 5.40625


@pytest.mark.gpu
def test_matches_curand_device_api() -> None:
    """The raw stream equals curand() after curand_init(seed, subsequence, offset), via CuPy."""
    cupy = pytest.importorskip("cupy")
    source = r"""
    #include <curand_kernel.h>
    extern "C" __global__ void draw(unsigned int* out, unsigned long long seed,
                                    unsigned long long subsequence, unsigned long long offset, int n) {
        if (blockIdx.x != 0 || threadIdx.x != 0) return;
        curandStatePhilox4_32_10_t state;
        curand_init(seed, subsequence, offset, &state);
        for (int i = 0; i < n; ++i) out[i] = curand(&state);
    }
    """
    options = tuple(f"-I{d}" for d in _cuda_include_dirs())
    draw = cupy.RawModule(code=source, options=options).get_function("draw")
    for seed, subsequence, offset in [(0, 0, 0), (1234, 7, 3), (2**40 + 1, 2**33, 2**20 + 2)]:
        out = cupy.zeros(257, dtype=cupy.uint32)
        draw((1,), (1,), (out, cupy.uint64(seed), cupy.uint64(subsequence), cupy.uint64(offset),
                          cupy.int32(257)))
        ours = Generator(seed=seed, subsequence=subsequence, offset=offset).integers32(257)
        assert unsigned(ours) == [int(v) for v in out.get()]


def _scipy_sobol_ints(dims: int, n: int, skip: int = 0) -> np.ndarray:
    from scipy.stats import qmc

    engine = qmc.Sobol(d=dims, scramble=False)
    if skip:
        engine.fast_forward(skip)
    return (engine.random(n) * 2.0**32).astype(np.uint64)


@pytest.mark.filterwarnings("ignore:The balance properties")
@pytest.mark.parametrize("dims,skip", [(1, 0), (5, 0), (1024, 0), (7, 13)])
def test_sobol_bit_exact_with_scipy(dims: int, skip: int, device: str) -> None:
    g = Generator("sobol32", dimensions=dims, offset=skip, device=device)
    first, second = g.integers32((40, dims)), g.integers32(24)  # n alone means (n, dims)
    got = np.array([[v & MASK for v in row] for row in torch.cat([first, second]).cpu().tolist()],
                   dtype=np.uint64)
    assert np.array_equal(got, _scipy_sobol_ints(dims, 64, skip))
    assert g.offset == skip + 64


@pytest.mark.filterwarnings("ignore:The balance properties")
@pytest.mark.parametrize("dims,first,values,steps", [(3, 37, 16, 2), (40, 5, 64, 4), (1, 1, 1, 1)])
def test_sobol_tiling_never_changes_the_points(dims: int, first: int, values: int, steps: int,
                                               device: str) -> None:
    """Many programs, partial first and last tiles, several dimension tiles."""
    directions = torch.from_numpy(np.ascontiguousarray(direction_numbers()[:dims].T.view(np.int32)))
    out = torch.empty(100, dims, dtype=torch.int32, device=device)
    launch_sobol(out, directions.to(device), None, first, 0, SobolConfig(values, steps, 4))
    got = out.cpu().numpy().astype(np.int64) & MASK
    assert np.array_equal(got, _scipy_sobol_ints(dims, 100, first).astype(np.int64))


def test_sobol_uniform_transform_and_dtypes(device: str) -> None:
    raw = Generator("sobol32", dimensions=3, device=device).integers32(32)
    ints = raw.cpu().numpy().astype(np.int64) & MASK
    u64 = Generator("sobol32", dimensions=3, device=device).uniform(32, torch.float64).cpu().numpy()
    assert np.array_equal(u64, ints * 2.0**-32 + 2.0**-33)
    u32 = Generator("sobol32", dimensions=3, device=device).uniform(32).cpu().numpy()
    ref = _f32_uniform((ints.reshape(-1)).tolist()).reshape(32, 3)
    assert np.all(np.abs(u32 - ref) <= np.spacing(ref))
    for dtype in (torch.float16, torch.bfloat16):
        u = Generator("sobol32", dimensions=3, device=device).uniform(16, dtype)
        assert bool((u > 0).all() & (u <= 1).all())


@pytest.mark.parametrize("scramble", [False, True])
def test_sobol_balance_each_dimension(scramble: bool, device: str) -> None:
    """The first 2^m points put exactly one point in each interval [j/2^m, (j+1)/2^m), per dimension."""
    u = Generator("sobol32", dimensions=64, scramble=scramble, seed=77, device=device).uniform(
        256, torch.float64).cpu().numpy()
    for d in range(64):
        assert np.array_equal(np.sort(np.floor(u[:, d] * 256)), np.arange(256))


def test_sobol_scramble_is_a_per_dimension_digital_shift(device: str) -> None:
    plain = Generator("sobol32", dimensions=8, device=device).integers32(16)
    shifted = Generator("sobol32", dimensions=8, scramble=True, seed=5, device=device).integers32(16)
    xor = (plain ^ shifted).cpu()
    assert torch.equal(xor, xor[0].expand_as(xor)) and bool((xor[0] != 0).all())
    again = Generator("sobol32", dimensions=8, scramble=True, seed=5, device=device).integers32(16)
    assert torch.equal(shifted, again)


def test_sobol_bad_input(device: str) -> None:
    for dims in (None, 0, 1025):
        with pytest.raises(InvalidArgumentError, match=r"dimensions must be an integer in \[1, 1024\]"):
            Generator("sobol32", dimensions=dims, device=device)
    g = Generator("sobol32", dimensions=4, device=device)
    with pytest.raises(InvalidArgumentError, match=r"shape must be \(n, 4\)"):
        g.uniform((10, 3))
    with pytest.raises(InvalidArgumentError, match="shape must be an integer or a sequence"):
        g.uniform(None)
    with pytest.raises(UnsupportedError, match="normal draws from sobol32"):
        g.normal(4)
    with pytest.raises(InvalidArgumentError, match="at most 2\\*\\*32"):
        Generator("sobol32", dimensions=2, offset=2**32 - 2, device=device).uniform(5)


M1, M2 = 4294967087, 4294944443


def _mat_power_apply(rows: list[list[int]], exponent: int, v: list[int], m: int) -> list[int]:
    """rows^exponent · v mod m with Python integers (square-and-multiply), for the test only."""
    def mul(a: list[list[int]], b: list[list[int]]) -> list[list[int]]:
        return [[sum(a[i][k] * b[k][j] for k in range(3)) % m for j in range(3)] for i in range(3)]
    result, base = [[int(i == j) for j in range(3)] for i in range(3)], [[x % m for x in r] for r in rows]
    while exponent:
        if exponent & 1:
            result = mul(result, base)
        base, exponent = mul(base, base), exponent >> 1
    return [sum(result[i][k] * v[k] for k in range(3)) % m for i in range(3)]


def reference_mrg32k3a(seed: int, subsequence: int, offset: int, n: int) -> list[float]:
    """L'Ecuyer (1999) MRG32k3a in exact integers; seeding and 2^76 subsequences as documented."""
    lo, hi = seed & MASK, seed >> 32
    x1 = [lo % M1 or 12345, hi % M1 or 12345, 12345]
    x2 = [hi % M2 or 12345, lo % M2 or 12345, 12345]
    a1 = [[0, 1, 0], [0, 0, 1], [-810728, 1403580, 0]]
    a2 = [[0, 1, 0], [0, 0, 1], [-1370589, 0, 527612]]
    x1 = _mat_power_apply(a1, subsequence * 2**76 + offset, x1, M1)
    x2 = _mat_power_apply(a2, subsequence * 2**76 + offset, x2, M2)
    out = []
    for _ in range(n):
        p1 = (1403580 * x1[1] - 810728 * x1[0]) % M1
        p2 = (527612 * x2[2] - 1370589 * x2[0]) % M2
        x1, x2 = [x1[1], x1[2], p1], [x2[1], x2[2], p2]
        out.append((p1 - p2 + M1 if p1 <= p2 else p1 - p2) * 2.328306549295727688e-10)
    return out


def test_mrg32k3a_first_value_is_lecuyers() -> None:
    assert reference_mrg32k3a(0, 0, 0, 1)[0] == pytest.approx(0.1270111220465771, abs=1e-15)


@pytest.mark.parametrize("seed,subsequence,offset", [(0, 0, 0), (2**40 + 17, 0, 3), (9, 3, 2**40 + 5)])
def test_mrg32k3a_bit_exact_with_the_reference(seed: int, subsequence: int, offset: int,
                                               device: str) -> None:
    g = Generator("mrg32k3a", seed=seed, subsequence=subsequence, offset=offset, device=device)
    got = torch.cat([g.uniform(70, torch.float64), g.uniform(30, torch.float64)]).cpu().tolist()
    assert got == reference_mrg32k3a(seed, subsequence, offset, 100)
    assert g.offset == offset + 100


@pytest.mark.parametrize("int_m1,int_m2", [(False, False), (False, True), (True, False), (True, True)])
def test_mrg32k3a_lane_layout_and_arithmetic_never_change_the_values(int_m1: bool, int_m2: bool,
                                                                      device: str) -> None:
    """Lanes of 32…256 values, jumped there with different bits, in programs of 16…128 lanes, each
    component in fp64 or integer lanes."""
    ref = reference_mrg32k3a(5, 2, 2**33 + 7, 3000)
    for block, lanes, max_chunk in ((16, 100, 32), (32, 40, 64), (128, 1, 256)):
        config = MrgConfig(block, lanes, max_chunk, 4, int_m1, int_m2)
        out = torch.empty(3000, dtype=torch.float64, device=device)
        launch_mrg(out, 1, 5, 2, 2**33 + 7, 0.0, 1.0, config)
        assert out.cpu().tolist() == ref, config


def test_mrg32k3a_transforms_and_statistics(device: str) -> None:
    ref = reference_mrg32k3a(4, 1, 0, 9)
    ints = Generator("mrg32k3a", seed=4, subsequence=1, device=device).integers32(9)
    assert [v & MASK for v in ints.cpu().tolist()] == [math.floor(u * 2**32) for u in ref]
    g = Generator("mrg32k3a", seed=4, subsequence=1, device=device)
    z = g.normal(7, dtype=torch.float64).cpu().tolist()
    assert g.offset == 8
    pairs = [(ref[i], ref[i + 1]) for i in range(0, 8, 2)]
    expect = [f(2 * math.pi * v) * math.sqrt(-2 * math.log(u))
              for u, v in pairs for f in (math.sin, math.cos)]
    assert z == pytest.approx(expect[:7], rel=1e-12, abs=1e-12)
    u = Generator("mrg32k3a", seed=8, device=device).uniform(1 << 14).cpu().double().numpy()
    assert scipy.stats.kstest(u, "uniform").pvalue > 1e-4
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        v = Generator("mrg32k3a", seed=1, device=device).uniform(64, dtype)
        assert bool((v > 0).all() & (v <= 1).all())


@pytest.mark.parametrize("lam", [0.0, 0.7, 15.9, 16.0, 1000.0])
def test_poisson_mean_variance_and_offsets(lam: float, device: str) -> None:
    n = 1 << 12
    g = Generator(seed=31, device=device)
    k = g.poisson(n, lam).cpu().double().numpy()
    assert g.offset == n * (1 if lam < 16 else 16)
    assert (k >= 0).all() and np.array_equal(k, np.floor(k))
    if lam == 0:
        assert not k.any()
        return
    sigma = math.sqrt(lam)
    assert abs(k.mean() - lam) < 5 * sigma / math.sqrt(n)
    assert abs(k.var() / lam - 1) < 5 * math.sqrt(2 / n) + 0.01


@pytest.mark.parametrize("device,error,message", [
    ("beyond", InvalidArgumentError, "device must be a GPU torch sees"),
    ("meta", UnsupportedError, "device meta is not supported")])
def test_a_device_tessera_cannot_draw_on_is_refused_before_drawing(device: str, error: type,
                                                                    message: str) -> None:
    """A generator made for a GPU torch does not see (one past the last) or for a device Tessera
    does not run on: each draw is refused with a TesseraError (torch's own assertion before), the
    offset unchanged."""
    if device == "beyond":
        device = f"cuda:{torch.cuda.device_count() if torch.cuda.is_available() else 0}"
    g = Generator(device=device)
    sobol = Generator("sobol32", dimensions=2, device=device)
    for draw in (lambda: g.uniform(4), lambda: g.poisson(4, 3.0), lambda: g.normal(4, out=torch.empty(4)),
                 lambda: sobol.uniform((3, 2))):
        with pytest.raises(error, match=message):
            draw()
    assert g.offset == 0 and sobol.offset == 0


def test_poisson_int32_counts_refuse_a_lambda_they_could_overflow(device: str) -> None:
    """Counts around λ ≈ 2³¹ overflowed int32 into −2³¹ (the interpreter) or saturated (a GPU):
    such λ are refused for int32, and at the bound every count fits and equals the int64 draw's."""
    g = Generator(seed=9, device=device)
    bound = math.floor((2**31 - 1) - 10 * math.sqrt(2**31 - 1))
    with pytest.raises(InvalidArgumentError, match=f"lam must be at most {bound} for int32"):
        g.poisson(8, 2.0**31 - 1000, dtype=torch.int32)
    assert g.offset == 0
    k32 = g.poisson(64, float(bound), dtype=torch.int32)
    k64 = Generator(seed=9, device=device).poisson(64, float(bound))
    assert bool((k32 > 0).all()) and torch.equal(k32.long(), k64)
    assert float((k64.double() - bound).abs().max()) < 6 * math.sqrt(bound)


@pytest.mark.parametrize("lam", [4.0, 50.0])
def test_poisson_goodness_of_fit(lam: float, device: str) -> None:
    n = 1 << 13
    k = Generator(seed=5, subsequence=3, device=device).poisson(n, lam).cpu().numpy()
    low, high = int(scipy.stats.poisson.ppf(0.01, lam)), int(scipy.stats.poisson.ppf(0.99, lam))
    observed, _ = np.histogram(np.clip(k, low, high), bins=np.arange(low, high + 2) - 0.5)
    expected = scipy.stats.poisson.pmf(np.arange(low, high + 1), lam)
    expected[0] += scipy.stats.poisson.cdf(low - 1, lam)
    expected[-1] += scipy.stats.poisson.sf(high, lam)
    assert scipy.stats.chisquare(observed, expected * n / expected.sum()).pvalue > 1e-4
