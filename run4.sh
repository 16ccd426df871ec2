set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TESSERA_GIT_REV=$1
left() { local l=$((400 - SECONDS)); [ $l -lt $1 ] && echo $l || echo $1; }
mkdir -p tune-out/sm_90 && cp benchmarks/results/tune-h200-4807f2a/blas.gemm.fp16.journal.jsonl tune-out/sm_90/
SIZES=wave,square bash benchmarks/tune_gemm.sh tune-out $(left 300) fp16 > $OUT/tune.txt 2>&1
tar czf $OUT/tune-out.tgz tune-out
timeout $(left 90) python3 -m pytest -q -p no:cacheprovider tests/test_packs.py > $OUT/t-packs.txt 2>&1
echo done $SECONDS
