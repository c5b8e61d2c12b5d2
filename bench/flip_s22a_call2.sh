# s22a's second device call (issue 24, session 22): VOXFX_SPARSE_SCAN_WAY "1" the default — the GPU
# files that run the set-up's scans at the defaults (the wide file; scan, join, set-up graph; fuse,
# workspace, ahead, pressure) beside the warm-up; the scans alone with the look-back window and
# occupancy variants combined; the 8M row with the ways alternating in one process, both orders.
# ≤ 200 s of script.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/s22a2; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
timeout 100 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1 & P0=$!
timeout -s INT 110 $PY $T/test_flip_sparse_pressure_scan_wide_gpu.py > $L/g1.log 2>&1 & P1=$!
timeout -s INT 110 $PY $T/test_flip_sparse_pressure_scan_gpu.py $T/test_flip_sparse_pressure_scan_join_gpu.py \
  $T/test_flip_sparse_setup_graph_gpu.py > $L/g2.log 2>&1 & P2=$!
timeout -s INT 110 $PY $T/test_flip_sparse_pressure_fuse_gpu.py $T/test_flip_sparse_pressure_workspace_gpu.py \
  $T/test_flip_sparse_pressure_ahead_gpu.py $T/test_flip_sparse_pressure_gpu.py > $L/g3.log 2>&1 & P3=$!
wait $P0; echo "warm-up rc=$? elapsed $SECONDS"
wait $P1; echo "G1 scan wide rc=$?"; pytest_lines $L/g1.log 12
wait $P2; echo "G2 scan, join, setup graph rc=$?"; pytest_lines $L/g2.log 12
wait $P3; echo "G3 fuse, workspace, ahead, pressure rc=$?"; pytest_lines $L/g3.log 12
echo "elapsed $SECONDS"
timeout 40 python3 bench/flip_scan_ways.py --variants 0 1 1:window1 1:blocks5 1:w1+b5 1:v8+w1+b5 > $L/ways.log 2>&1
echo "scans alone rc=$? at $SECONDS"
grep -vE "^\s*$" $L/ways.log | tail -50 | cut -c1-160
[ $SECONDS -lt 120 ] && timeout 40 python3 bench/flip_sparse.py --row 8m --steps 12 --warm 2 \
  --ab VOXFX_SPARSE_SCAN_WAY=0 --ab VOXFX_SPARSE_SCAN_WAY=1 > $L/ab.log 2>&1; echo "A/B rc=$? at $SECONDS"
grep -vE "^\s*$" $L/ab.log | tail -20 | cut -c1-300
[ $SECONDS -lt 160 ] && timeout 40 python3 bench/flip_sparse.py --row 8m --steps 12 --warm 2 \
  --ab VOXFX_SPARSE_SCAN_WAY=1 --ab VOXFX_SPARSE_SCAN_WAY=0 > $L/ab_rev.log 2>&1; echo "A/B reversed rc=$? at $SECONDS"
grep -vE "^\s*$" $L/ab_rev.log | tail -20 | cut -c1-300
echo "elapsed $SECONDS"
tar czf $OUT/logs.tgz -C /tmp s22a2 2>/dev/null
