# s23j's device call (issue 24; for the next session's first call, not yet run): the topology's first pass
# (mark_occupied) folded into G2P + advection (VOXFX_SPARSE_G2P_MARKS=1: the block G2P writes the next substep's
# occupied flags, speed2, missed and the largest |v|², the next pipeline takes them and the step's speed read
# takes the maximum). The new GPU file with the occupied-ahead file beside the warm-up (the
# ahead's take/drop now counts per holder), then the 8M paced step in blocks of 4 a way (--pace: the marks' gain)
# and the substep-alternating A/B in both orders (one process each; there "1" never finds marks: its cost only).
# Run from this tree's root (the copy under .cache/s23j); ≤ 120 s on an H100.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/s23j; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
V=VOXFX_SPARSE_G2P_MARKS
timeout 50 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 --ab $V=0 --ab $V=1 > $L/warm.log 2>&1 & P0=$!
timeout -s INT 55 $PY $T/test_flip_sparse_g2p_marks_gpu.py > $L/g1.log 2>&1 & P1=$!
timeout -s INT 55 $PY $T/test_flip_sparse_occupied_ahead_gpu.py > $L/g2.log 2>&1 & P2=$!
wait $P0; echo "warm-up rc=$? elapsed $SECONDS"; grep -E "Error|Traceback" $L/warm.log | head -5
wait $P1; echo "G1 g2p-marks file rc=$?"; pytest_lines $L/g1.log 12
wait $P2; echo "G2 occupied-ahead file rc=$?"; pytest_lines $L/g2.log 12
echo "elapsed $SECONDS"
# the paced step (speed read + substep, as step runs them) in blocks of 4 a way: 3 of 4 substeps take the marks
[ $SECONDS -lt 70 ] && timeout 30 python3 bench/flip_sparse.py --row 8m --pace 4 --rounds 6 --pace-kinds step \
  "step marked" --ab $V=0 --ab $V=1 > $L/pace.log 2>&1; echo "pace 0,1 rc=$? at $SECONDS"
grep -E "^round|paced|^paired|G2P marks|lag" $L/pace.log | cut -c1-300
# substeps alternating (the brief's A/B): a "1" substep never follows a "1" one, so this times the marks' cost only
[ $SECONDS -lt 95 ] && timeout 22 python3 bench/flip_sparse.py --row 8m --steps 12 --warm 2 --ab $V=0 \
  --ab $V=1 > $L/ab1.log 2>&1; echo "A/B 0,1 rc=$? at $SECONDS"
grep -E "G2P_MARKS|sub-stages|substep" $L/ab1.log | cut -c1-300
[ $SECONDS -lt 100 ] && timeout 18 python3 bench/flip_sparse.py --row 8m --steps 12 --warm 2 --ab $V=1 \
  --ab $V=0 > $L/ab2.log 2>&1; echo "A/B 1,0 rc=$? at $SECONDS"
grep -E "G2P_MARKS|sub-stages|substep" $L/ab2.log | cut -c1-300
echo "elapsed $SECONDS"
tar czf $OUT/logs.tgz -C /tmp s23j 2>/dev/null
