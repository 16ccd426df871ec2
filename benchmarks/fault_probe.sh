#!/usr/bin/env bash
# Where the quantized rows' `unspecified launch failure` comes from: which process (cold or warm
# kernel cache), which switches make it go away, which kernel (launch blocking, trace, memcheck).
# Run from the repository root on the device (the forty-ninth session's call 2: results/wq-fault-h100-737601/probe/).
# The cause was found in the fiftieth session (gemm_wq_ws's stages shared by warp groups; that README).
set -uo pipefail
OUT=${OUT:?}
W=/tmp/fp; rm -rf $W; mkdir -p $W
export PYTHONPATH=$PWD TESSERA_GIT_REV=$(cat .rev) TESSERA_HOME=$W/home
q() { local name=$1 cap=$2; shift 2; local s=$SECONDS
  timeout -s KILL $cap "$@" > $W/$name.txt 2>&1; echo "$name rc=$? $((SECONDS-s))s" | tee -a $W/summary.txt
  grep -v CUDAEvent $W/$name.txt | grep -E "W[48]A16|Error|error" | head -8; }
P="python3 benchmarks/quantized.py"
q a-cold 120 $P $W/a.json --decode-only
q b-warm 120 $P $W/b.json --decode-only
q c-nocache 120 env TESSERA_KERNEL_CACHE=0 $P $W/c.json --decode-only
q d-warm 120 $P $W/d.json --decode-only
q e-jitlaunch 120 env TESSERA_DIRECT_LAUNCH=0 $P $W/e.json --decode-only
q f-blocking 150 env CUDA_LAUNCH_BLOCKING=1 TESSERA_LOG=trace $P $W/f.json --decode-only
q h-rows-warm 120 $P $W/h.json --rows-only
ls $W/home/cache/*/ | wc -l
q g-memcheck 200 /usr/local/cuda/bin/compute-sanitizer --tool memcheck --print-limit 20 $P $W/g.json --decode-only
tail -c 3000000 $W/f-blocking.txt > $W/f-tail.txt; rm -f $W/f-blocking.txt  # the trace: its end
tar czf $OUT/fp.tgz -C $W --exclude home .
