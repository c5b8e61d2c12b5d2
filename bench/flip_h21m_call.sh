# h21m's device call, for the next session (issue 24; not run in session 21): the coarse levels' paired scans
# (VOXFX_SPARSE_SCAN_JOIN=1: mgs_level_cells_coarsen + scan_lookback_pair, 25 → 22 set-up launches at 8M, the
# same integers on the host). The new GPU file (the held levels' dam break among its cases) beside the
# warm-up, and the fuse, workspace and setup-graph files with "1" in the environment; then the A/B in one
# process (the solver's key is the same both ways: the substeps alternate) and each set-up kernel's device ms
# both ways. ≤ 150 s of script.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/h21m; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
timeout 100 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1 & P0=$!
timeout -s INT 90 $PY $T/test_flip_sparse_pressure_scan_join_gpu.py > $L/g1.log 2>&1 & P1=$!
VOXFX_SPARSE_SCAN_JOIN=1 timeout -s INT 90 $PY $T/test_flip_sparse_pressure_fuse_gpu.py \
  $T/test_flip_sparse_pressure_workspace_gpu.py $T/test_flip_sparse_setup_graph_gpu.py > $L/g2.log 2>&1 & P2=$!
wait $P0; echo "warm-up rc=$? elapsed $SECONDS"
wait $P1; echo "G1 scan join rc=$?"; pytest_lines $L/g1.log 12
wait $P2; echo "G2 fuse, workspace, setup graph (SCAN_JOIN=1) rc=$?"; pytest_lines $L/g2.log 12
echo "elapsed $SECONDS"
[ $SECONDS -lt 100 ] && timeout 28 python3 bench/flip_sparse.py --row 8m --steps 12 --warm 2 \
  --ab VOXFX_SPARSE_SCAN_JOIN=0 --ab VOXFX_SPARSE_SCAN_JOIN=1 > $L/ab.log 2>&1; echo "A/B rc=$? at $SECONDS"
grep -vE "^\s*$" $L/ab.log | tail -30 | cut -c1-300
[ $SECONDS -lt 120 ] && timeout 28 python3 bench/flip_sparse_setup_kernels.py --substeps 4 \
  --set VOXFX_SPARSE_SCAN_JOIN=0 --set VOXFX_SPARSE_SCAN_JOIN=1 > $L/kernels.log 2>&1; echo "kernels rc=$? at $SECONDS"
grep -E "^way|\[|scan_lookback|mgs_level_cells|mgs_coarsen|stages" $L/kernels.log | head -60 | cut -c1-200
echo "elapsed $SECONDS"
tar czf $OUT/logs.tgz -C /tmp h21m 2>/dev/null
