#!/bin/bash
export PYTHONPATH=$PWD TESSERA_GIT_REV=$(cat .rev)
R=$OUT/r; mkdir -p $R
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv > $R/smi.txt
timeout -s INT 200 python -m pytest -m gpu tests/test_gemm_ws.py -q -p no:cacheprovider > $R/tests.txt 2>&1
echo "rc $?" >> $R/tests.txt
timeout -s INT 150 python benchmarks/gemm_gluon_probe.py $R/fp8-probe.json --dtypes fp8 --sizes 8192 --rounds 5 \
  --configs 128x256x128:3:8:8,128x256x128:4:8:8:2,128x256x128:3:8:16,128x256x64:6:8:8,128x256x64:8:8:8:2,256x128x64:6:8:8 > $R/fp8-probe.txt 2>&1
echo "rc $?" >> $R/fp8-probe.txt
timeout -s INT 150 python benchmarks/gemm_gluon_probe.py $R/bf16-probe.json --dtypes bf16,fp16 --sizes 8192 --rounds 5 \
  --configs 128x256x64:3:8:8,128x256x64:4:8:8:2,128x256x64:4:8:16:2,128x256x32:8:8:8:2 > $R/bf16-probe.txt 2>&1
echo "rc $?" >> $R/bf16-probe.txt
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
