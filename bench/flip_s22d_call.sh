# s22d's device calls (issue 24): the substep as the simulation runs it (bench/flip_sparse.py --pace: blocks of
# substeps back to back, no sync of their own, beside the synced row in one simulation) on the 8M row; the
# device's pace, idle and busy time a substep. Call 1 (c250764): the first pace. Call 2: the GPU files for the
# topology's first kernel queued ahead of the step's speed read (VOXFX_SPARSE_OCCUPIED_AHEAD, the new file, the
# topology files, test_flip_sparse_gpu.py at "0" and at "1"), the pace with blocks of 3 whose order turns each
# round, then the step blocks "0" against "1" alternating in one simulation (both orders), and the user's Fast
# frames at "0", "1", "0" (separate processes). Run from this tree's root (the copy under .cache/s22d); ≤ 200 s.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/s22d; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
timeout 80 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1 & P0=$!
timeout -s INT 100 $PY $T/test_flip_sparse_occupied_ahead_gpu.py $T/test_flip_sparse_topology_gpu.py \
  $T/test_flip_sparse_topology_args_gpu.py > $L/g1.log 2>&1 & P1=$!
timeout -s INT 100 $PY $T/test_flip_sparse_gpu.py > $L/g2.log 2>&1 & P2=$!
VOXFX_SPARSE_OCCUPIED_AHEAD=1 timeout -s INT 100 $PY $T/test_flip_sparse_gpu.py > $L/g3.log 2>&1 & P3=$!
wait $P0; echo "warm-up rc=$? elapsed $SECONDS"; grep -E "^sparse" $L/warm.log | head -2
wait $P1; echo "G1 ahead + topology files rc=$?"; pytest_lines $L/g1.log 12
wait $P2; echo "G2 test_flip_sparse_gpu (defaults) rc=$?"; pytest_lines $L/g2.log 8
wait $P3; echo "G3 test_flip_sparse_gpu (OCCUPIED_AHEAD=1) rc=$?"; pytest_lines $L/g3.log 8
echo "elapsed $SECONDS"
timeout 40 python3 bench/flip_sparse.py --row 8m --pace 3 --rounds 4 --warm 2 > $L/pace.log 2>&1
echo "pace rc=$? elapsed $SECONDS"; grep -vE "^(device|VoxFX)" $L/pace.log | cut -c1-1600
A0=VOXFX_SPARSE_OCCUPIED_AHEAD=0; A1=VOXFX_SPARSE_OCCUPIED_AHEAD=1
for order in "$A0 $A1" "$A1 $A0"; do set -- $order
  [ $SECONDS -lt 165 ] && { timeout 30 python3 bench/flip_sparse.py --row 8m --pace 4 --rounds 8 --warm 2 \
    --pace-kinds step "step marked" --ab $1 --ab $2 > $L/ab_$1.log 2>&1
    echo "step A/B ($1 first) rc=$? elapsed $SECONDS"; grep -vE "^(device|VoxFX|round)" $L/ab_$1.log | cut -c1-900; }
done
for way in 0 1 0; do
  [ $SECONDS -lt 178 ] && { VOXFX_SPARSE_OCCUPIED_AHEAD=$way timeout 22 python3 bench/flip_sparse.py --row 8m \
    --frames 12 --timing fast --time-cap 12 > $L/frames_$way.log 2>&1
    echo "frames AHEAD=$way rc=$? elapsed $SECONDS"; awk -F'|' '/^[0-9]+ \|/{printf "%s:%s ", $1, $3} END{print ""}' \
      $L/frames_$way.log; }
done
tar czf $OUT/logs.tgz -C /tmp s22d 2>/dev/null
