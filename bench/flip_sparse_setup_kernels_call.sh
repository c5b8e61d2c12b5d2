#!/usr/bin/env bash
# The one device call of helper i24u (issue 24, item 1): the pressure set-up kernel by kernel.
# Phase 1: the pressure GPU files in three groups side by side (VOXFX_SPARSE_SETUP_WIDEN
# "block", the new default). Phase 2, alone on the device: bench/flip_sparse_setup_kernels.py
# (each set-up kernel's own time, "thread" and "block" in turn each substep, and "block" with
# the one-block tail off and from a finer level: TAIL_BOUND 0 and 131072), the pressure
# timeline with the two in turn, then the 8M row, thread / block alternating in separate
# processes while time is left. Logs under /tmp/i24u, tarred into $OUT/logs.tgz.
OUT_DEFAULT=$OUT; . "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
L=/tmp/i24u; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rf --durations=3"
A="$T/test_flip_sparse_pressure_gpu.py"
B="$T/test_flip_sparse_pressure_workspace_gpu.py $T/test_flip_sparse_pressure_solve_ahead_gpu.py $T/test_liquid_memory_check_gpu.py"
C="$T/test_flip_sparse_pressure_scan_gpu.py $T/test_flip_sparse_pressure_bricks_gpu.py $T/test_flip_sparse_pressure_ahead_gpu.py $T/test_flip_sparse_pressure_one_read_gpu.py"
timeout ${TESTS_S:-70} $PY $A > $L/tests_a.log 2>&1 & PA=$!
timeout ${TESTS_S:-70} $PY $B > $L/tests_b.log 2>&1 & PB=$!
timeout ${TESTS_S:-70} $PY $C > $L/tests_c.log 2>&1 & PC=$!
wait $PA; echo "tests a rc=$?"; pytest_lines $L/tests_a.log 8
wait $PB; echo "tests b rc=$?"; pytest_lines $L/tests_b.log 8
wait $PC; echo "tests c rc=$?"; pytest_lines $L/tests_c.log 8
echo "elapsed $SECONDS"
timeout 48 python3 bench/flip_sparse_setup_kernels.py --warm 1 --substeps 3 \
  --set VOXFX_SPARSE_SETUP_WIDEN=thread --set VOXFX_SPARSE_SETUP_WIDEN=block \
  --set VOXFX_SPARSE_SETUP_WIDEN=block sparse_pressure_setup.TAIL_BOUND=0 \
  --set VOXFX_SPARSE_SETUP_WIDEN=block sparse_pressure_setup.TAIL_BOUND=131072 > $L/kernels.log 2>&1
echo "kernels rc=$? elapsed $SECONDS"
grep -E "^\s+\[|unk_classify|^way|pool|stages" $L/kernels.log | cut -c1-160
timeout 40 python3 bench/flip_sparse_pressure_timeline.py --warm 1 --substeps 3 --show 0 \
  --ab VOXFX_SPARSE_SETUP_WIDEN=thread --ab VOXFX_SPARSE_SETUP_WIDEN=block > $L/timeline.log 2>&1
echo "timeline rc=$? elapsed $SECONDS"
grep -E "stage medians|cells stage|ws unknowns|coarse levels|whole|solve ahead \(" $L/timeline.log \
  | grep -vE "^  (solve_pressure|staged_setup) " | cut -c1-200
for i in 1 2 3 4; do
  [ $SECONDS -lt 172 ] || { echo "flip $i skipped (time)"; continue; }
  w=$([ $((i % 2)) = 1 ] && echo thread || echo block)
  VOXFX_SPARSE_SETUP_WIDEN=$w timeout 24 python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2 > $L/flip_${i}_$w.log 2>&1
  echo "flip 8m $w rc=$?"; grep -vE "^ *$|Warning|warn|VoxFX:" $L/flip_${i}_$w.log | tail -3 | cut -c1-250
done
echo "elapsed $SECONDS"
tar czf "$OUT/logs.tgz" -C /tmp i24u
