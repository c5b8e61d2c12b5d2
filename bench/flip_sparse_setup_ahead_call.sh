#!/usr/bin/env bash
# The one device call for the pressure set-up launched ahead of its read and the labels'
# union-find brick by brick (issue 24, branch i24x; sparse_pressure_workspace.AHEAD,
# sparse_pressure_cells.HOOK): the 8M dam break's pressure stage
# with (two reads, flat hook), (one read, flat hook) and (one read, brick hook) alternating
# in one process (per-piece times, whole substeps, max |Δp|, --count's launches), then the
# set-up's GPU tests. Each part
# under its own timeout (≤ 160 s in all); logs under $OUT.
. "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
V=fused:8192:kernel:kernel:1:16384:1:1:1:1:1:1:65536:0:workspace
timeout 78 python3 bench/flip_sparse_pressure_profile.py --substeps 2 --warm 2 --substep-runs 6 --alternate --count \
    --variants $V:0:cells $V:1:cells $V:1:bricks > "$OUT/profile.log" 2>&1
echo "profile rc=$?"
grep -E "^variant|cells\+labels|mg tables|PCG loop|solve_pressure|max \|p|median|count '.*set-up" "$OUT/profile.log" \
    | cut -c1-400
grep -E "set-up \+ loop RawKernels" "$OUT/profile.log" | while read -r line; do
    echo "kernels: $(echo "$line" | grep -oE "(cells_[a-z_]+|unk_[a-z_]+|mgb_ranked|mgs_tail_levels) [0-9.]+" | paste -sd' ')"
done
tail -2 "$OUT/profile.log" | cut -c1-300
timeout 76 python3 -m pytest -q -p no:cacheprovider -rf --durations=4 $T/test_flip_sparse_pressure_ahead_gpu.py \
    $T/test_flip_sparse_pressure_hook_gpu.py $T/test_flip_sparse_pressure_workspace_gpu.py \
    $T/test_flip_sparse_pressure_one_read_gpu.py > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; pytest_lines "$OUT/tests.log" 16
echo "elapsed $SECONDS"
