"""Gradients through gemm / matmul / gemm_wq, against torch's autograd on an fp64 reference."""

from __future__ import annotations

import pytest
import torch

from tessera import InvalidArgumentError, UnsupportedError
from tessera.blas import dequantize_weight, gemm, gemm_wq, matmul, quantize_weight


def _leaf(t: torch.Tensor) -> torch.Tensor:
    return t.detach().clone().requires_grad_()


def _reference_grads(fn, *inputs: torch.Tensor, grad: torch.Tensor) -> list[torch.Tensor | None]:
    """The gradients torch's autograd gives ``fn`` on fp64 copies of ``inputs``."""
    copies = [_leaf(t.double()) if t.requires_grad else t.double() for t in inputs]
    fn(*copies).backward(grad.double())
    return [c.grad for c in copies]


@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
def test_gemm_gradients_with_transposes_alpha_beta_and_a_bias_row(trans_a: bool, trans_b: bool,
                                                                   device: str) -> None:
    m, n, k = 5, 6, 7
    a = _leaf(torch.randn((k, m) if trans_a else (m, k), dtype=torch.float64, device=device))
    b = _leaf(torch.randn((n, k) if trans_b else (k, n), dtype=torch.float64, device=device))
    c = _leaf(torch.randn(n, dtype=torch.float64, device=device))  # broadcasts over the rows
    d = gemm(a, b, c, alpha=1.5, beta=-0.5, trans_a=trans_a, trans_b=trans_b)
    assert d.grad_fn is not None
    g = torch.randn_like(d)
    d.backward(g)

    def reference(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return 1.5 * (x.t() if trans_a else x) @ (y.t() if trans_b else y) - 0.5 * z

    for got, want in zip((a.grad, b.grad, c.grad), _reference_grads(reference, a, b, c, grad=g), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_gemm_gradients_sum_over_a_broadcast_batch(device: str) -> None:
    """A 2-D A against a batch of B, and a batch-1 C: their gradients are summed over the batch."""
    a = _leaf(torch.randn(4, 3, dtype=torch.float64, device=device))
    b = _leaf(torch.randn(5, 3, 6, dtype=torch.float64, device=device))
    c = _leaf(torch.randn(1, 4, 6, dtype=torch.float64, device=device))
    d = gemm(a, b, c, beta=2.0)
    assert d.shape == (5, 4, 6)
    g = torch.randn_like(d)
    d.backward(g)
    want = _reference_grads(lambda x, y, z: x @ y + 2.0 * z, a, b, c, grad=g)
    for got, expected in zip((a.grad, b.grad, c.grad), want, strict=True):
        assert got.shape == expected.shape
        torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12)


def test_gemm_gradcheck(device: str) -> None:
    """Finite differences of the forward against the backward (fp64, both operands transposed)."""
    a = _leaf(torch.randn(3, 4, dtype=torch.float64, device=device))
    b = _leaf(torch.randn(5, 3, dtype=torch.float64, device=device))
    assert torch.autograd.gradcheck(lambda x, y: gemm(x, y, alpha=0.75, trans_a=True, trans_b=True), (a, b))


def test_half_operands_with_a_float32_result_get_half_gradients(device: str) -> None:
    a = _leaf(torch.randn(8, 16, device=device).half())
    b = _leaf(torch.randn(16, 8, device=device).half())
    d = gemm(a, b, out_dtype=torch.float32)
    g = torch.randn_like(d)
    d.backward(g)
    assert a.grad.dtype == b.grad.dtype == torch.float16
    want_a, want_b = _reference_grads(lambda x, y: x @ y, a, b, grad=g.half().float())
    torch.testing.assert_close(a.grad.double(), want_a, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(b.grad.double(), want_b, rtol=2e-2, atol=2e-2)


def test_matmul_gradients_for_vectors_parameters_and_batches(device: str) -> None:
    """Vectors, an nn.Parameter (a Tensor subclass), a batch against a matrix and 4-D batches that
    broadcast: gradients through matmul's reshapes and expansions, as torch.matmul's."""
    def f64(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, dtype=torch.float64, device=device)

    weight = torch.nn.Parameter(f64(6, 4))
    vector = _leaf(f64(6))
    cases = [(vector, weight), (weight.t(), vector), (_leaf(f64(3, 2, 6)), weight),
             (_leaf(f64(2, 1, 3, 6)), torch.nn.Parameter(f64(1, 4, 6, 4)))]
    for x, w in cases:
        leaves = [t for t in (x, w, weight, vector) if t.is_leaf and t.requires_grad]
        leaves = list(dict.fromkeys(leaves))
        y = matmul(x, w)
        g = torch.randn_like(y)
        got = torch.autograd.grad(y, leaves, g, allow_unused=True)
        want = torch.autograd.grad(torch.matmul(x, w), leaves, g, allow_unused=True)
        for mine, theirs in zip(got, want, strict=True):
            assert (mine is None) == (theirs is None)
            if mine is not None:
                torch.testing.assert_close(mine, theirs, rtol=1e-12, atol=1e-12)


def test_no_gradient_is_recorded_without_grad_mode_or_a_leaf_that_wants_one(device: str) -> None:
    a = _leaf(torch.randn(4, 4, dtype=torch.float64, device=device))
    b = torch.randn(4, 4, dtype=torch.float64, device=device)
    with torch.no_grad():
        assert gemm(a, b).grad_fn is None
    assert gemm(a.detach(), b).grad_fn is None
    assert gemm(a, b).grad_fn is not None


def test_beta_zero_never_reads_c_so_its_gradient_is_zero(device: str) -> None:
    a, b = (_leaf(torch.randn(3, 3, dtype=torch.float64, device=device)) for _ in range(2))
    c = _leaf(torch.full((3, 3), float("nan"), dtype=torch.float64, device=device))
    d = gemm(a, b, c, beta=0.0)
    d.backward(torch.full_like(d, float("nan")))
    assert torch.equal(c.grad, torch.zeros_like(c))


def test_what_records_no_gradient_is_refused(device: str) -> None:
    a = _leaf(torch.randn(4, 4, device=device))
    b = torch.randn(4, 4, device=device)
    with pytest.raises(InvalidArgumentError, match="out= does not record gradients"):
        gemm(a, b, out=torch.empty(4, 4, device=device))
    codes = torch.randint(-8, 8, (4, 4), dtype=torch.int8, device=device)
    scale = _leaf(torch.ones((), device=device))
    with pytest.raises(UnsupportedError, match="no gradient"):
        gemm(codes, codes, scale_a=scale, scale_b=torch.ones((), device=device))


def test_gemm_wq_gradient_of_the_activations(device: str) -> None:
    w = torch.randn(64, 32, device=device)
    q = quantize_weight(w.half(), bits=4, group_size=32)
    x = _leaf(torch.randn(3, 64, device=device).half())
    y = gemm_wq(x, q)
    g = torch.randn_like(y)
    y.backward(g)
    weight = dequantize_weight(q, torch.float64)
    (want,) = _reference_grads(lambda v: v @ weight, x, grad=g)
    torch.testing.assert_close(x.grad.double(), want, rtol=2e-2, atol=5e-2)
    with pytest.raises(InvalidArgumentError, match="out= does not record gradients"):
        gemm_wq(x, q, out=torch.empty_like(y))
    q.scales.requires_grad_()
    with pytest.raises(UnsupportedError, match="scales or zeros require a gradient"):
        gemm_wq(x, q)


def test_level2_records_no_gradient_even_on_its_gemm_route(device: str) -> None:
    """gemv may run as a one-row GEMM (the logic's choice, forced here); with an A that requires a
    gradient it still computes y in place and records nothing, as on its own kernel."""
    from tessera.blas import gemv, space
    from tessera.blas.kernels.level2 import GemvGemmConfig

    a = _leaf(torch.randn(5, 7, dtype=torch.float64, device=device))
    x = torch.randn(5, dtype=torch.float64, device=device)
    y = torch.zeros(7, dtype=torch.float64, device=device)
    with space.forced(GemvGemmConfig()):
        got = gemv(a, x, y, trans=True)
    assert got.grad_fn is None
    torch.testing.assert_close(got, a.detach().t() @ x, rtol=1e-12, atol=1e-12)


def _in_place_writers(device: str) -> dict:
    """Each Tessera routine that writes an operand in place, as a function of that operand (a
    float64 vector of 8 or an 8 × 8 matrix, as ``shape`` says)."""
    from tessera.blas import axpy, gemv, ger, scal, symv, trsv
    from tessera.rand import Generator

    def f64(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, dtype=torch.float64, device=device)

    a, b, x = f64(8, 8), f64(8, 8), f64(8)
    q = quantize_weight(torch.randn(64, 8, device=device).half(), bits=4, group_size=32)
    return {
        "gemm out": ((8, 8), lambda t: gemm(a, b, out=t)),
        "gemm out (a repeat call)": ((8, 8), lambda t: gemm(a, b, out=t)),
        "gemm in place on C": ((8, 8), lambda t: gemm(a, b, t, beta=1.0, out=t)),
        "axpy": ((8,), lambda t: axpy(2.0, x, t)),
        "scal": ((8,), lambda t: scal(2.0, t)),
        "gemv": ((8,), lambda t: gemv(a, x, t, beta=1.0)),
        "symv": ((8,), lambda t: symv(a, x, t, beta=1.0)),
        "ger": ((8, 8), lambda t: ger(1.0, x, x, t)),
        "trsv": ((8,), lambda t: trsv(a + 8 * torch.eye(8, dtype=a.dtype, device=device), t)),
        "gemm_wq out": ((1, 8), lambda t: gemm_wq(torch.randn(1, 64, device=device).half(), q, out=t)),
        "rand out": ((8,), lambda t: Generator(seed=1, device=device).normal(8, dtype=t.dtype, out=t)),
    }


@pytest.mark.parametrize("name", ["gemm out", "gemm out (a repeat call)", "gemm in place on C", "axpy",
                                  "scal", "gemv", "symv", "ger", "trsv", "gemm_wq out", "rand out"])
def test_in_place_writes_refuse_tensors_autograd_tracks_and_tell_it_otherwise(name: str, device: str) -> None:
    """A routine that writes an operand in place refuses one that requires a gradient under grad
    mode (its write would be invisible to autograd; torch refuses in-place ops on such leaves
    too), writes it under no_grad, and bumps the version of what it writes: a backward pass that
    saved the tensor before the write then raises instead of using the new values."""
    shape, write = _in_place_writers(device)[name]
    dtype = torch.float16 if name == "gemm_wq out" else torch.float64
    tracked = torch.randn(*shape, dtype=dtype, device=device, requires_grad=True)
    with pytest.raises(InvalidArgumentError, match=r"requires (a gradient|one)"):
        write(tracked)
    with torch.no_grad():
        write(tracked)
    weight = torch.randn(*shape, dtype=dtype, device=device, requires_grad=True)
    saved = torch.randn(*shape, dtype=dtype, device=device)
    if name == "gemm out (a repeat call)":
        write(saved.clone())  # the signature's recipe: the write below replays it
    loss = (weight * saved).sum()  # saves `saved` for the gradient of weight
    write(saved)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
