"""float32 GEMM as bf16 products (``precision="bf16x9"`` / ``"bf16x6"``): the exact split, results
within the documented bound of an fp64 reference, and IEEE's placement of ±inf and NaN."""

from __future__ import annotations

import pytest
import torch

from reference import assert_gemm_close
from tessera import InvalidArgumentError
from tessera._core.device import device_info, torch_matmul_tf32_as
from tessera.blas import emulated, explain, gemm, space
from tessera.blas.emulated import SMALL_PRODUCTS, EmulatedConfig, padded_k, pieces_of_a, pieces_of_b
from tessera.blas.kernels.gemm_tma import TmaConfig, full_wave_shape, launch_gemm_tma
from tessera.blas.kernels.split import split_into

PRECISIONS = tuple(SMALL_PRODUCTS)


def rand(*shape: int, device: str) -> torch.Tensor:
    return torch.randn(shape).to(device)


def full_mantissas(rows: int, cols: int, device: str) -> torch.Tensor:
    """Values over many binades whose low bits are all used (a split that lost a piece shows)."""
    x = torch.randn(rows, cols, dtype=torch.float64) * torch.exp2(torch.randint(-60, 60, (rows, cols)))
    return x.float().to(device)


def test_split_is_exact_and_rounds_to_nearest(device: str) -> None:
    """x = p0 + p1 + p2 exactly, p0 = bf16(x) rounded to nearest (torch's conversion), the padding
    zeros; a value above bf16's largest stays finite (truncated), inf and NaN are p0 alone."""
    x = full_mantissas(37, 70, device)
    x[0, :4] = torch.tensor([3.4e38, -3.40282e38, 3.3895e38, 1.0])
    x[1, :3] = torch.tensor([float("inf"), float("-inf"), float("nan")])
    dst = torch.full((3, 40, 72), 7.0, dtype=torch.bfloat16, device=device)
    split_into(x, dst, (0, 1, 2))
    p = dst[:, :37, :70].double().cpu()
    xs = x.double().cpu()
    finite = torch.isfinite(xs)
    assert torch.equal(p.sum(0)[finite], xs[finite])
    normal = finite & (xs.abs() < 3.38e38)
    assert torch.equal(p[0][normal], x.cpu().to(torch.bfloat16).double()[normal])
    assert torch.isfinite(p[:, 0, :2]).all()
    assert torch.equal(p[0, 1, :2], xs[1, :2]) and p[0, 1, 2].isnan()
    assert (p[1:, 1, :3] == 0).all()
    assert (dst[:, 37:, :] == 0).all() and (dst[:, :, 70:] == 0).all()


def test_split_writes_the_named_pieces_batched_from_strided(device: str) -> None:
    src = full_mantissas(3 * 20, 30, device).view(3, 20, 30).transpose(-1, -2)  # batch × 30 × 20, strided
    dst = torch.empty(3, 4, 32, 24, dtype=torch.bfloat16, device=device)
    split_into(src, dst, (2, 0, 0, 1))
    whole = torch.empty(3, 3, 32, 24, dtype=torch.bfloat16, device=device)
    for i in range(3):
        split_into(src[i], whole[i], (0, 1, 2))
    assert torch.equal(dst[:, 0], whole[:, 2]) and torch.equal(dst[:, 1], whole[:, 0])
    assert torch.equal(dst[:, 2], whole[:, 0]) and torch.equal(dst[:, 3], whole[:, 1])


def test_pieces_lie_side_by_side_along_k(device: str) -> None:
    """op(A)'s pieces are K-blocks of one row-major matrix, op(B)'s stacked row blocks, each K
    padded to a multiple of 8 with zeros: the two bf16 GEMMs read them as they lie."""
    a, b = full_mantissas(5, 13, device), full_mantissas(13, 6, device)
    k = padded_k(13)
    assert k == 16
    pa, pb = pieces_of_a(a, (1, 0)), pieces_of_b(b, (0, 2))
    assert pa.shape == (5, 2 * k) and pa.is_contiguous() and pb.shape == (2 * k, 6) and pb.is_contiguous()
    assert (pa[:, 13:16] == 0).all() and (pb[k + 13:, :] == 0).all()
    whole_a = torch.empty(3, 5, k, dtype=torch.bfloat16, device=device)
    split_into(a, whole_a, (0, 1, 2))
    assert torch.equal(pa[:, :k], whole_a[1]) and torch.equal(pa[:, k:], whole_a[0])


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (33, 45, 27), (64, 40, 130)])
def test_within_bound(precision: str, m: int, n: int, k: int, device: str) -> None:
    a, b = full_mantissas(m, k, device), full_mantissas(k, n, device)
    assert_gemm_close(gemm(a, b, precision=precision), a, b, precision=precision)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_bound_is_tighter_than_one_bf16_product(precision: str, device: str) -> None:
    """Products of the pieces matter: a0·b0 alone (bf16 GEMM) breaks the bound by far."""
    a, b = rand(48, 40, device=device), rand(40, 24, device=device)
    with pytest.raises(AssertionError, match="exceeds bound"):
        one = gemm(a.bfloat16(), b.bfloat16(), out_dtype=torch.float32)
        assert_gemm_close(one, a, b, precision=precision)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_transposes_batch_and_c(precision: str, device: str) -> None:
    """Transposed and batched operands (one broadcast), alpha, beta and a broadcast C, and an
    in-place update of C (``out=c``): C is read before the result is written."""
    a = rand(3, 30, 20, device=device)  # op(A) = Aᵀ: 3 × 20 × 30
    b = rand(30, 17, device=device)  # broadcast over the batch
    c = rand(17, device=device)
    d = gemm(a, b, c, alpha=0.75, beta=-2.0, trans_a=True, precision=precision)
    for i in range(3):
        assert_gemm_close(d[i], a[i], b, c.expand(20, 17), alpha=0.75, beta=-2.0, trans_a=True,
                          precision=precision)
    c2 = rand(20, 17, device=device)
    before = c2.clone()
    got = gemm(a[0], b, c2, alpha=-1.0, beta=0.5, trans_a=True, out=c2, precision=precision)
    assert got is c2
    assert_gemm_close(c2, a[0], b, before, alpha=-1.0, beta=0.5, trans_a=True, precision=precision)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_non_finite_inputs_land_as_in_ieee(precision: str, device: str) -> None:
    """±inf and NaN where IEEE float32 puts them, though the small products meet inf · 0 (a
    non-finite value is its first piece alone); a value above bf16's largest stays finite."""
    a, b = rand(24, 40, device=device), rand(40, 16, device=device)
    a[3, 5], a[7, 9], a[11, 13] = float("inf"), float("-inf"), float("nan")
    b[9, 2] = 0.0  # inf · 0 = NaN at (7, 2)
    a[20, 0] = 3.4e38
    b[0] *= 1e-10
    ref = (a.double() @ b.double()).cpu()
    for _ in range(2):  # the first call, then its recipe's replays
        got = gemm(a, b, precision=precision).cpu()
        for test in (torch.isposinf, torch.isneginf, torch.isnan):
            assert torch.equal(test(got), test(ref)), test.__name__
        finite = torch.isfinite(ref)
        assert torch.allclose(got[finite].double(), ref[finite], rtol=1e-5, atol=1e-5)


def test_explain_names_the_products_and_other_dtypes_ignore_them(device: str) -> None:
    a, b = rand(20, 24, device=device), rand(24, 12, device=device)
    for precision in PRECISIONS:
        choice = explain(a, b, precision=precision)
        assert choice is not None and choice.config == EmulatedConfig(precision)
        assert f"{len(SMALL_PRODUCTS[precision]) + 1} bf16 products" in choice.config.short()
    half = a.half(), b.half()
    assert explain(*half, precision="bf16x9") == explain(*half)
    assert_gemm_close(gemm(*half, precision="bf16x9"), *half)


def test_empty_and_zero_k(device: str) -> None:
    c = rand(4, 3, device=device)
    empty = gemm(torch.empty(0, 5, device=device), rand(5, 3, device=device), precision="bf16x9")
    assert empty.shape == (0, 3)
    d = gemm(torch.empty(4, 0, device=device), torch.empty(0, 3, device=device), c, beta=2.0,
             precision="bf16x9")
    assert torch.equal(d, 2.0 * c)


def test_repeat_calls_replay_and_bad_precision(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A repeat call of a bf16-product precision replays the first call's launches (splits, both
    GEMMs) on buffers of its own, without planning again: a second call on new operands gives its
    own result and leaves the first's alone; transposes, batch and alpha keep their recipe apart."""
    from tessera.blas import api

    for precision in PRECISIONS:
        a, b = rand(16, 24, device=device), rand(24, 8, device=device)
        first = gemm(a, b, precision=precision)
        kept = first.clone()
        batched = rand(2, 24, 16, device=device)  # op(A) = Aᵀ, a batch of 2
        first_t = gemm(batched, b, alpha=0.5, trans_a=True, precision=precision)
        with monkeypatch.context() as m:
            m.setattr(api, "_plan", lambda *args, **kwargs: pytest.fail("a repeat call planned again"))
            a2, b2 = rand(16, 24, device=device), rand(24, 8, device=device)
            assert_gemm_close(gemm(a2, b2, precision=precision), a2, b2, precision=precision)
            batched2 = rand(2, 24, 16, device=device)
            again = gemm(batched2, b, alpha=0.5, trans_a=True, precision=precision)
        for i in range(2):
            assert_gemm_close(again[i], batched2[i], b, alpha=0.5, trans_a=True, precision=precision)
            assert_gemm_close(first_t[i], batched[i], b, alpha=0.5, trans_a=True, precision=precision)
        assert torch.equal(first, kept)
        assert_gemm_close(first, a, b, precision=precision)
    with pytest.raises(InvalidArgumentError, match=r"'tf32x3', 'bf16x9' or 'bf16x6'"):
        gemm(a, b, precision="bf16x3")


def test_promoted_sums_are_the_product(device: str) -> None:
    """The descriptor family with each K step's products summed apart (the a₀·b₀ GEMM's kernel):
    edge tiles, several K steps, alpha and C (fp16 operands: the interpreter's bf16 dot is wrong);
    with ``finite_c``, C's ±inf and NaN read as 0 (the small products' sum, cleaned as read)."""
    a, b = rand(70, 200, device=device).half(), rand(200, 104, device=device).half()
    c, d = rand(70, 104, device=device), torch.empty(70, 104, device=device)
    config = TmaConfig(64, 64, 32, 8, 4, 2)
    launch_gemm_tma(a, b, c, d, 1.5, 1.0, precision="ieee", num_sms=4, config=config, promote=True)
    assert_gemm_close(d, a, b, c, alpha=1.5, beta=1.0)
    dirty = c.clone()
    dirty[3, :3] = torch.tensor([float("inf"), float("-inf"), float("nan")])
    launch_gemm_tma(a, b, dirty, d, 1.5, 1.5, precision="ieee", num_sms=4, config=config, promote=True,
                    finite_c=True)
    clean = dirty.nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)
    assert torch.isfinite(d).all()
    assert_gemm_close(d, a, b, clean, alpha=1.5, beta=1.5)


@pytest.mark.gpu
@pytest.mark.parametrize("precision", PRECISIONS)
def test_long_sums_are_as_accurate_as_sgemm(precision: str) -> None:
    """Tensor cores truncate each sum they accumulate: one bf16 GEMM over a₀·b₀ left bf16x9 2–4×
    SGEMM's elementwise error at K = 4096 (uniform operands, whose sums only grow). Promoted
    per K step (Hopper), the products' error is below SGEMM's on the same operands (cuBLAS
    splits no K over 256 output tiles)."""
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("the promoted a₀·b₀ GEMM is the descriptor family's (sm_90+)")
    a, b = torch.rand(2048, 8192, device="cuda"), torch.rand(8192, 2048, device="cuda")  # no split-K

    def error(d: torch.Tensor, exact: torch.Tensor) -> float:
        return float(((d.double() - exact).abs() / exact).max())

    pieces = emulated.operand_pieces(precision)
    a0, b0 = emulated.first_pieces(pieces_of_a(a, pieces[0]), pieces_of_b(b, pieces[1]), precision, 8192)
    promoted = torch.empty(2048, 2048, device="cuda")
    target = emulated.promoting_target(a0, b0, promoted)
    assert target is not None
    emulated.promoted_product(a0, b0, torch.zeros_like(promoted), promoted, 1.0, target, clean=False)
    exact0 = a0.double() @ b0.double()
    assert error(promoted, exact0) < error(gemm(a0, b0, out_dtype=torch.float32), exact0) / 4
    exact = a.double() @ b.double()
    with torch_matmul_tf32_as(False):
        sgemm = error(torch.matmul(a, b), exact)
    assert error(gemm(a, b, precision=precision), exact) <= sgemm


@pytest.mark.gpu
def test_small_products_on_the_warp_specialized_tile() -> None:
    """On Hopper the small products' sum of a call whose 128×256 tiles fill 7/8 of a wave to 4
    waves runs on ``emulated.SMALL_TILE`` (gemm_ws, a float32 D stored in column halves): edge tiles
    (M, N not multiples of the tile) and a K not a multiple of its step match fp64, a call of that
    size is within its bound, and a repeat call replays the launch on new operands."""
    info = device_info()
    if not space.ws_capable(info):
        pytest.skip("the warp-specialized family runs on CUDA sm_90")
    tile = emulated.SMALL_TILE
    rows, cols = full_wave_shape(tile.block_m, tile.block_n, info.multiprocessors)
    m, n, k = rows - 24, cols - 40, 5 * 1000
    a_pieces = torch.randn(m, k, device="cuda").bfloat16()
    b_pieces = torch.randn(k, n, device="cuda").bfloat16()
    total = torch.empty(m, n, device="cuda")
    assert emulated.small_tile_target(a_pieces, b_pieces, total) is not None
    assert emulated.small_tile_target(a_pieces[:256], b_pieces, total[:256]) is None  # under 7/8 of a wave
    exact = a_pieces.double() @ b_pieces.double()
    # float32 sums truncated at most once a 16-deep wgmma (313 times here), with room to spare
    bound = 1000 * 2.0**-23 * (a_pieces.double().abs() @ b_pieces.double().abs())
    assert ((emulated.small_products(a_pieces, b_pieces).double() - exact).abs() <= bound).all()
    for precision in PRECISIONS:
        a, b = rand(m, 1000, device="cuda"), rand(1000, n, device="cuda")
        assert_gemm_close(gemm(a, b, precision=precision), a, b, precision=precision)
        a2, b2 = rand(m, 1000, device="cuda"), rand(1000, n, device="cuda")
        assert_gemm_close(gemm(a2, b2, precision=precision), a2, b2, precision=precision)  # replayed
