"""Whether two strided operands share memory (``tessera._core.footprint``), against the byte sets
themselves, and the BLAS routines that refuse such arguments and take interleaved ones."""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera import InvalidArgumentError
from tessera._core.footprint import MAX_PAIRS, Footprint, footprints_meet
from tessera.blas import axpy, copy, gemm, gemv, ger, rot, scal, swap, symv, trsv


def _bytes(f: Footprint) -> set[int]:
    """Every byte the footprint covers, enumerated (the independent reference)."""
    covered = set()
    for index in itertools.product(*(range(size) for size, _ in f.dims)):
        start = f.first + sum(i * stride for i, (_, stride) in zip(index, f.dims, strict=True))
        covered.update(range(start, start + f.width))
    return covered


_strides = st.sampled_from([-24, -8, -4, -3, 0, 1, 2, 3, 4, 6, 8, 12, 40])
_dims = st.lists(st.tuples(st.integers(0, 6), _strides), min_size=0, max_size=3)
_footprints = st.builds(Footprint, st.integers(0, 64), _dims.map(tuple), st.sampled_from([1, 2, 4, 8, 16]))


@settings(max_examples=3000, deadline=None)
@given(_footprints, _footprints)
def test_meet_exactly_when_a_byte_is_shared(a: Footprint, b: Footprint) -> None:
    assert footprints_meet(a, b) == bool(_bytes(a) & _bytes(b))
    assert footprints_meet(b, a) == footprints_meet(a, b)


def test_columns_of_one_matrix_are_apart_without_enumerating_entries() -> None:
    """Step 2 (residues modulo the strides' gcd) shows two columns of a batch of matrices apart
    even where the entry pairs are too many for step 3 (which would answer "may meet"); a
    column and the one shifted by a row meet."""
    batch, rows, row_bytes = 100, 50, 64 * 4
    assert batch * batch > MAX_PAIRS
    column = Footprint(0, ((batch, rows * row_bytes), (rows, row_bytes)), 4)
    assert not footprints_meet(column, Footprint(4, column.dims, 4))
    assert footprints_meet(column, Footprint(row_bytes, column.dims, 4))
    few = Footprint(0, ((8, rows * row_bytes), (rows, row_bytes)), 4)  # enumerated: exact
    assert footprints_meet(few, Footprint(row_bytes, few.dims, 4))
    assert not footprints_meet(few, Footprint(8 * rows * row_bytes, few.dims, 4))  # the next 8 entries


def test_column_slices_of_one_buffer_are_decided_by_row_differences(device: str) -> None:
    """Slices of one buffer's columns (x @ W written beside x in a concatenated buffer) share a
    row stride: however many rows, only the row differences that bring two rows within reach are
    tested (pairs of rows would exceed ``MAX_PAIRS`` and answer "may meet")."""
    rows, row_bytes = 8192, 24 * 4
    a = Footprint(0, ((rows, row_bytes), (8, 4)), 4)  # columns 0-7 of a (8192, 24) float32 buffer
    assert rows * rows > MAX_PAIRS
    assert not footprints_meet(a, Footprint(8 * 4, a.dims, 4))  # columns 8-15
    assert footprints_meet(a, Footprint(7 * 4, a.dims, 4))  # columns 7-14: column 7 shared
    assert not footprints_meet(a, Footprint(8 * 4, ((rows, row_bytes), (16, 4)), 4))  # columns 8-23
    last_row = (rows - 1) * row_bytes
    assert not footprints_meet(a, Footprint(last_row + 23 * 4, (), 4))  # the buffer's last element
    assert footprints_meet(a, Footprint(last_row + 7 * 4, (), 4))  # column 7 of the last row
    # through gemm (the interpreter runs it): 300 rows, whose pairs alone are 90000
    buffer = torch.randn(300, 24, device=device)
    x, w = buffer[:, :8], torch.randn(8, 16, device=device)
    want = x.double() @ w.double()
    assert gemm(x, w, out=buffer[:, 8:]) is not None
    torch.testing.assert_close(buffer[:, 8:].double(), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(InvalidArgumentError, match="out overlaps input a"):
        gemm(buffer[:, 1:9], torch.randn(8, 16, device=device), out=buffer[:, 8:])  # column 8 both


def test_routines_refuse_arguments_that_share_elements(device: str) -> None:
    """gemv with y = x wrote while other programs read (errors of 1e24 in the interpreter at
    n = 600); each refused before anything is written."""
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(70, 70, generator=gen, dtype=torch.float64).to(device)
    x = torch.randn(70, generator=gen, dtype=torch.float64).to(device)
    before = (a.clone(), x.clone())
    calls = [lambda: gemv(a, x, x, beta=1.0), lambda: gemv(a, x, a[3], trans=True),
             lambda: symv(a, x, x), lambda: ger(1.0, a[0], x, a), lambda: trsv(a, a[:, 2]),
             lambda: axpy(2.0, x[:-1], x[1:]), lambda: copy(x[:-1], x[1:]), lambda: swap(x[:-1], x[1:]),
             lambda: axpy(2.0, x, x, incx=-1), lambda: rot(x, x, 0.6, 0.8), lambda: axpy(1.0, x, x, incy=0),
             lambda: axpy(1.0, x[:1], x[:1], n=3, incx=0, incy=0)]  # y₀ += x₀ three times, in order
    for call in calls:
        with pytest.raises(InvalidArgumentError, match="overlaps input"):
            call()
    for call in (lambda: scal(2.0, torch.ones(1, device=device).expand(5)),
                 lambda: copy(x[:5], torch.ones(1, dtype=x.dtype, device=device).expand(5))):
        with pytest.raises(InvalidArgumentError, match="non-zero element stride"):
            call()
    assert torch.equal(a, before[0]) and torch.equal(x, before[1])


def test_routines_take_interleaved_and_identical_vectors(device: str) -> None:
    """Columns of one row-major matrix (a Givens rotation of two columns, batched too), a vector
    in the padding column beside A, and axpy / copy / swap on the very same vector."""
    gen = torch.Generator().manual_seed(1)
    m = torch.randn(3, 9, 7, generator=gen, dtype=torch.float64)
    want = m.clone()
    c, s = 0.6, 0.8
    want[..., 0], want[..., 1] = c * m[..., 0] + s * m[..., 1], c * m[..., 1] - s * m[..., 0]
    got = m.to(device)
    rot(got[..., 0], got[..., 1], c, s)  # batched: 3 entries
    rot(got[0, :, 2], got[0, :, 3], 1.0, 0.0)  # one vector each: unchanged
    assert torch.allclose(got.cpu(), want)
    padded = torch.randn(6, 6, generator=gen, dtype=torch.float64).to(device)
    x = torch.randn(5, generator=gen, dtype=torch.float64).to(device)
    gemv(padded[:, :5], x, padded[:, 5])
    assert torch.allclose(padded[:, 5], padded[:, :5] @ x)
    v = torch.arange(6.0, dtype=torch.float64, device=device)
    assert torch.equal(axpy(2.0, v, v).cpu(), 3 * torch.arange(6.0, dtype=torch.float64))
    assert torch.equal(copy(v, v).cpu(), 3 * torch.arange(6.0, dtype=torch.float64))
    swap(v, v)
    assert torch.equal(v.cpu(), 3 * torch.arange(6.0, dtype=torch.float64))
