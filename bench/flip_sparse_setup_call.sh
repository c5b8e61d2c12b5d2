#!/usr/bin/env bash
# The one device call for the pressure set-up's workspace (issue 24, branch i24v;
# kernels/flip/sparse_pressure_workspace.py): the 8M dam break's pressure stage with the set-up's
# buffers fresh and in the workspace, alternating in one process (per-piece times, whole substeps,
# max |Δp|, --count's launches and allocations), then the workspace's GPU tests and the pressure
# GPU files whose code it touches. Each part under its own timeout (≤ 150 s in all); logs under $OUT.
. "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
V=fused:8192:kernel:kernel:1:16384:1:1:1:1:1:1:65536:0
timeout 60 python3 bench/flip_sparse_pressure_profile.py --substeps 4 --warm 2 --substep-runs 4 --alternate --count \
    --variants $V:fresh $V:workspace > "$OUT/profile.log" 2>&1
echo "profile rc=$?"
grep -E "^variant|cells\+labels|mg tables|gather|PCG loop|scatter p|solve_pressure|iterations \||max \|p|median|count '" \
    "$OUT/profile.log"
timeout 85 python3 -m pytest -q -p no:cacheprovider -rf --durations=6 $T/test_flip_sparse_pressure_workspace_gpu.py \
    $T/test_flip_sparse_pressure_persist_gpu.py $T/test_flip_sparse_pressure_gpu.py > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; pytest_lines "$OUT/tests.log" 20
echo "elapsed $SECONDS"
