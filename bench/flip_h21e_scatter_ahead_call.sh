# h21e's second device call: VOXFX_SPARSE_PRESSURE_SCATTER_AHEAD — the GPU files (the new one at the
# defaults, the pressure files with the switch on) beside the warm-up, then the pressure timeline with
# "0" and "1" alternating each substep in one process, then the 8M row in separate processes 0, 1, 0, 1.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/h21e2; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
S=VOXFX_SPARSE_PRESSURE_SCATTER_AHEAD
timeout 90 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1 & P0=$!
timeout -s INT 95 $PY $T/test_flip_sparse_pressure_scatter_ahead_gpu.py $T/test_flip_sparse_pressure_around_gpu.py $T/test_flip_pressure_gpu.py > $L/g1.log 2>&1 & P1=$!
env $S=1 timeout -s INT 95 $PY $T/test_flip_sparse_pressure_solve_ahead_gpu.py $T/test_flip_sparse_pcg_early_stop_gpu.py $T/test_flip_sparse_pressure_warm_gpu.py $T/test_flip_sparse_pressure_persist_gpu.py > $L/g2.log 2>&1 & P2=$!
env $S=1 timeout -s INT 95 $PY $T/test_flip_sparse_pressure_gpu.py $T/test_liquid_memory_check_gpu.py $T/test_flip_sparse_pressure_workspace_gpu.py > $L/g3.log 2>&1 & P3=$!
wait $P0; echo "warm-up rc=$? t=$SECONDS"
wait $P1; echo "G1 new file, around, dense (defaults) rc=$?"; pytest_lines $L/g1.log 8
wait $P2; echo "G2 $S=1: solve-ahead, early stop, warm, persist rc=$?"; pytest_lines $L/g2.log 8
wait $P3; echo "G3 $S=1: pressure, memory check, workspace rc=$?"; pytest_lines $L/g3.log 8
echo "t=$SECONDS"
timeout 40 python3 bench/flip_sparse_pressure_timeline.py --substeps 8 --ab $S=0 --ab $S=1 > $L/tl.log 2>&1; echo "timeline rc=$? t=$SECONDS"
grep -E "stage medians|whole|check read < \.\. run_blocks|run_blocks < \.\. solver.solve|solver.solve < \.\. carry|carry < \.\. solve_pressure|solve ahead >|coarse levels > \.\. coarse|check read > \.\. check read <  " $L/tl.log
n=0
for w in 0 1 0 1; do
  [ $SECONDS -gt 178 ] && continue
  n=$((n+1)); env $S=$w timeout 25 python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2 > $L/row_${n}_$w.log 2>&1; echo "row $n $S=$w rc=$?"
  grep -E "^sparse \|" $L/row_${n}_$w.log; grep -E "CG iterations per substep" $L/row_${n}_$w.log
done
echo "elapsed $SECONDS"
tar czf $OUT/logs.tgz -C /tmp h21e2 2>/dev/null
