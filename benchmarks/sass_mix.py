"""A kernel family's SASS without a GPU: registers, instruction count and the main loop's mix.

Compiles, as a pack build does (``tessera.tuning.precompile``: the family's representative
launches, whose operands have the runtime's layouts), one configuration for an NVIDIA target
with the running Triton, disassembles each binary with the ``cuobjdump`` that Triton ships, and
prints per binary: registers a thread, instructions, and the opcode mix of the longest loop (the
longest backward branch) — what a thread issues per K step — and, where it has FFMA, how they
read their registers (:func:`ffma_operands`: accumulators updated in place, reuse flags, operands
read from one of the two register banks). Run it with the Triton the GPU has
(a side venv, docs/status.md) to read what the GPU will run.

Usage: python benchmarks/sass_mix.py LIBRARY OP KERNEL DTYPE 'CONFIG-JSON' [--arch sm_90] [--top N]
       [--keep DIR]
  e.g. python benchmarks/sass_mix.py blas gemm_wq gemm_wq int4_bf16 '{"block_m": 8, "block_n": 256,
       "block_k": 128, "split_k": 8, "num_warps": 8, "num_stages": 3}'
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import triton

_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)(.*)")
_BACKWARD = re.compile(r"BRA\s+0x([0-9a-f]+)")


def cuobjdump(*args: str) -> str:
    """``cuobjdump`` (shipped with Triton's NVIDIA backend) run on ``args``; its stdout."""
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    return subprocess.run([str(tool), *args], capture_output=True, text=True, check=True).stdout


def registers(binary: Path) -> int | None:
    """A cubin's registers a thread (``cuobjdump -res-usage``); None where it names none."""
    found = re.search(r"REG:(\d+)", cuobjdump("-res-usage", str(binary)))
    return int(found.group(1)) if found else None


def compiled_offline(call: object, arch: str = "sm_90") -> tuple[str, int | None, int]:
    """A launch captured under ``tessera._core.launch.capture`` compiled for ``arch`` without a GPU,
    as a pack build compiles it: (its SASS, its registers a thread, its shared memory in bytes)."""
    from tessera.tuning import precompile

    with tempfile.TemporaryDirectory() as tmp:
        binary, metadata = precompile.compile_call(call, precompile._target(arch, 32), Path(tmp))[:2]
        return (cuobjdump("-sass", str(Path(tmp) / binary)), registers(Path(tmp) / binary),
                json.loads((Path(tmp) / metadata).read_text())["shared"])


def sass_counts(sass: str, patterns: dict[str, str]) -> dict[str, int]:
    """How many times each pattern (a regular expression, by name) occurs in ``sass``."""
    return {name: len(re.findall(pattern, sass)) for name, pattern in patterns.items()}


def instructions(sass: str) -> list[tuple[int, str, str]]:
    """(address, opcode, operands) of every instruction in ``cuobjdump -sass`` output."""
    return [(int(m.group(1), 16), m.group(2), m.group(3))
            for m in map(_INSTRUCTION.match, sass.splitlines()) if m]


def main_loop(found: list[tuple[int, str, str]]) -> list[str]:
    """The opcodes of the longest backward branch's body (the first instruction to the branch)."""
    best: list[str] = []
    for i, (address, opcode, operands) in enumerate(found):
        branch = _BACKWARD.search(opcode + operands) if opcode == "BRA" else None
        if branch and int(branch.group(1), 16) < address:
            body = [op for a, op, _ in found[: i + 1] if a >= int(branch.group(1), 16)]
            best = max(best, body, key=len)
    return best


def ffma_operands(found: list[tuple[int, str, str]]) -> str:
    """How the FFMAs of ``found`` read their registers: the share updating their accumulator in
    place (``FFMA Rd, Ra, Rb, Rd``, as cuBLAS's SGEMM does throughout), reuse flags an FFMA, and
    the share whose operands not held by the reuse cache (the same register in the same slot, flagged
    ``.reuse`` by the FFMA before) put two or three reads on one register bank (bank = register
    index mod 2). Empty when there is no FFMA."""
    count = in_place = flags = two = three = 0
    cached: dict[int, int] = {}
    for _, opcode, operands in found:
        regs = [re.match(r"\s*-?\|?R(\d+)(\.reuse)?", o) for o in operands.split(",")]
        if opcode != "FFMA" or len(regs) != 4 or not all(regs):
            cached = {}
            continue
        dest, *sources = [(int(m.group(1)), bool(m.group(2))) for m in regs if m]
        count += 1
        in_place += dest[0] == sources[2][0]
        flags += sum(flag for _, flag in sources)
        banks = collections.Counter(r % 2 for slot, (r, _) in enumerate(sources) if cached.get(slot) != r)
        crowded = max(banks.values(), default=0)  # uncached reads on the busier bank
        two += crowded >= 2
        three += crowded == 3
        cached = {slot: r for slot, (r, flag) in enumerate(sources) if flag}
    if not count:
        return ""
    return (f"  {count} FFMA: {in_place / count:.0%} in place, {flags / count:.2f} reuse flags each, "
            f"uncached reads on one bank: two {two / count:.0%}, three {three / count:.1%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    for name in ("library", "op", "kernel", "dtype"):
        parser.add_argument(name)
    parser.add_argument("config", help="the configuration's fields as JSON")
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--top", type=int, default=16, help="opcodes shown per loop")
    parser.add_argument("--keep", type=Path, help="write the binaries and their SASS here")
    args = parser.parse_args()

    out = args.keep or Path(tempfile.mkdtemp(prefix="sass_mix_"))
    out.mkdir(parents=True, exist_ok=True)
    job = {"arch": args.arch, "out": str(out), "jobs": [
        {"library": args.library, "op": args.op, "kernel": args.kernel, "dtype": args.dtype,
         "config": json.loads(args.config)}]}
    done = subprocess.run([sys.executable, "-m", "tessera.tuning.precompile"], input=json.dumps(job),
                          capture_output=True, text=True, check=False)
    result = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
    if result.get("status") != "ok":
        sys.exit(f"compile failed: {result.get('reason') or done.stderr[-2000:]}")
    print(f"{args.kernel} {args.dtype} {args.config} for {args.arch}, triton {triton.__version__}")
    for name in (f for f in result["files"] if f.endswith(".cubin")):
        sass = cuobjdump("-sass", str(out / name))
        (out / name).with_suffix(".sass").write_text(sass)
        used = registers(out / name)
        found = instructions(sass)
        loop = main_loop(found)
        mix = "  ".join(f"{n} {op}" for op, n in collections.Counter(loop).most_common(args.top))
        print(f"{name}: {'?' if used is None else used} registers, {len(found)} instructions; "
              f"loop {len(loop)}:\n  {mix}")
        if report := ffma_operands(found):
            print(report)


if __name__ == "__main__":
    main()
