set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TESSERA_GIT_REV=$1
left() { local l=$((570 - SECONDS)); [ $l -lt $1 ] && echo $l || echo $1; }
REV=$1
P="python3 -m pytest -q -p no:cacheprovider"
timeout $(left 60) python3 benchmarks/host_overhead.py $OUT/host-overhead-h200-$REV.json > $OUT/host.txt 2>&1
timeout $(left 100) python3 benchmarks/streamk.py $OUT/streamk-h200-$REV.json > $OUT/streamk.txt 2>&1
timeout $(left 280) python3 -m tessera bench gemm --preset grid --vs-heuristic --json $OUT/gemm-grid-h200-$REV.json > $OUT/gemm.txt 2>&1
timeout $(left 200) $P tests/test_gemm_gpu.py tests/test_launch.py > $OUT/t-gemm.txt 2>&1
echo done $SECONDS
