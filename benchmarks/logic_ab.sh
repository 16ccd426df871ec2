#!/usr/bin/env bash
# Shipped logic against edited logic, through `tessera bench gemm` calls (the vendor in the same
# process): each round runs every case once with the shipped files and once with each VARIANT — a
# logic YAML, or a folder of them, copied over the shipped files of those names for its runs and
# the shipped ones put back after — alternating, within one deadline. A line per run goes to
# OUT/ab.txt, each run's result JSON to OUT/. It edits tessera/logic/ in place: run it on a copy
# (the device's tree).
# Usage: CASES="-m 4096 -n 4096 -k 4096 --dtype tf32;--preset grid" [ROUNDS=2] [ARCH=sm_90] \
#            benchmarks/logic_ab.sh OUT SECONDS VARIANT...
set -uo pipefail
out=${1:?usage: benchmarks/logic_ab.sh OUT SECONDS VARIANT...}
deadline=$((SECONDS + ${2:?seconds}))
shift 2
PY=${PYTHON:-python3}
logic=tessera/logic/${ARCH:-sm_90}
files() { if [ -d "$1" ]; then ls "$1"/*.yaml; else echo "$1"; fi; }
mkdir -p "$out/shipped"
for variant in "$@"; do
    for file in $(files "$variant"); do
        name=$(basename "$file")
        [ -f "$logic/$name" ] || { echo "no shipped $logic/$name to compare $file with"; exit 2; }
        cp "$logic/$name" "$out/shipped/"
    done
done
IFS=';' read -ra list <<< "${CASES:?CASES: ';'-separated tessera bench gemm arguments}"
run=0
for round in $(seq "${ROUNDS:-2}"); do
    for variant in shipped "$@"; do
        for args in "${list[@]}"; do
            left=$((deadline - SECONDS))
            if [ "$left" -lt 10 ]; then echo "deadline: stopped in round $round" >> "$out/ab.txt"; exit 0; fi
            [ "$variant" = shipped ] || cp $(files "$variant") "$logic/"
            run=$((run + 1))
            # shellcheck disable=SC2086  # args are words on purpose
            timeout "$left" "$PY" -m tessera bench gemm $args --rounds 3 --json "$out/gemm-$run.json" \
                > "$out/gemm-$run.txt" 2>&1
            grep -E " (NN|NT|TN|TT) " "$out/gemm-$run.txt" | sed "s|^|round $round $variant \| |" >> "$out/ab.txt"
            [ "$variant" = shipped ] || cp "$out"/shipped/*.yaml "$logic/"
        done
    done
done
