"""Whether two strided operands share memory, element by element (not by byte range).

BLAS passes vectors as strides into arrays, so two disjoint arguments often interleave: the
columns of a row-major matrix (``a[:, 0]`` and ``a[:, 1]``, increment = the row length) are
apart though their byte ranges overlap, while ``x[:-1]`` and ``x[1:]`` share all but one element.
A kernel that writes one while other programs read the other returns garbage (gemv with y = x:
errors of 1e24 in the interpreter), so the routines refuse arguments that share an element, and
must not refuse the interleaved ones. :func:`footprints_meet` decides it exactly for the cases
that occur (a vector, a batch of vectors, a matrix), in O(1) for lone vectors:

1. byte ranges apart → apart;
2. every element address of each operand is its first plus a combination of its strides, so
   all lie in residue classes modulo G, the gcd of every stride: if no byte of one operand's
   element can coincide with a byte of the other's modulo G, they are apart (this settles the
   columns of one matrix, batched or not);
3. rows of one stride (slices of one buffer's columns, a vector beside a matrix): only the row
   differences that bring two rows' byte spans within reach are tested, however many rows;
4. otherwise each outer index pair (batch entries, matrix rows) is two arithmetic progressions,
   which meet iff a linear Diophantine equation has a solution in a box (extended Euclid); past
   ``MAX_PAIRS`` pairs the answer is "may meet" (refused; a message says how to avoid it).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from tessera._core.errors import InvalidArgumentError

MAX_PAIRS = 1 << 12  # outer index pairs (or row differences) tested before "may meet"


class Footprint(NamedTuple):
    """The bytes an operand's elements cover: element (i₀, …, i_d) starts at ``first`` + Σ iₖ·strideₖ
    (``dims``: (size, stride in bytes) pairs, outermost first) and is ``width`` bytes long. (A
    named tuple: built on every call of a routine, where a frozen dataclass costs microseconds.)"""

    first: int
    dims: tuple[tuple[int, int], ...]
    width: int

    @staticmethod
    def of_tensor(t: torch.Tensor) -> Footprint:
        """Every element of ``t`` (a complex element is its two parts)."""
        size = t.element_size()
        dims = tuple((s, st * size) for s, st in zip(t.shape, t.stride(), strict=True))
        return Footprint(t.data_ptr(), dims, size)

    def normalized(self) -> Footprint | None:
        """The same bytes with every stride ≥ 0 and no dimension of size 1; None when empty."""
        first, dims = self.first, []
        for size, stride in self.dims:
            if size == 0:
                return None
            if size == 1 or stride == 0:
                continue
            if stride < 0:
                first += (size - 1) * stride
                stride = -stride
            dims.append((size, stride))
        return Footprint(first, tuple(dims), self.width)


def _exists_in_box(s1: int, n1: int, s2: int, n2: int, r: int) -> bool:
    """Whether j·s2 − i·s1 = r for some 0 ≤ i < n1, 0 ≤ j < n2 (s1, s2 ≥ 0)."""
    if n1 == 1:
        s1 = 0
    if n2 == 1:
        s2 = 0
    if s1 == 0 and s2 == 0:
        return r == 0
    if s1 == 0:
        return r >= 0 and r % s2 == 0 and r // s2 < n2
    if s2 == 0:
        return r <= 0 and (-r) % s1 == 0 and (-r) // s1 < n1
    g, p, q = _extended_gcd(s2, s1)  # s2·p + s1·q = g
    if r % g:
        return False
    j0, i0 = p * (r // g), -q * (r // g)  # one solution; all: j0 + t·s1/g, i0 + t·s2/g
    u, v = s1 // g, s2 // g
    low = max(-(j0 // u), -(i0 // v))  # ceil(−j0/u), ceil(−i0/v)
    high = min((n2 - 1 - j0) // u, (n1 - 1 - i0) // v)
    return low <= high


def _extended_gcd(a: int, b: int) -> tuple[int, int, int]:
    """(g, x, y) with a·x + b·y = g = gcd(a, b)."""
    x0, y0, x1, y1 = 1, 0, 0, 1
    while b:
        quotient, a, b = a // b, b, a % b
        x0, x1 = x1, x0 - quotient * x1
        y0, y1 = y1, y0 - quotient * y1
    return a, x0, y0


def _lines_meet(a0: int, line_a: tuple[int, int], wa: int, b0: int, line_b: tuple[int, int], wb: int) -> bool:
    """Whether elements a0 + i·sa (i < na, wa bytes each) and b0 + j·sb (j < nb, wb bytes) share a byte:
    b0 + j·sb − (a0 + i·sa) must lie in [−(wb − 1), wa − 1]."""
    (na, sa), (nb, sb) = line_a, line_b
    aligned = wa == wb and (b0 - a0) % wa == 0 and sa % wa == 0 and sb % wa == 0
    gaps = (0,) if aligned else range(-(wb - 1), wa)
    return any(_exists_in_box(sa, na, sb, nb, gap - (b0 - a0)) for gap in gaps)


def _outer_starts(f: Footprint) -> tuple[list[int], tuple[int, int]]:
    """The first byte of each innermost line of a normalized footprint, and that line (size, stride)."""
    if not f.dims:
        return [f.first], (1, 0)
    starts = [f.first]
    for size, stride in f.dims[:-1]:
        starts = [s + i * stride for s in starts for i in range(size)]
    return starts, f.dims[-1]


def byte_range(f: Footprint) -> tuple[int, int] | None:
    """[lo, hi) of a footprint as given (any stride signs); None when it is empty. The per-call
    test (most calls end here, without normalizing), and what a repeat gemm call's recipe keeps
    (``validate.extent_offsets``)."""
    lo = hi = f.first
    for size, stride in f.dims:
        if size == 0:
            return None
        if stride < 0:
            lo += (size - 1) * stride
        else:
            hi += (size - 1) * stride
    return lo, hi + f.width


def footprints_meet(a: Footprint, b: Footprint) -> bool:
    """Whether ``a`` and ``b`` may share a byte: False only when they are shown apart (module
    docstring); True past ``MAX_PAIRS`` outer index pairs."""
    a_range, b_range = byte_range(a), byte_range(b)
    if a_range is None or b_range is None or a_range[1] <= b_range[0] or b_range[1] <= a_range[0]:
        return False
    a, b = a.normalized(), b.normalized()
    assert a is not None and b is not None  # not empty: byte_range said so
    g = math.gcd(*(stride for _, stride in a.dims + b.dims))
    if g:  # some byte gap b − a in [−(wb − 1), wa − 1] must be ≡ b.first − a.first (mod g)
        offset = (b.first - a.first) % g
        low = -(b.width - 1)
        if low + (offset - low) % g > a.width - 1:
            return False
    rows = _rows_meet(a, b)
    if rows is not None:
        return rows
    pairs = math.prod(s for s, _ in a.dims[:-1]) * math.prod(s for s, _ in b.dims[:-1])
    if pairs > MAX_PAIRS:
        return True
    (a_starts, a_line), (b_starts, b_line) = _outer_starts(a), _outer_starts(b)
    return any(_lines_meet(s, a_line, a.width, t, b_line, b.width) for s in a_starts for t in b_starts)


def _rows_meet(a: Footprint, b: Footprint) -> bool | None:
    """Rows of one stride R — slices of one buffer's columns, a vector beside a matrix: a's row i
    and b's row j lie D + (j − i)·R bytes apart (D = b.first − a.first), so only the differences
    k = j − i that put the two rows' byte spans within reach of each other need a line test,
    however many rows there are. None where the footprints are not such rows, or the differences
    to test exceed ``MAX_PAIRS`` (lines longer than the row stride)."""
    if len(a.dims) > 2 or len(b.dims) > 2:
        return None
    strides = {dims[0][1] for dims in (a.dims, b.dims) if len(dims) == 2}
    if len(strides) != 1:
        return None
    (row,) = strides

    def rows_and_line(f: Footprint) -> tuple[int, tuple[int, int], int]:
        """(rows, the row's line (size, stride), its byte span): one row of a vector or an element."""
        count = f.dims[0][0] if len(f.dims) == 2 else 1
        line = f.dims[-1] if f.dims else (1, 0)
        return count, line, (line[0] - 1) * line[1] + f.width

    (rows_a, line_a, span_a), (rows_b, line_b, span_b) = rows_and_line(a), rows_and_line(b)
    gap = b.first - a.first
    low = max(-(rows_a - 1), (-span_b - gap) // row + 1)  # spans meet iff −span_b < gap + k·R < span_a
    high = min(rows_b - 1, -((gap - span_a) // row) - 1)
    if high - low >= MAX_PAIRS:
        return None
    return any(_lines_meet(0, line_a, a.width, gap + k * row, line_b, b.width) for k in range(low, high + 1))


def check_apart(written: str, footprint: Footprint, reads: dict[str, Footprint],
                same_ok: frozenset[str] = frozenset()) -> None:
    """The operand ``written`` (``footprint``) must share no element with an operand the call reads
    (``reads``): another program would read what it wrote. A name in ``same_ok`` may instead be
    the very same elements in the same order (an element-wise routine reads and writes each in
    one place, as ``axpy(α, x, x)`` scales x)."""
    for name, other in reads.items():
        if footprints_meet(footprint, other) and not (name in same_ok and other == footprint):
            same = f" (or the very same vector as {name})" if name in same_ok else ""
            raise InvalidArgumentError(
                f"{written} overlaps input {name} in memory (an element in common, or elements that could "
                f"not be shown apart); Tessera never writes over an input it still reads: pass a separate "
                f"tensor{same}, e.g. {name}.clone()")
