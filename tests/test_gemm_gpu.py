"""GEMM paths that only exist on a GPU: bf16 tensor cores, the Hopper TMA family, tf32, int64 indexing."""

from __future__ import annotations

import pytest
import torch

from reference import assert_gemm_close
from tessera.blas import explain, gemm, space
from tessera.blas.kernels.gemm_tile import TileConfig
from tessera.blas.kernels.gemm_tma import TmaConfig
from tessera.blas.kernels.gemm_ws import WsConfig

pytestmark = pytest.mark.gpu


def rand(*shape: int, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    return torch.randn(shape, device="cuda", dtype=torch.float32).to(dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (16, 8192, 513), (257, 129, 200), (1000, 1100, 300),
                                   (3100, 3000, 1000), (6200, 6300, 128)])
def test_16bit_sizes_every_heuristic_branch(dtype: torch.dtype, m: int, n: int, k: int) -> None:
    a, b = rand(m, k, dtype=dtype), rand(k, n, dtype=dtype)
    assert_gemm_close(gemm(a, b), a, b)


@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("precision,dtype", [("ieee", torch.bfloat16), ("ieee", torch.float16),
                                             ("tf32", torch.float32), ("tf32x3", torch.float32),
                                             ("ieee", torch.float32)])
def test_transposes_on_gpu_paths(trans_a: bool, trans_b: bool, precision: str, dtype: torch.dtype) -> None:
    m, n, k = 520, 392, 264
    a = rand(k, m, dtype=dtype) if trans_a else rand(m, k, dtype=dtype)
    b = rand(n, k, dtype=dtype) if trans_b else rand(k, n, dtype=dtype)
    c = rand(m, n, dtype=dtype)
    d = gemm(a, b, c, alpha=0.5, beta=-2.0, trans_a=trans_a, trans_b=trans_b, precision=precision)
    assert_gemm_close(d, a, b, c, alpha=0.5, beta=-2.0, trans_a=trans_a, trans_b=trans_b,
                      precision=precision)


@pytest.mark.parametrize("config", [None, TileConfig(64, 64, 32, 8, 4, 3), TmaConfig(128, 128, 32, 8, 8, 3)])
@pytest.mark.parametrize("m,n,k", [(200, 136, 64), (1000, 1100, 72), (1, 72, 64)])
def test_tf32x3_is_held_to_its_own_bound(config: TileConfig | TmaConfig | None, m: int, n: int,
                                         k: int) -> None:
    """tf32x3's bound (operand error 1.5·2⁻²⁰) is far under plain TF32's (2⁻⁹) at these short K: a
    kernel that computed plain TF32 (the small products dropped) fails it. The heuristic's choice
    and each family forced; B row-major and column-major."""
    a = rand(m, k, dtype=torch.float32)
    for b in (rand(k, n, dtype=torch.float32), rand(n, k, dtype=torch.float32).t()):
        if config is None:
            assert_gemm_close(gemm(a, b, precision="tf32x3"), a, b, precision="tf32x3")
            continue
        with space.forced(config):
            if explain(a, b, precision="tf32x3").config != config:
                continue  # a TMA tile the layout does not take (the fallback is tested above)
            assert_gemm_close(gemm(a, b, precision="tf32x3"), a, b, precision="tf32x3")


@pytest.mark.parametrize("shapes", [((3, 130, 72), (3, 72, 97)), ((2, 16, 64), (64, 300))])
def test_tf32x3_batched_on_the_tile_family(shapes: tuple) -> None:
    """Batched calls take the portable tile family (whose tf32x3 binaries keep one more tile in
    shared memory for the split halves): correct within tf32x3's bound, every batch."""
    a, b = rand(*shapes[0], dtype=torch.float32), rand(*shapes[1], dtype=torch.float32)
    d = gemm(a, b, precision="tf32x3")
    for i in range(d.shape[0]):
        assert_gemm_close(d[i], a[i], b[i] if b.dim() == 3 else b, precision="tf32x3")


def test_tf32x3_non_finite_inputs_land_as_in_ieee() -> None:
    """±inf and NaN in A give ±inf and NaN where IEEE fp32 puts them: the split's inf − inf
    (a NaN in the small products) must not turn an infinite result into NaN."""
    a, b = rand(256, 256, dtype=torch.float32), rand(256, 256, dtype=torch.float32)
    a[3, 5], a[7, 9], a[11, 13] = float("inf"), float("-inf"), float("nan")
    b[9, 2] = 0.0  # inf·0: NaN in row 7, column 2
    got, ref = gemm(a, b, precision="tf32x3"), torch.matmul(a, b)
    for test in (torch.isposinf, torch.isneginf, torch.isnan):
        assert torch.equal(test(got), test(ref)), test.__name__
    rows = [i for i in range(256) if i not in (3, 7, 11)]  # the finite rows, within the bound
    assert_gemm_close(got[rows], a[rows], b, precision="tf32x3")


def test_hopper_uses_a_tensor_descriptor_family_for_16bit() -> None:
    """A large 16-bit GEMM on Hopper runs on TMA copies: ``gemm_tma`` or the warp-specialized
    ``gemm_ws`` (the shipped sm_90 logic's 4096³ row since the fifty-second session)."""
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("the TMA families are for sm_90+")
    choice = explain(rand(4096, 4096), rand(4096, 4096))
    assert choice is not None and isinstance(choice.config, (TmaConfig, WsConfig)), choice


TMA_CONFIGS = [
    TmaConfig(256, 128, 64, 8, 8, 4, False, 2), TmaConfig(128, 256, 64, 8, 8, 3),
    TmaConfig(128, 128, 64, 8, 4, 4), TmaConfig(128, 256, 32, 8, 8, 3, False, 2),
    TmaConfig(128, 256, 64, 8, 8, 3, False, 2, True),
    TmaConfig(64, 128, 64, 8, 4, 4, False, 1, True),
]


@pytest.mark.parametrize("config", TMA_CONFIGS)
def test_tma_configs_with_edges_and_c(config: TmaConfig) -> None:
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("the TMA family is for sm_90+")
    m, n, k = 777, 1000, 328  # rows of 16 bytes (what TMA takes), no side a multiple of the tile
    a, b, c = rand(m, k), rand(k, n), rand(m, n)
    with space.forced(config):
        assert explain(a, b, c, alpha=1.25, beta=0.5).config == config  # not the fallback
        assert_gemm_close(gemm(a, b, c, alpha=1.25, beta=0.5), a, b, c, alpha=1.25, beta=0.5)
        assert_gemm_close(gemm(a, b), a, b)  # no C
        wide = gemm(a, b, out_dtype=torch.float32)  # an fp32 D needs fewer stages to fit
        assert_gemm_close(wide, a, b)
        # an fp32 C beside an fp32 D (addmm into float32; the bf16 products' a₀·b₀ GEMM): 128×256
        # unsplit took 262144 bytes, over the H200's 232448, until D went in halves; flattened (config4)
        # 344088 even in halves, until such a loop was no longer flattened (gemm_tma.fit_for_c)
        c32 = c.float()
        wide_c = gemm(a, b, c32, alpha=1.25, beta=0.5, out_dtype=torch.float32)
        assert_gemm_close(wide_c, a, b, c32, alpha=1.25, beta=0.5)


def test_misaligned_views_fall_back_and_stay_correct() -> None:
    base = rand(300 * 301 + 1)
    a = base[1:].view(300, 301)[:, :300]  # base pointer off 16 bytes, odd leading dimension
    b = rand(300, 200)
    assert_gemm_close(gemm(a, b), a, b)
    out = torch.empty(300, 203, device="cuda", dtype=torch.bfloat16)[:, :200]
    gemm(a, b, out=out)
    assert_gemm_close(out, a, b)


def test_fp64_large() -> None:
    a, b = rand(700, 513, dtype=torch.float64), rand(513, 650, dtype=torch.float64)
    assert_gemm_close(gemm(a, b), a, b)


def test_batched_small_bf16() -> None:
    a, b = rand(512, 64, 64), rand(512, 64, 64)
    d = gemm(a, b)
    for i in (0, 255, 511):
        assert_gemm_close(d[i], a[i], b[i])


def test_int64_indexing_beyond_2_31_elements() -> None:
    m, n, k = 65536, 32768 + 64, 16  # D has 2.15e9 elements: offsets need int64
    if torch.cuda.get_device_properties(0).total_memory < 16 * 2**30:
        pytest.skip("needs 16 GiB of GPU memory")
    a, b = rand(m, k), rand(k, n)
    for config in (None, TileConfig(128, 128, 16, 8, 4, 2)):
        with space.forced(config):
            d = gemm(a, b)
        rows = torch.tensor([0, 1, m // 2, m - 1], device="cuda")
        assert_gemm_close(d[rows], a[rows], b)
        del d
        torch.cuda.empty_cache()
