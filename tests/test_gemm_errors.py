"""Bad input raises the right TesseraError subclass, says what was wrong, and leaves out untouched."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tessera import InvalidArgumentError, TesseraError, UnsupportedError
from tessera.blas import explain, gemm, matmul


def _out_untouched(fn, out: torch.Tensor, error: type[Exception], match: str) -> None:
    before = out.clone()
    with pytest.raises(error, match=match):
        fn()
    assert torch.equal(out, before), "a failed call wrote into out"


def test_mismatched_inner_dimensions(device: str) -> None:
    a, b = torch.randn(4, 5, device=device), torch.randn(6, 3, device=device)
    out = torch.zeros(4, 3, device=device)
    _out_untouched(lambda: gemm(a, b, out=out), out, InvalidArgumentError, r"inner dimensions differ")


def test_4d_operand(device: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"a\.dim\(\) must be 2-D or 3-D \(actual: 4"):
        gemm(torch.randn(2, 2, 3, 4, device=device), torch.randn(4, 5, device=device))


def test_unsupported_dtype(device: str) -> None:
    with pytest.raises(UnsupportedError, match=r"int32; supported: float16, bfloat16"):
        gemm(torch.ones(3, 3, dtype=torch.int32, device=device), torch.ones(3, 3, dtype=torch.int32,
                                                                         device=device))


def test_mixed_dtypes(device: str) -> None:
    with pytest.raises(UnsupportedError, match=r"a float16, b float32"):
        gemm(torch.randn(3, 3, device=device).half(), torch.randn(3, 3, device=device))


def test_out_dtype_must_be_a_dtype(device: str) -> None:
    """A string such as "float32" was reported as an unsupported out_dtype whose name is in the
    supported list; it is refused as not a torch.dtype, for every entry point that takes one."""
    a = torch.randn(4, 4, device=device)
    fp8 = a.to(torch.float8_e4m3fn)
    one = torch.tensor(1.0, device=device)
    for call in (lambda: gemm(a.half(), a.half(), out_dtype="float32"),
                 lambda: explain(a.half(), a.half(), out_dtype="float32"),
                 lambda: gemm(fp8, fp8, scale_a=one, scale_b=one, out_dtype="bfloat16")):
        with pytest.raises(InvalidArgumentError, match=r"out_dtype must be None or a torch\.dtype"):
            call()


def test_narrowing_out_dtype(device: str) -> None:
    with pytest.raises(UnsupportedError, match=r"out_dtype float16 for float32 inputs"):
        gemm(torch.randn(3, 3, device=device), torch.randn(3, 3, device=device), out_dtype=torch.float16)


def test_mixed_devices() -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs two device types")
    with pytest.raises(InvalidArgumentError, match=r"one device"):
        gemm(torch.randn(3, 3), torch.randn(3, 3, device="cuda"))


def test_mixed_devices_meta(device: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"one device \(actual: a on"):
        gemm(torch.randn(3, 3, device=device), torch.randn(3, 3, device="meta"))


def test_out_aliasing_a(device: str) -> None:
    a = torch.randn(8, 8, device=device)
    b = torch.randn(8, 8, device=device)
    _out_untouched(lambda: gemm(a, b, out=a), a, InvalidArgumentError, r"out overlaps input a")


def test_out_overlapping_part_of_b(device: str) -> None:
    storage = torch.randn(16, 8, device=device)
    a, b, out = torch.randn(8, 8, device=device), storage[:8], storage[4:12]
    _out_untouched(lambda: gemm(a, b, out=out), out, InvalidArgumentError, r"overlaps input b")


def test_out_wrong_shape_and_dtype(device: str) -> None:
    a, b = torch.randn(4, 5, device=device), torch.randn(5, 3, device=device)
    out = torch.zeros(3, 4, device=device)
    _out_untouched(lambda: gemm(a, b, out=out), out, InvalidArgumentError, r"out\.shape must be \(4, 3\)")
    out = torch.zeros(4, 3, dtype=torch.float64, device=device)
    _out_untouched(lambda: gemm(a, b, out=out), out, InvalidArgumentError, r"out\.dtype must be float32")


def test_out_with_zero_stride(device: str) -> None:
    a, b = torch.randn(4, 5, device=device), torch.randn(5, 3, device=device)
    out = torch.zeros(1, 3, device=device).expand(4, 3)
    with pytest.raises(InvalidArgumentError, match=r"non-zero strides"):
        gemm(a, b, out=out)


def test_beta_without_c(device: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"c must be a tensor when beta != 0"):
        gemm(torch.randn(2, 2, device=device), torch.randn(2, 2, device=device), beta=1.0)


def test_c_wrong_shape(device: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"broadcastable"):
        gemm(torch.randn(2, 3, device=device), torch.randn(3, 4, device=device),
             torch.randn(3, 4, device=device), beta=1.0)


def test_batch_mismatch(device: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"batch sizes differ: a has 2, b has 3"):
        gemm(torch.randn(2, 4, 5, device=device), torch.randn(3, 5, 6, device=device))


def test_bad_precision_and_scalars(device: str) -> None:
    a = torch.randn(2, 2, device=device)
    with pytest.raises(InvalidArgumentError,
                       match=r"precision must be 'ieee', 'tf32', 'tf32x3', 'bf16x9' or 'bf16x6'"):
        gemm(a, a, precision="fast")
    for alpha in ("2", 1j, torch.tensor(2.0), np.bool_(True)):
        with pytest.raises(InvalidArgumentError, match=r"alpha must be a real number \(Python or NumPy"):
            gemm(a, a, alpha=alpha)  # type: ignore[arg-type]
    for flag in ("yes", 1, None):  # a truthy string transposed A silently before
        with pytest.raises(InvalidArgumentError, match=r"trans_a must be True or False"):
            gemm(a, a, trans_a=flag)  # type: ignore[arg-type]
    want = gemm(a, a, alpha=2.0)
    assert torch.equal(gemm(a, a, alpha=np.float32(2.0)), want)  # NumPy scalars are numbers, as in torch
    with pytest.raises(UnsupportedError, match=r"c has dtype int32; supported: float32$"):
        gemm(a, a, torch.ones(2, 2, dtype=torch.int32, device=device), beta=1.0)  # float32 once


def test_not_a_tensor() -> None:
    with pytest.raises(InvalidArgumentError, match=r"a must be a torch.Tensor"):
        gemm([[1.0]], torch.ones(1, 1))  # type: ignore[arg-type]


def test_matmul_errors(device: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"a.dim\(\) must be at least 1"):
        matmul(torch.tensor(2.0, device=device), torch.randn(1, 1, device=device))
    with pytest.raises(InvalidArgumentError, match=r"batch dimensions do not broadcast"):
        matmul(torch.randn(2, 3, 1, 1, device=device), torch.randn(4, 1, 1, device=device))
    with pytest.raises(InvalidArgumentError, match=r"inner dimensions differ"):
        matmul(torch.randn(2, 3, 4, 5, device=device), torch.randn(4, 3, device=device))
    with pytest.raises(InvalidArgumentError, match=r"inner dimensions differ"):
        matmul(torch.randn(3, device=device), torch.randn(4, device=device))


def test_errors_are_builtin_types_too() -> None:
    assert issubclass(InvalidArgumentError, ValueError)
    assert issubclass(UnsupportedError, NotImplementedError)
    assert issubclass(InvalidArgumentError, TesseraError)
