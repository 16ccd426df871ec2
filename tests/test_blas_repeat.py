"""Repeat level-2 calls and level-1 reductions replay the first call's launches
(``tessera.blas.repeat``): right on new operands of the same signature (fp64 NumPy references),
each result a tensor of its own, taken only where the signature and the operands' places allow,
and never where the full path would refuse the call."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import numpy as np
import pytest
import torch

from tessera import InvalidArgumentError
from tessera.blas import gemv, ger, level1, level2, repeat, space, symv
from tessera.blas.kernels.level2 import GemvConfig, GemvGemmConfig, SymvConfig
from tessera.tuning import logic


def _sym(a: torch.Tensor, lower: bool) -> np.ndarray:
    """The symmetric matrix symv reads from ``a``'s upper (or lower) triangle, in fp64."""
    d = a.double().cpu().numpy()
    tri = np.tril(d) if lower else np.triu(d)
    return tri + tri.T - np.diag(np.diag(d))


@pytest.fixture
def full_paths(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many calls took the full path (validated their matrix), counted by call."""
    counted: list[int] = []
    matrix = level2._matrix

    def counting(name: str, a: object) -> torch.Tensor:
        counted.append(1)
        return matrix(name, a)

    monkeypatch.setattr(level2, "_matrix", counting)
    repeat._RECIPES.clear()
    return counted


def _operands(n: int, seed: int, device: str, dtype: torch.dtype = torch.float64
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return tuple(t.to(dtype).to(device) for t in (torch.randn(n, n, generator=gen, dtype=torch.float64),
                                                   torch.randn(n, generator=gen, dtype=torch.float64),
                                                   torch.randn(n, generator=gen, dtype=torch.float64)))


@pytest.mark.parametrize("lower", [False, True])
def test_symv_repeats_on_new_operands(lower: bool, device: str, full_paths: list[int]) -> None:
    """Three calls of one signature on different data: one full path, two replays, each right;
    then the other triangle (another signature) takes the full path and reads its own triangle."""
    n = 45
    with space.forced(SymvConfig(16, 2, 2)):
        for seed in range(3):
            a, x, y = _operands(n, seed, device)
            got = symv(a, x, y.clone(), alpha=0.5, beta=-2.0, lower=lower)
            want = 0.5 * _sym(a, lower) @ x.cpu().numpy() - 2.0 * y.cpu().numpy()
            np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-12, atol=1e-12)
        assert len(full_paths) == 1
        a, x, y = _operands(n, 7, device)
        got = symv(a, x, y.clone(), alpha=0.5, beta=-2.0, lower=not lower)
        want = 0.5 * _sym(a, not lower) @ x.cpu().numpy() - 2.0 * y.cpu().numpy()
        np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-12, atol=1e-12)
    assert len(full_paths) == 2


def test_symv_repeat_makes_a_new_result(device: str, full_paths: list[int]) -> None:
    """y = None: each repeat call returns a vector of its own, not the first call's."""
    results = []
    with space.forced(SymvConfig(16, 2, 2)):
        for seed in range(2):
            a, x, _ = _operands(33, seed, device)
            results.append(symv(a, x))
            np.testing.assert_allclose(results[-1].cpu().numpy(), _sym(a, False) @ x.cpu().numpy(),
                                       rtol=1e-12, atol=1e-12)
    assert len(full_paths) == 1
    assert results[0].data_ptr() != results[1].data_ptr()
    assert not torch.equal(results[0], results[1])


def test_batched_symv_repeats(device: str, full_paths: list[int]) -> None:
    """A batch of three matrices and vectors, twice (the replay indexes the batch as recorded)."""
    n = 20
    with space.forced(SymvConfig(8, 2, 2)):
        for seed in range(2):
            gen = torch.Generator().manual_seed(seed)
            a = torch.randn(3, n, n, generator=gen, dtype=torch.float64).to(device)
            x = torch.randn(3, n, generator=gen, dtype=torch.float64).to(device)
            got = symv(a, x)
            for b in range(3):
                np.testing.assert_allclose(got[b].cpu().numpy(), _sym(a[b], False) @ x[b].cpu().numpy(),
                                           rtol=1e-12, atol=1e-12)
    assert len(full_paths) == 1


@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("config", [GemvConfig(16, 32, 4, 64), GemvGemmConfig()], ids=["kernel", "gemm"])
def test_gemv_repeats_on_new_operands(trans: bool, config: object, device: str,
                                      full_paths: list[int]) -> None:
    """gemv through its kernel and as a one-row GEMM (whose launches the recipe replays with the
    rows and the matrix as the views the GEMM took), β ≠ 0 and β = 0 with NaN in y."""
    m, n = 37, 70
    with space.forced(config):
        for beta in (0.0, 1.5):
            for seed in range(3):
                gen = torch.Generator().manual_seed(seed)
                a = torch.randn(m, n, generator=gen, dtype=torch.float64)
                x = torch.randn(m if trans else n, generator=gen, dtype=torch.float64)
                y = torch.randn(n if trans else m, generator=gen, dtype=torch.float64)
                want = 0.5 * (a.t() if trans else a).numpy() @ x.numpy() + beta * y.numpy()
                if beta == 0.0:
                    y[2] = float("nan")
                got = gemv(a.to(device), x.to(device), y.to(device), alpha=0.5, beta=beta, trans=trans)
                np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-12, atol=1e-12)
    assert len(full_paths) == 2  # one a β


def test_a_repeat_call_whose_output_meets_an_input_takes_the_full_path(device: str,
                                                                          full_paths: list[int]) -> None:
    """The second call's y has the first's layout but lies in A's last row: the full path runs
    and refuses it, as it refuses such a first call."""
    n = 24
    buffer = torch.randn(n * n + n, dtype=torch.float64).to(device)
    a = buffer[: n * n].view(n, n)
    x = torch.randn(n, dtype=torch.float64).to(device)
    with space.forced(SymvConfig(8, 2, 2)):
        symv(a, x, buffer[n * n:])  # y right after A: apart
        with pytest.raises(InvalidArgumentError, match="y"):
            symv(a, x, buffer[n * n - n: n * n])
    assert len(full_paths) == 2


def test_a_written_vector_that_autograd_tracks_is_refused_on_repeat(device: str,
                                                                    full_paths: list[int]) -> None:
    """A y that comes to require a gradient changes the signature: the full path refuses it."""
    a, x, y = _operands(16, 0, device)
    with space.forced(SymvConfig(8, 2, 2)):
        symv(a, x, y)
        with pytest.raises(InvalidArgumentError, match="gradient"):
            symv(a, x, y.clone().requires_grad_())
    assert len(full_paths) == 2


def test_forced_configs_and_logic_reloads_are_part_of_the_signature(device: str,
                                                                    full_paths: list[int]) -> None:
    """Another forced configuration, or reloaded logic, is another signature: no stale replay."""
    a, x, y = _operands(40, 0, device)
    want = _sym(a, False) @ x.cpu().numpy()
    for config in (SymvConfig(8, 2, 2), SymvConfig(16, 3, 4), SymvConfig(8, 2, 2)):
        with space.forced(config):
            np.testing.assert_allclose(symv(a, x, y).cpu().numpy(), want, rtol=1e-12, atol=1e-12)
    assert len(full_paths) == 2
    logic.reload()
    with space.forced(SymvConfig(8, 2, 2)):
        symv(a, x, y)
    assert len(full_paths) == 3


def test_subclasses_and_numpy_scalars_take_the_full_path(device: str, full_paths: list[int]) -> None:
    """Only exact tensors and Python scalars have signatures."""
    a, x, y = _operands(16, 0, device)
    with space.forced(SymvConfig(8, 2, 2)):
        for _ in range(2):
            symv(a, x, y, alpha=np.float64(0.5))
        for _ in range(2):
            symv(torch.nn.Parameter(a, requires_grad=False), x, y)
    assert len(full_paths) == 4


def test_ger_repeats_and_refuses_a_vector_inside_the_matrix(device: str, full_paths: list[int]) -> None:
    """ger writes A: three calls on new data agree with fp64; then a repeat call whose x lies in
    A's first row (x's layout as before) takes the full path, which refuses it."""
    m, n = 30, 50
    for seed in range(3):
        gen = torch.Generator().manual_seed(seed)
        a = torch.randn(m, n, generator=gen, dtype=torch.float64)
        x = torch.randn(m, generator=gen, dtype=torch.float64)
        y = torch.randn(n, generator=gen, dtype=torch.float64)
        want = a.numpy() + 0.25 * np.outer(x.numpy(), y.numpy())
        got = ger(0.25, x.to(device), y.to(device), a.to(device))
        np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-12, atol=1e-12)
    assert len(full_paths) == 1
    a = torch.randn(m, n, dtype=torch.float64).to(device)
    with pytest.raises(InvalidArgumentError, match="a"):
        ger(0.25, a[0, :m], torch.randn(n, dtype=torch.float64).to(device), a)
    assert len(full_paths) == 2


@pytest.fixture
def vectors_validated(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many level-1 vectors the full path validated (the fast path validates none)."""
    counted: list[int] = []

    class Counted(level1.Vector):
        def __init__(self, *args: object, **kwargs: object) -> None:
            counted.append(1)
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(level1, "Vector", Counted)
    repeat._RECIPES.clear()
    return counted


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_reductions_repeat_on_new_operands(dtype: torch.dtype, device: str,
                                           vectors_validated: list[int]) -> None:
    """dot, dotc, nrm2, asum, iamax and iamin three times each on new data: right each time
    (fp64 NumPy), each result a tensor of its own in the routine's dtype, validated once."""
    n = 300  # one program in the interpreter's shape: the result is the launch's partial itself
    results: dict[str, list[torch.Tensor]] = {}
    for seed in range(3):
        gen = torch.Generator().manual_seed(seed)
        x64, y64 = (torch.randn(n, generator=gen, dtype=torch.float64) for _ in range(2))
        x, y = x64.to(dtype).to(device), y64.to(dtype).to(device)
        xs, ys = x.double().cpu().numpy(), y.double().cpu().numpy()
        want = {"dot": xs @ ys, "dotc": xs @ ys, "nrm2": np.linalg.norm(xs), "asum": np.abs(xs).sum(),
                "iamax": np.argmax(np.abs(xs)), "iamin": np.argmin(np.abs(xs))}
        got = {"dot": level1.dot(x, y), "dotc": level1.dotc(x, y), "nrm2": level1.nrm2(x),
               "asum": level1.asum(x), "iamax": level1.iamax(x), "iamin": level1.iamin(x)}
        tol = 1e-2 if dtype == torch.bfloat16 else 1e-5
        for name, value in got.items():
            assert value.dtype == (torch.int64 if name.startswith("ia") else dtype), name
            assert value.shape == (), name
            if name.startswith("ia"):
                assert int(value) == want[name], name
            else:
                assert float(value) == pytest.approx(float(want[name]), rel=tol, abs=tol), name
            results.setdefault(name, []).append(value)
    assert len(vectors_validated) == 8  # dot and dotc validate x and y, the others x, once each
    for name, values in results.items():
        assert len({v.data_ptr() for v in values}) == 3, name


def test_batched_nrm2_repeats(device: str, vectors_validated: list[int]) -> None:
    """A batch of rows twice: one norm a row, right both times, validated once."""
    for seed in range(2):
        x = torch.randn(5, 40, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
        got = level1.nrm2(x.to(device))
        np.testing.assert_allclose(got.cpu().numpy(), np.linalg.norm(x.numpy(), axis=1), rtol=1e-12)
    assert len(vectors_validated) == 1


def test_a_dot_of_several_programs_repeats(device: str, vectors_validated: list[int]) -> None:
    """A dot over several programs adds their partials with torch: a repeat call replays the launch
    into a new buffer and takes the same sum (``level1._Total``) — right each time, validated once."""
    from tessera.blas.kernels.level1 import VectorConfig

    with space.forced(VectorConfig(32, 2, 1)):
        for seed in range(3):
            x, y = (torch.randn(500, generator=torch.Generator().manual_seed(seed + k), dtype=torch.float64)
                    for k in (0, 9))
            assert float(level1.dot(x.to(device), y.to(device))) == pytest.approx(float(x @ y), rel=1e-12)
            assert float(level1.asum(x.to(device))) == pytest.approx(float(x.abs().sum()), rel=1e-12)
    assert len(vectors_validated) == 3


@pytest.fixture
def recordings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times a call recorded its launches for a recipe."""
    counted: list[int] = []
    recording = repeat.launch.recording

    def counting() -> object:
        counted.append(1)
        return recording()

    monkeypatch.setattr(repeat.launch, "recording", counting)
    return counted


def test_a_signature_without_a_recipe_is_recorded_once(device: str, vectors_validated: list[int],
                                                        recordings: list[int]) -> None:
    """A complex dot's launch takes x's real view (another dtype than x): no recipe. Every call is
    validated and right, and only the first records its launches (the others skip the attempt)."""
    for seed in range(3):
        gen = torch.Generator().manual_seed(seed)
        x, y = (torch.randn(64, generator=gen, dtype=torch.complex128) for _ in range(2))
        got = level1.dot(x.to(device), y.to(device))
        assert complex(got) == pytest.approx(complex((x * y).sum()), rel=1e-12)
    assert len(vectors_validated) == 6
    assert len(recordings) == 1


_SCALARS = ((0.5, 1.5), (-0.75, 2.25), (1.25, -0.5))  # none 0 or ±1: one signature


def _level2_call(routine: str, seed: int, alpha: float, beta: float, device: str
                 ) -> tuple[torch.Tensor, np.ndarray]:
    """One call of a level-2 routine on new fp64 operands, and its fp64 NumPy reference."""
    gen = torch.Generator().manual_seed(seed)
    a, x, y = (torch.randn(*shape, generator=gen, dtype=torch.float64) for shape in ((40, 40), (40,), (40,)))
    d = {name: t.clone().to(device) for name, t in (("a", a), ("x", x), ("y", y))}  # written in place
    if routine == "ger":
        return ger(alpha, d["x"], d["y"], d["a"]), a.numpy() + alpha * np.outer(x.numpy(), y.numpy())
    if routine == "symv":
        return (symv(d["a"], d["x"], d["y"], alpha=alpha, beta=beta),
                alpha * _sym(a, False) @ x.numpy() + beta * y.numpy())
    trans = routine.startswith("gemv T")
    return (gemv(d["a"], d["x"], d["y"], alpha=alpha, beta=beta, trans=trans),
            alpha * (a.t() if trans else a).numpy() @ x.numpy() + beta * y.numpy())


_LEVEL2 = {"gemv": GemvConfig(16, 32, 4, 64), "gemv T": GemvConfig(16, 32, 4, 64),
           "gemv as a GEMM": GemvGemmConfig(), "gemv T as a GEMM": GemvGemmConfig(),
           "symv": SymvConfig(16, 2, 2), "ger": None}


@pytest.mark.parametrize("routine", list(_LEVEL2))
def test_level2_repeats_take_new_scalars(routine: str, device: str, full_paths: list[int]) -> None:
    """A new alpha and beta each call (an iterative method's): one full path, then replays with the
    new values, each right; β = 0 (y not read) and α = 1 are other signatures."""
    config = _LEVEL2[routine]
    with space.forced(config) if config is not None else contextlib.nullcontext():
        for seed, (alpha, beta) in enumerate(_SCALARS):
            got, want = _level2_call(routine, seed, alpha, beta, device)
            np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-12, atol=1e-12)
        assert len(full_paths) == 1
        for seed, (alpha, beta) in enumerate(((0.5, 0.0), (1.0, 2.0), (1.0, 3.0)), 10):
            got, want = _level2_call(routine, seed, alpha, beta, device)
            np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-12, atol=1e-12)
    # β = 0 and α = 1 record once each; (1, 3) replays (1, 2)'s recipe with β alone put in; ger has no β
    assert len(full_paths) == (2 if routine == "ger" else 3)


@pytest.mark.parametrize("routine", [*_LEVEL2, "axpy", "scal", "rot"])
def test_the_recorded_float_arguments_are_the_scalars(routine: str, device: str,
                                                      full_paths: list[int]) -> None:
    """Every float a recorded launch takes is alpha, beta (c, s) or a constant 0 or 1: a value
    derived from them (−α, α·β) would be replayed stale, since only the scalars' own places are
    rewritten."""
    alpha, beta = 0.3125, -1.8125
    if routine in _LEVEL2:
        config = _LEVEL2[routine]
        with space.forced(config) if config is not None else contextlib.nullcontext():
            _level2_call(routine, 0, alpha, beta, device)
    else:
        x, y = (torch.randn(64, dtype=torch.float64).to(device) for _ in range(2))
        _map_call(routine, x, y, alpha, beta)[0]()
    (recipe,) = repeat._RECIPES.recipes()
    floats = {arg for replay in recipe.replays for arg in replay.call.args if type(arg) is float}
    assert floats - {alpha, beta} <= {0.0, 1.0}
    assert alpha in floats
    assert any(recipe.slots), "the scalars' places"


def test_equal_scalars_key_the_recipe_by_value(device: str, full_paths: list[int]) -> None:
    """alpha = beta on the first call: which argument is which cannot be told, so that recipe
    replays those values only; a later call with two values records one that takes any."""
    calls = [((0.5, 0.5), 1), ((0.5, 0.5), 1), ((0.25, 0.75), 2), ((0.3, 0.3), 2), ((2.5, -0.5), 2)]
    with space.forced(GemvConfig(16, 32, 4, 64)):
        for seed, ((alpha, beta), paths) in enumerate(calls):
            got, want = _level2_call("gemv", seed, alpha, beta, device)
            np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-12, atol=1e-12)
            assert len(full_paths) == paths, (alpha, beta)


_Effect = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


def _map_call(routine: str, x: torch.Tensor, y: torch.Tensor, a: float, b: float
              ) -> tuple[Callable[[], object], _Effect]:
    """A level-1 element-wise call with scalars a (and b), and its effect on (x, y) in fp64."""
    if routine == "axpy":
        return lambda: level1.axpy(a, x, y), lambda xs, ys: (xs, a * xs + ys)
    if routine == "scal":
        return lambda: level1.scal(a, x), lambda xs, ys: (a * xs, ys)
    return lambda: level1.rot(x, y, a, b), lambda xs, ys: (a * xs + b * ys, a * ys - b * xs)


@pytest.mark.parametrize("routine", ["axpy", "scal", "rot"])
def test_level1_maps_take_new_scalars(routine: str, device: str, vectors_validated: list[int]) -> None:
    """A new alpha (c and s) each call: validated once, replayed with each call's values, right."""
    for seed, (a, b) in enumerate(_SCALARS):
        gen = torch.Generator().manual_seed(seed)
        x64, y64 = (torch.randn(2, 50, generator=gen, dtype=torch.float64) for _ in range(2))
        x, y = x64.clone().to(device), y64.clone().to(device)  # written in place
        call, effect = _map_call(routine, x, y, a, b)
        call()
        wx, wy = effect(x64.numpy(), y64.numpy())
        np.testing.assert_allclose(x.cpu().numpy(), wx, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(y.cpu().numpy(), wy, rtol=1e-12, atol=1e-12)
    assert len(vectors_validated) == (1 if routine == "scal" else 2)


def test_columns_of_one_matrix_replay(device: str, vectors_validated: list[int]) -> None:
    """rot on two columns of a row-major matrix (their byte ranges meet, no element does) replays."""
    for seed in range(3):
        m64 = torch.randn(30, 2, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
        m = m64.clone().to(device)
        level1.rot(m[:, 0], m[:, 1], 0.6, 0.8)
        c0, c1 = m64[:, 0].numpy(), m64[:, 1].numpy()
        np.testing.assert_allclose(m.cpu().numpy(), np.stack([0.6 * c0 + 0.8 * c1, 0.6 * c1 - 0.8 * c0], 1),
                                   rtol=1e-12, atol=1e-12)
    assert len(vectors_validated) == 2


def test_one_vector_twice_is_a_signature_of_its_own(device: str, vectors_validated: list[int],
                                                   recordings: list[int]) -> None:
    """dot(x, x) and dot(u, v) have different keys (the recorded launches of the first name x for
    both operands): each replays right; axpy(α, x, x) keeps a recipe its repeat calls decline (x
    meets itself), running the full path without recording again."""
    for seed in range(3):
        gen = torch.Generator().manual_seed(seed)
        x64, u64, v64 = (torch.randn(40, generator=gen, dtype=torch.float64) for _ in range(3))
        x, u, v = (t.clone().to(device) for t in (x64, u64, v64))
        assert float(level1.dot(x, x)) == pytest.approx(float(x64 @ x64), rel=1e-12)
        assert float(level1.dot(u, v)) == pytest.approx(float(u64 @ v64), rel=1e-12)
        level1.axpy(0.5, x, x)
        np.testing.assert_allclose(x.cpu().numpy(), 1.5 * x64.numpy(), rtol=1e-12)
        level1.axpy(0.5, u, v)
        np.testing.assert_allclose(v.cpu().numpy(), 0.5 * u64.numpy() + v64.numpy(), rtol=1e-12)
    assert len(recordings) == 4 and len(repeat._RECIPES) == 4
    assert len(vectors_validated) == 2 * 3 + 3 * 2  # axpy(α, x, x) each time; the others once


def test_ger_of_one_vector_twice_replays(device: str, full_paths: list[int]) -> None:
    """ger(α, x, x, A) (a symmetric rank-1 update) replays on new x and A: its own signature."""
    for seed in range(3):
        gen = torch.Generator().manual_seed(seed)
        a, x = torch.randn(20, 20, generator=gen, dtype=torch.float64), torch.randn(20, generator=gen,
                                                                                   dtype=torch.float64)
        xd = x.clone().to(device)
        got = ger(0.25, xd, xd, a.clone().to(device))
        want = a.numpy() + 0.25 * np.outer(x, x)
        np.testing.assert_allclose(got.cpu().numpy(), want, rtol=1e-12, atol=1e-12)
    assert len(full_paths) == 1


@pytest.mark.gpu
@pytest.mark.parametrize("routine", ["gemv", "gemv T", "symv"])
def test_gpu_large_level2_calls_take_new_scalars(routine: str, full_paths: list[int]) -> None:
    """The issue's 8192² bf16 calls on the routes the shipped logic picks there (gemv T: a one-row
    GEMM): a new alpha and beta each call replays right, and the recorded launches take no float
    but the scalars (or a constant 0 or 1)."""
    n = 8192
    gen = torch.Generator(device="cuda").manual_seed(3)
    a = torch.randn(n, n, generator=gen, device="cuda", dtype=torch.bfloat16)
    if routine == "symv":
        full = _sym(a, False)
    else:
        full = (a.double().t() if routine == "gemv T" else a.double()).cpu().numpy()
    for alpha, beta in _SCALARS:
        x, y = (torch.randn(n, generator=gen, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        want = alpha * full @ x.double().cpu().numpy() + beta * y.double().cpu().numpy()
        if routine == "symv":
            got = symv(a, x, y, alpha=alpha, beta=beta)
        else:
            got = gemv(a, x, y, alpha=alpha, beta=beta, trans=routine == "gemv T")
        error = np.linalg.norm(got.double().cpu().numpy() - want) / np.linalg.norm(want)
        assert error < 1e-2, (alpha, beta, error)
    assert len(full_paths) == 1
    (recipe,) = repeat._RECIPES.recipes()
    floats = {arg for replay in recipe.replays for arg in replay.call.args if type(arg) is float}
    assert floats - set(_SCALARS[0]) <= {0.0, 1.0}


def test_a_float_made_of_a_scalar_keys_the_recipe_by_value() -> None:
    """Where a launch takes a float made of a scalar (−α here) beside α itself, a replay that wrote
    only α's place would run with the old −α: such launches are keyed by value (None), as are a
    free scalar in no argument and one argument equal to two scalars."""
    def call(*args: object) -> repeat.launch.Call:
        return repeat.launch.Call(None, (1,), args, {}, 4, 3)  # type: ignore[arg-type]

    assert repeat.scalar_slots([call(7, 0.5, 0.0, 1.0)], (0.5,)) == (((1, 0),),)
    assert repeat.scalar_slots([call(7, 0.5), call(2.5, 0.5)], (0.5, 2.5)) == (((1, 0),), ((0, 1), (1, 0)))
    assert repeat.scalar_slots([call(7, 0.5, 3.0)], (0.5, 3.0)) == (((1, 0), (2, 1)),)
    assert repeat.scalar_slots([call(7, 0.5, -0.5)], (0.5,)) is None  # −α
    assert repeat.scalar_slots([call(7, 0.25)], (0.5,)) is None  # α in no argument
    assert repeat.scalar_slots([call(0.5, 0.5)], (0.5, 0.5)) is None  # α = β
    assert repeat.scalar_slots([call(0.5, 1.0)], (0.5, 1.0)) == (((0, 0),),)  # β = 1 is in the key
