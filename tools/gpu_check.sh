#!/usr/bin/env bash
# Run on the GPU machine (no bpy there): kernel unit tests + GPU tests, logs under $OUT.
#   bash tools/gpu_check.sh
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import sys, numpy, cupy; print('python', sys.version.split()[0], 'numpy', numpy.__version__, 'cupy', cupy.__version__, 'cuda runtime', cupy.cuda.runtime.runtimeGetVersion())"
  nvcc --version | tail -n 1
} 2>&1 | tee "$OUT/gpu_env.txt"
[ $# -gt 0 ] || set -- tests/unit tests/gpu
PYTHONUNBUFFERED=1 python3 -m pytest -q -p no:cacheprovider -rs "$@" 2>&1 | tee "$OUT/gpu_tests.log"
