"""Is W4A16 decode held back by how it reads the codes? Reading alone, in its pattern and others.

``gemm_wq``'s shipped M = 1 tile (8×128×128, K split 8, 4 warps, 3 stages) reads its 4-bit codes,
stored column-major (each column's K/2 bytes contiguous), as one (128 columns, 64 bytes) tile a
step: 128 runs of 64 bytes, 4 KiB apart. This kernel reads the same 32 MiB of codes (N = K =
8192) in the same grid and pipeline and does next to nothing with them (an XOR of int32 words),
so its time is the access pattern's: 64, 128 or 256 bytes a column a step, and "blocked" (each
step's tile one contiguous piece, a packing a kernel could be given). Timed from CUDA graphs over
four copies (cold L2) beside the shipped call and a copy of the codes' bytes.

Usage: python benchmarks/wq_read_pattern.py OUT.json
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable

import torch
import triton
import triton.language as tl

from tessera._core.timing import graph_rounds, run_record, write_result
from tessera.blas import gemm_wq, quantize_weight

N = K = 8192
COPIES = 4
ROUNDS = 3


@triton.jit
def _read_words(q_ptr, out_ptr, N, WORDS_PER_COLUMN, words_per_split, BLOCK_N: tl.constexpr,
                STEP_WORDS: tl.constexpr, BLOCKED: tl.constexpr, NUM_STAGES: tl.constexpr,
                PAIRED: tl.constexpr):
    """XOR of the int32 words of BLOCK_N columns over one K slice, STEP_WORDS words a column a
    step. Column-major: word w of column n at n·WORDS_PER_COLUMN + w. BLOCKED: the slice's steps
    each one contiguous (BLOCK_N, STEP_WORDS) piece. PAIRED (column-major): two steps an iteration,
    their two loads issued together (what a tile of two quantization groups a step would do)."""
    pid_n = tl.program_id(0)
    split = tl.program_id(1)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rw = tl.arange(0, STEP_WORDS)
    acc = tl.zeros((BLOCK_N, STEP_WORDS), dtype=tl.int32)
    w_lo = split * words_per_split
    if PAIRED:
        for w0 in tl.range(w_lo, w_lo + words_per_split, 2 * STEP_WORDS, num_stages=NUM_STAGES):
            offsets = rn[:, None].to(tl.int64) * WORDS_PER_COLUMN + (w0 + rw)[None, :]
            first = tl.load(q_ptr + offsets)
            second = tl.load(q_ptr + offsets + STEP_WORDS)
            acc ^= first
            acc ^= second
        tl.store(out_ptr + split * N + rn, tl.xor_sum(acc, 1))
        return
    for w0 in tl.range(w_lo, w_lo + words_per_split, STEP_WORDS, num_stages=NUM_STAGES):
        if BLOCKED:  # tile (pid_n, step) stored whole: N/BLOCK_N × steps pieces of BLOCK_N·STEP_WORDS
            base = (pid_n.to(tl.int64) * WORDS_PER_COLUMN + w0) * BLOCK_N
            offsets = base + rn[:, None] % BLOCK_N * STEP_WORDS + rw[None, :]
        else:
            offsets = rn[:, None].to(tl.int64) * WORDS_PER_COLUMN + (w0 + rw)[None, :]
        acc ^= tl.load(q_ptr + offsets)
    tl.store(out_ptr + split * N + rn, tl.xor_sum(acc, 1))


def reader(words: torch.Tensor, out: torch.Tensor, step_bytes: int, blocked: bool, split: int = 8,
           block_n: int = 128, warps: int = 4, stages: int = 3, paired: bool = False) -> Callable[[], None]:
    words_per_column = words.numel() // N
    grid = (N // block_n, split)

    def run() -> None:
        _read_words[grid](words, out, N, words_per_column, words_per_column // split, BLOCK_N=block_n,
                          STEP_WORDS=step_bytes // 4, BLOCKED=blocked, NUM_STAGES=stages, PAIRED=paired,
                          num_warps=warps)
    return run


def main() -> None:
    out_path = sys.argv[1]
    gen = torch.Generator(device="cuda").manual_seed(3)
    weights = [torch.randn(K, N, device="cuda", generator=gen).to(torch.bfloat16) * 0.02
               for _ in range(COPIES)]
    x = torch.randn(1, K, device="cuda", generator=gen).to(torch.bfloat16)
    qs = [quantize_weight(w, bits=4, group_size=128) for w in weights]
    words = [torch.as_strided(q.codes, (q.codes.numel(),), (1,)).view(torch.int32) for q in qs]
    halves = [(c[: c.numel() // 2], c[c.numel() // 2:]) for c in words]
    sink = torch.empty(8 * N, dtype=torch.int32, device="cuda")
    cases: dict[str, list[Callable[[], object]]] = {
        "torch.matmul (bf16 weights)": [lambda w=w: torch.matmul(x, w) for w in weights],
        "shipped gemm_wq W4A16 M=1": [lambda q=q: gemm_wq(x, q) for q in qs],
        "copy: half the codes onto the other half": [lambda h=h: h[1].copy_(h[0]) for h in halves],
    }
    for step_bytes in (64, 128, 256):
        cases[f"read column-major, {step_bytes} B a column a step"] = [
            reader(w, sink, step_bytes, False) for w in words]
    for step_bytes in (64, 128):
        cases[f"read blocked, {step_bytes} B a column a step"] = [
            reader(w, sink, step_bytes, True) for w in words]
    cases["read column-major, two 64 B loads a step"] = [
        reader(w, sink, 64, False, paired=True) for w in words]
    cases["read column-major, two 64 B loads, 2 stages"] = [
        reader(w, sink, 64, False, stages=2, paired=True) for w in words]
    cases["read column-major, 128 B, 2 stages"] = [reader(w, sink, 128, False, stages=2) for w in words]
    cases["read column-major, 64 B, 5 stages"] = [reader(w, sink, 64, False, stages=5) for w in words]
    cases["read column-major, 64 B, split 16"] = [reader(w, sink, 64, False, split=16) for w in words]
    times = graph_rounds(cases, ROUNDS)
    rows = []
    codes_bytes = words[0].numel() * 4
    for name, samples in times.items():
        us = 1e3 * statistics.median(samples)
        rows.append({"case": name, "graph_us": us, "codes_tb_per_s": codes_bytes / us / 1e6})
        print(f"{name:<48} {us:8.2f} µs  {codes_bytes / us / 1e6:5.2f} TB/s of codes", flush=True)
    record = {**run_record("python benchmarks/wq_read_pattern.py OUT.json"), "n": N, "k": K, "rows": rows}
    write_result(out_path, record)


if __name__ == "__main__":
    main()
