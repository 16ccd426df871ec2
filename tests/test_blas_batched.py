"""Batched BLAS levels 1 and 2 (rocBLAS's strided-batched routines: a 2-D vector is a batch of rows,
a 3-D matrix a batch of matrices) against the reference BLAS's loops written here in fp64 NumPy,
entry by entry: batch layouts (contiguous rows, interleaved rows, padded rows), increments of
either sign, an unbatched read operand serving every entry, several programs an entry, complex
reductions, the sequential zero-increment cases, n = 0, and the errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reference import close, f64, positions
from tessera import InvalidArgumentError
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
    rot,
    scal,
    space,
    swap,
    symv,
    trsv,
)
from tessera.blas.kernels.level1 import VectorConfig
from tessera.blas.kernels.level2 import GemvConfig, SymvConfig, TrsvConfig
from tessera.blas.level1 import Vector

DTYPES = [torch.bfloat16, torch.float32, torch.float64]
SMALL = VectorConfig(16, 2, 1)  # several programs for each entry's vector in the interpreter


def rows(batch: int, length: int, dtype: torch.dtype, device: str, seed: int, layout: str) -> torch.Tensor:
    """A (batch, length) tensor: rows stored one after another ("rows"), interleaved (the
    transpose of a (length, batch) tensor: batch stride 1), or with room between them ("padded")."""
    gen = torch.Generator().manual_seed(seed)

    def fill(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype).to(device)

    if layout == "interleaved":
        return fill(length, batch).T
    if layout == "padded":
        return fill(batch, length + 7)[:, 3:3 + length]
    return fill(batch, length)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["rows", "interleaved", "padded"])
@pytest.mark.parametrize("incx,incy", [(1, 1), (2, -1), (-3, 2)])
def test_element_wise_routines_entry_by_entry(dtype: torch.dtype, layout: str, incx: int, incy: int,
                                              device: str) -> None:
    batch, n = 5, 37
    x = rows(batch, (n - 1) * abs(incx) + 1, dtype, device, 1, layout)
    y = rows(batch, (n - 1) * abs(incy) + 1, dtype, device, 2, layout)
    px, py = positions(n, incx), positions(n, incy)
    xs, ys = f64(x), f64(y)
    with space.forced(SMALL):
        want = ys.copy()
        want[:, py] = 0.5 * xs[:, px] + ys[:, py]
        close(axpy(0.5, x, y.clone(), incx=incx, incy=incy), want, dtype, 3)
        want = xs.copy()
        if incx > 0:
            want[:, px] = -2.0 * xs[:, px]
        close(scal(-2.0, x.clone(), incx=incx), want, dtype, 4)
        want = ys.copy()
        want[:, py] = xs[:, px]
        assert np.array_equal(f64(copy(x, y.clone(), incx=incx, incy=incy)), want)
        got_x, got_y = swap(x.clone(), y.clone(), incx=incx, incy=incy)
        wx, wy = xs.copy(), ys.copy()
        wx[:, px], wy[:, py] = ys[:, py], xs[:, px]
        assert np.array_equal(f64(got_x), wx) and np.array_equal(f64(got_y), wy)
        c, s = 0.6, 0.8
        got_x, got_y = rot(x.clone(), y.clone(), c, s, incx=incx, incy=incy)
        wx[:, px], wy[:, py] = c * xs[:, px] + s * ys[:, py], c * ys[:, py] - s * xs[:, px]
        close(got_x, wx, dtype, 6)
        close(got_y, wy, dtype, 6)


def test_a_read_vector_may_serve_every_entry(device: str) -> None:
    """x 1-D beside a batched y: axpy and copy use it for every row; dot with one side 1-D."""
    x = torch.randn(40, device=device, dtype=torch.float64)
    y = rows(4, 40, torch.float64, device, 3, "padded")
    close(axpy(2.0, x, y.clone()), f64(y) + 2.0 * f64(x)[None, :], torch.float64, 4)
    close(copy(x, y.clone()), np.broadcast_to(f64(x), (4, 40)), torch.float64, 1)
    close(dot(x, y), f64(y) @ f64(x), torch.float64, 80)
    close(dot(y, x, incx=-1, incy=1), f64(y)[:, ::-1] @ f64(x), torch.float64, 80)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64, torch.complex128], ids=str)
def test_reductions_give_one_value_an_entry(dtype: torch.dtype, device: str) -> None:
    batch, n = 4, 75
    gen = torch.Generator().manual_seed(4)

    def sample(layout_batch: int) -> torch.Tensor:
        t = torch.randn(layout_batch, 2 * n, generator=gen, dtype=torch.float64)
        if dtype.is_complex:
            t = torch.complex(t, torch.randn(layout_batch, 2 * n, generator=gen, dtype=torch.float64))
        return t.to(dtype).to(device)

    x, y = sample(batch), sample(batch)
    x[2, 6] = 3.0 * x[2].abs().max()  # a clear extreme, and a tie in another row
    x[3, 10] = x[3, 20] = 5.0 * x[3].abs().max()
    xs, ys = f64(x)[:, positions(n, 2)], f64(y)[:, positions(n, -2)]
    real = torch.float64 if dtype in (torch.float64, torch.complex128) else torch.float32
    with space.forced(SMALL):
        got_dot, got_dotc = dot(x, y, incx=2, incy=-2), dotc(x, y, incx=2, incy=-2)
        got_nrm2, got_asum = nrm2(x, incx=2), asum(x, incx=2)
        got_max, got_min = iamax(x, incx=2), iamin(x, incx=2)
    assert got_dot.shape == got_nrm2.shape == got_max.shape == (batch,)
    close(got_dot, (xs * ys).sum(1), real, 2 * n)
    close(got_dotc, (np.conj(xs) * ys).sum(1), real, 2 * n)
    close(got_nrm2, np.sqrt((np.abs(xs) ** 2).sum(1)), real, 2 * n)
    magnitude = np.abs(xs.real) + np.abs(xs.imag)
    close(got_asum, magnitude.sum(1), real, 2 * n)
    assert got_max.tolist() == [int(np.argmax(m)) for m in magnitude]  # first of ties, as BLAS
    assert got_min.tolist() == [int(np.argmin(m)) for m in magnitude]


def test_nrm2_scales_each_entry_apart(device: str) -> None:
    """One row near fp32's overflow, one near its underflow, one ordinary: each as LAPACK's xNRM2."""
    x = torch.ones(3, 50, device=device)
    x[0] *= 1e30
    x[1] *= 1e-30
    with space.forced(SMALL):
        got = nrm2(x)
    close(got, np.sqrt(50.0) * np.array([1e30, 1e-30, 1.0]), torch.float32, 2e30)
    assert np.allclose(f64(got), np.sqrt(50.0) * np.array([1e30, 1e-30, 1.0]), rtol=1e-6)


def test_edge_cases_follow_the_reference_per_entry(device: str) -> None:
    x = torch.randn(3, 10, device=device, dtype=torch.float64)
    assert dot(x[:, :0], x[:, :0]).shape == (3,) and not dot(x[:, :0], x[:, :0]).any()
    assert iamax(x[:, :0]).tolist() == [-1, -1, -1] and iamin(x, incx=-1).tolist() == [-1, -1, -1]
    assert asum(x, incx=0).tolist() == [0.0, 0.0, 0.0]
    assert torch.equal(scal(2.0, x.clone(), incx=-1), x)  # incx ≤ 0: nothing, as the reference
    # y's increment 0: the reference adds every αx_i into y's one element, row by row
    y = torch.randn(3, 1, device=device, dtype=torch.float64)
    want = f64(y) + 2.0 * f64(x).sum(1, keepdims=True)
    close(axpy(2.0, x, y.clone(), n=10, incy=0), want, torch.float64, 40)
    close(copy(x, y.clone(), n=10, incy=0), f64(x)[:, -1:], torch.float64, 1)  # the last element written wins
    empty = torch.empty(0, 10, device=device)  # a batch of no vectors: nothing launches
    assert nrm2(empty).shape == (0,) and axpy(1.0, empty, empty.clone()).shape == (0, 10)
    one = torch.ones(10, device=device)
    assert dot(empty, one).shape == iamax(empty).shape == asum(empty).shape == (0,)
    assert dotc(one, empty).shape == (0,) and scal(2.0, empty).shape == (0, 10)
    assert gemv(torch.empty(0, 5, 10, device=device), one).shape == (0, 5)
    assert symv(torch.empty(0, 10, 10, device=device), torch.empty(0, 10, device=device)).shape == (0, 10)
    assert trsv(torch.eye(10, device=device), empty).shape == (0, 10)
    no_matrices = torch.empty(0, 5, 10, device=device)
    assert ger(1.0, torch.empty(0, 5, device=device), one, no_matrices).shape == (0, 5, 10)


def test_batched_vectors_are_checked(device: str) -> None:
    x, y = torch.randn(3, 8, device=device), torch.randn(4, 8, device=device)
    with pytest.raises(InvalidArgumentError, match="batch"):
        axpy(1.0, x, y)
    with pytest.raises(InvalidArgumentError, match="holds the whole batch"):
        axpy(1.0, x, torch.randn(8, device=device))  # a written vector must hold the batch
    with pytest.raises(InvalidArgumentError, match="share no element"):
        scal(2.0, torch.randn(8, device=device).expand(3, 8))
    with pytest.raises(InvalidArgumentError, match="share no element"):  # rows 4 elements apart, 8 long
        scal(2.0, torch.randn(16, device=device).as_strided((3, 8), (4, 1)))
    interleaved = torch.randn(8, 3, device=device).T  # rows one element apart, elements 3 apart: no overlap
    scal(2.0, interleaved)
    with pytest.raises(InvalidArgumentError, match="1-D"):
        nrm2(torch.randn(2, 3, 4, device=device))


@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("shared", ["none", "a", "x"])
def test_gemv_entry_by_entry(trans: bool, shared: str, device: str) -> None:
    """A 3-D and x 2-D, or one of them unbatched (the same for every entry); increments of both
    signs, β ≠ 0; and long rows, whose columns are split among programs (the finish per entry)."""
    batch = 3
    for m, n in ((45, 30), (6, 700)):
        gen = torch.Generator().manual_seed(m)
        a = torch.randn(batch, m, n, generator=gen, dtype=torch.float64)
        if shared == "a":
            a = a[0]
        rows_, cols = (n, m) if trans else (m, n)
        x = torch.randn(batch, 2 * cols, generator=gen, dtype=torch.float64)
        if shared == "x":
            x = x[0]
        y = torch.randn(batch, rows_, generator=gen, dtype=torch.float64)
        got = gemv(a.to(device), x.to(device), y.clone().to(device), alpha=1.5, beta=0.5, trans=trans,
                   incx=-2)
        a3 = np.broadcast_to(f64(a), (batch, m, n))
        op = a3.transpose(0, 2, 1) if trans else a3
        xv = np.broadcast_to(f64(x), (batch, 2 * cols))[:, positions(cols, -2)]
        want = 1.5 * np.einsum("bij,bj->bi", op, xv) + 0.5 * f64(y)
        close(got, want, torch.float64, 4 * cols)


def test_gemv_tile_configs_and_new_outputs(device: str) -> None:
    a = torch.randn(4, 20, 33, device=device, dtype=torch.float32)
    x = torch.randn(4, 33, device=device, dtype=torch.float32)
    with space.forced(GemvConfig(16, 16, 1, 2)):
        got = gemv(a, x)
    assert got.shape == (4, 20)
    close(got, np.einsum("bij,bj->bi", f64(a), f64(x)), torch.float32, 40)
    close(gemv(a, x, alpha=0.0), np.zeros((4, 20)), torch.float32, 1)  # α = 0, β = 0: zeros
    with pytest.raises(InvalidArgumentError, match="holds the batch"):
        gemv(a, x, torch.empty(20, device=device), beta=1.0)
    with pytest.raises(InvalidArgumentError, match="batch"):
        gemv(a, torch.randn(3, 33, device=device))


@pytest.mark.parametrize("lower", [False, True])
def test_symv_entry_by_entry(lower: bool, device: str) -> None:
    """Each entry read from its stored triangle only (the other is NaN), several programs a block
    column, the finish per entry."""
    batch, n = 3, 70
    gen = torch.Generator().manual_seed(5)
    full = torch.randn(batch, n, n, generator=gen, dtype=torch.float64)
    tri = torch.tril(full) if lower else torch.triu(full)
    sym = tri + tri.transpose(-1, -2) - torch.diag_embed(torch.diagonal(full, dim1=-2, dim2=-1))
    stored = full.clone()
    ones = torch.ones(n, n, dtype=torch.bool)
    keep = torch.tril(ones) if lower else torch.triu(ones)
    stored[:, ~keep] = float("nan")
    x = torch.randn(batch, n, generator=gen, dtype=torch.float64)
    y = torch.randn(batch, n, generator=gen, dtype=torch.float64)
    with space.forced(SymvConfig(16, 2, 2, longest_first=True, finish_rows=8)):
        got = symv(stored.to(device), x.to(device), y.clone().to(device), alpha=2.0, beta=-1.0, lower=lower)
    close(got, 2.0 * np.einsum("bij,bj->bi", f64(sym), f64(x)) - f64(y), torch.float64, 4 * n)
    shared = symv(stored[0].to(device), x.to(device), lower=lower)  # one matrix for every entry
    close(shared, np.einsum("ij,bj->bi", f64(sym[0]), f64(x)), torch.float64, 4 * n)


def test_ger_entry_by_entry(device: str) -> None:
    batch, m, n = 3, 37, 50
    a = torch.randn(batch, m, n, device=device, dtype=torch.float64)
    x = torch.randn(batch, m, device=device, dtype=torch.float64)
    y = torch.randn(n, device=device, dtype=torch.float64)  # the same y for every entry
    got = ger(0.5, x, y, a.clone(), incx=-1)
    want = f64(a) + 0.5 * np.einsum("bi,j->bij", f64(x)[:, ::-1], f64(y))
    close(got, want, torch.float64, 4)
    with pytest.raises(InvalidArgumentError, match="3-D"):
        ger(0.5, x, y, a[0].clone())  # the written matrix must hold the batch


@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("unit", [False, True])
def test_trsv_entry_by_entry(lower: bool, trans: bool, unit: bool, device: str) -> None:
    """Each entry solved with its own flags and tickets (several blocks an entry); A 3-D, and A 2-D
    for every entry."""
    batch, n = 3, 70
    gen = torch.Generator().manual_seed(6)
    eye = torch.eye(n, dtype=torch.float64)
    t = 0.05 * torch.randn(batch, n, n, generator=gen, dtype=torch.float64) + eye
    b = torch.randn(batch, 2 * n, generator=gen, dtype=torch.float64)
    tri = torch.tril(t) if lower else torch.triu(t)
    if unit:
        tri = tri - torch.diag_embed(torch.diagonal(tri, dim1=-2, dim2=-1)) + eye
    op = tri.transpose(-1, -2) if trans else tri
    for a, ops in ((t, op), (t[0], op[0].expand(batch, n, n))):
        x = b.clone().to(device)
        with space.forced(TrsvConfig(16, 4)):
            trsv(a.to(device), x, lower=lower, trans=trans, unit_diagonal=unit, incx=-2)
        solved = f64(x)[:, positions(n, -2)]
        want = np.linalg.solve(f64(ops), f64(b)[:, positions(n, -2)][..., None])[..., 0]
        close(torch.from_numpy(solved), want, torch.float64, 1e3)


@settings(max_examples=300, deadline=None)
@given(batch=st.integers(1, 9), n=st.integers(1, 9), across=st.integers(0, 24), along=st.integers(1, 7),
       inc=st.sampled_from([-2, -1, 1, 3]))
def test_the_written_rows_overlap_rule_is_exact(batch: int, n: int, across: int, along: int,
                                                inc: int) -> None:
    """Vector.check_writable refuses a batched output exactly when two of its rows share an element
    (brute force over the element offsets each row writes)."""
    length = (n - 1) * abs(inc) + 1
    storage = torch.empty(across * (batch - 1) + along * (length - 1) + 1)
    t = storage.as_strided((batch, length), (across, along))
    rows_written = [{b * across + i * abs(inc) * along for i in range(n)} for b in range(batch)]
    shared = any(rows_written[b] & rows_written[c] for b in range(batch) for c in range(b))
    vector = Vector("y", t, n, inc, batched=True)
    if shared:
        with pytest.raises(InvalidArgumentError, match="share no element"):
            vector.check_writable()
    else:
        vector.check_writable()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.integers(1, 4), n=st.integers(0, 70), incx=st.sampled_from([-2, 1, 3]),
       incy=st.sampled_from([-1, 2]), layout=st.sampled_from(["rows", "interleaved", "padded"]),
       seed=st.integers(0, 2**16))
def test_batched_level1_fuzz(batch: int, n: int, incx: int, incy: int, layout: str, seed: int,
                             device: str) -> None:
    """Random batches, lengths, increments and layouts: dot, nrm2, iamax and axpy entry by entry."""
    x = rows(batch, max(1, (n - 1) * abs(incx) + 1), torch.float64, device, seed, layout)
    y = rows(batch, max(1, (n - 1) * abs(incy) + 1), torch.float64, device, seed + 1, layout)
    xs, ys = f64(x)[:, positions(n, incx)], f64(y)[:, positions(n, incy)]
    with space.forced(SMALL):
        close(dot(x, y, n=n, incx=incx, incy=incy), (xs * ys).sum(1), torch.float64, 4 * max(n, 1))
        close(nrm2(x, n=n, incx=incx), np.sqrt((xs * xs).sum(1)), torch.float64, 4 * max(n, 1))
        want_max = [int(np.argmax(np.abs(r))) if n and incx > 0 else -1 for r in xs]
        assert iamax(x, n=n, incx=incx).tolist() == want_max
        got = axpy(0.75, x, y.clone(), n=n, incx=incx, incy=incy)
    want = f64(y)
    want[:, positions(n, incy)] = 0.75 * xs + ys
    close(got, want, torch.float64, 4)


def test_a_batch_of_short_vectors_gets_a_shape_cut_to_them(device: str) -> None:
    """Each entry takes programs of its own: for 50-element rows the tuned long-vector shape is cut
    to one step of a 64-lane block on one warp (right results); long rows keep it."""
    from tessera._core.launch import recording

    x, y = rows(6, 50, torch.float32, device, 7, "rows"), rows(6, 50, torch.float32, device, 8, "rows")
    with recording() as calls:
        got = dot(x, y)
    (reduce_call,) = [c for c in calls if c.constexprs.get("ITERS") is not None]
    shape = (reduce_call.constexprs["BLOCK"], reduce_call.constexprs["ITERS"], reduce_call.num_warps)
    assert shape == (64, 1, 1)
    close(got, (f64(x) * f64(y)).sum(1), torch.float32, 100)
    with recording() as calls:
        iamax(x)
    assert calls[0].constexprs["BLOCK"] == 64
    long = rows(2, 40000, torch.float32, device, 9, "rows")
    with recording() as calls:
        nrm2(long)
    shipped = space.shape_of("level1_reduce", (40000,), long)
    assert calls[0].constexprs["BLOCK"] == shipped.block and calls[0].constexprs["ITERS"] == shipped.iters


def test_a_batch_of_small_matrices_gets_a_gemv_tile_cut_to_them(device: str) -> None:
    """A batched gemv on 24 × 40 matrices launches tiles no larger than the matrix (the shipped
    tile is for 8192²), right."""
    from tessera._core.launch import recording

    a = torch.randn(5, 24, 40, device=device, dtype=torch.float64)
    x = torch.randn(5, 40, device=device, dtype=torch.float64)
    with space.forced(GemvConfig(128, 512, 4, 2)), recording() as calls:
        got = gemv(a, x)
    assert (calls[0].constexprs["BLOCK_M"], calls[0].constexprs["BLOCK_N"]) == (32, 64)
    close(got, np.einsum("bij,bj->bi", f64(a), f64(x)), torch.float64, 80)
