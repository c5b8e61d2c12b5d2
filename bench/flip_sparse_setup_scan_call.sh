#!/usr/bin/env bash
# The one device call for the set-up's scans in one launch (issue 24, branch i24x;
# sparse_pressure_setup.SCAN "lookback": scan_lookback, a single pass with decoupled look-back,
# against "kernel", scan_tile_sums + scan_tiles): the 8M dam break's pressure stage with the two
# alternating each substep in one process (per-piece and per-kernel times, whole substeps,
# max |Δp|, --count's launches, a host profile of whole solves), then the scan's GPU tests and
# the set-up's GPU files with the look-back scan. Each part under its own timeout; logs under $OUT.
. "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
V=fused:8192:SCAN:kernel:1:16384:1:1:1:1:1:1:65536:0:workspace:1:bricks
timeout ${PROFILE_S:-80} python3 bench/flip_sparse_pressure_profile.py --substeps 3 --warm 2 --substep-runs 6 \
    --alternate --count --host-profile ${HOST_PROFILE:-3} --variants ${V/SCAN/kernel} ${V/SCAN/lookback} \
    > "$OUT/profile.log" 2>&1
echo "profile rc=$?"
grep -E "^variant|cells\+labels|mg tables|PCG loop|solve_pressure|max \|p|median|count '.*set-up" "$OUT/profile.log" \
    | cut -c1-330
grep -E "set-up \+ loop RawKernels" "$OUT/profile.log" | while read -r line; do
    echo "kernels: $(echo "$line" | grep -oE "(scan_[a-z_]+|cells_[a-z_]+|unk_[a-z_]+|mg[bs]_[a-z0-9_]+) [0-9.]+" \
        | paste -sd' ')"
done
grep -A22 "^host profile" "$OUT/profile.log" | grep -E "ncalls|^ +[0-9]" | cut -c1-150 | head -22
VOXFX_SPARSE_PRESSURE_SCAN=lookback timeout ${TESTS_S:-70} python3 -m pytest -q -p no:cacheprovider -rf \
    --durations=4 $T/test_flip_sparse_pressure_scan_gpu.py $T/test_flip_sparse_pressure_ahead_gpu.py \
    $T/test_flip_sparse_pressure_workspace_gpu.py $T/test_flip_sparse_pressure_one_read_gpu.py > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; pytest_lines "$OUT/tests.log" 16
echo "elapsed $SECONDS"
