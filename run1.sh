#!/bin/bash
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TESSERA_GIT_REV=$1
timeout -s INT 120 python3 benchmarks/symv_floor.py $OUT/symv-floor-h200-$1.json > $OUT/symv.txt 2>&1
