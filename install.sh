#!/usr/bin/env bash
# Install Tessera and its test dependencies into the current Python environment.
# A torch that is already installed (e.g. the CUDA/ROCm build of a GPU machine) is kept; without
# one, torch 2.13.0 is installed (on the project's CPU machines pip takes its CPU build from disk).
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
if ! "$PY" -c "import torch" 2>/dev/null; then
    "$PY" -m pip install --quiet "torch==2.13.0"
fi
"$PY" -m pip install --quiet -e ".[test]"
# pyenv only sees new console scripts (`tessera`) after a rehash
if command -v pyenv >/dev/null 2>&1; then pyenv rehash; fi
