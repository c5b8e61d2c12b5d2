#!/usr/bin/env bash
# Run on the GPU machine (no bpy there): the quick benchmarks of every effect and the
# GPU memory-guard check, each logged under $OUT; a failing one does not stop the others.
#   bash tools/gpu_bench.sh
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/bench_env.txt"
status=0
for bench in "bench/voxelize.py --quick" "bench/snow.py --quick" "bench/flip.py --quick" "bench/memory_gpu.py"; do
  script=${bench%% *}
  [ -f "$script" ] || { echo "== $bench: not in this checkout" | tee -a "$OUT/bench.log"; continue; }
  echo "== $bench" | tee -a "$OUT/bench.log"
  start=$SECONDS
  timeout 240 python3 $bench 2>&1 | tee -a "$OUT/bench.log"
  rc=${PIPESTATUS[0]}
  echo "== $bench: exit $rc in $((SECONDS - start)) s" | tee -a "$OUT/bench.log"
  [ "$rc" = 0 ] || status=1
done
exit $status
