#!/usr/bin/env bash
# Helper i24w's device script for the next session's call (issue 24, item 1; ≤ 150 s): the two
# set-up kernels i24u's profile found far below the card's bandwidth, each a switch, off.
#   VOXFX_SPARSE_LABEL_BRICK_LINKS=local  cells_hook_bricks_local (no nbr rows; "nbr" today)
#   VOXFX_SPARSE_SCAN_TILE=16|32          scan_lookback's tile floor in block widths ("8" today)
# Phase 1, three pytest groups side by side: (a) the hook and scan GPU files at the defaults
# (their new tests compare the ways bit for bit on real set-ups and dam breaks); (b) the
# pressure file and (c) the scan and workspace files with both ways on. Phase 2, alone:
# bench/flip_sparse_setup_kernels.py, old / new / new with the 16 floor in turn each substep
# on one 8M simulation (each kernel's own device time). Logs under /tmp/i24w → $OUT/logs.tgz.
OUT_DEFAULT=$OUT; . "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
L=/tmp/i24w; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rf --durations=3"
ON="VOXFX_SPARSE_LABEL_BRICK_LINKS=local VOXFX_SPARSE_SCAN_TILE=32"
timeout ${TESTS_S:-70} $PY $T/test_flip_sparse_pressure_hook_gpu.py $T/test_flip_sparse_pressure_scan_gpu.py \
  > $L/tests_a.log 2>&1 & PA=$!
env $ON timeout ${TESTS_S:-70} $PY $T/test_flip_sparse_pressure_gpu.py > $L/tests_b.log 2>&1 & PB=$!
env $ON timeout ${TESTS_S:-70} $PY $T/test_flip_sparse_pressure_scan_gpu.py \
  $T/test_flip_sparse_pressure_workspace_gpu.py > $L/tests_c.log 2>&1 & PC=$!
wait $PA; echo "tests a (defaults: hook, scan files) rc=$?"; pytest_lines $L/tests_a.log 8
wait $PB; echo "tests b (ways on: pressure file) rc=$?"; pytest_lines $L/tests_b.log 8
wait $PC; echo "tests c (ways on: scan, workspace files) rc=$?"; pytest_lines $L/tests_c.log 8
echo "elapsed $SECONDS"
timeout ${KERNELS_S:-60} python3 bench/flip_sparse_setup_kernels.py --warm 1 --substeps 3 \
  --set VOXFX_SPARSE_LABEL_BRICK_LINKS=nbr VOXFX_SPARSE_SCAN_TILE=8 \
  --set $ON \
  --set VOXFX_SPARSE_LABEL_BRICK_LINKS=local VOXFX_SPARSE_SCAN_TILE=16 > $L/kernels.log 2>&1
echo "kernels rc=$? elapsed $SECONDS"
grep -E "^device|bricks, pool|^way|\[cells stage\]|\[ws unknowns\]|\[coarse levels\]|cells_hook_bricks|scan_lookback|CG it" \
  $L/kernels.log | cut -c1-170
tail -3 $L/kernels.log | grep -iE "error|Traceback" | cut -c1-200
tar czf "$OUT/logs.tgz" -C /tmp i24w
