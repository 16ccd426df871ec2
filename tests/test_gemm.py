"""tessera.blas.gemm / matmul against an fp64 reference (interpreter on CPU, or the GPU)."""

from __future__ import annotations

import contextlib
import dataclasses
import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tessera
from reference import assert_gemm_close, op
from tessera import InvalidArgumentError
from tessera._core.launch import building_for
from tessera.blas import explain, gemm, matmul, space
from tessera.blas.kernels.gemm_splitk import SplitKConfig
from tessera.blas.kernels.gemm_streamk import StreamKConfig
from tessera.blas.kernels.gemm_tile import TileConfig
from tessera.blas.kernels.gemm_tma import TmaConfig

FAST_DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def rand(shape: tuple[int, ...], dtype: torch.dtype, device: str) -> torch.Tensor:
    return torch.randn(shape, dtype=torch.float32).to(dtype).to(device)


def operand(rows: int, cols: int, dtype: torch.dtype, device: str, layout: str) -> torch.Tensor:
    """A rows×cols matrix stored row-major, column-major, or as a strided slice of a larger one."""
    if layout == "row":
        return rand((rows, cols), dtype, device)
    if layout == "col":
        return rand((cols, rows), dtype, device).t()
    big = rand((rows * 2 + 1, cols + 5), dtype, device)  # "slice": every other row, offset
    return big[1::2][:rows, 3 : 3 + cols]


@pytest.mark.parametrize("dtype", FAST_DTYPES)
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (7, 16, 129), (16, 7, 16), (129, 65, 33), (33, 257, 7)])
def test_sizes(dtype: torch.dtype, m: int, n: int, k: int, device: str) -> None:
    a, b = rand((m, k), dtype, device), rand((k, n), dtype, device)
    assert_gemm_close(gemm(a, b), a, b)


@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_transposes(trans_a: bool, trans_b: bool, dtype: torch.dtype, device: str) -> None:
    m, n, k = 37, 45, 70
    a = rand((k, m) if trans_a else (m, k), dtype, device)
    b = rand((n, k) if trans_b else (k, n), dtype, device)
    d = gemm(a, b, trans_a=trans_a, trans_b=trans_b)
    assert_gemm_close(d, a, b, trans_a=trans_a, trans_b=trans_b)


@pytest.mark.parametrize("layout_a", ["row", "col", "slice"])
@pytest.mark.parametrize("layout_b", ["row", "col", "slice"])
def test_layouts(layout_a: str, layout_b: str, device: str) -> None:
    a = operand(40, 33, torch.float32, device, layout_a)
    b = operand(33, 50, torch.float32, device, layout_b)
    assert_gemm_close(gemm(a, b), a, b)


def test_layout_without_unit_stride_is_copied(device: str) -> None:
    base = rand((30, 40), torch.float32, device)
    a = base[::2, ::2]  # neither stride is 1
    b = rand((20, 9), torch.float32, device)
    assert_gemm_close(gemm(a, b), a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("alpha,beta", [(1.0, 0.0), (0.5, 2.0), (-1.5, 1.0), (2.0, -0.25)])
def test_alpha_beta(alpha: float, beta: float, dtype: torch.dtype, device: str) -> None:
    a, b, c = rand((33, 20), dtype, device), rand((20, 47), dtype, device), rand((33, 47), dtype, device)
    d = gemm(a, b, c, alpha=alpha, beta=beta)
    assert_gemm_close(d, a, b, c, alpha=alpha, beta=beta)


def test_beta_zero_never_reads_c(device: str) -> None:
    a, b = rand((17, 9), torch.float32, device), rand((9, 21), torch.float32, device)
    c = torch.full((17, 21), math.nan, device=device)
    d = gemm(a, b, c, beta=0.0)
    assert torch.isfinite(d).all()
    assert_gemm_close(d, a, b)


def test_alpha_zero_never_reads_a_b(device: str) -> None:
    a = torch.full((5, 4), math.nan, device=device)
    b = torch.full((4, 6), math.inf, device=device)
    c = rand((5, 6), torch.float32, device)
    d = gemm(a, b, c, alpha=0.0, beta=3.0)
    torch.testing.assert_close(d, 3.0 * c)


def test_c_broadcasts_as_bias(device: str) -> None:
    a, b = rand((19, 8), torch.float32, device), rand((8, 23), torch.float32, device)
    bias = rand((23,), torch.float32, device)
    d = gemm(a, b, bias, beta=1.0)
    assert_gemm_close(d, a, b, bias.expand(19, 23), beta=1.0)


def test_out_in_place_on_c(device: str) -> None:
    a, b, c = rand((24, 16), torch.float32, device), rand((16, 24), torch.float32, device), rand(
        (24, 24), torch.float32, device
    )
    c0 = c.clone()
    d = gemm(a, b, c, alpha=1.0, beta=1.0, out=c)
    assert d is c
    assert_gemm_close(c, a, b, c0, beta=1.0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_out_dtype_widens(dtype: torch.dtype, device: str) -> None:
    a, b = rand((30, 70), dtype, device), rand((70, 20), dtype, device)
    d = gemm(a, b, out_dtype=torch.float32)
    assert d.dtype == torch.float32
    assert_gemm_close(d, a, b)


def test_fp64(device: str) -> None:
    a, b, c = (rand(s, torch.float64, device) for s in [(45, 37), (37, 29), (45, 29)])
    d = gemm(a, b, c, alpha=0.375, beta=-1.0)
    assert d.dtype == torch.float64
    assert_gemm_close(d, a, b, c, alpha=0.375, beta=-1.0)


def test_fp64_scalars_keep_fp64_precision(device: str) -> None:
    """0.3 and -0.1 are not fp32 values: rounded through fp32 (as a cast in Triton's interpreter
    does) they put errors of ~1e-8 into the result, far over fp64's bound."""
    a, b, c = (rand(s, torch.float64, device) for s in [(130, 70), (70, 90), (130, 90)])
    d = gemm(a, b, c, alpha=0.3, beta=-0.1)
    assert_gemm_close(d, a, b, c, alpha=0.3, beta=-0.1)


def test_tf32_precision_opt_in(device: str) -> None:
    a, b = rand((40, 64), torch.float32, device), rand((64, 30), torch.float32, device)
    assert_gemm_close(gemm(a, b, precision="tf32"), a, b, precision="tf32")


@pytest.mark.parametrize("k", [1, 2])
def test_tf32_short_k_within_the_truncated_operands_bound(k: int, device: str) -> None:
    """At K = 1 each element is one product whose error is its operands' conversion alone: the
    tensor cores truncate float32 to TF32, up to 2·2⁻¹⁰ of |a·b| — a bound for operands rounded
    to nearest (2·2⁻¹¹) failed on the GPU, where a fifth of such products exceed it."""
    a, b = rand((96, k), torch.float32, device), rand((k, 80), torch.float32, device)
    assert_gemm_close(gemm(a, b, precision="tf32"), a, b, precision="tf32")
    assert_gemm_close(gemm(a, b, precision="tf32x3"), a, b, precision="tf32x3")


@pytest.mark.parametrize("shape", [(40, 64, 30), (130, 72, 97)])
def test_tf32x3_precision_opt_in(shape: tuple[int, int, int], device: str) -> None:
    """fp32 as three TF32 products, held to its bound: operand error 1.5·2⁻²⁰ against tf32's 2⁻⁹,
    so on a GPU a kernel that dropped the small products would fail it at these short K."""
    m, k, n = shape
    a, b, c = (rand(s, torch.float32, device) for s in ((m, k), (k, n), (m, n)))
    assert_gemm_close(gemm(a, b, precision="tf32x3"), a, b, precision="tf32x3")
    d = gemm(a, b, c, alpha=0.5, beta=-1.5, precision="tf32x3")
    assert_gemm_close(d, a, b, c, alpha=0.5, beta=-1.5, precision="tf32x3")
    choice = explain(a, b, precision="tf32x3")
    assert choice is not None and "tf32x3" in choice.reason  # its own logic key, not fp32's


def test_tensor_core_precisions_leave_other_dtypes_alone(device: str) -> None:
    a, b = rand((20, 24), torch.bfloat16, device), rand((24, 12), torch.bfloat16, device)
    for precision in ("tf32", "tf32x3"):
        assert explain(a, b, precision=precision) == explain(a, b)
        assert_gemm_close(gemm(a, b, precision=precision), a, b)


@pytest.mark.parametrize("shapes", [((3, 20, 30), (3, 30, 10)), ((4, 20, 30), (30, 10)),
                                    ((20, 30), (2, 30, 10)), ((1, 20, 30), (5, 30, 10))])
def test_batched_with_broadcast(shapes: tuple, device: str) -> None:
    sa, sb = shapes
    a, b = rand(sa, torch.float32, device), rand(sb, torch.float32, device)
    d = gemm(a, b)
    batch = max(a.shape[0] if a.dim() == 3 else 1, b.shape[0] if b.dim() == 3 else 1)
    assert d.shape == (batch, 20, 10)
    for i in range(batch):
        ai = a[i if a.shape[0] > 1 else 0] if a.dim() == 3 else a
        bi = b[i if b.shape[0] > 1 else 0] if b.dim() == 3 else b
        assert_gemm_close(d[i], ai, bi)


def test_batched_transposed_and_beta(device: str) -> None:
    a = rand((3, 25, 18), torch.float16, device)  # op(A) = A^T: 18 x 25
    b = rand((3, 11, 25), torch.float16, device)  # op(B) = B^T: 25 x 11
    c = rand((3, 18, 11), torch.float16, device)
    d = gemm(a, b, c, alpha=2.0, beta=0.5, trans_a=True, trans_b=True)
    for i in range(3):
        assert_gemm_close(d[i], a[i], b[i], c[i], alpha=2.0, beta=0.5, trans_a=True, trans_b=True)


@pytest.mark.parametrize("m,n,k", [(0, 5, 3), (5, 0, 3), (0, 0, 0)])
def test_empty_output(m: int, n: int, k: int, device: str) -> None:
    d = gemm(torch.empty(m, k, device=device), torch.empty(k, n, device=device))
    assert d.shape == (m, n)


def test_empty_batch(device: str) -> None:
    d = gemm(torch.empty(0, 4, 3, device=device), torch.empty(0, 3, 5, device=device))
    assert d.shape == (0, 4, 5)
    # against a broadcast operand (2-D, or a batch of one) the batch stays empty: nothing launches
    for b in (torch.empty(3, 5, device=device), torch.empty(1, 3, 5, device=device)):
        assert gemm(torch.empty(0, 4, 3, device=device), b).shape == (0, 4, 5)
        assert gemm(b.transpose(-1, -2), torch.empty(0, 3, 4, device=device)).shape == (0, 5, 4)


def test_k_zero_gives_beta_c(device: str) -> None:
    a, b = torch.empty(6, 0, device=device), torch.empty(0, 4, device=device)
    c = rand((6, 4), torch.float32, device)
    torch.testing.assert_close(gemm(a, b, c, beta=2.0), 2.0 * c)
    assert torch.count_nonzero(gemm(a, b)) == 0


def test_tma_stages_fit_the_output(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stages are cut only where the operand stages plus the epilogue's buffer exceed the device's
    shared memory (the H200's 232448 bytes: 128×256×128 fp8 with an fp32 D measured 262176)."""
    from types import SimpleNamespace

    from tessera.blas.kernels import gemm_tma

    d, fp8_tile = torch.empty(0), TmaConfig(128, 256, 128, 8, 8, 4, False, 2)
    assert gemm_tma.fitting_stages(fp8_tile, 1, 4, d) == 4  # no limit known: as configured
    with building_for("cuda", "sm_90"):  # a pack build: its target's shared memory, as a call there
        assert gemm_tma.fitting_stages(fp8_tile, 1, 4, d) == 3
    monkeypatch.setattr(gemm_tma, "device_info", lambda _: SimpleNamespace(shared_memory_per_block=232448))
    assert gemm_tma.fitting_stages(fp8_tile, 1, 2, d) == 4  # bf16 D: 229408 bytes measured
    assert gemm_tma.fitting_stages(fp8_tile, 1, 4, d) == 3  # fp32 D
    quarters = dataclasses.replace(fp8_tile, epilogue_split=4)
    assert gemm_tma.fitting_stages(quarters, 1, 4, d) == 4  # fp32 D stored in quarters
    assert gemm_tma.fitting_stages(TmaConfig(256, 128, 64, 8, 8, 4, False, 2), 2, 2, d) == 4  # shipped bf16
    assert gemm_tma.fitting_stages(TmaConfig(256, 128, 64, 8, 8, 4, False, 2), 2, 4, d) == 3
    # with C the epilogue converts C's whole tile beside D's buffer: an fp32 C and D (bf16 inputs,
    # as the bf16-product precisions run) take halves, then 3 stages fit (213016 bytes measured)
    wide = TmaConfig(128, 256, 64, 8, 8, 3)
    assert gemm_tma.fit_for_c(wide, 2, 4, 4, d) == dataclasses.replace(wide, epilogue_split=2)
    assert gemm_tma.fitting_stages(dataclasses.replace(wide, epilogue_split=2), 2, 4, d) == 3
    assert gemm_tma.fit_for_c(wide, 2, 2, 2, d) == wide  # bf16 C and D: as tuned
    # a flattened loop keeps C's tile beside the stages (344088 bytes flattened in halves with an
    # fp32 C and D: an H100 refused it): not flattened there; flattened where everything fits
    flat = dataclasses.replace(wide, epilogue_split=2, flatten=True)
    assert gemm_tma.fit_for_c(flat, 2, 4, 4, d) == dataclasses.replace(flat, flatten=False)
    small = TmaConfig(128, 128, 64, 8, 8, 3, False, 1, True)
    assert gemm_tma.fit_for_c(small, 2, 2, 2, d) == small
    monkeypatch.setattr(gemm_tma, "device_info", lambda _: SimpleNamespace(shared_memory_per_block=1000))
    assert gemm_tma.fitting_stages(TmaConfig(64, 64, 32, 8, 4, 3), 2, 2, d) == 1  # never below one
    assert gemm_tma.fit_for_c(wide, 2, 4, 4, d).epilogue_split == 4  # never beyond quarters


def test_forced_configs_agree(device: str) -> None:
    """Every family and a spread of tile shapes compute the same function (edge tiles included;
    M = 72 and N = 88: rows and columns of 144 and 176 bytes, which descriptors take, so the TMA
    configurations run, Aᵀ too)."""
    a, b = rand((72, 48), torch.float16, device), rand((48, 88), torch.float16, device)
    c = rand((72, 88), torch.float16, device)
    configs = [TileConfig(16, 32, 16, 1, 4, 1), TileConfig(64, 32, 32, 4, 4, 2),
               TmaConfig(64, 64, 32, 4, 4, 2), TmaConfig(64, 64, 16, 8, 4, 2, False, 2),
               TmaConfig(32, 64, 16, 8, 4, 2, False, 2, True),  # 3 x 2 tiles, flattened loop
               TmaConfig(64, 64, 16, 8, 4, 2, False, 4)]  # D stored in four column slices
    for config in configs:
        with space.forced(config):
            assert explain(a, b, c, beta=-1.0).config == config
            assert_gemm_close(gemm(a, b, c, alpha=1.5, beta=-1.0), a, b, c, alpha=1.5, beta=-1.0)
            a_t = a.t().contiguous()
            assert explain(a_t, b, trans_a=True).config == config
            d = gemm(a_t, b, trans_a=True)
            assert_gemm_close(d, a_t, b, trans_a=True)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    m=st.integers(1, 70), n=st.integers(1, 70), k=st.integers(1, 70),
    trans_a=st.booleans(), trans_b=st.booleans(),
    layout_a=st.sampled_from(["row", "col", "slice"]), layout_b=st.sampled_from(["row", "col", "slice"]),
    beta=st.sampled_from([0.0, 1.0, -0.5]),
)
def test_property_shapes_and_strides(
    m: int, n: int, k: int, trans_a: bool, trans_b: bool, layout_a: str, layout_b: str,
    beta: float, device: str,
) -> None:
    a = operand(*((k, m) if trans_a else (m, k)), torch.float32, device, layout_a)
    b = operand(*((n, k) if trans_b else (k, n)), torch.float32, device, layout_b)
    c = rand((m, n), torch.float32, device)
    d = gemm(a, b, c, beta=beta, trans_a=trans_a, trans_b=trans_b)
    assert_gemm_close(d, a, b, c, beta=beta, trans_a=trans_a, trans_b=trans_b)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    m=st.integers(0, 9), n=st.integers(0, 9), k=st.integers(0, 9),
    batch_a=st.sampled_from([None, 0, 1, 3]), batch_b=st.sampled_from([None, 0, 1, 3]),
    trans_a=st.booleans(), trans_b=st.booleans(),
    c_shape=st.sampled_from(["none", "full", "row", "column", "batch-one"]),
    alpha=st.sampled_from([1.0, -2.0, 0.0]),
)
def test_property_batches_broadcasting_and_empty_dimensions(
    m: int, n: int, k: int, batch_a: int | None, batch_b: int | None, trans_a: bool, trans_b: bool,
    c_shape: str, alpha: float, device: str,
) -> None:
    """Any mix of a 2-D operand, a batch of one, an empty batch and a batch of three (where they
    broadcast), zero-sized M, N or K, transposes and a C of several broadcast shapes, against
    torch's fp64 arithmetic on the same operands — or an InvalidArgumentError where batches clash."""
    def make(batch: int | None, rows: int, cols: int, trans: bool) -> torch.Tensor:
        shape = (cols, rows) if trans else (rows, cols)
        return torch.randn(*(() if batch is None else (batch,)), *shape, dtype=torch.float64, device=device)

    a, b = make(batch_a, m, k, trans_a), make(batch_b, k, n, trans_b)
    sizes = {x for x in (batch_a, batch_b) if x is not None}
    batch = None if not sizes else (max(sizes) if sizes <= {1, 3} else 0)
    if {0, 3} <= sizes:
        with pytest.raises(InvalidArgumentError, match="batch sizes differ"):
            gemm(a, b, trans_a=trans_a, trans_b=trans_b)
        return
    out_shape = ((batch,) if batch is not None else ()) + (m, n)
    c = {"none": None, "full": out_shape, "row": (n,), "column": (m, 1),
         "batch-one": (1, m, n) if batch is not None else None}[c_shape]
    c = None if c is None else torch.randn(*c, dtype=torch.float64, device=device)
    beta = 0.0 if c is None else 0.5
    d = gemm(a, b, c, alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b)
    want = alpha * (a.transpose(-1, -2) if trans_a else a) @ (b.transpose(-1, -2) if trans_b else b)
    if c is not None:
        want = want + beta * c
    assert d.shape == want.shape == out_shape
    torch.testing.assert_close(d, want, rtol=1e-12, atol=1e-12)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    m=st.integers(1, 20), n=st.integers(1, 20), k=st.integers(0, 20),
    out_layout=st.sampled_from(["row", "col", "padded-row", "padded-col"]),
    in_place=st.booleans(), beta=st.sampled_from([0.0, 1.0, -0.5]),
)
def test_property_out_views_and_in_place_updates(
    m: int, n: int, k: int, out_layout: str, in_place: bool, beta: float, device: str,
) -> None:
    """``out`` as a row- or column-major view, padded inside a larger buffer, possibly C itself
    (BLAS's in-place update), twice in a row (the second call replays the first's recipe): the
    view holds the fp64 result and nothing around it in the buffer changes."""
    a = torch.randn(m, k, dtype=torch.float64, device=device)
    b = torch.randn(k, n, dtype=torch.float64, device=device)
    padded = out_layout.startswith("padded")
    rows, cols = (m + 3, n + 5) if padded else (m, n)
    buffer = torch.randn(rows, cols, dtype=torch.float64, device=device)
    if out_layout.endswith("col"):
        buffer = torch.randn(cols, rows, dtype=torch.float64, device=device).t()
    out = buffer[1:m + 1, 2:n + 2] if padded else buffer
    around = torch.zeros(rows, cols, dtype=torch.bool, device=device)  # the buffer outside out
    if padded:
        around[:] = True
        around[1:m + 1, 2:n + 2] = False
    for _ in range(2):
        before = buffer.clone()
        c = out if in_place else torch.randn(m, n, dtype=torch.float64, device=device)
        want = a @ b + beta * c.clone()
        got = gemm(a, b, c if beta != 0.0 else None, beta=beta, out=out)
        assert got is out
        torch.testing.assert_close(out, want, rtol=1e-12, atol=1e-12)
        assert torch.equal(buffer[around], before[around])


@pytest.mark.parametrize("sa,sb", [((5,), (5,)), ((5,), (5, 3)), ((4, 5), (5,)), ((4, 5), (5, 3)),
                                   ((2, 4, 5), (5, 3)), ((5,), (2, 5, 3)), ((2, 4, 5), (5,)),
                                   ((2, 4, 5), (2, 5, 3)), ((1, 4, 5), (3, 5, 2)),
                                   # N-D: attention-shaped, a matrix against 4-D, broadcasting
                                   # batch dimensions, a batch of one, an empty batch, K = 0
                                   ((2, 3, 4, 5), (2, 3, 5, 6)), ((2, 3, 4, 5), (5, 6)),
                                   ((5,), (2, 3, 5, 4)), ((2, 1, 4, 5), (1, 3, 5, 2)),
                                   ((3, 1, 4, 5), (2, 5, 6)), ((1, 1, 4, 5), (1, 5, 3)),
                                   ((0, 2, 4, 5), (5, 3)), ((2, 3, 4, 0), (2, 3, 0, 2))])
def test_matmul_follows_torch(sa: tuple, sb: tuple, device: str) -> None:
    a, b = rand(sa, torch.float32, device), rand(sb, torch.float32, device)
    expected = torch.matmul(a.cpu().double(), b.cpu().double())
    got = matmul(a, b)
    assert got.shape == expected.shape
    torch.testing.assert_close(got.cpu().double(), expected, rtol=1e-5, atol=1e-5)
    # out= as torch.matmul takes it: contiguous, and with columns two apart (not a view of the
    # GEMM's output: written through a copy); the same result either way
    for out in (torch.full(expected.shape, float("nan"), device=device),
                torch.full((*expected.shape, 2), float("nan"), device=device)[..., 0]):
        assert matmul(a, b, out=out) is out
        torch.testing.assert_close(out.cpu().double(), expected, rtol=1e-5, atol=1e-5)


def test_matmul_out_is_checked_before_anything_runs(device: str) -> None:
    a, b = rand((2, 4, 5), torch.float32, device), rand((5, 3), torch.float32, device)
    for out, message in ((torch.empty(2, 3, 4, device=device), r"out must be the result's shape \(2, 4, 3\)"),
                         (torch.empty(2, 4, 3, device=device, dtype=torch.float64), "and dtype float32"),
                         (torch.empty(1, 4, 3, device=device).expand(2, 4, 3), "non-zero strides"),
                         (a[:, :, :3], "out overlaps input a")):
        before = a.clone()
        with pytest.raises(tessera.InvalidArgumentError, match=message):
            matmul(a, b, out=out)
        assert torch.equal(a, before)
    out = torch.empty(2, 4, 3, device=device)
    with pytest.raises(tessera.InvalidArgumentError, match="out= does not record gradients"):
        matmul(a.requires_grad_(), b, out=out)  # as torch.matmul refuses it


_PRECISION_CHILD = r"""
import json
import torch
from tessera._core.device import torch_matmul_tf32_as
from tessera.blas.api import _matmul_precision

x, seen = torch.empty(1), []
seen.append(_matmul_precision(x))  # torch's default: IEEE
if hasattr(torch.backends, "fp32_precision"):  # the new API: reading allow_tf32 raises after it
    torch.backends.fp32_precision = "tf32"
    seen.append(_matmul_precision(x))
    with torch_matmul_tf32_as(False):
        seen.append(_matmul_precision(x))
    seen.append(_matmul_precision(x))
    torch.backends.cuda.matmul.fp32_precision = "ieee"  # the backend's own setting wins
    seen.append(_matmul_precision(x))
torch.backends.cuda.matmul.allow_tf32 = True  # the legacy API
seen.append(_matmul_precision(x))
torch.set_float32_matmul_precision("highest")
seen.append(_matmul_precision(x))
seen.append(_matmul_precision(x.double()))
print(json.dumps(seen))
"""


def test_matmul_follows_torchs_float32_precision_through_either_api() -> None:
    """matmul's float32 is TF32 exactly where torch.matmul's is, set by the legacy ``allow_tf32`` /
    ``set_float32_matmul_precision`` or by the ``fp32_precision`` API (after which reading
    ``allow_tf32`` raises in torch: reading it crashed matmul); benchmarks set it and restore it
    alike. In a child process: these are process-wide torch settings."""
    import json
    import subprocess
    import sys

    from child import compiler_env

    done = subprocess.run([sys.executable, "-c", _PRECISION_CHILD], env=compiler_env(), capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    new_api = ["tf32", "ieee", "tf32", "ieee"] if hasattr(torch.backends, "fp32_precision") else []
    assert seen == ["ieee", *new_api, "tf32", "ieee", "ieee"]


def test_dlpack_inputs(device: str) -> None:
    if device != "cpu":
        pytest.skip("numpy operands only exist on the CPU")
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((9, 7)).astype(np.float32)
    b = rng.standard_normal((7, 5)).astype(np.float32)
    d = gemm(a, b)
    assert_gemm_close(d, torch.from_numpy(a), torch.from_numpy(b))


def test_top_level_namespace() -> None:
    assert tessera.blas.gemm is gemm
    assert op(torch.ones(2, 3), True).shape == (3, 2)


def test_explain_matches_what_runs(device: str, monkeypatch: pytest.MonkeyPatch,
                                   capfd: pytest.CaptureFixture) -> None:
    a, b = rand((40, 24), torch.float32, device), rand((24, 30), torch.float32, device)
    choice = tessera.blas.explain(a, b)
    assert choice is not None and choice.config.kernel in ("gemm_tile", "gemm_tma")
    monkeypatch.setenv("TESSERA_LOG", "trace")
    gemm(a, b)
    assert str(choice.config) in capfd.readouterr().err
    assert tessera.blas.explain(torch.empty(0, 3, device=device), torch.empty(3, 2, device=device)) is None


def test_layout_copies_keep_values(device: str) -> None:
    from tessera.blas.kernels.copy import column_major_copy, row_major_copy

    x = rand((3, 70, 130), torch.float32, device).transpose(-1, -2)[:, 1:, :]  # (3, 129, 70) strided
    col = column_major_copy(x)
    row = row_major_copy(x)
    assert col.stride(-2) == 1 and row.stride(-1) == 1
    assert torch.equal(col, x) and torch.equal(row, x)


def test_forced_tma_config_with_bf16_stays_correct(device: str) -> None:
    a, b = rand((64, 48), torch.bfloat16, device), rand((48, 80), torch.bfloat16, device)
    with space.forced(TmaConfig(64, 64, 16, 8, 4, 2)):
        assert_gemm_close(gemm(a, b), a, b)


@pytest.mark.parametrize("batched", [False, True])
def test_k_major_copies_for_tf32(batched: bool, device: str) -> None:
    """The Hopper tf32 path copies A to row-major and B to column-major; values must not change."""
    from tessera.blas.api import _k_major

    shape_a, shape_b = ((3, 20, 12), (3, 12, 9)) if batched else ((20, 12), (12, 9))
    a = rand(shape_a[::-1] if not batched else (3, 12, 20), torch.float32, device).transpose(-1, -2)
    b = rand(shape_b, torch.float32, device)  # row-major: N contiguous
    ka, kb = _k_major(a, b, materialize=True)
    assert ka.shape == a.shape and kb.shape == b.shape
    assert ka.stride(-1) == 1 and kb.stride(-2) == 1
    assert torch.equal(ka, a) and torch.equal(kb, b)
    ma, mb = _k_major(a, b, materialize=False)
    assert ma.device.type == "meta" and mb.stride(-2) == 1 and mb.shape == b.shape


SPLITK_CONFIGS = [SplitKConfig(16, 32, 16, 3, 4, 2), SplitKConfig(32, 16, 32, 2, 4, 1)]


@pytest.mark.parametrize("config", SPLITK_CONFIGS, ids=lambda c: c.short())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_split_k_family(config: SplitKConfig, dtype: torch.dtype, device: str) -> None:
    a, b, c = rand((9, 130), dtype, device), rand((130, 37), dtype, device), rand((9, 37), dtype, device)
    with space.forced(config):
        d = gemm(a, b, c, alpha=1.5, beta=-0.5 if dtype != torch.float64 else -1.0)
        again = gemm(a, b, c, alpha=1.5, beta=-0.5 if dtype != torch.float64 else -1.0)
    assert_gemm_close(d, a, b, c, alpha=1.5, beta=-0.5 if dtype != torch.float64 else -1.0)
    assert torch.equal(d, again), "split-K must be bit-reproducible"


def test_split_k_batched_transposed_broadcast(device: str) -> None:
    a = rand((3, 70, 11), torch.float32, device)  # op(A) = A^T: 11 x 70
    b = rand((70, 13), torch.float32, device)  # broadcast over the batch
    with space.forced(SplitKConfig(16, 16, 16, 4, 4, 2)):
        d = gemm(a, b, trans_a=True)
    for i in range(3):
        assert_gemm_close(d[i], a[i], b, trans_a=True)


# On 41 × 37 (K = 75): 4 programs take 4 of 6 tiles whole, then share 2 tiles' 10 iterations
# (3 each: cuts at different K-iterations); 5 share the last tile's 3 iterations one each; 7 share
# 2 tiles' 10 iterations 2 each (a program ending one tile and starting the next); 40 (more
# programs than tiles) share all 45 iterations 2 each
STREAMK_CONFIGS = [StreamKConfig(16, 32, 16, 4, 4, 2), StreamKConfig(32, 16, 32, 5, 4, 1),
                   StreamKConfig(16, 16, 16, 7, 4, 1), StreamKConfig(16, 16, 16, 40, 4, 1)]


@pytest.mark.parametrize("config", STREAMK_CONFIGS, ids=lambda c: c.short())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_stream_k_family(config: StreamKConfig, dtype: torch.dtype, device: str) -> None:
    a, b, c = rand((41, 75), dtype, device), rand((75, 37), dtype, device), rand((41, 37), dtype, device)
    beta = -0.5 if dtype != torch.float64 else -1.0
    with space.forced(config):
        d = gemm(a, b, c, alpha=1.5, beta=beta)
        again = gemm(a, b, c, alpha=1.5, beta=beta)
    assert_gemm_close(d, a, b, c, alpha=1.5, beta=beta)
    assert torch.equal(d, again), "stream-K must be bit-reproducible"


@pytest.mark.parametrize("config", [StreamKConfig(16, 32, 16, 4, 4, 2, True),
                                    StreamKConfig(32, 16, 32, 5, 4, 1, True)], ids=lambda c: c.short())
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_stream_k_through_descriptors(config: StreamKConfig, dtype: torch.dtype, device: str) -> None:
    """Descriptor loads (rows of 16 bytes; A and B in either layout), tiles cut at different
    K-iterations, C and alpha; bit-reproducible. (bf16 needs the GPU: the interpreter's bf16 dot.)"""
    if device == "cuda" and torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("tensor descriptors need sm_90+")
    a, b, c = rand((48, 80), dtype, device), rand((80, 40), dtype, device), rand((48, 40), dtype, device)
    with space.forced(config):
        assert explain(a, b, c, alpha=1.5, beta=-0.5).config == config  # not the fallback
        d = gemm(a, b, c, alpha=1.5, beta=-0.5)
        assert torch.equal(d, gemm(a, b, c, alpha=1.5, beta=-0.5)), "stream-K must be bit-reproducible"
        a_t, b_t = a.t().contiguous(), b.t().contiguous()  # column-major op(A), op(B)
        assert explain(a_t, b_t, trans_a=True, trans_b=True).config == config
        assert_gemm_close(gemm(a_t, b_t, trans_a=True, trans_b=True), a_t, b_t, trans_a=True, trans_b=True)
    assert_gemm_close(d, a, b, c, alpha=1.5, beta=-0.5)


def test_stream_k_transposed_and_batch_fallback(device: str) -> None:
    a = rand((70, 11), torch.float32, device)  # op(A) = A^T: 11 x 70
    b = rand((13, 70), torch.float32, device)  # op(B) = B^T
    with space.forced(StreamKConfig(16, 16, 16, 3, 4, 1)):
        assert_gemm_close(gemm(a, b, trans_a=True, trans_b=True), a, b, trans_a=True, trans_b=True)
        batched = rand((2, 11, 70), torch.float32, device)
        assert explain(batched, b, trans_b=True).reason == "forced stream-K config takes no batch"


@pytest.mark.parametrize("config", [TileConfig(16, 16, 16, 1, 4, 1), SplitKConfig(16, 16, 16, 2, 4, 1)],
                         ids=lambda c: c.kernel)
def test_batches_beyond_the_grid_limit_are_sliced(config: space.Config, device: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from tessera.blas.kernels import gemm_tile

    monkeypatch.setattr(gemm_tile, "MAX_GRID_Y", 2)  # the real limit (65535) needs huge batches
    a, b, c = rand((5, 8, 16), torch.float32, device), rand((16, 8), torch.float32, device), rand(
        (5, 8, 8), torch.float32, device)
    with space.forced(config):
        d = gemm(a, b, c, beta=1.0)
    for i in range(5):
        assert_gemm_close(d[i], a[i], b, c[i], beta=1.0)


@pytest.mark.parametrize("precision", ["tf32", "tf32x3"])
def test_repeat_tf32_calls_copy_k_major_again(precision: str, device: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Where TF32 MMAs want K-major operands (Hopper; forced here), the first call copies B
    column-major (tf32x3 too: from a row-major B it ran 2.2–2.4x slower on the H200) and a repeat
    call through the recipe copies the new call's B, not the first one's."""
    from tessera.blas import api

    monkeypatch.setattr(space, "tf32_wants_k_major", lambda info: True)
    api._RECIPES.clear()
    a = torch.randn(24, 40, device=device)
    for b in (torch.randn(40, 20, device=device), torch.randn(40, 20, device=device)):
        assert_gemm_close(gemm(a, b, precision=precision), a, b, precision=precision)
    (recipe,) = api._RECIPES.recipes()
    assert recipe.k_major


@pytest.mark.parametrize(("trans_a", "batch"), [(False, None), (True, None), (True, 3)])
def test_repeat_tf32_calls_replay_their_k_major_copies(trans_a: bool, batch: int | None, device: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A repeat tf32 call on Hopper (forced here) replays the first call's K-major copies (B's, and
    A's when op(A) is column-major; batched too) onto new buffers without planning them again, and
    the result is the new operands' product; an odd-strided B (copied by torch first) is planned
    again on every call, and stays right."""
    from tessera.blas import api

    monkeypatch.setattr(space, "tf32_wants_k_major", lambda info: True)
    api._RECIPES.clear()
    lead = () if batch is None else (batch,)

    def operands() -> tuple[torch.Tensor, torch.Tensor]:
        a = torch.randn(*lead, *((40, 24) if trans_a else (24, 40)), device=device)
        return a, torch.randn(*lead, 40, 20, device=device)

    def check(a: torch.Tensor, b: torch.Tensor) -> None:
        got = gemm(a, b, trans_a=trans_a, precision="tf32")
        op_a = a.transpose(-1, -2) if trans_a else a
        for i in range(batch or 1):
            pick = (lambda t, i=i: t[i]) if batch else (lambda t: t)
            assert_gemm_close(pick(got), pick(op_a), pick(b), precision="tf32")

    check(*operands())
    (recipe,) = api._RECIPES.recipes()
    assert recipe.copies is not None
    assert [i for i, _, _ in recipe.copies.buffers] == ([0, 1] if trans_a else [1])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(api, "_k_major", None)  # a replayed copy plans nothing
        for _ in range(2):
            check(*operands())
    api._RECIPES.clear()
    a, _ = operands()
    wide = torch.randn(*lead, 40, 40, device=device)[..., ::2]  # neither row- nor column-major
    check(a, wide)
    (recipe,) = api._RECIPES.recipes()
    assert recipe.copies is None
    check(a, torch.randn(*lead, 40, 40, device=device)[..., ::2])


def test_repeat_calls_with_out_reuse_the_plan_and_still_refuse_overlap(device: str) -> None:
    """A call with ``out`` stores a recipe keyed by out's layout too: a repeat call writes into the
    new ``out`` without planning again, an ``out`` of another layout is planned, and an ``out``
    that now overlaps A or B is refused as on a first call, before anything is written."""
    from tessera.blas import api

    api._RECIPES.clear()
    a, b = torch.randn(40, 24, device=device), torch.randn(24, 32, device=device)
    out = torch.empty(40, 32, device=device)
    assert gemm(a, b, out=out) is out
    assert_gemm_close(out, a, b)
    assert len(api._RECIPES) == 1
    fresh_a, fresh_out = torch.randn(40, 24, device=device), torch.full((40, 32), float("nan"), device=device)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(api, "_plan", None)  # a repeat signature must not plan again
        assert gemm(fresh_a, b, out=fresh_out) is fresh_out
    assert_gemm_close(fresh_out, fresh_a, b)
    column_major = torch.empty(32, 40, device=device).t()  # another layout: another recipe
    assert_gemm_close(gemm(a, b, out=column_major), a, b)
    assert len(api._RECIPES) == 2
    # out inside A's storage, with out's layout and alignment unchanged: refused, A untouched
    storage = torch.randn(40 * 32 + 40 * 24, device=device)
    a_in, b_in = storage[:40 * 24].view(40, 24), torch.randn(24, 32, device=device)
    separate = torch.empty(40 * 32 + 40 * 24, device=device)[40 * 24:].view(40, 32)
    assert_gemm_close(gemm(a_in, b_in, out=separate), a_in, b_in)  # the recipe for this signature
    before = storage.clone()
    overlapping = storage[40 * 24 - 40 * 32 // 2:][: 40 * 32].view(40, 32)  # shares A's second half
    assert overlapping.data_ptr() % 16 == separate.data_ptr() % 16
    with pytest.MonkeyPatch.context() as patch, pytest.raises(tessera.InvalidArgumentError,
                                                               match="out overlaps input a"):
        patch.setattr(api, "_plan", None)  # refused by the recipe's own check, not by planning again
        gemm(a_in, b_in, out=overlapping)
    assert torch.equal(storage, before)


@pytest.mark.parametrize("c_shape", [(40, 32), (32,), (40, 1)], ids=["full", "row", "column"])
def test_repeat_calls_with_c_reuse_the_plan(c_shape: tuple[int, ...], device: str) -> None:
    """A call with C (full, or broadcast: a bias row or column) keeps a recipe keyed by C's layout
    and beta: repeat calls replay on new A, B and C with a new alpha each, into a new result or
    ``out`` — C itself included (an in-place update) — without planning again; beta = 0 never
    reads C (NaN there does not leak); an ``out`` that meets C without being C is refused as on a
    first call."""
    from tessera.blas import api

    api._RECIPES.clear()

    def operands() -> tuple[torch.Tensor, ...]:
        return (torch.randn(40, 24, device=device), torch.randn(24, 32, device=device),
                torch.randn(c_shape, device=device))

    a, b, c = operands()
    assert_gemm_close(gemm(a, b, c, alpha=2.0, beta=0.5), a, b, c, alpha=2.0, beta=0.5)
    out = torch.empty(40, 32, device=device)
    assert gemm(a, b, c, alpha=2.0, beta=0.5, out=out) is out
    assert_gemm_close(out, a, b, c, alpha=2.0, beta=0.5)
    assert len(api._RECIPES) == 2 and all(r.reads_c and r.replays for r in api._RECIPES.recipes())
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(api, "_plan", None)  # a repeat signature must not plan again
        for alpha in (3.0, -0.25):
            a, b, c = operands()
            assert_gemm_close(gemm(a, b, c, alpha=alpha, beta=0.5), a, b, c, alpha=alpha, beta=0.5)
            out = torch.full((40, 32), float("nan"), device=device)
            assert gemm(a, b, c, alpha=alpha, beta=0.5, out=out) is out
            assert_gemm_close(out, a, b, c, alpha=alpha, beta=0.5)
    if c_shape == (40, 32):  # out = C: the recipe of a distinct out takes the in-place update
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(api, "_plan", None)
            before = c.clone()
            assert gemm(a, b, c, alpha=1.5, beta=0.5, out=c) is c
            assert_gemm_close(c, a, b, before, alpha=1.5, beta=0.5)
            storage = torch.randn(2 * 40 * 32, device=device)
            meets = storage[: 40 * 32].view(40, 32), storage[40 * 32 // 2:][: 40 * 32].view(40, 32)
            with pytest.raises(tessera.InvalidArgumentError, match="out overlaps input c"):
                gemm(a, b, meets[0], alpha=1.5, beta=0.5, out=meets[1])
    nan_c = torch.full(c_shape, float("nan"), device=device)  # beta = 0: C never read
    for _ in range(2):
        assert torch.isfinite(gemm(a, b, nan_c, beta=0.0)).all()


@pytest.mark.parametrize("config", [TmaConfig(64, 128, 64, 8, 4, 4),
                                    StreamKConfig(64, 128, 64, 0, 4, 3, True),
                                    SplitKConfig(16, 64, 128, 4, 4, 3)], ids=lambda c: c.short())
@pytest.mark.parametrize("c_shape", [(48, 256), (256,)], ids=["full", "row"])
def test_repeat_calls_with_c_replay_every_family(config: space.Config, c_shape: tuple[int, ...],
                                                 device: str) -> None:
    """16-bit calls with C (full, or a bias row) through the descriptor, stream-K and split-K
    families keep a recipe whose launches replay: right on three operand sets twice, a new alpha
    each call, and into C itself (bf16 on a GPU; fp16 in the interpreter, whose bf16 dot is
    wrong)."""
    from tessera.blas import api

    dtype = torch.bfloat16 if device == "cuda" else torch.float16
    api._RECIPES.clear()
    sets = [tuple(torch.randn(shape, device=device).to(dtype) for shape in ((48, 512), (512, 256), c_shape))
            for _ in range(3)]
    with space.forced(config):
        for i, (a, b, c) in enumerate(sets * 2):
            alpha = 0.5 + i
            assert_gemm_close(gemm(a, b, c, alpha=alpha, beta=0.75), a, b, c, alpha=alpha, beta=0.75)
        (recipe,) = api._RECIPES.recipes()
        assert recipe.reads_c and recipe.replays is not None and recipe.choice.config == config
        if c_shape == (48, 256):
            a, b, c = sets[0]
            before = c.clone()
            assert gemm(a, b, c, alpha=2.0, beta=0.75, out=c) is c
            assert_gemm_close(c, a, b, before, alpha=2.0, beta=0.75)


def test_out_interleaved_with_an_operand_is_taken(device: str) -> None:
    """An ``out`` whose byte range meets A's but which shares no element with it (the odd columns
    of the buffer whose even columns are A) is taken, on a first call and on a repeat one (the
    recipe's byte ranges meet, so it decides element by element); an ``out`` on A's own columns,
    one over, shares elements and is refused before anything is written."""
    from tessera.blas import api

    api._RECIPES.clear()
    b = torch.randn(24, 24, device=device)
    for _ in range(2):
        storage = torch.randn(40, 48, device=device)
        a, out = storage[:, 0::2], storage[:, 1::2]
        want = a.double() @ b.double()
        assert gemm(a, b, out=out) is out
        assert torch.allclose(out.double(), want, rtol=1e-4, atol=1e-4)
    assert len(api._RECIPES) == 1
    storage = torch.randn(40, 49, device=device)
    before = storage.clone()
    with pytest.raises(tessera.InvalidArgumentError, match="out overlaps input a"):
        gemm(storage[:, 0:48:2], b, out=storage[:, 2:49:2])  # out's columns are A's, one over
    assert torch.equal(storage, before)


_ALPHA_CONFIGS = [None, SplitKConfig(16, 16, 16, 4, 4, 2), StreamKConfig(16, 16, 16, 7, 4, 1)]


@pytest.mark.parametrize("config", _ALPHA_CONFIGS, ids=["selected", "split-K", "stream-K"])
def test_repeat_calls_take_a_new_alpha(config: object, device: str) -> None:
    """A new alpha each call (a learning rate's schedule) replays the first call's launches with its
    value in alpha's places — no planning again — right on every family's epilogue (split-K's sum,
    stream-K's fix-up); alpha 1 and 0 are other signatures."""
    from tessera.blas import api

    api._RECIPES.clear()
    a, b = torch.randn(40, 64, device=device), torch.randn(64, 24, device=device)
    with space.forced(config) if config is not None else contextlib.nullcontext():
        assert_gemm_close(gemm(a, b, alpha=0.5), a, b, alpha=0.5)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(api, "_plan", None)  # a repeat signature must not plan again
            for alpha in (-0.75, 3.25, 1e-3):
                fresh = torch.randn(40, 64, device=device)
                assert_gemm_close(gemm(fresh, b, alpha=alpha), fresh, b, alpha=alpha)
        assert len(api._RECIPES) == 1
        assert_gemm_close(gemm(a, b, alpha=1.0), a, b)
        assert len(api._RECIPES) == 2


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("size", [1024, 4096])
def test_gpu_repeat_calls_take_a_new_alpha(dtype: torch.dtype, size: int) -> None:
    """The shipped selection's kernels with a new alpha each call: right each time (fp64 reference),
    and one recipe — each family's launches take alpha as it is (else the recipe would be kept by
    value: a marker and an entry a value)."""
    from tessera.blas import api

    api._RECIPES.clear()
    gen = torch.Generator(device="cuda").manual_seed(5)
    a, b = (torch.randn(size, size, generator=gen, device="cuda", dtype=dtype) for _ in range(2))
    exact = a.double() @ b.double()
    for alpha in (0.5, -0.75, 3.25):
        d = gemm(a, b, alpha=alpha)
        error = float((d.double() - alpha * exact).norm() / (alpha * exact).norm())
        assert error < (1e-2 if dtype != torch.float32 else 1e-5), (alpha, error)
    assert len(api._RECIPES) == 1


def test_repeat_calls_reuse_the_plan_and_follow_overrides(device: str) -> None:
    """A repeat call with the same signature skips validation and selection (a recipe is stored
    once), stays correct for new data and strides of the same signature, and a forced config or
    a new signature is honoured at once; what _plan copies (odd strides) is copied again, from the
    new call's operands."""
    from tessera._core.launch import capture
    from tessera.blas import api

    api._RECIPES.clear()
    a, b = torch.randn(40, 24, device=device), torch.randn(32, 24, device=device)
    for _ in range(2):
        assert_gemm_close(gemm(a, b, trans_b=True, alpha=0.5), a, b, trans_b=True, alpha=0.5)
    assert len(api._RECIPES) == 1
    fresh_a = torch.randn(40, 24, device=device)  # same signature, other data: the recipe serves it
    assert_gemm_close(gemm(fresh_a, b, trans_b=True, alpha=0.5), fresh_a, b, trans_b=True, alpha=0.5)
    assert len(api._RECIPES) == 1
    assert_gemm_close(gemm(a, b, trans_b=True, alpha=2.0), a, b, trans_b=True, alpha=2.0)  # its value put in
    assert len(api._RECIPES) == 1
    assert_gemm_close(gemm(a, b, trans_b=True, alpha=1.0), a, b, trans_b=True, alpha=1.0)  # another class
    assert len(api._RECIPES) == 2
    for block in (16, 32):
        with space.forced(TileConfig(block, block, 16, 8, 4, 1)), capture() as calls:
            gemm(a, b, trans_b=True, alpha=0.5)
        assert calls[0].constexprs["BLOCK_M"] == block
    odd = torch.randn(40, 48, device=device)[:, ::2]  # neither row- nor column-major: copied,
    for _ in range(2):  # and copied again by a repeat call that reuses the recipe
        assert_gemm_close(gemm(odd, b, trans_b=True), odd, b, trans_b=True)
    assert sum(key[1] == odd.stride() for key in api._RECIPES.keys()) == 1
    other = torch.randn(40, 48, device=device)[:, ::2]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(api, "_plan", None)  # a repeat signature must not plan again
        assert_gemm_close(gemm(other, b, trans_b=True), other, b, trans_b=True)
    with pytest.raises(tessera.InvalidArgumentError):  # invalid input is never cached
        gemm(a, torch.randn(23, 24, device=device))
    with pytest.raises(tessera.InvalidArgumentError):
        gemm(a, torch.randn(23, 24, device=device))
    for arguments in ({"scale_a": torch.ones(1, device=device)}, {"bias": torch.ones(32, device=device)},
                      {"fast_accum": True}):  # arguments the recipe's signature leaves out: never served
        with pytest.raises(tessera.InvalidArgumentError, match="operands"):
            gemm(a, b, trans_b=True, alpha=0.5, **arguments)
