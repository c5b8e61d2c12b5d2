# s22f's device call (issue 24): the fused tables queued ahead of the topology's flags read
# (VOXFX_SPARSE_TABLES_AHEAD, kernels/flip/sparse_topology_tables_ahead.py). The GPU files (the new one, the
# topology files, test_flip_sparse_gpu.py at "0" and "1"), then bench/flip_sparse.py --pace's step blocks "0"
# against "1" alternating in one simulation (both orders: s22d's form), the Fast frames "0" against "1" in one process
# (--frames --ab), the synced row's A/B where time is left. Run from this tree's root (the copy
# under .cache/s22f); ≤ 200 s.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/s22f; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
timeout 80 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1 & P0=$!
VOXFX_SPARSE_TABLES_AHEAD=1 timeout 80 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm1.log 2>&1 & P4=$!
timeout -s INT 100 $PY $T/test_flip_sparse_tables_ahead_gpu.py $T/test_flip_sparse_topology_gpu.py \
  $T/test_flip_sparse_topology_args_gpu.py > $L/g1.log 2>&1 & P1=$!
timeout -s INT 100 $PY $T/test_flip_sparse_gpu.py > $L/g2.log 2>&1 & P2=$!
VOXFX_SPARSE_TABLES_AHEAD=1 timeout -s INT 100 $PY $T/test_flip_sparse_gpu.py $T/test_flip_sparse_topology_gpu.py \
  $T/test_flip_sparse_topology_args_gpu.py > $L/g3.log 2>&1 & P3=$!
wait $P0; echo "warm-up rc=$? elapsed $SECONDS"; grep -E "^sparse" $L/warm.log | head -2
wait $P4; echo "warm-up AHEAD=1 rc=$? elapsed $SECONDS"; grep -E "^sparse" $L/warm1.log | head -2
wait $P1; echo "G1 tables-ahead + topology files rc=$?"; pytest_lines $L/g1.log 12
wait $P2; echo "G2 test_flip_sparse_gpu (defaults) rc=$?"; pytest_lines $L/g2.log 8
wait $P3; echo "G3 test_flip_sparse_gpu + topology files (TABLES_AHEAD=1) rc=$?"; pytest_lines $L/g3.log 8
echo "elapsed $SECONDS"
A0=VOXFX_SPARSE_TABLES_AHEAD=0; A1=VOXFX_SPARSE_TABLES_AHEAD=1
pace() {  # the step blocks, $1 first
  timeout 32 python3 bench/flip_sparse.py --row 8m --pace 4 --rounds 8 --warm 2 --pace-kinds step "step marked" \
    --ab $1 --ab $2 > $L/ab_$1.log 2>&1
  echo "step A/B ($1 first) rc=$? elapsed $SECONDS"; grep -vE "^(device|VoxFX|round)" $L/ab_$1.log | cut -c1-1400
}
[ $SECONDS -lt 140 ] && pace $A0 $A1
[ $SECONDS -lt 150 ] && { timeout 40 python3 bench/flip_sparse.py --row 8m --frames 12 --timing fast --time-cap 14 \
  --ab $A0 --ab $A1 > $L/frames.log 2>&1; echo "frames A/B rc=$? elapsed $SECONDS"; tail -16 $L/frames.log | cut -c1-300; }
[ $SECONDS -lt 165 ] && pace $A1 $A0
[ $SECONDS -lt 178 ] && { timeout 20 python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2 --ab $A0 --ab $A1 \
  > $L/row.log 2>&1; echo "row A/B rc=$? elapsed $SECONDS"; grep -vE "^(device|VoxFX)" $L/row.log | tail -6 | cut -c1-400; }
tar czf $OUT/logs.tgz -C /tmp s22f 2>/dev/null
