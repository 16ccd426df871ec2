#!/bin/bash
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TESSERA_GIT_REV=$1
timeout -s INT 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests/ > $OUT/gpu-tests.txt 2>&1
