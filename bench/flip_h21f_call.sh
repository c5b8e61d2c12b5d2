# h21f's device call (issue 24): the pressure set-up's device work at 8M with the same bits — cells_rhs
# zeroes cells_label's reach and the sealed count (two memsets fewer), the extra values copied by one 4-byte
# copy, solver_tables keeps the set-up's own kind (no copy), and for a solve launched ahead ahead_sizes
# zeroes the vectors' sentinels (VOXFX_SPARSE_AHEAD_ZERO "sentinels", no 41 MB fill) and unknowns_gather
# takes x₀ from the carried pressure and writes level 0's diag (VOXFX_SPARSE_AHEAD_GATHER "folded": no
# warm_guess pass, no unk_diag_strided). The pressure
# GPU files in three groups beside the warm-ups (this tree, then main's in base/), then the 8M row in
# separate processes main, h21f, main, h21f, the timeline with the two switches alternating each substep
# in one process, and a timeline of main and of h21f. ≤ 160 s of script.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/h21f; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
B=base
timeout 80 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1 & P0=$!
timeout -s INT 95 $PY $T/test_flip_sparse_pressure_solve_ahead_gpu.py $T/test_flip_sparse_pressure_around_gpu.py $T/test_flip_sparse_pressure_one_read_gpu.py $T/test_flip_density_gpu.py $T/test_flip_sparse_pressure_hook_gpu.py > $L/g1.log 2>&1 & P1=$!
timeout -s INT 95 $PY $T/test_flip_sparse_pressure_gpu.py $T/test_flip_sparse_pressure_workspace_gpu.py $T/test_flip_sparse_pressure_persist_gpu.py > $L/g2.log 2>&1 & P2=$!
timeout -s INT 95 $PY $T/test_flip_sparse_pressure_warm_gpu.py $T/test_flip_sparse_pressure_scatter_ahead_gpu.py $T/test_flip_sparse_pcg_early_stop_gpu.py $T/test_flip_sparse_air_band_gpu.py > $L/g3.log 2>&1 & P3=$!
wait $P0; echo "warm-up rc=$? t=$SECONDS"
(cd $B && timeout 45 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm_base.log 2>&1); echo "main's warm-up rc=$? t=$SECONDS"
wait $P1; echo "G1 solve-ahead (new test), around, one read, density, hook rc=$?"; pytest_lines $L/g1.log 8
wait $P2; echo "G2 pressure, workspace, persist rc=$?"; pytest_lines $L/g2.log 8
wait $P3; echo "G3 warm, scatter ahead, early stop, air band rc=$?"; pytest_lines $L/g3.log 8
echo "t=$SECONDS"
n=0
for w in main h21f main h21f; do
  [ $SECONDS -gt 140 ] && continue
  n=$((n+1)); d=.; [ $w = main ] && d=$B
  (cd $d && timeout 20 python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2 > $L/row_${n}_$w.log 2>&1); echo "row $n $w rc=$? t=$SECONDS"
  grep -E "^sparse \|" $L/row_${n}_$w.log; grep -E "CG iterations per substep|pressure per substep|per substep" $L/row_${n}_$w.log | head -3
done
S="VOXFX_SPARSE_AHEAD_ZERO"; G="VOXFX_SPARSE_AHEAD_GATHER"
[ $SECONDS -lt 130 ] && { timeout 25 python3 bench/flip_sparse_pressure_timeline.py --substeps 8 --show 0 --ab $S=fill $G=apart --ab '' > $L/tl_ab.log 2>&1; echo "timeline fill+apart / defaults rc=$? t=$SECONDS"
  grep -E "stage medians|whole|solve ahead > \.\. start graph|start graph > \.\. start graph <|start graph < \.\. solve ahead <|lag at each|taken" $L/tl_ab.log; }
for w in main h21f; do
  [ $SECONDS -gt 146 ] && continue
  d=.; [ $w = main ] && d=$B
  (cd $d && timeout 15 python3 bench/flip_sparse_pressure_timeline.py --substeps 6 --show 0 > $L/tl_$w.log 2>&1); echo "timeline $w rc=$? t=$SECONDS"
  grep -E "stage medians|cells stage > \.\. cells stage <|ws unknowns > \.\. coarse|coarse levels > \.\. coarse levels <|solve ahead > \.\. |solver_tables > \.\. |whole" $L/tl_$w.log
done
echo "elapsed $SECONDS"
tar czf $OUT/logs.tgz -C /tmp h21f 2>/dev/null
