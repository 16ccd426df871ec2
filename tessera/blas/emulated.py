"""float32 GEMM on bf16 tensor cores (``gemm(..., precision="bf16x9" | "bf16x6")``).

Each float32 operand is split exactly into three bf16 pieces, x = x₀ + x₁ + x₂ (8 significant bits
each, ``kernels/split.py``), so a·b is the sum of the nine products aᵢ·bⱼ, each exact in fp32.
"bf16x9" computes all nine; "bf16x6" drops the three smallest (i + j ≥ 3, at most ~2⁻²¹ of |a·b|
together) for 1.5× fewer tensor-core operations. Two bf16 GEMMs with fp32 accumulation do the
work: one over the small products, their pieces laid side by side along K (smallest first), and
one over a₀·b₀ that adds the first's result in its epilogue, so the small products are summed apart
from the large one (a blocked summation, as Triton's tf32x3 does). Tensor cores truncate what they
add into the accumulator, which over a long K left a₀·b₀'s sum 2–4× SGEMM's error (fifty-seventh
session); on Hopper the a₀·b₀ GEMM therefore sums each K step's products apart and adds them with
round-to-nearest float32 adds (``gemm_tma.mac``'s promotion, :data:`PROMOTED_TILE`).

Non-finite values: a non-finite x is x₀ alone, so in the small products an inf meets the other
operand's lower pieces, which may be zero (inf · 0 = NaN) or of the other sign than the operand
(x = 0.99999: x₀ = 1, x₁ < 0). The small products' sum is therefore zeroed wherever it is not
finite before it is added to a₀·b₀, which carries every inf and NaN as SGEMM would (x₀ has x's
sign and is 0 only for x = 0 or |x| < 2⁻¹³³). The one case this gets wrong: a sum that overflows
in the small products alone, which needs |a·b| sums near 2¹³⁵ with a₀·b₀'s cancelling.
What differs from IEEE fp32: a value below ~2⁻¹¹⁰ in magnitude loses low bits in its smallest
piece (bf16's subnormals end at 2⁻¹³³), so such an operand's products carry less than fp32's
precision; and tensor cores do not round their fp32 sums to nearest (``accuracy.py``'s bound).

Memory: (products − 1)·K bf16 elements per row of op(A) and per column of op(B) for the pieces
(4× the operands' float32 bytes for bf16x9, 2.5× for bf16x6), and one float32 matrix of D's shape
for the small products' sum.
"""

from __future__ import annotations

import contextlib
import itertools
from dataclasses import dataclass, replace

import torch

from tessera._core import launch
from tessera._core.device import (
    BF16_PRODUCT_KEYS,
    DeviceInfo,
    build_multiprocessors,
    device_info,
    offline_device,
)
from tessera._core.launch import build_arch, cdiv
from tessera.blas import space
from tessera.blas.kernels.gemm_tma import TmaConfig, full_wave_shape, launch_gemm_tma, tma_supported
from tessera.blas.kernels.gemm_ws import WsConfig, launch_gemm_ws
from tessera.blas.kernels.split import split_into

# The products computed apart from a₀·b₀, smallest first: (piece of A, piece of B).
SMALL_PRODUCTS: dict[str, tuple[tuple[int, int], ...]] = {
    "bf16x9": ((2, 2), (1, 2), (2, 1), (0, 2), (1, 1), (2, 0), (0, 1), (1, 0)),
    "bf16x6": ((0, 2), (1, 1), (2, 0), (0, 1), (1, 0)),
}
assert tuple(SMALL_PRODUCTS) == BF16_PRODUCT_KEYS
K_ALIGN = 8  # each piece's K padded to 16 bytes of bf16: TMA descriptors need aligned rows and bases
# The a₀·b₀ GEMM's tile with promoted sums: both accumulators of a 128×128 tile stay in registers
# on 8 warps (175 a thread compiled offline for sm_90, no spills; 128×256 tiles spill 196–256
# bytes), and 128-deep steps halve the promotions, each waiting for its wgmma: a₀·b₀ at 8192³ 2.17
# ms against 2.51–2.62 for 64-deep tiles and 1.74 unpromoted, as accurate (H100, promote_probe.py).
PROMOTED_TILE = TmaConfig(128, 128, 128, 8, 8, 3, False, 2)
# The small products' GEMM on Hopper, where its 128×256 tiles fill from 7/8 of a wave to 4 waves:
# gemm_ws with the float32 sum stored in column halves (3 stages: 212992 bytes of shared memory).
# Their K is long (5 or 8 times the call's), and the bf16 logic's nearest rows (wave shapes, K
# 8192) give them 128×128 descriptor tiles: on an H100 at 2048² × 10240 … 4096² × 32768 (16-bit
# D) gemm_ws 128×256 ran 709–771 TFLOP/s against 586–694 for those (stream-K 499–566; cuBLAS
# 697–785). Beyond 4 waves the logic's choice stays (stream-K: 723 TFLOP/s at 8192² × 40960).
SMALL_TILE = WsConfig(128, 256, 64, 8, 8, 3, epilogue_split=2)
SMALL_TILE_WAVES = (7 / 8, 4)


@dataclass(frozen=True)
class EmulatedConfig:
    """How ``gemm`` computes a float32 call with a bf16-product precision (what ``explain`` names)."""

    precision: str

    kernel = "bf16_products"

    def short(self) -> str:
        products = len(SMALL_PRODUCTS[self.precision]) + 1
        return f"{self.kernel} {self.precision} ({products} bf16 products in 2 bf16 GEMMs)"


def operand_pieces(precision: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The pieces of op(A) and of op(B) in the small products' segments, in their order."""
    small = SMALL_PRODUCTS[precision]
    return tuple(i for i, _ in small), tuple(j for _, j in small)


def padded_k(k: int) -> int:
    """Each piece's K as the bf16 GEMMs see it (zeros past ``k``)."""
    return cdiv(k, K_ALIGN) * K_ALIGN


def pieces_of_a(op_a: torch.Tensor, pieces: tuple[int, ...]) -> torch.Tensor:
    """op(A) (M × K, or batch × M × K) as bf16 pieces side by side: M × (len(pieces)·K'), row-major."""
    k = padded_k(op_a.shape[-1])
    lead, m = op_a.shape[:-2], op_a.shape[-2]
    out = torch.empty((*lead, m, len(pieces) * k), dtype=torch.bfloat16, device=op_a.device)
    split_into(op_a, a_segments(out, len(pieces)), pieces)
    return out


def a_segments(a_pieces: torch.Tensor, count: int) -> torch.Tensor:
    """op(A)'s pieces buffer seen as (…, segments, M, K'): what the split writes."""
    *lead, m, width = a_pieces.shape
    return a_pieces.view(*lead, m, count, width // count).movedim(-2, -3)


def pieces_of_b(op_b: torch.Tensor, pieces: tuple[int, ...]) -> torch.Tensor:
    """op(B) (K × N, or batch × K × N) as bf16 pieces stacked: (len(pieces)·K') × N, row-major."""
    k = padded_k(op_b.shape[-2])
    lead, n = op_b.shape[:-2], op_b.shape[-1]
    out = torch.empty((*lead, len(pieces) * k, n), dtype=torch.bfloat16, device=op_b.device)
    split_into(op_b, b_segments(out, len(pieces)), pieces)
    return out


def b_segments(b_pieces: torch.Tensor, count: int) -> torch.Tensor:
    """op(B)'s pieces buffer seen as (…, segments, K', N): what the split writes."""
    *lead, height, n = b_pieces.shape
    return b_pieces.view(*lead, count, height // count, n)


def run(op_a: torch.Tensor, op_b: torch.Tensor, c: torch.Tensor | None, d: torch.Tensor, alpha: float,
        beta: float, precision: str, *, remember: bool = False) -> Recipe | None:
    """``d = alpha · op_a @ op_b + beta · c`` in float32 from bf16 products (validated by ``gemm``:
    float32 operands, d float32 of the result's shape, c None or broadcast to it, K > 0). With
    ``remember`` (no C), also the :class:`Recipe` that repeats the call's launches on new
    operands, or None where one of them cannot be replayed."""
    from tessera.blas.api import gemm  # api imports this module

    from_a, from_b = operand_pieces(precision)
    with _recording(remember) as splits:
        a_pieces, b_pieces = pieces_of_a(op_a, from_a), pieces_of_b(op_b, from_b)
    with _recording(remember) as small:
        total = small_products(a_pieces, b_pieces)
    a0, b0 = first_pieces(a_pieces, b_pieces, precision, op_a.shape[-1])
    target = promoting_target(a0, b0, d)
    cleaned_in_gemm = target is not None and c is None  # the promoted GEMM reads the sum cleaned
    if not cleaned_in_gemm:
        _clean(total, alpha)
        if c is not None:
            total.add_(c, alpha=beta)
    with _recording(remember) as first:
        if target is None:
            gemm(a0, b0, total, alpha=alpha, beta=1.0, out_dtype=torch.float32, out=d)
        else:
            promoted_product(a0, b0, total, d, alpha, target, clean=cleaned_in_gemm)
    if not remember or c is not None:
        return None
    replays = (launch.Replay.each_of(splits, (op_a, op_b, a_segments(a_pieces, len(from_a)),
                                              b_segments(b_pieces, len(from_b)))),
               launch.Replay.each_of(small, (a_pieces, b_pieces, total)),
               launch.Replay.each_of(first, (a0, b0, total, d)))
    if any(r is None for r in replays):
        return None
    return Recipe(precision, float(alpha), op_a.shape[-1], tuple(a_pieces.shape), tuple(b_pieces.shape),
                  tuple(d.shape), cleaned_in_gemm, *replays)  # type: ignore[arg-type]


def _recording(remember: bool) -> contextlib.AbstractContextManager[list[launch.Call]]:
    """The launches of a block, recorded when a recipe is to be made of them."""
    return launch.recording() if remember else contextlib.nullcontext([])


def _clean(total: torch.Tensor, alpha: float) -> None:
    """The small products' sum as a₀·b₀'s GEMM adds it: zeroed where not finite (inf · 0 and
    inf · x₁ < 0 meet there; a₀·b₀ carries every inf and NaN), times alpha — a pass over the sum
    of its own where a₀·b₀ is not promoted or a C is added (the promoted GEMM does it as it reads
    the sum otherwise: bf16x6 1.5–4 % faster from 8192³ down to 2048³ in graphs on an H100)."""
    total.nan_to_num_(nan=0.0, posinf=0.0, neginf=0.0)
    if alpha != 1.0:
        total.mul_(alpha)


@dataclass(frozen=True)
class Recipe:
    """A bf16-product call's launches, repeatable on new operands of its signature (``gemm``'s
    repeat-call path: no validation, selection, launch keys or descriptor checks again): the
    splits, the small products' GEMM and the a₀·b₀ GEMM, on buffers allocated alike."""

    precision: str
    alpha: float
    k: int  # op(A)'s K
    a_shape: tuple[int, ...]  # op(A)'s pieces
    b_shape: tuple[int, ...]  # op(B)'s pieces
    out_shape: tuple[int, ...]
    cleaned_in_gemm: bool  # the promoted a₀·b₀ GEMM cleans the small sum (else _clean before it)
    splits: tuple[launch.Replay, ...]  # on (op(A), op(B), A's segments, B's segments)
    small: tuple[launch.Replay, ...]  # on (A's pieces, B's pieces, their sum)
    first: tuple[launch.Replay, ...]  # on (a₀, b₀, the sum, D)

    def run(self, a: torch.Tensor, b: torch.Tensor, trans_a: bool, trans_b: bool, alpha: float,
            beta: float, out: torch.Tensor | None = None, c: torch.Tensor | None = None) -> torch.Tensor:
        """The call this recipe was made for, on new operands of its signature (no C, no out)."""
        assert out is None and c is None  # gemm keeps recipes of these precisions for such calls only
        op_a = a.transpose(-1, -2) if trans_a else a
        op_b = b.transpose(-1, -2) if trans_b else b
        device = a.device
        a_pieces = torch.empty(self.a_shape, dtype=torch.bfloat16, device=device)
        b_pieces = torch.empty(self.b_shape, dtype=torch.bfloat16, device=device)
        total = torch.empty(self.out_shape, dtype=torch.float32, device=device)
        d = torch.empty(self.out_shape, dtype=torch.float32, device=device)
        count_a, count_b = (len(p) for p in operand_pieces(self.precision))
        segments = (op_a, op_b, a_segments(a_pieces, count_a), b_segments(b_pieces, count_b))
        for replay in self.splits:
            replay(segments)
        for replay in self.small:
            replay((a_pieces, b_pieces, total))
        if not self.cleaned_in_gemm:
            _clean(total, self.alpha)
        a0, b0 = first_pieces(a_pieces, b_pieces, self.precision, self.k)
        for replay in self.first:
            replay((a0, b0, total, d))
        return d


def first_pieces(a_pieces: torch.Tensor, b_pieces: torch.Tensor, precision: str,
                 k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """a₀ and b₀ as views of a segment of the small products' pieces that holds them."""
    from_a, from_b = operand_pieces(precision)
    k, t_a, t_b = padded_k(k), from_a.index(0), from_b.index(0)
    return a_pieces[..., t_a * k:(t_a + 1) * k], b_pieces[..., t_b * k:(t_b + 1) * k, :]


def _target(d: torch.Tensor) -> DeviceInfo:
    """The GPU a launch on ``d`` runs on, or a pack build's target — with
    :data:`~tessera._core.device.OFFLINE_MULTIPROCESSORS` where the arch's count is unknown, as the
    GEMM families' representative launches have (a launch for 1 SM specializes its grid argument
    as a constant: a binary no real call takes)."""
    arch = build_arch()
    if not arch:
        return device_info(d.device)
    target = offline_device(arch)
    return replace(target, multiprocessors=build_multiprocessors(target))


def promoting_target(a0: torch.Tensor, b0: torch.Tensor, d: torch.Tensor) -> DeviceInfo | None:
    """The GPU (or pack target) on which a₀·b₀ runs promoted (:func:`promoted_product`): where the
    descriptor family runs (CUDA sm_90 or newer, 2-D, TMA's alignment); None elsewhere, where a
    plain bf16 GEMM truncates its sums as the tensor cores do."""
    info = _target(d)
    if space.tma_capable(info) and a0.dim() == 2 and d.dim() == 2 and tma_supported(a0, b0, d):
        return info
    return None


def small_tile_target(a_pieces: torch.Tensor, b_pieces: torch.Tensor,
                      total: torch.Tensor) -> DeviceInfo | None:
    """The GPU (or pack target) on which the small products' GEMM (into ``total``) runs on
    :data:`SMALL_TILE`: CUDA sm_90 (wgmma's), 2-D, descriptor-aligned, its tiles within
    :data:`SMALL_TILE_WAVES`; None elsewhere (``gemm``'s selection then)."""
    target = promoting_target(a_pieces, b_pieces, total)  # sm_90+, 2-D, descriptor-aligned
    if target is None or not space.ws_capable(target):
        return None
    sms = target.multiprocessors or 1
    tiles = cdiv(total.shape[0], SMALL_TILE.block_m) * cdiv(total.shape[1], SMALL_TILE.block_n)
    low, high = SMALL_TILE_WAVES
    return target if low * sms <= tiles <= high * sms else None


def small_products(a_pieces: torch.Tensor, b_pieces: torch.Tensor) -> torch.Tensor:
    """The small products' float32 sum, A's pieces @ B's pieces: on :data:`SMALL_TILE` where
    :func:`small_tile_target` has a target, else through ``gemm``'s selection for a bf16 GEMM
    with a float32 result."""
    from tessera.blas.api import gemm  # api imports this module

    if a_pieces.dim() == 2 and b_pieces.dim() == 2:
        total = torch.empty((a_pieces.shape[0], b_pieces.shape[1]), dtype=torch.float32,
                            device=a_pieces.device)
        target = small_tile_target(a_pieces, b_pieces, total)
        if target is not None:
            launch_gemm_ws(a_pieces, b_pieces, total, num_sms=target.multiprocessors or 1, config=SMALL_TILE)
            return total
    return gemm(a_pieces, b_pieces, out_dtype=torch.float32)


def promoted_product(a0: torch.Tensor, b0: torch.Tensor, c: torch.Tensor, d: torch.Tensor, alpha: float,
                     target: DeviceInfo, *, clean: bool) -> None:
    """d = alpha · a0 @ b0 + c with each K step's sums promoted (:data:`PROMOTED_TILE`) on
    ``target`` (:func:`promoting_target`); ``clean``: d = alpha · (a0 @ b0 + c's finite part)
    instead, the small products' sum read as :func:`_clean` would leave it."""
    launch_gemm_tma(a0, b0, c, d, alpha, alpha if clean else 1.0, precision="ieee",
                    num_sms=target.multiprocessors or 1, config=PROMOTED_TILE, promote=True, finite_c=clean)


def representative_launches() -> None:
    """The launches the bf16-product precisions add to bf16 GEMMs', for packs (under
    ``launch.capture()`` in ``launch.building_for``). The splits: both precisions, op(A) and op(B)
    row- and column-major, each of M (or N) and K a multiple of 16, of 8 only (K's pieces then
    8-aligned), or odd (padded to 16): every 2-D specialization. On Hopper targets the promoted
    a₀·b₀ GEMM for problems of a full wave or more (smaller grids compile on first use, as the
    GEMM families' do): M, N and K' each a multiple of 16 or of 8 only, alpha 1 or not, without a
    C of the caller's (with one the small sum is cleaned apart); and the small products' GEMM on
    :data:`SMALL_TILE`, M, N and K alike. Batched calls compile theirs on first use."""
    for precision in SMALL_PRODUCTS:
        a_pieces, b_pieces = operand_pieces(precision)
        for rows, cols, transposed in itertools.product(*2 * ((1024, 1000, 1001),), (False, True)):
            a = torch.empty(cols, rows).t() if transposed else torch.empty(rows, cols)  # M × K
            pieces_of_a(a, a_pieces)
            b = torch.empty(rows, cols).t() if transposed else torch.empty(cols, rows)  # K × N
            pieces_of_b(b, b_pieces)
    target = _target(torch.empty(0))
    rows, cols = full_wave_shape(PROMOTED_TILE.block_m, PROMOTED_TILE.block_n, target.multiprocessors or 1)
    for m, n, k, alpha in itertools.product((rows, rows - 8), (cols, cols - 8), (1024, 1000), (1.0, 1.5)):
        a0, b0 = torch.empty(m, k, dtype=torch.bfloat16), torch.empty(k, n, dtype=torch.bfloat16)
        d = torch.empty(m, n)
        promoting = promoting_target(a0, b0, d)
        if promoting is not None:
            promoted_product(a0, b0, torch.empty(m, n), d, alpha, promoting, clean=True)
    if not space.ws_capable(target):
        return
    rows, cols = full_wave_shape(SMALL_TILE.block_m, SMALL_TILE.block_n, target.multiprocessors or 1)
    segments = sorted({len(products) for products in SMALL_PRODUCTS.values()})
    for m, n, k, count in itertools.product((rows, rows - 8), (cols, cols - 8), (1024, 1000), segments):
        small_products(torch.empty(m, count * k, dtype=torch.bfloat16),
                       torch.empty(count * k, n, dtype=torch.bfloat16))
