#!/usr/bin/env bash
# Tune the rand kernels' launch configurations on this GPU (the draws of the rand benchmark),
# 2^28 values first: logic files and journals land in OUT/<arch>/; ship them in tessera/logic/<arch>/.
# Usage: benchmarks/tune_rand.sh OUT [SCALE]   (SCALE multiplies each op's minutes; default 1)
set -euo pipefail
out=${1:?usage: benchmarks/tune_rand.sh OUT [SCALE]}
scale=${2:-1}
PY=${PYTHON:-python3}
for job in "philox_uniform fp32 1" "philox_normal fp32 1" "philox_normal bf16 1" "philox_uniform fp64 0.8" \
           "mrg32k3a_uniform fp32 2.5" "sobol32_uniform fp32 0.8"; do
    set -- $job
    "$PY" -m tessera tune rand --op "$1" --dtype "$2" --sizes large,default --out "$out" \
        --budget-minutes "$(awk "BEGIN {print $3 * $scale}")" --resume --no-plot
done
