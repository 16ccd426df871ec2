"""Repeat level-2 calls and level-1 reductions replay the first call's launches
(``tessera.blas.repeat``): right on new operands of the same signature (fp64 NumPy references),
each result a tensor of its own, taken only where the signature and the operands' places allow,
and never where the full path would refuse the call."""

from __future__ import annotations

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


def test_a_signature_without_a_recipe_is_recorded_once(device: str, vectors_validated: list[int],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A complex dot's launch takes x's real view (another dtype than x): no recipe. Every call is
    validated and right, and only the first records its launches (the others skip the attempt)."""
    recordings: list[int] = []
    recording = repeat.launch.recording

    def counted() -> object:
        recordings.append(1)
        return recording()

    monkeypatch.setattr(repeat.launch, "recording", counted)
    for seed in range(3):
        gen = torch.Generator().manual_seed(seed)
        x, y = (torch.randn(64, generator=gen, dtype=torch.complex128) for _ in range(2))
        got = level1.dot(x.to(device), y.to(device))
        assert complex(got) == pytest.approx(complex((x * y).sum()), rel=1e-12)
    assert len(vectors_validated) == 6
    assert len(recordings) == 1
