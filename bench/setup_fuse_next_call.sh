#!/usr/bin/env bash
# Helper i24v's device script for the next session's call (issue 24, item 1; ≤ 90 s): the coarse
# levels' set-up with its independent launches joined (VOXFX_SPARSE_SETUP_FUSE=1, off today:
# mgb_coarsen_span, mgb_restrict_span, mgs_level_end; 30 → 25 launches at 8M by the launch
# sequence). Phase 1, three pytest groups side by side: (a) the fuse GPU file (tables, sizes,
# spans and a dam break's pressure bit for bit, "0" against "1"); (b) the pressure file and (c)
# the workspace and restriction files with the switch on. Phase 2, alone:
# bench/flip_sparse_setup_kernels.py, "0" / "1" in turn each substep on one 8M simulation (the
# coarse levels' launches and device ms). Logs under /tmp/i24v → $OUT/logs.tgz.
OUT_DEFAULT=$OUT; . "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
L=/tmp/i24v; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rf --durations=3"
timeout ${TESTS_S:-45} $PY $T/test_flip_sparse_pressure_fuse_gpu.py > $L/tests_a.log 2>&1 & PA=$!
VOXFX_SPARSE_SETUP_FUSE=1 timeout ${TESTS_S:-45} $PY $T/test_flip_sparse_pressure_gpu.py > $L/tests_b.log 2>&1 & PB=$!
VOXFX_SPARSE_SETUP_FUSE=1 timeout ${TESTS_S:-45} $PY $T/test_flip_sparse_pressure_workspace_gpu.py \
  $T/test_flip_sparse_pressure_restrict_gpu.py > $L/tests_c.log 2>&1 & PC=$!
wait $PA; echo "tests a (fuse file: 0 against 1) rc=$?"; pytest_lines $L/tests_a.log 8
wait $PB; echo "tests b (FUSE=1: pressure file) rc=$?"; pytest_lines $L/tests_b.log 8
wait $PC; echo "tests c (FUSE=1: workspace, restrict files) rc=$?"; pytest_lines $L/tests_c.log 8
echo "elapsed $SECONDS"
timeout ${KERNELS_S:-40} python3 bench/flip_sparse_setup_kernels.py --warm 1 --substeps 3 \
  --set VOXFX_SPARSE_SETUP_FUSE=0 --set VOXFX_SPARSE_SETUP_FUSE=1 > $L/kernels.log 2>&1
echo "kernels rc=$? elapsed $SECONDS"
grep -E "^device|bricks, pool|^way|\[coarse levels\]|mgs_level_end|_span|mgs_coarsen|prolong_restrict|CG it" \
  $L/kernels.log | cut -c1-170
tail -3 $L/kernels.log | grep -iE "error|Traceback" | cut -c1-200
tar czf "$OUT/logs.tgz" -C /tmp i24v
