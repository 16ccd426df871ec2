#!/usr/bin/env bash
# Programmatic dependent launch (PDL) modes against each other on the GPU, the vendor in the same
# process: every case runs once per mode in its own process (TESSERA_PDL is read at import), the
# modes alternating, for ROUNDS rounds, within one deadline. "measured" is each launch site's
# shipped choice; 0, early and exit force that mode at every site that takes one.
# The result JSONs record the mode (their "settings"); a line per run goes to OUT/modes.txt.
# Usage: [ROUNDS=2] [MODES="0 measured early exit"] [DECODE=1] benchmarks/pdl_modes.sh OUT SECONDS
#   GEMM cases: bf16, tf32 and fp32 1024³ and bf16 512 × 64³ (CASES overrides, ';'-separated
#   `tessera bench gemm` arguments; empty: none); DECODE=1 adds quantized.py --decode-only (W4/W8A16, M = 1, 16),
#   DECODE=rows quantized.py --rows-only (also M = 4096, the fp8 and int8 scaled GEMMs at 8192³).
set -uo pipefail
out=${1:?usage: benchmarks/pdl_modes.sh OUT SECONDS}
deadline=$((SECONDS + ${2:?seconds}))
PY=${PYTHON:-python3}
cases=${CASES-"-m 1024 -n 1024 -k 1024 --dtype bf16;-m 1024 -n 1024 -k 1024 --dtype tf32;-m 1024 -n 1024 -k 1024 --dtype fp32;-m 64 -n 64 -k 64 --batch 512 --dtype bf16"}
mkdir -p "$out"
run=0
for round in $(seq "${ROUNDS:-2}"); do
    for mode in ${MODES:-0 measured early exit}; do
        IFS=';' read -ra list <<< "$cases"
        for args in "${list[@]}"; do
            left=$((deadline - SECONDS))
            if [ "$left" -lt 10 ]; then echo "deadline: stopped before round $round, mode $mode" >> "$out/modes.txt"; exit 0; fi
            run=$((run + 1))
            # shellcheck disable=SC2086  # args are words on purpose
            line=$(TESSERA_PDL=$mode timeout "$left" "$PY" -m tessera bench gemm $args --rounds 3 \
                   --json "$out/gemm-$run.json" 2>&1 | grep " NN ")
            echo "round $round TESSERA_PDL=$mode | $line" >> "$out/modes.txt"
        done
        if [ "${DECODE:-0}" != 0 ]; then
            left=$((deadline - SECONDS))
            if [ "$left" -lt 40 ]; then continue; fi
            run=$((run + 1))
            which=--decode-only
            if [ "$DECODE" = rows ]; then which=--rows-only; fi
            TESSERA_PDL=$mode timeout "$left" "$PY" benchmarks/quantized.py "$out/decode-$run.json" $which \
                2>&1 | grep -E "^(W|fp8|int8)" | sed "s/^/round $round TESSERA_PDL=$mode | /" >> "$out/modes.txt"
        fi
    done
done
