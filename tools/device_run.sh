#!/usr/bin/env bash
# One device call: GPU tests for the given test files, then a benchmark. Logs in $OUT.
#   bash tools/device_run.sh "<pytest args>" "<bench command>"
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
bash tools/gpu_check.sh $1 2>&1 | tail -n 25
if [ -n "${2:-}" ]; then
  PYTHONUNBUFFERED=1 bash -c "$2" 2>&1 | tee "$OUT/bench.log"
fi
