#!/usr/bin/env bash
# The second device call for the set-up (issue 24, branch i24x): the 8M dam break's pressure stage
# with the scans in two launches ("kernel", the old default), by look-back ("lookback", the default
# now) and with the workspace's coarse restrictions as the prolongation's transpose (RESTRICT
# "scatter"), the three alternating each substep in one process (per-piece and per-kernel times,
# whole substeps, max |Δp|, --count's launches); then the scan and restriction GPU tests, the
# pressure file's table and scan tests, and the set-up's GPU files with the scattered
# restriction. Each part under its own timeout; logs under $OUT.
. "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
V=fused:8192:SCAN:kernel:1:16384:1:1:1:1:1:1:65536:0:workspace:1:bricks
timeout ${PROFILE_S:-70} python3 bench/flip_sparse_pressure_profile.py --substeps 3 --warm 2 --substep-runs 8 \
    --alternate --count --variants ${V/SCAN/kernel}:search ${V/SCAN/lookback}:search ${V/SCAN/lookback}:scatter \
    > "$OUT/profile.log" 2>&1
echo "profile rc=$?"
grep -E "^variant|cells\+labels|PCG loop|solve_pressure|max \|p|median|count '.*set-up" "$OUT/profile.log" \
    | cut -c1-260
grep -E "set-up \+ loop RawKernels" "$OUT/profile.log" | while read -r line; do
    echo "kernels: $(echo "$line" | grep -oE "(scan_[a-z_]+|mgs_[a-z_]+) [0-9.]+" | paste -sd' ')"
done
timeout ${TESTS1_S:-50} python3 -m pytest -q -p no:cacheprovider -rf --durations=4 \
    $T/test_flip_sparse_pressure_restrict_gpu.py $T/test_flip_sparse_pressure_scan_gpu.py \
    $T/test_flip_sparse_pressure_gpu.py -k "restrict or lookback or scan_kernels or multigrid_tables" \
    > "$OUT/tests1.log" 2>&1
echo "tests1 rc=$?"; pytest_lines "$OUT/tests1.log" 12
VOXFX_SPARSE_MG_RESTRICT=scatter timeout ${TESTS2_S:-60} python3 -m pytest -q -p no:cacheprovider -rf --durations=4 \
    $T/test_flip_sparse_pressure_ahead_gpu.py $T/test_flip_sparse_pressure_workspace_gpu.py \
    $T/test_flip_sparse_pressure_one_read_gpu.py $T/test_flip_sparse_pressure_hook_gpu.py > "$OUT/tests2.log" 2>&1
echo "tests2 rc=$?"; pytest_lines "$OUT/tests2.log" 12
echo "elapsed $SECONDS"
