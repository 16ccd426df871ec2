set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TESSERA_GIT_REV=$1
left() { local l=$((560 - SECONDS)); [ $l -lt $1 ] && echo $l || echo $1; }
REV=$1
mkdir -p tune-out/sm_90 && cp benchmarks/results/tune-h200-4807f2a/blas.gemm.bf16.journal.jsonl tune-out/sm_90/
SIZES=wave,square bash benchmarks/tune_gemm.sh tune-out $(left 330) bf16 > $OUT/tune.txt 2>&1
cp tune-out/sm_90/blas.gemm.bf16.yaml tessera/logic/sm_90/blas.gemm.bf16.yaml
timeout $(left 110) python3 benchmarks/streamk.py $OUT/streamk-h200-$REV.json > $OUT/streamk.txt 2>&1
timeout $(left 70) python3 benchmarks/quantized.py $OUT/quantized-h200-$REV.json --rows-only > $OUT/quantized.txt 2>&1
tar czf $OUT/tune-out.tgz tune-out
echo done $SECONDS
