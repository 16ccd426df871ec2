set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TESSERA_GIT_REV=$1
left() { local l=$((560 - SECONDS)); [ $l -lt $1 ] && echo $l || echo $1; }
REV=$1
S=1024x1024x1024,4096x4096x4096,8192x8192x8192,64x8192x8192
SIZES=$S bash benchmarks/tune_gemm.sh tune-q $(left 210) int8 > $OUT/tune-int8.txt 2>&1
SIZES=$S bash benchmarks/tune_gemm.sh tune-q $(left 210) fp8e4m3_fast > $OUT/tune-fp8.txt 2>&1
cp tune-q/sm_90/*.yaml tessera/logic/sm_90/
timeout $(left 80) python3 benchmarks/quantized.py $OUT/quantized-h200-$REV.json --rows-only > $OUT/quantized.txt 2>&1
tar czf $OUT/tune-q.tgz tune-q
echo done $SECONDS
