#!/usr/bin/env bash
# Tune sm_90-style GEMM logic for several dtypes within one deadline (a device call's time):
# each dtype gets the time left, an interrupted dtype resumes from its journal on the next run.
# Logic files, journals, plots and each run's summary land in OUT/<arch>/ (ship the YAML in
# tessera/logic/<arch>/); with $TAR set, OUT is also tarred there (one file to bring back).
# Usage: [SIZES=preset] [SPACE=default] [FAMILIES=a,b] [STREAM_K_MARGIN=0.05] [WAVE_SLACK=0.7]
#        [WAVE_EXPONENT=0.8] [WAVE_RATIO_MAX=2] [MIN_SPLIT_DEPTH=512] [TAR=FILE]
#        benchmarks/tune_gemm.sh OUT SECONDS DTYPE...
set -uo pipefail
out=${1:?usage: benchmarks/tune_gemm.sh OUT SECONDS DTYPE...}
deadline=$((SECONDS + ${2:?seconds}))
shift 2
PY=${PYTHON:-python3}
mkdir -p "$out"
for dtype in "$@"; do
    left=$((deadline - SECONDS - 45))  # 45 s for the summary's vendor timings (and a default never journaled)
    if [ "$left" -lt 30 ]; then echo "no time left for $dtype"; break; fi
    resume=() options=()
    compgen -G "$out/*/blas.gemm.$dtype.journal.jsonl" > /dev/null && resume=(--resume)
    [ -n "${FAMILIES:-}" ] && options=(--families "$FAMILIES")
    [ -n "${STREAM_K_MARGIN:-}" ] && options+=(--stream-k-margin "$STREAM_K_MARGIN")
    [ -n "${WAVE_SLACK:-}" ] && options+=(--wave-slack "$WAVE_SLACK")  # merges into the shipped 16-bit files
    [ -n "${WAVE_EXPONENT:-}" ] && options+=(--wave-exponent "$WAVE_EXPONENT")
    [ -n "${WAVE_RATIO_MAX:-}" ] && options+=(--wave-ratio-max "$WAVE_RATIO_MAX")
    [ -n "${MIN_SPLIT_DEPTH:-}" ] && options+=(--min-split-depth "$MIN_SPLIT_DEPTH")
    echo "== $dtype: ${left}s ${resume[*]}"
    timeout $((left + 40)) "$PY" -m tessera tune gemm --dtype "$dtype" --sizes "${SIZES:-preset}" \
        --space "${SPACE:-default}" --budget-minutes "$(awk "BEGIN {print $left / 60}")" "${resume[@]}" \
        "${options[@]}" --out "$out" \
        > "$out/tune-$dtype.txt" 2>&1
    echo "rc $?"
    tr '\r' '\n' < "$out/tune-$dtype.txt" | grep -v '^tune blas' | tail -40
done
if [ -n "${TAR:-}" ]; then tar czf "$TAR" "$out"; fi
