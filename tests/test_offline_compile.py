"""The portable GEMM family compiles, without a GPU, for AMD targets and for sm_90.

Triton lowers a kernel for a target it is not running on (shared/FINDINGS.md); this is what lets
packs be built offline. A failure here means a kernel change broke a target we promise. The
compiles run in a child process: Triton's interpreter (on in CPU test runs) patches the language
module process-wide, and compiling needs it off.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from child import compiler_env, sm90_ptx

TARGETS = [("hip", "gfx1103", 32), ("hip", "gfx942", 64), ("cuda", 90, 32)]
DTYPES = ["fp16", "bf16", "fp32", "fp64"]

_CHILD = r"""
import json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.runtime.jit import JITFunction
from tessera.blas.kernels.gemm_tile import _gemm_tile_kernel as kernel

jit = JITFunction(kernel.fn)  # a compilable function even where the interpreter was on

runtime = ["ptr"] * 4 + ["i32"] * 15 + ["fp64", "fp64"]  # a b c d, M N K + 12 strides, alpha beta
results = {}
for backend, arch, warp in json.loads(sys.argv[1]):
    for dtype in json.loads(sys.argv[2]):
        constexprs = dict(HAS_C=True, SCALE_ALPHA=True, ACC_FP64=dtype == "fp64", UPCAST=False,
                          INPUT_PRECISION="ieee", INDEX_64=False, EVEN_K=False, BLOCK_M=64,
                          BLOCK_N=64, BLOCK_K=32, GROUP_M=8, PDL=0)  # off, as on AMD
        types = [f"*{dtype}" if t == "ptr" else t for t in runtime]
        signature = dict(zip(jit.arg_names, types)) | {name: "constexpr" for name in constexprs}
        try:
            compiled = triton.compile(ASTSource(jit, signature, constexprs),
                                      target=GPUTarget(backend, arch, warp),
                                      options={"num_warps": 4, "num_stages": 2})
            binary = compiled.asm["hsaco" if backend == "hip" else "cubin"]
            results[f"{arch}-{dtype}"] = len(binary)
        except Exception as exc:
            results[f"{arch}-{dtype}"] = f"{type(exc).__name__}: {str(exc)[-300:]}"
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def compiled_sizes() -> dict[str, int | str]:
    result = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(TARGETS), json.dumps(DTYPES)],
                            capture_output=True, text=True, env=compiler_env(), timeout=900, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("target", [t[1] for t in TARGETS])
@pytest.mark.parametrize("dtype", DTYPES)
def test_tile_kernel_compiles_offline(compiled_sizes: dict[str, int | str], target: str | int,
                                      dtype: str) -> None:
    size = compiled_sizes[f"{target}-{dtype}"]
    assert isinstance(size, int) and size > 1000, size



def test_tf32x3_compiles_to_three_tf32_products_for_sm90() -> None:
    """A pack's tf32x3 binary (offline, the running Triton) splits each operand in registers
    (``cvt.rna.tf32.f32``) and issues three TF32 wgmma for each one of the tf32 binary."""
    tile = {"block_m": 128, "block_n": 128, "block_k": 32, "group_m": 8, "num_warps": 8, "num_stages": 3}
    ptx = sm90_ptx({dtype: ("tessera.blas.kernels.gemm_tma", "gemm", "TmaConfig", tile, dtype, 0)
                    for dtype in ("tf32", "tf32x3")})
    wgmma = {dtype: text.count("wgmma.mma_async.sync.aligned") for dtype, text in ptx.items()}
    assert wgmma["tf32"] > 0 and wgmma["tf32x3"] == 3 * wgmma["tf32"], wgmma
    assert ".tf32.tf32" in ptx["tf32x3"]
    assert "cvt.rna.tf32.f32" in ptx["tf32x3"] and "cvt.rna.tf32.f32" not in ptx["tf32"]
