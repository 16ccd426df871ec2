"""W4A16 decode (M = 1, N = K = 8192, group 128, symmetric) on CUDA cores, read from the
column-major 4-bit codes ``quantize_weight`` stores: an experiment beside the shipped
tensor-core tile (``gemm_wq``), not a library kernel.

Each thread owns whole columns and reduces along K inside its registers (no cross-lane sums):
the codes of a column are contiguous, viewed as int32 words of eight K values (nibble j of word
w is K row 8w + j). A nibble n enters as the fp32 1 + n/128 (even j: the nibble moved to bits
16–19) or 1 + n/2048 (odd j: bits 12–15) — four shifts a word and one LOP3 a nibble (mask, and
1.0's bits) — and is multiplied by x as it is: the product is exact, and a group's Σ x·(1 +
n/128) − Σx, times 128 (2048 for odd j), is Σ x·n. The group's scale multiplies that once per
column, with the zero point 8 taken off as 8·Σx. Offline (sm_90, triton 3.6) 3.3–3.7
instructions a weight against ~2.7 for the tensor-core tile's decode; what this form might have
won is latency: the 8-bit CUDA-core decode streams its codes at 3.3 TB/s, and at that rate the
4-bit codes would take ~10 µs against the tensor-core tile's ~13.8.

``X_SPLIT`` picks how a thread gets the step's activations: 0 loads each nibble position's
WORDS values (stride 8) as scalars, 1 loads the step's 8·WORDS values at once and splits them
into the eight positions (``tl.split``).

Timed from CUDA graphs cycling over four weight copies (cold L2), medians of three rounds, beside
bf16 torch.matmul and the shipped ``gemm_wq`` in the same run; every variant is checked against
x @ dequantize_weight(q) in fp64 first. On the CPU (``TRITON_INTERPRET=1``) only the checks run,
at N = K = 512.

Measured at c1c9245 (``wq4-cuda-core-h200-c1c9245.json``): every variant right (1.5e-4 of Σ|x·w|
at most, the bf16 result's rounding included) and slower than the tensor-core tile — the best,
128 columns on 2 warps with K split 16, 21.4 µs against the shipped 14.7 (torch 33.5); 256–512
columns on 4 warps 22.9–24.1, 4 words a step 28.6–30.6. The shipped tile stays; this script is
kept as the evidence.

Usage: python benchmarks/wq4_cuda_core.py OUT.json
"""

from __future__ import annotations

import statistics
import sys

import torch
import triton
import triton.language as tl

from tessera._core.device import interpreter_enabled
from tessera._core.timing import graph_rounds, run_record, write_result
from tessera.blas import gemm_wq, quantize_weight
from tessera.blas.kernels.gemm_wq import sum_slices
from tessera.blas.quantized import dequantize_weight, unpack_nibbles

CPU = interpreter_enabled()
N = K = 512 if CPU else 8192
DEVICE = "cpu" if CPU else "cuda"
GROUP = 128
COPIES = 1 if CPU else 4
ROUNDS = 3


# Nibble j of a word (K row 8w + j) goes to bits 16–19 for even j (fp32 1 + n/128) and to bits
# 12–15 for odd j (1 + n/2048), so four shifts serve the eight nibbles: << 16 (j = 0), << 8
# (1, 2), none (3, 4), >> 8 (5, 6), >> 16 (7). One LOP3 each keeps the nibble under 1.0's bits;
# both constants are PTX immediates, so ptxas holds one in a register instead of splitting the
# LOP3 in two. The odd nibbles' products keep 2^-11 of x like 8-bit unit codes' (see gemv_wq).
_EVEN, _ODD = "0x000F0000", "0x0000F000"
_ASM_NIBBLES = tl.constexpr(
    "{ .reg .b32 a, b, c, d; shl.b32 a, $8, 16; shl.b32 b, $8, 8; shr.u32 c, $8, 8; shr.u32 d, $8, 16; "
    + " ".join(f"lop3.b32 ${j}, {src}, {mask}, 0x3F800000, 0xEA;" for j, (src, mask) in enumerate(
        [("a", _EVEN), ("b", _ODD), ("b", _EVEN), ("$8", _ODD), ("$8", _EVEN), ("c", _ODD), ("c", _EVEN),
         ("d", _ODD)])) + " }")


@triton.jit
def _placed(t, EVEN: tl.constexpr):
    mask: tl.constexpr = 0x000F0000 if EVEN else 0x0000F000
    return ((t & mask) | 0x3F800000).to(tl.float32, bitcast=True)


@triton.jit
def _unit_nibbles(words, ASM: tl.constexpr):
    """The eight nibbles of each int32 word as fp32: 1 + n/128 (even j), 1 + n/2048 (odd j)."""
    if ASM:
        v = tl.inline_asm_elementwise(_ASM_NIBBLES, "=r,=r,=r,=r,=r,=r,=r,=r,r", [words],
                                      dtype=(tl.int32,) * 8, is_pure=True, pack=1)
        return (v[0].to(tl.float32, bitcast=True), v[1].to(tl.float32, bitcast=True),
                v[2].to(tl.float32, bitcast=True), v[3].to(tl.float32, bitcast=True),
                v[4].to(tl.float32, bitcast=True), v[5].to(tl.float32, bitcast=True),
                v[6].to(tl.float32, bitcast=True), v[7].to(tl.float32, bitcast=True))
    a, b, c, d = words << 16, words << 8, (words >> 8) & 0x00FFFFFF, (words >> 16) & 0x0000FFFF
    return (_placed(a, True), _placed(b, False), _placed(b, True), _placed(words, False),
            _placed(words, True), _placed(c, False), _placed(c, True), _placed(d, False))


@triton.jit
def _wq4_decode_kernel(x_ptr, w_ptr, s_ptr, y_ptr, N, K, k_per_split, stride_wn, stride_sg, stride_sn,
                       stride_ys, GROUP: tl.constexpr, BLOCK_N: tl.constexpr, WORDS: tl.constexpr,
                       NUM_STAGES: tl.constexpr, X_SPLIT: tl.constexpr, ASM: tl.constexpr):
    pid_n = tl.program_id(0)
    split = tl.program_id(1)
    rn = pid_n.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_n = rn < N
    k_lo = split * k_per_split  # a multiple of GROUP
    k_hi = tl.minimum(k_lo + k_per_split, K)
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    w = tl.arange(0, WORDS)
    for g in range(k_lo // GROUP, k_hi // GROUP):
        scale = tl.load(s_ptr + g * stride_sg + rn * stride_sn, mask=mask_n, other=0).to(tl.float32)
        even = tl.zeros((BLOCK_N, WORDS), dtype=tl.float32)
        odd = tl.zeros((BLOCK_N, WORDS), dtype=tl.float32)
        x_even = tl.zeros((WORDS,), dtype=tl.float32)
        x_odd = tl.zeros((WORDS,), dtype=tl.float32)
        for k0 in tl.range(g * GROUP, g * GROUP + GROUP, 8 * WORDS, num_stages=NUM_STAGES):
            words = tl.load(w_ptr + rn[:, None] * stride_wn + (k0 // 8 + w)[None, :], mask=mask_n[:, None],
                            other=0)
            if X_SPLIT:
                xt = tl.load(x_ptr + k0 + 8 * w[:, None] + tl.arange(0, 8)[None, :]).to(tl.float32)
                e, o = tl.split(tl.reshape(xt, (WORDS, 4, 2)))  # positions 0 2 4 6 | 1 3 5 7
                e0, e1 = tl.split(tl.reshape(e, (WORDS, 2, 2)))  # 0 4 | 2 6
                o0, o1 = tl.split(tl.reshape(o, (WORDS, 2, 2)))  # 1 5 | 3 7
                x0, x4 = tl.split(e0)
                x2, x6 = tl.split(e1)
                x1, x5 = tl.split(o0)
                x3, x7 = tl.split(o1)
            else:
                x0 = tl.load(x_ptr + k0 + 8 * w).to(tl.float32)
                x1 = tl.load(x_ptr + k0 + 8 * w + 1).to(tl.float32)
                x2 = tl.load(x_ptr + k0 + 8 * w + 2).to(tl.float32)
                x3 = tl.load(x_ptr + k0 + 8 * w + 3).to(tl.float32)
                x4 = tl.load(x_ptr + k0 + 8 * w + 4).to(tl.float32)
                x5 = tl.load(x_ptr + k0 + 8 * w + 5).to(tl.float32)
                x6 = tl.load(x_ptr + k0 + 8 * w + 6).to(tl.float32)
                x7 = tl.load(x_ptr + k0 + 8 * w + 7).to(tl.float32)
            v0, v1, v2, v3, v4, v5, v6, v7 = _unit_nibbles(words, ASM)
            even += v0 * x0[None, :]  # one FFMA each (a sum of products first would not fuse)
            even += v2 * x2[None, :]
            even += v4 * x4[None, :]
            even += v6 * x6[None, :]
            odd += v1 * x1[None, :]
            odd += v3 * x3[None, :]
            odd += v5 * x5[None, :]
            odd += v7 * x7[None, :]
            x_even += (x0 + x2) + (x4 + x6)
            x_odd += (x1 + x3) + (x5 + x7)
        sum_even, sum_odd = tl.sum(x_even), tl.sum(x_odd)
        dot = (tl.sum(even, 1) - sum_even) * 128.0 + (tl.sum(odd, 1) - sum_odd) * 2048.0  # Σ x·n
        acc += scale * (dot - 8.0 * (sum_even + sum_odd))
    tl.store(y_ptr + split.to(tl.int64) * stride_ys + rn, acc, mask=mask_n)


def decode(x: torch.Tensor, words: torch.Tensor, scales: torch.Tensor, split: int, block_n: int,
           num_warps: int, words_per_step: int, num_stages: int, x_split: bool, ws: torch.Tensor,
           y: torch.Tensor) -> None:
    """y (1, N) ← x (1, K) · W for the (N, K/8) int32 words of column-major 4-bit codes: partial
    sums of ``split`` K slices to ``ws`` (split, N) fp32, then added in a fixed order."""
    n, k = y.shape[1], x.shape[1]
    k_per_split = k // split
    _wq4_decode_kernel[(triton.cdiv(n, block_n), split)](
        x, words, scales, ws, n, k, k_per_split, words.stride(0), *scales.stride(), ws.stride(0),
        GROUP=GROUP, BLOCK_N=block_n, WORDS=words_per_step, NUM_STAGES=num_stages, X_SPLIT=x_split,
        ASM=not CPU, num_warps=num_warps)
    sum_slices(ws, split, y)


# (K split, BLOCK_N, warps, words a step, stages, x split); offline (sm_90, triton 3.6) the step
# loop takes 471–485 instructions for a thread's 128 weights at 256 columns on 4 warps (127
# registers), 837 for 256 at 512 columns (181 registers); K splits of 16–32 give 512–1024 programs
VARIANTS = [(16, 256, 4, 8, 3, False), (16, 256, 4, 8, 3, True), (32, 256, 4, 8, 3, True),
            (16, 512, 4, 8, 3, True), (32, 512, 4, 8, 3, True), (16, 128, 2, 8, 3, True),
            (32, 128, 2, 8, 2, False), (8, 256, 4, 4, 4, True), (16, 256, 4, 4, 4, True),
            (8, 256, 4, 8, 3, True)]
if CPU:
    VARIANTS = [(2, 64, 2, 8, 2, False), (2, 64, 2, 8, 2, True), (1, 32, 1, 4, 2, True)]


def main() -> None:
    gen = torch.Generator(device=DEVICE).manual_seed(5)
    weights = [torch.randn(K, N, device=DEVICE, generator=gen).to(torch.bfloat16) * 0.02
               for _ in range(COPIES)]
    qs = [quantize_weight(w, bits=4, group_size=GROUP) for w in weights]
    # the codes re-packed in the order this experiment was written for (rows 2i, 2i + 1 a byte;
    # quantize_weight interleaves runs of 32 rows since the thirty-seventh session), (K/2, N) stored
    # column-major: each column's K/2 bytes contiguous → (N, K/8) int32 words
    sequential = [unpack_nibbles(q.codes) for q in qs]
    words = [(c[0::2] | (c[1::2] << 4)).t().contiguous().view(torch.int32) for c in sequential]
    assert words[0].shape == (N, K // 8) and words[0].stride() == (K // 8, 1)
    x = torch.randn(1, K, device=DEVICE, generator=gen).to(torch.bfloat16)
    exact = x.double() @ dequantize_weight(qs[0], torch.float32).double()
    magnitude = x.double().abs() @ dequantize_weight(qs[0], torch.float32).double().abs()
    y = torch.empty(1, N, device=DEVICE, dtype=torch.bfloat16)
    rows, cases = [], {"torch.matmul (bf16 weights)": [lambda w=w: torch.matmul(x, w) for w in weights],
                       "shipped gemm_wq": [lambda q=q: gemm_wq(x, q, out=y) for q in qs]}
    for split, block_n, warps, per_step, stages, x_split in VARIANTS:
        name = (f"cuda-core k/{split} n{block_n} w{warps} words{per_step} s{stages}"
                f"{' x-split' if x_split else ''}")
        ws = torch.empty(split, N, device=DEVICE, dtype=torch.float32)
        try:
            decode(x, words[0], qs[0].scales, split, block_n, warps, per_step, stages, x_split, ws, y)
        except Exception as error:  # noqa: BLE001 - a variant that fails is a result too
            rows.append({"case": name, "error": f"{type(error).__name__}: {str(error)[:300]}"})
            print(name, rows[-1]["error"], flush=True)
            continue
        # one bf16 rounding of the result (the interpreter truncates: a whole ulp), plus fp32 sums
        unit = 2.0**-7 if CPU else 2.0**-8
        excess = ((y.double() - exact).abs() - (unit * exact.abs() + 1e-5 * magnitude)).max().item()
        rel = ((y.double() - exact).abs() / (magnitude + 1e-30)).max().item()
        rows.append({"case": name, "max_err_over_sum_abs": rel, "within_bound": excess <= 0})
        print(f"{name:<52} max |err| / Σ|x·w| = {rel:.2e}  within bound: {excess <= 0}", flush=True)
        if excess <= 0:
            cases[name] = [lambda wd=wd, q=q, a=(split, block_n, warps, per_step, stages, x_split), ws=ws:
                           decode(x, wd, q.scales, *a, ws, y) for wd, q in zip(words, qs, strict=True)]
    if not CPU:
        times = graph_rounds(cases, ROUNDS)
        torch_us = 1e3 * statistics.median(times["torch.matmul (bf16 weights)"])
        for name, samples in times.items():
            us = 1e3 * statistics.median(samples)
            rows.append({"case": name, "graph_us": us, "vs_torch": torch_us / us})
            print(f"{name:<52} {us:8.2f} µs  {torch_us / us:5.2f}× torch", flush=True)
    if len(sys.argv) > 1:
        write_result(sys.argv[1], {**run_record("python benchmarks/wq4_cuda_core.py OUT.json"),
                                   "n": N, "k": K, "group": GROUP, "rows": rows})


if __name__ == "__main__":
    main()
