#!/usr/bin/env bash
# The one device call for the set-up's coarse levels as a graph replay (issue 24, branch i24c;
# kernels/flip/sparse_pressure_setup_graph.py, VOXFX_SPARSE_SETUP_GRAPH "1" the default in that call;
# "0" the default after it).
# Phase 1: the GPU tests in two groups side by side (the graph's file, the workspace, ahead,
# solve-ahead, release, PCG loop and memory-check files; the rest of the pressure files, level 0
# and the brick V-cycle). Phase 2, alone on the device: the pressure timeline with the graph
# (--keys: how often level 1's launches would keep one key) and without it, then the 8M row,
# off / on alternating in separate processes. Each part under its own timeout; logs under $OUT.
OUT_DEFAULT=$OUT; . "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
PY="python3 -m pytest -q -p no:cacheprovider -rf --durations=5"
A="$T/test_flip_sparse_setup_graph_gpu.py $T/test_flip_sparse_pressure_workspace_gpu.py \
$T/test_flip_sparse_pressure_ahead_gpu.py $T/test_flip_sparse_pressure_solve_ahead_gpu.py $T/test_solver_release_gpu.py \
$T/test_flip_sparse_pcg_loop_gpu.py $T/test_liquid_memory_check_gpu.py"
B=""
for f in $T/test_flip_sparse_pressure*_gpu.py $T/test_flip_sparse_level0_gpu.py $T/test_flip_sparse_vcycle_bricks_gpu.py; do
  case " $A " in *" $f "*) ;; *) B="$B $f";; esac
done
timeout ${TESTS_S:-80} $PY $A > "$OUT/tests_a.log" 2>&1 &
PA=$!
sleep 3
timeout ${TESTS_S:-80} $PY $B > "$OUT/tests_b.log" 2>&1 &
PB=$!
wait $PA; echo "tests a rc=$?"; pytest_lines "$OUT/tests_a.log" 12
wait $PB; echo "tests b rc=$?"; pytest_lines "$OUT/tests_b.log" 12
grep -E "^[0-9.]+s (call|setup)" "$OUT/tests_a.log" "$OUT/tests_b.log" | head -10
echo "elapsed $SECONDS"
VOXFX_SPARSE_SETUP_GRAPH=1 timeout 40 python3 bench/flip_sparse_pressure_timeline.py --substeps 4 --keys \
  > "$OUT/timeline_1.log" 2>&1
echo "timeline graph 1 rc=$?"
VOXFX_SPARSE_SETUP_GRAPH=0 timeout 30 python3 bench/flip_sparse_pressure_timeline.py --substeps 4 \
  > "$OUT/timeline_0.log" 2>&1
echo "timeline graph 0 rc=$?"
for g in 1 0; do
  echo "== timeline graph $g"
  grep -E "stage medians|coarse levels|ws unknowns|cells stage|whole|graphs:|level 1 keys|solve ahead|^pool" \
    "$OUT/timeline_$g.log" | grep -vE "^  (solve_pressure|staged_setup) " | cut -c1-400 | tail -16
done
echo "elapsed $SECONDS"
for i in 1 2 3 4; do
  [ $SECONDS -lt 178 ] || { echo "flip $i skipped (time)"; continue; }
  g=$(( i % 2 ))  # 1, 0, 1, 0
  VOXFX_SPARSE_SETUP_GRAPH=$g timeout 24 python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2 \
    > "$OUT/flip_${i}_g$g.log" 2>&1
  echo "flip 8m graph $g rc=$? $(grep -E '^sparse' "$OUT/flip_${i}_g$g.log" | cut -c1-300)"
done
echo "elapsed $SECONDS"
