"""Tuning GEMM: problems, candidate configurations, correctness check and timing for the tuner."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import torch

from tessera._core.device import DeviceInfo, device_info, precision_of, torch_dtype
from tessera._core.errors import InvalidArgumentError
from tessera._core.launch import compile_only
from tessera._core.timing import cold_copies, graph_ms, on_gpu
from tessera.blas import space
from tessera.blas.accuracy import FP8_ACCUMULATION, FP8_FAST_ACCUMULATION, gemm_reference
from tessera.blas.api import gemm
from tessera.blas.kernels.gemm_fma import FmaConfig
from tessera.blas.kernels.gemm_scaled import FAST_SUFFIX, ScaledConfig, ScaledTmaConfig, element_dtype
from tessera.blas.kernels.gemm_splitk import SplitKConfig
from tessera.blas.kernels.gemm_streamk import StreamKConfig
from tessera.blas.kernels.gemm_tile import TileConfig
from tessera.blas.kernels.gemm_tma import TmaConfig, shared_memory_bytes
from tessera.blas.kernels.gemm_wq import WqConfig, WqGemvConfig
from tessera.blas.kernels.gemm_wq_ws import WqWsConfig
from tessera.blas.kernels.gemm_ws import ScaledWsConfig, WsConfig
from tessera.blas.kernels.level1 import ELEMENTWISE_OPS, VectorConfig
from tessera.blas.kernels.level2 import GemvConfig, GerConfig, SymvConfig, TrsvConfig
from tessera.blas.level1 import axpy, dot, iamax, nrm2, swap
from tessera.blas.level2 import gemv, ger, symv, trsv
from tessera.blas.quantized import (
    QuantizedWeight,
    dequantize_weight,
    gemm_wq,
    quantize_weight,
    scaled_fits,
    wq_ws_ok,
)
from tessera.tuning.logic import LAYOUTS
from tessera.tuning.tuner import TunableOp, runtime_of

LLM_NK = ((4096, 4096), (8192, 8192), (14336, 4096), (4096, 14336))
SIZE_PRESETS: dict[str, list[tuple[int, int, int, int]]] = {
    "square": [(s, s, s, 1) for s in (256, 512, 1024, 2048, 4096, 8192, 16384)],
    "skinny": [(m, n, k, 1) for m in (1, 4, 16, 64, 256) for n, k in LLM_NK],
    # the same layers at prompt lengths (prefill): between the skinny rows and the squares, where
    # the nearest row was a skinny one streaming its weights or a square of another shape
    "prefill": [(m, n, k, 1) for m in (512, 1024, 2048) for n, k in LLM_NK],
    # small products with a short K (M 64-256 x N 1024-4096 x K 512 / 1024): the shipped files serve
    # them from squares and long-K rows ~1.5 log-units away, and rows tuned at K >= 4096 reach down
    # there untimed (docs/architecture.md, "Rows that win at K >= 2048 and reach short K untimed")
    "shortk": [(m, n, k, 1) for m in (64, 128, 256) for n in (1024, 2048, 4096) for k in (512, 1024)],
    "batched": [(64, 64, 64, 512), (128, 128, 128, 256), (32, 32, 32, 1024), (256, 256, 256, 64)],
    # wave-quantized on 132 SMs (benchmarks/streamk.py): 128x128 grids a few tiles over one or
    # two waves, K = 8192, where stream-K can win; and nearly full grids as controls, so that
    # their own rows (not a stream-K neighbour's) decide them
    "wave": [(1664, 1408, 8192, 1), (1408, 1664, 8192, 1), (2176, 1024, 8192, 1), (1536, 1536, 8192, 1),
             (1792, 1280, 8192, 1), (3456, 3072, 4096, 1), (2432, 2304, 8192, 1), (4224, 4096, 4096, 1),
             (1536, 1408, 8192, 1), (8448, 8192, 2048, 1)],
    "tiny": [(48, 40, 32, 1), (20, 64, 40, 1), (32, 32, 32, 3)],  # interpreter-sized, for CPU runs
}
SIZE_PRESETS["preset"] = (SIZE_PRESETS["square"] + SIZE_PRESETS["skinny"] + SIZE_PRESETS["prefill"]
                          + SIZE_PRESETS["batched"] + SIZE_PRESETS["wave"])


def _warps_suit(config: TmaConfig) -> bool:
    """Default-space warps for a TMA tile: two warp groups above 128x128, one below (128x64 and
    64x128 tiles, for the small squares where 128x128 tiles leave half of an H200's SMs idle),
    either at 128x128."""
    area = config.block_m * config.block_n
    if area == 128 * 128:
        return True
    return config.num_warps == (8 if area > 128 * 128 else 4)


SPACES: dict[str, tuple[space.Config, ...]] = {
    "default": tuple(c for c in space.TILE_SPACE if c.num_stages == 3) + tuple(
        c for c in space.TMA_SPACE if not c.warp_specialize and c.num_stages < 5 and _warps_suit(c))
    + tuple(c for c in space.SPLITK_SPACE if c.num_stages == 3)
    + tuple(c for c in space.STREAMK_SPACE if c.num_stages == 3 or c.tma)  # 4 stages won with descriptors
    + space.WS_SPACE + space.WS_TF32_SPACE + space.FMA_SPACE,
    "wide": space.TILE_SPACE + space.TMA_SPACE + space.SPLITK_SPACE + space.STREAMK_SPACE + space.WS_SPACE
    + space.WS_TF32_SPACE + space.FMA_SPACE,
    "tiny": (TileConfig(16, 16, 16, 1, 2, 1), TileConfig(32, 32, 16, 4, 4, 1),
             TileConfig(16, 32, 32, 8, 4, 2)),
}


def _pow2_at_least(x: int) -> int:
    return 1 << max(4, (x - 1).bit_length())


def _fits(config: space.Config, problem: tuple[int, ...], dtype: str, device: DeviceInfo) -> bool:
    m, n, k, batch = problem
    if config.block_m > _pow2_at_least(m) or config.block_n > _pow2_at_least(n):
        return False  # a tile mostly outside the matrix
    if isinstance(config, SplitKConfig):
        # worth it only for few output tiles and a long K that every slice still covers
        return m * n <= 256 * 8192 and k >= 4 * config.split_k * config.block_k
    if isinstance(config, StreamKConfig) and (batch != 1 or (config.tma and not space.tma_capable(device))):
        return False  # a persistent grid over one 2-D problem; descriptors need sm_90
    if isinstance(config, FmaConfig):  # IEEE float32, one 2-D problem, NVIDIA
        return dtype == "fp32" and batch == 1 and device.backend == "cuda"
    if isinstance(config, WsConfig):  # 16-bit or tf32 (its own space), one 2-D problem, Hopper's wgmma
        limit, element = device.shared_memory_per_block, torch_dtype(dtype).itemsize
        return (batch == 1 and space.ws_capable(device)
                and (dtype in ("bf16", "fp16") if config not in space.WS_TF32_SPACE else dtype == "tf32")
                and (limit is None or shared_memory_bytes(config, config.num_stages, element, element) + 1024
                     <= limit))
    if isinstance(config, TmaConfig):
        if batch != 1 or dtype == "fp64" or not space.tma_capable(device):
            return False
        element = torch_dtype(dtype).itemsize
        needed = shared_memory_bytes(config, config.num_stages, element, element)
        return device.shared_memory_per_block is None or needed <= device.shared_memory_per_block
    limit = device.shared_memory_per_block
    return limit is None or space._shared_memory_bytes(config, dtype) <= limit


def gemm_tunable(dtype: str, problems: Sequence[tuple[int, int, int, int]], space_name: str,
                 device: DeviceInfo | None = None, layout: str | None = None) -> TunableOp:
    """The GEMM op as the tuner sees it, on the current device (GPU, or the interpreter). With a
    ``layout`` (``logic.LAYOUTS``: NT is A row-major and B column-major, as in ``x @ W.t()``) the
    operands are stored so and the logic file is that layout's; without one, both row-major."""
    if layout is not None and layout not in LAYOUTS:
        raise InvalidArgumentError(f"layout {layout!r} is unknown; expected one of {', '.join(LAYOUTS)}")
    device = device or device_info()
    elem_dtype = torch_dtype(dtype)
    precision = precision_of(dtype)
    target = "cuda" if on_gpu() else "cpu"
    prepared: dict[tuple[int, ...], tuple[torch.Tensor, ...]] = {}

    def operands(problem: tuple[int, ...]) -> tuple:
        """(a, b, fp64 reference, elementwise error bound, operand copies for cold graph timing) on
        the target device, built once per problem: on the GPU the fp64 products take a fraction of
        a second even at 16384³, where on the host they took minutes per candidate."""
        if problem not in prepared:
            prepared.clear()  # one problem at a time: keep memory bounded
            gen = torch.Generator().manual_seed(hash(problem) % 2**31)
            a, b = (t.to(elem_dtype).to(target) for t in stored_operands(problem, layout, generator=gen))
            exact, bound = gemm_reference(a, b, None, alpha=1.0, beta=0.0, out_dtype=elem_dtype,
                                          precision=precision)
            prepared[problem] = (a, b, exact, bound, cold_copies((a, b)))
        return prepared[problem]

    def candidates(problem: tuple[int, ...]) -> list[space.Config]:
        """The space's configs that fit, and always the heuristic's own pick (first): tuned logic
        must never choose worse than what an untuned call gets."""
        default = default_choice(problem, dtype, device)
        fitting = (c for c in SPACES[space_name] if _fits(c, problem, dtype, device) and c != default)
        return [default, *fitting]

    def run(problem: tuple[int, ...], config: space.Config) -> torch.Tensor:
        a, b = operands(problem)[:2]
        with space.forced(config):
            return gemm(a, b, precision=precision)

    def check(problem: tuple[int, ...], config: space.Config) -> str | None:
        ref, bound = operands(problem)[2:4]
        worst = ((run(problem, config).double() - ref).abs() / bound).max().item()
        return None if worst <= 1.0 else f"error exceeds the accuracy bound by x{worst:.3g}"

    def measure(problem: tuple[int, ...], config: space.Config) -> float:
        """TFLOP/s replayed from a CUDA graph over operand copies larger than twice L2: the kernel's
        own cold time. Timed eagerly, problems up to ~2048³ measured the Python launch path
        (50–90 µs on the H200's host, longer than do_bench's cache flush) as much as the kernel."""
        m, n, k, batch = problem
        calls = [lambda x=x, y=y: gemm(x, y, precision=precision) for x, y in operands(problem)[4]]
        with space.forced(config):
            return 2.0 * m * n * k * batch / graph_ms(calls) / 1e9

    return TunableOp("blas", "gemm", device.arch, dtype, list(problems), candidates, check, measure,
                     runtime=runtime_of(device), warm=_parallel_warm(run), layout=layout,
                     local=stream_k_is_local)


def stream_k_is_local(config: dict) -> bool:
    """``TunableOp.local`` for GEMM (a journaled configuration): stream-K's figure is its fix-up's
    at that size and does not carry to the neighbours a logic file's row also serves."""
    return config["kernel"] == "gemm_streamk"


def stored_operands(problem: tuple[int, ...], layout: str | None, *, generator: torch.Generator | None = None,
                    device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Random normal float32 A (M×K) and B (K×N) of ``problem`` (m, n, k, batch; 3-D when the batch is
    over 1), stored in ``layout`` (A then B, N row-major, T column-major; default NN): what the
    tuner times and checks, and what the vendor is timed on beside it."""
    m, n, k, batch = problem

    def matrix(rows: int, cols: int, order: str) -> torch.Tensor:
        if order == "T":
            t = torch.randn(batch, cols, rows, generator=generator, device=device).transpose(-1, -2)
        else:
            t = torch.randn(batch, rows, cols, generator=generator, device=device)
        return t if batch > 1 else t[0]

    order = layout or "NN"
    return matrix(m, k, order[0]), matrix(k, n, order[1])


def _parallel_warm(run: Callable[[tuple[int, ...], space.Config], object]
                   ) -> Callable[[tuple[int, ...], Sequence[space.Config]], None]:
    """A tunable's ``warm``: compile a problem's candidates in parallel (Triton's asynchronous
    compilation, launches compile-only) before they are checked and timed one by one."""
    def warm(problem: tuple[int, ...], configs: Sequence[space.Config]) -> None:
        try:
            from triton.runtime._async_compile import AsyncCompileMode
        except ImportError:  # this Triton cannot compile asynchronously: compile on first run
            return
        if not on_gpu():
            return
        with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool, \
                AsyncCompileMode(pool, ignore_errors=True), compile_only():
            for config in configs:
                try:
                    run(problem, config)
                except Exception:  # noqa: BLE001 - the candidate's own run reports failures
                    continue
    return warm


def default_choice(problem: tuple[int, ...], dtype: str, device: DeviceInfo) -> space.Config:
    """What the untuned heuristic picks (the tuner's plot compares against it)."""
    m, n, k, batch = problem
    tma_ok = batch == 1 and dtype != "fp64" and min(m, n, k) >= 16
    return space.heuristic(space.GemmProblem(m, n, k, batch, dtype, tma_ok), device).config



# Quantized ops: ``gemm_wq`` (dtypes int4_bf16 …) and ``gemm_scaled`` (fp8e4m3, fp8e5m2, int8).
GEMV_MAX_ROWS = 8  # the CUDA-core decode family reads the weight once per row: few rows only
QUANTIZED_TINY_SPACES: dict[str, tuple[space.Config, ...]] = {
    "gemm_wq": (WqGemvConfig(32, 32, 2, 4), WqConfig(16, 32, 32, 1, 4, 4, 1),
                WqConfig(16, 32, 32, 2, 4, 4, 1)),
    "gemm_scaled": (ScaledConfig(16, 32, 32, 4, 4, 1), ScaledConfig(32, 32, 32, 4, 4, 1),
                    ScaledTmaConfig(16, 32, 32, 4, 4, 1, False, 1, True)),
}


def _rounding(dtype: str) -> tuple[float, float]:
    """(one unit of the output's rounding, the relative error fp32 / fp64 sums may add) for a level-1/2
    dtype key: 16-bit results one ulp (the interpreter truncates bf16 where the GPU rounds)."""
    return {"fp16": (2.0**-10, 1e-5), "bf16": (2.0**-7, 1e-5), "fp64": (2.0**-52, 1e-12),
            "complex128": (2.0**-52, 1e-12)}.get(dtype, (2.0**-23, 1e-5))


def _excess(got: torch.Tensor, ref: torch.Tensor, magnitude: torch.Tensor, unit: float,
            accumulation: float) -> float:
    """How far the worst element of ``got`` lies beyond the tests' bound against the fp64 ``ref``:
    the output's rounding (``unit`` of |ref|) plus the sums' (``accumulation`` of Σ|a·b|); ≤ 0 passes."""
    return ((got - ref).abs() - unit * ref.abs() - accumulation * magnitude - 1e-6).max().item()


def quantized_op(dtype: str) -> str | None:
    """The op a quantized ``--dtype`` tunes (``gemm_wq`` / ``gemm_scaled``), None for float GEMM."""
    if dtype in space.WQ_DTYPES:
        return "gemm_wq"
    return "gemm_scaled" if dtype in space.SCALED_DTYPES else None


def _group_for(k: int) -> int:
    for group in (128, 64, 32):
        if k % group == 0:
            return group
    raise InvalidArgumentError(f"K = {k} for a weight-only problem; expected a multiple of 32")


def quantized_tunable(dtype: str, problems: Sequence[tuple[int, int, int]], space_name: str,
                      device: DeviceInfo | None = None) -> TunableOp:
    """``gemm_wq`` or ``gemm_scaled`` as the tuner sees it: problems (m, n, k); the check is the
    tests' bound against fp64 (x @ dequantized weight, or the exact product of fp8/int8 values)."""
    device = device or device_info()
    op = quantized_op(dtype)
    target = "cuda" if on_gpu() else "cpu"
    cache: dict[tuple[int, ...], tuple] = {}

    def operands(problem: tuple[int, ...]) -> tuple:
        if problem not in cache:
            cache.clear()
            m, n, k = problem
            gen = torch.Generator().manual_seed(hash(problem) % 2**31)
            if op == "gemm_wq":
                bits, act = int(dtype[3]), torch_dtype(dtype.split("_")[1])
                w = (torch.randn(k, n, generator=gen) * 0.02).to(act).to(target)
                q = quantize_weight(w, bits=bits, group_size=_group_for(k))
                x = torch.randn(m, k, generator=gen).to(act).to(target)
                args: tuple = (x, q)
                wide_a = x.double().cpu()
                # the tensor-core paths round each weight to 16 bits, the decode path does not
                weights = [dequantize_weight(q).double().cpu(), dequantize_weight(q, torch.float64).cpu()]
            else:
                elem = element_dtype(dtype)[0]
                if elem == torch.int8:
                    a = torch.randint(-128, 128, (m, k), generator=gen, dtype=torch.int8)
                    b = torch.randint(-128, 128, (n, k), generator=gen, dtype=torch.int8).t()
                else:
                    a = torch.randn(m, k, generator=gen).to(elem)
                    b = torch.randn(n, k, generator=gen).to(elem).t()  # column-major, as vendors want
                one = torch.ones(1, device=target)
                args = (a.to(target), b.to(target), one)
                wide_a, weights = a.double(), [b.double()]
            cache[problem] = (args, [(wide_a @ w, wide_a.abs() @ w.abs()) for w in weights], _cold_sets(args))
        return cache[problem]

    def call(args: tuple) -> torch.Tensor:
        if op == "gemm_wq":
            return gemm_wq(*args)
        a, b, one = args
        return gemm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                    fast_accum=element_dtype(dtype)[1])

    def run(problem: tuple[int, ...], config: space.Config) -> torch.Tensor:
        with space.forced(config):
            return call(operands(problem)[0])

    def candidates(problem: tuple[int, ...]) -> list[space.Config]:
        m, n, k = problem
        if space_name == "tiny":
            configs: Sequence[space.Config] = QUANTIZED_TINY_SPACES[op]
        else:
            configs = space.WQ_SPACE if op == "gemm_wq" else space.SCALED_SPACE
        if dtype == "int8_bf16":  # the only dtype whose codes enter the MMA exact or rounded by choice
            configs = [*configs, *(dataclasses.replace(c, exact_bytes=True) for c in configs
                                   if isinstance(c, WqConfig))]
        if dtype.startswith("int8_"):  # 8-bit codes also as byte planes: 16-row tiles of 4 warps and
            # at least 128 columns (32 words); the best 8-warp and 8-row-half forms were 11–14 %
            # slower than the best of these (wq-planes-h200-0749f3e.json, wq-planes2-…)
            planes = [dataclasses.replace(c, byte_planes=True) for c in configs
                      if isinstance(c, WqConfig) and c.block_m == 16 and c.num_warps == 4
                      and c.block_n >= 128 and not c.warp_mma and not c.exact_bytes]
            # each also with its scales loaded a step ahead (24.7 against 26.2 µs at 16×8192²,
            # wq-early-h200-ceac80c.json); with bf16 activations the decode tiles also with unit
            # codes (two instructions a weight; fp16 activations launch without them)
            units = [dataclasses.replace(c, unit_codes=True) for c in configs
                     if isinstance(c, WqGemvConfig) and dtype == "int8_bf16"]
            early = [dataclasses.replace(c, early_scales=True) for c in planes]
            configs = [*configs, *planes, *early, *units]
        tma = space.descriptors_run(device)
        ws = space.ws_capable(device) and dtype.startswith("fp8") and dtype.endswith(FAST_SUFFIX)
        # the weight-only Gluon kernel: the operands above (symmetric codes) where it takes them
        wq_ws = op == "gemm_wq" and wq_ws_ok(*_wq_ws_view(operands(problem)[0]), device)
        # BLOCK_K beyond the quantization group would launch capped: the same kernel measured twice;
        # a warp-specialized one the call does not fit would run the selection's choice instead
        return [c for c in configs if getattr(c, "block_m", 1) <= _pow2_at_least(m)
                and (tma or not space.uses_tma(c)) and (ws or not isinstance(c, ScaledWsConfig))
                and (wq_ws if isinstance(c, WqWsConfig) else getattr(c, "block_n", 0) <= _pow2_at_least(n))
                and (op != "gemm_wq" or getattr(c, "block_k", 0) <= _group_for(k))
                and not (isinstance(c, WqGemvConfig) and (m > GEMV_MAX_ROWS or n % 4))]  # words

    def check(problem: tuple[int, ...], config: space.Config) -> str | None:
        got = run(problem, config).double().cpu()
        unit = 2.0**-7  # one ulp of a 16-bit result (the interpreter truncates bf16)
        accumulation = 1e-5  # fp32 sums; fp8 tensor cores sum in a narrower accumulator (accuracy.py)
        if dtype.startswith("fp8") and target == "cuda":
            accumulation = FP8_FAST_ACCUMULATION if dtype.endswith("_fast") else FP8_ACCUMULATION
        excess = min(_excess(got, ref, magnitude, unit, accumulation)  # within one reference's bound
                     for ref, magnitude in operands(problem)[1])
        return None if excess <= 0 else f"error exceeds the bound by {excess:.3g}"

    def measure(problem: tuple[int, ...], config: space.Config) -> float:
        """TFLOP/s replayed from a CUDA graph over argument copies larger than twice L2 (as the float
        GEMM tuner): a decode kernel runs shorter than its Python call, so eager timing measured
        the host."""
        m, n, k = problem
        calls = [lambda args=args: call(args) for args in operands(problem)[2]]
        with space.forced(config):
            return 2.0 * m * n * k / graph_ms(calls) / 1e9

    return TunableOp("blas", op, device.arch, dtype, list(problems), candidates, check, measure,
                     runtime=runtime_of(device), warm=_parallel_warm(run))


def _wq_ws_view(args: tuple) -> tuple:
    """``wq_ws_ok``'s operands for a ``gemm_wq`` call's (x, weight): x as the 2-D view it launches."""
    x, q = args
    return x.reshape(-1, x.shape[-1]), q


def _cold_sets(args: tuple) -> list[tuple]:
    """``gemm_wq``'s (x, weight) or ``gemm_scaled``'s (a, b, scale) and copies of them (the weight's
    codes, scales and zero points; the scale is shared) for :func:`graph_ms`."""
    if isinstance(args[1], QuantizedWeight):
        x, q = args
        tensors = (x, q.codes, q.scales, *(() if q.zeros is None else (q.zeros,)))
        return [args] + [(copy[0], dataclasses.replace(q, codes=copy[1], scales=copy[2],
                                                       zeros=copy[3] if len(copy) > 3 else None))
                         for copy in cold_copies(tensors)[1:]]
    a, b, one = args
    return [(x, y, one) for x, y in cold_copies((a, b))]


def quantized_default(problem: tuple[int, ...], dtype: str, device: DeviceInfo) -> space.Config:
    """What the untuned heuristic of a quantized op picks (the tuner's summary compares with it),
    for the problem flagged as a call with the tuner's operands flags it: their layouts as
    storage-free (meta) tensors — x row-major and a symmetric weight as ``quantize_weight`` stores
    it; a row-major, b column-major and a bf16 D — through the selection's own predicates
    (``ws_ok``, ``tma_ok``)."""
    op = quantized_op(dtype)
    m, n, k = problem
    if op == "gemm_wq":
        bits, act, group = int(dtype[3]), torch_dtype(dtype.split("_")[1]), _group_for(k)
        codes = (torch.empty(k, n, dtype=torch.uint8, device="meta") if bits == 8
                 else torch.empty(n, k // 2, dtype=torch.uint8, device="meta").t())
        scales = torch.empty(k // group, n, dtype=act, device="meta")
        q = QuantizedWeight(codes, scales, None, bits, group, (k, n))
        flags = {"ws_ok": wq_ws_ok(torch.empty(m, k, dtype=act, device="meta"), q, device)}
    else:
        elem, fast = element_dtype(dtype)
        a, b = torch.empty(m, k, dtype=elem, device="meta"), torch.empty(n, k, dtype=elem, device="meta").t()
        d = torch.empty(m, n, dtype=torch.bfloat16, device="meta")
        flags = dict(zip(("tma_ok", "ws_ok"), scaled_fits(a, b, d, True, fast, device), strict=True))
    config = space.MNK_HEURISTICS[op](space.MnkProblem(*problem, dtype, **flags), device.backend,
                                      device.multiprocessors or 0).config
    if isinstance(config, WqConfig | WqGemvConfig):  # as launched: BLOCK_K within the quantization group
        config = dataclasses.replace(config, block_k=min(config.block_k, _group_for(problem[2])))
    return config


# BLAS level 2 gemv (op ``gemv``): problems (m, n) of op(A); dtype ``bf16`` … (op(A) rows
# contiguous) or ``bf16_t`` … (columns contiguous: gemv with trans=True on a row-major matrix).
GEMV_PRESETS: dict[str, list[tuple[int, int]]] = {
    "default": [(1024, 1024), (4096, 4096), (8192, 8192), (4096, 14336), (14336, 4096), (16384, 16384)],
    "tiny": [(40, 72), (24, 130)],  # interpreter-sized, for CPU runs
}
GEMV_TINY_SPACE = (GemvConfig(16, 32, 4, 1), GemvConfig(16, 64, 4, 4), GemvConfig(32, 32, 4, 2))


def gemv_tunable(dtype: str, problems: Sequence[tuple[int, int]], space_name: str,
                 device: DeviceInfo | None = None) -> TunableOp:
    """``gemv`` as the tuner sees it: the check is the tests' bound against fp64 (the output's
    rounding plus fp32 accumulation), the figure GB/s of the matrix read (CUDA-graph timed on a
    GPU: eager gemv calls are host-bound)."""
    device = device or device_info()
    if dtype not in space.GEMV_DTYPES:
        raise InvalidArgumentError(f"gemv dtype {dtype!r} is unknown; known: {', '.join(space.GEMV_DTYPES)}")
    elem, trans = torch_dtype(dtype.removesuffix("_t")), dtype.endswith("_t")
    target = "cuda" if on_gpu() else "cpu"
    unit, accumulation = _rounding(dtype.removesuffix("_t"))
    cache: dict[tuple[int, ...], tuple] = {}

    def operands(problem: tuple[int, ...]) -> tuple:
        if problem not in cache:
            cache.clear()
            m, n = problem
            gen = torch.Generator().manual_seed(hash(problem) % 2**31)
            a = torch.randn((n, m) if trans else (m, n), generator=gen).to(elem)
            x = torch.randn(n, generator=gen).to(elem)
            op_a = (a.t() if trans else a).double()
            cache[problem] = ((a.to(target), x.to(target)), op_a @ x.double(), op_a.abs() @ x.double().abs())
        return cache[problem]

    def run(problem: tuple[int, ...], config: space.Config) -> torch.Tensor:
        a, x = operands(problem)[0]
        with space.forced(config):
            return gemv(a, x, trans=trans)

    def check(problem: tuple[int, ...], config: space.Config) -> str | None:
        _, ref, magnitude = operands(problem)
        got = run(problem, config).double().cpu()
        excess = _excess(got, ref, magnitude, unit, accumulation)
        return None if excess <= 0 else f"error exceeds the bound by {excess:.3g}"

    def measure(problem: tuple[int, ...], config: space.Config) -> float:
        m, n = problem
        matrix_bytes = m * n * torch.empty((), dtype=elem).element_size()
        return matrix_bytes / graph_ms([lambda: run(problem, config)]) / 1e6

    def candidates(problem: tuple[int, ...]) -> list[space.Config]:
        configs = GEMV_TINY_SPACE if space_name == "tiny" else space.GEMV_SPACE
        tiles: list[space.Config] = [c for c in configs if c.block_m <= _pow2_at_least(problem[0])]
        return [*tiles, *space.GEMV_GEMM_SPACE] if trans else tiles

    return TunableOp("blas", "gemv", device.arch, dtype, list(problems), candidates, check, measure,
                     figure="gbs", runtime=runtime_of(device))


def shape_default(op: str, dtype: str, device: DeviceInfo) -> space.Config:
    """What the untuned heuristic picks for a level-1/2 op (the tuner's summary compares with it)."""
    return space.SHAPE_OPS[op].heuristic(dtype, device.backend).config


# BLAS level 1 (ops level1_map, level1_swap, level1_reduce, level1_extreme): problems (n,). Each op is
# timed on its routines: axpy; swap; dot and nrm2 together (one launch shape serves both: dot reads
# two vectors, nrm2 one with more arithmetic; tuned on nrm2 alone the shape cost dot 8 %, b4419df);
# iamax.
LEVEL1_PRESETS: dict[str, list[tuple[int]]] = {
    "default": [(1 << 20,), (1 << 24,), (1 << 26,)],
    "tiny": [(3000,), (1023,)],  # interpreter-sized, for CPU runs
}
LEVEL1_TINY_SPACE = (VectorConfig(64, 2, 2), VectorConfig(128, 1, 4), VectorConfig(256, 4, 4))
LEVEL1_ROUTINES = {"level1_map": "axpy", "level1_swap": "swap", "level1_reduce": "dot + nrm2",
                   "level1_extreme": "iamax"}


def level1_routine(op: str, dtype: str, target: str) -> tuple[Callable[[tuple[int, ...]], tuple],
                                                              Callable[[tuple], object], int]:
    """(operands for a problem, the routine op is timed on, bytes it moves per element; the
    reduce op's routine returns (dot(x, y), nrm2(x)))."""
    elem = torch_dtype(dtype)
    size = torch.empty((), dtype=elem).element_size()

    def operands(problem: tuple[int, ...]) -> tuple:
        gen = torch.Generator().manual_seed(problem[0] % 2**31)
        vectors = [torch.randn(problem[0], generator=gen, dtype=torch.float64).to(elem).to(target)
                   for _ in range(1 if op == "level1_extreme" else 2)]
        return tuple(vectors)

    routine = {"level1_map": lambda args: axpy(1.5, args[0], args[1]),
               "level1_swap": lambda args: swap(args[0], args[1]),
               "level1_reduce": lambda args: (dot(args[0], args[1]), nrm2(args[0])),
               "level1_extreme": lambda args: iamax(args[0])}[op]
    moved = {"level1_map": 3, "level1_swap": 4, "level1_reduce": 3, "level1_extreme": 1}[op]
    return operands, routine, moved * size


def level1_tunable(op: str, dtype: str, problems: Sequence[tuple[int, ...]], space_name: str,
                   device: DeviceInfo | None = None) -> TunableOp:
    """A level-1 op as the tuner sees it: checked against fp64 (axpy, dot and nrm2 within the
    output's rounding plus fp32 sums; iamax exactly NumPy's first largest |x|), the figure GB/s
    moved by the routines (CUDA-graph timed on a GPU: a vector op takes less time than its Python
    call)."""
    device = device or device_info()
    if op not in LEVEL1_ROUTINES:
        raise InvalidArgumentError(f"level-1 op {op!r} is unknown; known: {', '.join(LEVEL1_ROUTINES)}")
    known = space.SHAPE_OPS[op].dtypes
    if dtype not in known:
        raise InvalidArgumentError(f"{op} has no dtype {dtype!r}; known: {', '.join(known)}")
    target = "cuda" if on_gpu() else "cpu"
    make_operands, routine, bytes_per_element = level1_routine(op, dtype, target)
    unit, accumulation = _rounding(dtype)
    cache: dict[tuple[int, ...], tuple] = {}

    def operands(problem: tuple[int, ...]) -> tuple:
        """(the vectors, a copy of them the timed calls may update in place)."""
        if problem not in cache:
            cache.clear()
            vectors = make_operands(problem)
            cache[problem] = (vectors, tuple(v.clone() for v in vectors))
        return cache[problem]

    def check(problem: tuple[int, ...], config: space.Config) -> str | None:
        vectors = operands(problem)[0]
        written = op in ELEMENTWISE_OPS  # the routine writes in place: on copies
        args = (vectors[0].clone(), vectors[1].clone()) if written else vectors
        with space.forced(config):
            got = routine(args)
        x = vectors[0].cpu().to(torch.complex128 if vectors[0].is_complex() else torch.float64)
        if op == "level1_extreme":
            want = int(torch.argmax(x.real.abs() + x.imag.abs() if x.is_complex() else x.abs()))
            return None if int(got) == want else f"iamax {int(got)}, expected {want}"
        y = vectors[1].cpu().to(x.dtype)
        if op == "level1_swap":  # exact: the elements exchanged, not recomputed
            if torch.equal(got[0].cpu(), vectors[1].cpu()) and torch.equal(got[1].cpu(), vectors[0].cpu()):
                return None
            return "swap: x and y not exchanged exactly"
        if op == "level1_map":
            checks = [("axpy", got, 1.5 * x + y, 1.5 * x.abs() + y.abs())]
        else:
            norm = torch.linalg.vector_norm(x)
            checks = [("dot", got[0], (x * y).sum(), (x.abs() * y.abs()).sum()), ("nrm2", got[1], norm, norm)]
        for name, value, want, magnitude in checks:
            excess = _excess(value.cpu().to(want.dtype), want, magnitude, unit, accumulation)
            if excess > 0:
                return f"{name}: error exceeds the bound by {excess:.3g}"
        return None

    def measure(problem: tuple[int, ...], config: space.Config) -> float:
        work = operands(problem)[1]

        def run() -> None:
            with space.forced(config):
                routine(work)
        return problem[0] * bytes_per_element / graph_ms([run]) / 1e6

    def candidates(problem: tuple[int, ...]) -> list[space.Config]:
        configs = LEVEL1_TINY_SPACE if space_name == "tiny" else space.LEVEL1_SPACE
        if op in ELEMENTWISE_OPS:  # one step a program: iters does not matter
            configs = tuple(dict.fromkeys(dataclasses.replace(c, iters=1) for c in configs))
        return list(configs)

    return TunableOp("blas", op, device.arch, dtype, list(problems), candidates, check, measure,
                     figure="gbs", runtime=runtime_of(device))


# BLAS level 2 ger, symv, trsv: problems (m, n) for ger, (n,) for the others; GB/s of the matrix
# bytes the routine must move (ger reads and writes A; symv and trsv read one triangle).
LEVEL2_PRESETS: dict[str, dict[str, list[tuple[int, ...]]]] = {
    "ger": {"default": [(4096, 4096), (8192, 8192), (4096, 14336)], "tiny": [(40, 72), (24, 130)]},
    "symv": {"default": [(4096,), (8192,), (16384,)], "tiny": [(40,), (75,)]},
    "trsv": {"default": [(4096,), (8192,), (16384,)], "tiny": [(40,), (100,)]},
}
LEVEL2_TINY_SPACES = {"ger": (GerConfig(16, 32, 2), GerConfig(32, 16, 4)),
                      "symv": (SymvConfig(16, 1, 2), SymvConfig(16, 3, 4)),
                      "trsv": (TrsvConfig(16, 2), TrsvConfig(32, 4))}


def level2_case(op: str, dtype: str, problem: tuple[int, ...],
                target: str) -> tuple[Callable[[], object], Callable[[], tuple], int]:
    """For ``problem``: (a launch of ``op`` in place on device operands, for timing; a checked call
    on fresh copies returning (result, fp64 reference, magnitude) on the CPU; the bytes of A the
    routine must move). symv and trsv use A's upper triangle; trsv is checked by its residual."""
    elem = torch_dtype(dtype)
    gen = torch.Generator().manual_seed(sum(problem) % 2**31)
    m, n = (problem[0], problem[1]) if op == "ger" else (problem[0], problem[0])
    a = torch.randn(m, n, generator=gen, dtype=torch.float64)
    if op == "trsv":  # well conditioned: the diagonal dominates
        a = 0.5 * a / n**0.5 + torch.eye(n, dtype=torch.float64)
    x = torch.randn(n, generator=gen, dtype=torch.float64)
    y = torch.randn(m, generator=gen, dtype=torch.float64)
    a_t, x_t, y_t = (t.to(elem).to(target) for t in (a, x, y))
    a64, x64, y64 = (t.to(elem).double() for t in (a, x, y))
    a_work, x_work = a_t.clone(), x_t.clone()  # what the timed launches update in place
    launch: Callable[[], object] = {"ger": lambda: ger(1.5, y_t, x_t, a_work), "symv": lambda: symv(a_t, x_t),
                                    "trsv": lambda: trsv(a_t, x_work)}[op]
    # the references once per problem (every candidate is checked against them)
    if op == "ger":
        ref = a64 + 1.5 * torch.outer(y64, x64)
        magnitude = a64.abs() + 1.5 * torch.outer(y64.abs(), x64.abs())

        def checked() -> tuple:
            return ger(1.5, y_t, x_t, a_t.clone()).cpu().double(), ref, magnitude
    elif op == "symv":
        upper = torch.triu(a64)
        full = upper + torch.triu(upper, 1).T
        ref, magnitude = full @ x64, full.abs() @ x64.abs()

        def checked() -> tuple:
            return symv(a_t, x_t).cpu().double(), ref, magnitude
    else:
        upper = torch.triu(a64)

        def checked() -> tuple:  # the residual of the candidate's own solution
            solution = trsv(a_t, x_t.clone()).cpu().double()
            return upper @ solution, x64, upper.abs() @ solution.abs()

    return launch, checked, level2_bytes(op, dtype, problem)


def level2_bytes(op: str, dtype: str, problem: tuple[int, ...]) -> int:
    """The bytes of A the routine must move: ger reads and writes it, symv and trsv read a triangle."""
    size = torch.empty((), dtype=torch_dtype(dtype)).element_size()
    n = problem[0]
    return (2 * problem[0] * problem[1] if op == "ger" else n * (n + 1) // 2) * size


def level2_tunable(op: str, dtype: str, problems: Sequence[tuple[int, ...]], space_name: str,
                   device: DeviceInfo | None = None) -> TunableOp:
    """ger, symv or trsv as the tuner sees it: checked against fp64 within the output's rounding plus
    fp32 sums (trsv by its residual), the figure GB/s of the matrix bytes (CUDA-graph timed)."""
    device = device or device_info()
    if op not in LEVEL2_PRESETS:
        raise InvalidArgumentError(f"level-2 op {op!r} is unknown; known: {', '.join(LEVEL2_PRESETS)}")
    if dtype not in space.SHAPE_OPS[op].dtypes:
        known = ", ".join(space.SHAPE_OPS[op].dtypes)
        raise InvalidArgumentError(f"{op} has no dtype {dtype!r}; known: {known}")
    target = "cuda" if on_gpu() else "cpu"
    unit, sums = _rounding(dtype)
    cache: dict[tuple[int, ...], tuple] = {}

    def case(problem: tuple[int, ...]) -> tuple:
        if problem not in cache:
            cache.clear()
            cache[problem] = level2_case(op, dtype, problem, target)
        return cache[problem]

    def check(problem: tuple[int, ...], config: space.Config) -> str | None:
        with space.forced(config):
            got, ref, magnitude = case(problem)[1]()
        if op == "trsv":  # a residual: x's rounding to the dtype and the sums, both of |A|·|x|
            excess = _excess(got, ref, magnitude, 0.0, unit + sums)
        else:
            excess = _excess(got, ref, magnitude, unit, sums)
        return None if excess <= 0 else f"error exceeds the bound by {excess:.3g}"

    def measure(problem: tuple[int, ...], config: space.Config) -> float:
        launch, _, nbytes = case(problem)

        def run() -> None:
            with space.forced(config):
                launch()
        return nbytes / graph_ms([run]) / 1e6

    def candidates(problem: tuple[int, ...]) -> list[space.Config]:
        if space_name == "tiny":
            return list(LEVEL2_TINY_SPACES[op])
        return list({"ger": space.GER_SPACE, "symv": space.SYMV_SPACE, "trsv": space.TRSV_SPACE}[op])

    return TunableOp("blas", op, device.arch, dtype, list(problems), candidates, check, measure,
                     figure="gbs", runtime=runtime_of(device))
