#!/usr/bin/env bash
# The one device call for the pressure set-up launched ahead of its read (issue 24, branch
# i24x; kernels/flip/sparse_pressure_workspace.py AHEAD): the 8M dam break's pressure stage
# with the workspace set-up reading twice and once, alternating in one process (per-piece
# times, whole substeps, max |Δp|, --count's launches and allocations), then the set-up's GPU
# tests. Each part under its own timeout (≤ 160 s in all); logs under $OUT.
OUT=${OUT:-out}; mkdir -p "$OUT"; export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
V=fused:8192:kernel:kernel:1:16384:1:1:1:1:1:1:65536:0:workspace
T=tests/gpu
timeout 75 python3 -m pytest -q -p no:cacheprovider -rf --durations=4 $T/test_flip_sparse_pressure_ahead_gpu.py \
    $T/test_flip_sparse_pressure_workspace_gpu.py $T/test_flip_sparse_pressure_bricks_gpu.py \
    $T/test_flip_sparse_pressure_one_read_gpu.py > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; grep -E 'passed|failed|error' "$OUT/tests.log" | tail -1; grep -E '^(FAILED|ERROR)' "$OUT/tests.log" | head
grep -E "^E  " "$OUT/tests.log" | head -20
timeout 75 python3 bench/flip_sparse_pressure_profile.py --substeps 4 --warm 2 --substep-runs 6 --alternate --count \
    --variants $V:0 $V:1 > "$OUT/profile.log" 2>&1
echo "profile rc=$?"
grep -E "^variant|cells\+labels|mg tables|gather|PCG loop|scatter p|solve_pressure|iterations \||max \|p|median|count '" \
    "$OUT/profile.log"
tail -3 "$OUT/profile.log"
echo "elapsed $SECONDS"
