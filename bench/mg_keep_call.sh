# h19d (issue 24): the pressure set-up's levels >= 2 held across set-ups (VOXFX_SPARSE_MG_KEEP,
# sparse_pressure_workspace_kept). GPU tests in three groups side by side (the new file and the
# workspace / ahead / solve-ahead / graph files with the switch off; the pressure, workspace,
# ahead and solve-ahead files with it at 3; the memory check and the warm-start file at 4) beside a
# warm-up row, then the 8M row (bench/_mg_keep_count.py: flip_sparse.py with the set-ups counted)
# in separate processes alternating off, 3, off, 3 (then 4 if time): pressure ms, CG iterations
# and pressure ms per substep, substep ms, set-ups kept / built. Logs tarred into $OUT/logs.tgz.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/h19d; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
VOXFX_SPARSE_MG_KEEP=3 timeout 90 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1 & P0=$!
timeout -s INT 88 $PY $T/test_flip_sparse_pressure_kept_gpu.py $T/test_flip_sparse_pressure_workspace_gpu.py \
    $T/test_flip_sparse_pressure_solve_ahead_gpu.py $T/test_flip_sparse_pressure_ahead_gpu.py \
    $T/test_flip_sparse_setup_graph_gpu.py > $L/off.log 2>&1 & P1=$!
VOXFX_SPARSE_MG_KEEP=3 timeout -s INT 88 $PY $T/test_flip_sparse_pressure_gpu.py \
    $T/test_flip_sparse_pressure_workspace_gpu.py $T/test_flip_sparse_pressure_solve_ahead_gpu.py \
    $T/test_flip_sparse_pressure_ahead_gpu.py > $L/on3.log 2>&1 & P2=$!
VOXFX_SPARSE_MG_KEEP=4 timeout -s INT 88 $PY $T/test_liquid_memory_check_gpu.py \
    $T/test_flip_sparse_pressure_warm_gpu.py > $L/on4.log 2>&1 & P3=$!
wait $P1; echo "off: kept file + workspace, solve-ahead, ahead, graph rc=$?"; pytest_lines $L/off.log 12
wait $P2; echo "keep 3: pressure, workspace, solve-ahead, ahead rc=$?"; pytest_lines $L/on3.log 12
wait $P3; echo "keep 4: memory check + warm rc=$?"; pytest_lines $L/on4.log 12
wait $P0; echo "warm-up rc=$? (elapsed $SECONDS)"
row() {  # row WAY TAG
  VOXFX_SPARSE_MG_KEEP=$1 timeout 28 python3 bench/_mg_keep_count.py --row 8m --steps 8 --warm 2 > $L/row_$2.log 2>&1
  echo "row keep=$1 ($2) rc=$? (elapsed $SECONDS)"
  grep -E "^sparse \|" $L/row_$2.log | awk -F'|' '{print "  pressure",$8,"CG",$11,"substep",$12}'
  grep -E "CG iterations per substep|levels >= 2" $L/row_$2.log | sed 's/^ */  /'
}
for tag in a b; do
  for way in 0 3; do
    [ $SECONDS -lt 168 ] && row $way $way$tag
  done
done
[ $SECONDS -lt 168 ] && row 4 4a
tar czf $OUT/logs.tgz -C /tmp h19d 2>/dev/null
echo "elapsed $SECONDS"
