"""benchmarks/sass_mix.py's reading of FFMA operands (the offline check of how a kernel's FMAs use
the register file), on SASS lines written by hand in ``cuobjdump -sass``'s form."""

from __future__ import annotations

from benchmarks import sass_mix


def _sass(*lines: str) -> str:
    return "\n".join(f"        /*{16 * i:04x}*/                   {line} ;   /* 0x0000 */"
                     for i, line in enumerate(lines))


def test_ffma_operands_counts_in_place_updates_reuse_and_bank_conflicts() -> None:
    found = sass_mix.instructions(_sass(
        "FFMA R8, R2.reuse, R4, R8",    # in place; fresh R2, R4, R8: all even, three on one bank
        "FFMA R9, R2, R5, R9",          # in place; R2 cached by the flag above: R5, R9 on one bank
        "FFMA R10, R3, R4, R11",        # not in place; R3, R4, R11: two on bank 1
        "LDS.128 R12, [R1]",            # not an FFMA: the reuse cache is not carried past it
        "FFMA R6, R2, R5, R6",          # in place; R2, R5 split, R6 with R2: two on bank 0
    ))
    assert sass_mix.ffma_operands(found) == (
        "  4 FFMA: 75% in place, 0.25 reuse flags each, uncached reads on one bank: two 100%, three 25.0%")


def test_ffma_operands_is_empty_without_ffma() -> None:
    assert sass_mix.ffma_operands(sass_mix.instructions(_sass("LDS.128 R12, [R1]", "BRA 0x0"))) == ""
