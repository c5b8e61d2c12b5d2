#!/usr/bin/env bash
# The device call for issue 24's frame spikes from new sparse pressure solvers (helper i24b,
# session 15): the five GPU test files with main's ways and with the three switches on
# (VOXFX_SPARSE_PCG_BLOCK=singles, VOXFX_SPARSE_SETUP_CAPS=together, VOXFX_SPARSE_PCG_GROW=ahead),
# four processes beside a one-frame warm-up that compiles the row's kernels; then the 8M Fast
# frames with --stages (each solver built: why, its construction, each capture and first replay,
# the workspace's generations) before (main's ways) and after (the switches), separate processes,
# and, time allowing, the after without GROW. Each process's log under /tmp, then all of them
# in $OUT/i24b_full.log. Run once (session 15): bench/RESULTS.md, "The frames that build a pressure solver".
# (VOXFX_SPARSE_PCG_GROW "ahead" was removed in the review after this call: it overshot the memory
# estimate and built no fewer solvers; the variable is no longer read.)
OUT_DEFAULT=$OUT
. "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
FINAL=$OUT
OUT=/tmp/i24b_logs
mkdir -p "$OUT"
FR="--row 8m --frames 12 --timing fast --level-set --trim --stages"
SW="env VOXFX_SPARSE_PCG_BLOCK=singles VOXFX_SPARSE_SETUP_CAPS=together VOXFX_SPARSE_PCG_GROW=ahead"
NOGROW="env VOXFX_SPARSE_PCG_BLOCK=singles VOXFX_SPARSE_SETUP_CAPS=together"
G1="$T/test_flip_sparse_pressure_gpu.py $T/test_solver_release_gpu.py $T/test_memory_release_gpu.py"
G2="$T/test_flip_sparse_pressure_workspace_gpu.py $T/test_liquid_memory_check_gpu.py"
PT="python3 -m pytest -q -p no:cacheprovider -rf --durations=3"
timeout 95 $PT $G1 > "$OUT/tA1.log" 2>&1 & A1=$!
timeout 95 $PT $G2 > "$OUT/tA2.log" 2>&1 & A2=$!
timeout 95 $SW $PT $G1 > "$OUT/tB1.log" 2>&1 & B1=$!
timeout 95 $SW $PT $G2 > "$OUT/tB2.log" 2>&1 & B2=$!
timeout 60 python3 bench/flip_sparse.py --row 8m --frames 1 --timing fast --level-set --trim > "$OUT/warm.log" 2>&1
echo "warm-up rc=$? elapsed $SECONDS"
for j in A1 A2 B1 B2; do wait ${!j}; echo "tests $j rc=$?"; pytest_lines "$OUT/t$j.log" 12; done
echo "elapsed $SECONDS"
show() { grep -E "^[0-9]+ \||step stages|solver event|solve ahead" "$1" | sed -E 's/level set device ms.*//'; }
timeout 33 python3 bench/flip_sparse.py $FR > "$OUT/before.log" 2>&1; echo "8M before rc=$?"; show "$OUT/before.log"
echo "elapsed $SECONDS"
timeout 33 $SW python3 bench/flip_sparse.py $FR > "$OUT/after.log" 2>&1; echo "8M after rc=$?"; show "$OUT/after.log"
echo "elapsed $SECONDS"
if [ "$SECONDS" -lt 165 ]; then
    timeout 33 $NOGROW python3 bench/flip_sparse.py $FR > "$OUT/nogrow.log" 2>&1; echo "8M after, no GROW rc=$?"
    show "$OUT/nogrow.log"
fi
echo "elapsed $SECONDS"
for f in "$OUT"/*.log; do echo "=== $f"; cat "$f"; done > "$FINAL/i24b_full.log"
