#!/usr/bin/env bash
# A source file against an earlier version of it, through alternating processes (a kernel's code
# changed without a configuration to switch it): each round runs CMD once with TARGET as it is
# ("after") and once with BEFORE copied over it ("before"), TARGET restored after each run and at
# exit. Each run's output goes to OUT/<after|before>-<round>.txt; "{json}" in CMD becomes
# OUT/<after|before>-<round>.json. Run it on a copy of the tree (the device's).
# Usage: benchmarks/source_ab.sh OUT ROUNDS SECONDS TARGET BEFORE CMD...
#   e.g. benchmarks/source_ab.sh /tmp/ab 2 300 tessera/blas/kernels/gemm_ws.py old_gemm_ws.py \
#            python3 benchmarks/gemm_gluon_probe.py {json} --dtypes tf32 --configs 256x128x32:3:8:8:2
set -uo pipefail
out=${1:?usage: benchmarks/source_ab.sh OUT ROUNDS SECONDS TARGET BEFORE CMD...}
rounds=${2:?rounds}
deadline=$((SECONDS + ${3:?seconds}))
target=${4:?target}
before=${5:?before}
shift 5
mkdir -p "$out"
saved=$(mktemp)
cp "$target" "$saved"
trap 'cp "$saved" "$target"' EXIT
for round in $(seq "$rounds"); do
    for version in after before; do
        left=$((deadline - SECONDS))
        if [ "$left" -lt 10 ]; then echo "deadline: stopped in round $round"; exit 0; fi
        if [ "$version" = before ]; then cp "$before" "$target"; else cp "$saved" "$target"; fi
        args=()
        for a in "$@"; do args+=("${a//\{json\}/$out/$version-$round.json}"); done
        timeout "$left" "${args[@]}" > "$out/$version-$round.txt" 2>&1
        echo "$version round $round rc=$?"
        cp "$saved" "$target"
    done
done
