# s22a's device call (issue 24, session 22): the look-back scans folded into one body (the "0"
# kernels' integers) and their tiles read once into registers (VOXFX_SPARSE_SCAN_WAY=1:
# scan_lookback_wide, scan_lookback_pair_wide). The new GPU file, the scan / join / set-up graph
# files with "1" in the environment and the scan / join files at the defaults (the fold), beside
# the warm-up; then the scans alone (bench/flip_scan_ways.py: "0", "1" and its -D variants) and
# each set-up kernel's device ms both ways, in both orders. ≤ 200 s of script.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/s22a; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
timeout 100 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1 & P0=$!
timeout -s INT 105 $PY $T/test_flip_sparse_pressure_scan_wide_gpu.py > $L/g1.log 2>&1 & P1=$!
VOXFX_SPARSE_SCAN_WAY=1 timeout -s INT 105 $PY $T/test_flip_sparse_pressure_scan_gpu.py \
  $T/test_flip_sparse_pressure_scan_join_gpu.py $T/test_flip_sparse_setup_graph_gpu.py > $L/g2.log 2>&1 & P2=$!
timeout -s INT 105 $PY $T/test_flip_sparse_pressure_scan_gpu.py $T/test_flip_sparse_pressure_scan_join_gpu.py \
  > $L/g3.log 2>&1 & P3=$!
wait $P0; echo "warm-up rc=$? elapsed $SECONDS"
wait $P1; echo "G1 scan wide rc=$?"; pytest_lines $L/g1.log 12
wait $P2; echo "G2 scan, join, setup graph (SCAN_WAY=1) rc=$?"; pytest_lines $L/g2.log 12
wait $P3; echo "G3 scan, join (defaults: the fold) rc=$?"; pytest_lines $L/g3.log 12
echo "elapsed $SECONDS"
timeout 40 python3 bench/flip_scan_ways.py > $L/ways.log 2>&1; echo "scans alone rc=$? at $SECONDS"
grep -vE "^\s*$" $L/ways.log | tail -45 | cut -c1-160
[ $SECONDS -lt 150 ] && timeout 28 python3 bench/flip_sparse_setup_kernels.py --substeps 4 \
  --set VOXFX_SPARSE_SCAN_WAY=0 --set VOXFX_SPARSE_SCAN_WAY=1 > $L/kernels.log 2>&1; echo "kernels rc=$? at $SECONDS"
grep -E "^way|\[|scan_lookback|stages" $L/kernels.log | head -40 | cut -c1-200
[ $SECONDS -lt 170 ] && timeout 28 python3 bench/flip_sparse_setup_kernels.py --substeps 4 \
  --set VOXFX_SPARSE_SCAN_WAY=1 --set VOXFX_SPARSE_SCAN_WAY=0 > $L/kernels_rev.log 2>&1; echo "kernels (reversed) rc=$? at $SECONDS"
grep -E "^way|\[|scan_lookback|stages" $L/kernels_rev.log | head -40 | cut -c1-200
echo "elapsed $SECONDS"
tar czf $OUT/logs.tgz -C /tmp s22a 2>/dev/null
