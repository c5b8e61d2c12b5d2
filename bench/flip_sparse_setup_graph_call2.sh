#!/usr/bin/env bash
# i24c call 2 (issue 24, branch i24c): the GPU tests at the new default (VOXFX_SPARSE_SETUP_GRAPH=0), then the pressure
# timeline with and without the graph (6 substeps, separate processes), everything in one log.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
PY="python3 -m pytest -q -p no:cacheprovider -rf --durations=3"
A="$T/test_flip_sparse_setup_graph_gpu.py $T/test_flip_sparse_pressure_workspace_gpu.py \
$T/test_flip_sparse_pressure_ahead_gpu.py $T/test_flip_sparse_pressure_solve_ahead_gpu.py $T/test_solver_release_gpu.py \
$T/test_flip_sparse_pcg_loop_gpu.py $T/test_liquid_memory_check_gpu.py"
B=""
for f in $T/test_flip_sparse_pressure*_gpu.py $T/test_flip_sparse_level0_gpu.py $T/test_flip_sparse_vcycle_bricks_gpu.py; do
  case " $A " in *" $f "*) ;; *) B="$B $f";; esac
done
timeout 90 $PY $A > /tmp/tests_a.log 2>&1 &
PA=$!
sleep 3
timeout 90 $PY $B > /tmp/tests_b.log 2>&1 &
PB=$!
wait $PA; echo "tests a (default) rc=$?"; pytest_lines /tmp/tests_a.log 12
wait $PB; echo "tests b (default) rc=$?"; pytest_lines /tmp/tests_b.log 12
echo "elapsed $SECONDS"
for g in 1 0; do
  VOXFX_SPARSE_SETUP_GRAPH=$g timeout 40 python3 bench/flip_sparse_pressure_timeline.py --substeps 6 --show 2 \
    > /tmp/timeline_$g.log 2>&1
  echo "== timeline graph $g rc=$?"; grep -vE "^VoxFX|^device" /tmp/timeline_$g.log | cut -c1-200
done
echo "elapsed $SECONDS"
