# s22f's second device call (issue 24; VOXFX_SPARSE_TABLES_AHEAD, kernels/flip/sparse_topology_tables_ahead.py):
# the topology GPU file at "1" (call 1's one failure: a fills-mechanism test, now pinned to "0") and the new file
# again (random states), then more samples: --pace's step blocks "0" against "1" in both orders, twice (16 rounds, each
# round's pair printed), the Fast frames in one process (--frames --ab, 36 frames), "1" with
# VOXFX_SPARSE_OCCUPIED_AHEAD=1 as a third way, the synced row's A/B.
# Run from this tree's root (the copy under .cache/s22f); ≤ 200 s.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/s22f2; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
timeout 80 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1 & P0=$!
VOXFX_SPARSE_TABLES_AHEAD=1 timeout -s INT 100 $PY $T/test_flip_sparse_topology_gpu.py > $L/g1.log 2>&1 & P1=$!
timeout -s INT 100 $PY $T/test_flip_sparse_tables_ahead_gpu.py > $L/g2.log 2>&1 & P2=$!
wait $P0; echo "warm-up rc=$? elapsed $SECONDS"; grep -E "^sparse" $L/warm.log | head -2
wait $P1; echo "G1 topology file (TABLES_AHEAD=1) rc=$?"; pytest_lines $L/g1.log 12
wait $P2; echo "G2 tables-ahead file rc=$?"; pytest_lines $L/g2.log 12
echo "elapsed $SECONDS"
A0=VOXFX_SPARSE_TABLES_AHEAD=0; A1=VOXFX_SPARSE_TABLES_AHEAD=1
pace() {  # the step blocks, the ways in the order given
  timeout 40 python3 bench/flip_sparse.py --row 8m --pace 4 --rounds 16 --warm 2 --pace-kinds step "step marked" \
    "$@" > $L/ab_$SECONDS.log 2>&1
  echo "step A/B ($*) rc=$? elapsed $SECONDS"
  grep -vE "^(device|VoxFX|round)" $(ls -t $L/ab_*.log | head -1) | cut -c1-900
}
[ $SECONDS -lt 120 ] && pace --ab $A0 --ab $A1
[ $SECONDS -lt 130 ] && pace --ab $A1 --ab $A0
[ $SECONDS -lt 140 ] && { timeout 40 python3 bench/flip_sparse.py --row 8m --frames 36 --timing fast --time-cap 25 \
  --ab $A0 --ab $A1 > $L/frames.log 2>&1; echo "frames A/B rc=$? elapsed $SECONDS"; tail -6 $L/frames.log | cut -c1-300; }
[ $SECONDS -lt 160 ] && pace --ab $A0 --ab $A1
[ $SECONDS -lt 165 ] && pace --ab $A1 --ab $A0
[ $SECONDS -lt 170 ] && pace --ab $A0 --ab $A1 --ab $A1 VOXFX_SPARSE_OCCUPIED_AHEAD=1
[ $SECONDS -lt 180 ] && { timeout 20 python3 bench/flip_sparse.py --row 8m --steps 16 --warm 2 --ab $A0 --ab $A1 \
  > $L/row.log 2>&1; echo "row A/B rc=$? elapsed $SECONDS"; grep -vE "^(device|VoxFX)" $L/row.log | tail -6 | cut -c1-400; }
tar czf $OUT/logs.tgz -C /tmp s22f2 2>/dev/null
