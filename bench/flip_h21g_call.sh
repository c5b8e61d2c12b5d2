# h21g's device call (issue 24): the block G2P kernel's corners from the particle's brick table
# (VOXFX_SPARSE_G2P_CORNERS=table, now auto's) — the G2P GPU files (every corners, the same bits) in parallel
# with a warm-up, then the kernel alone from one state (bench/flip_sparse_g2p_project.py: select and table at
# 4x256 and 8x128, the ways in turn), then the 8M row in separate processes, main's tree (base/, `git archive
# main`) and this one alternating, 2 each. Run from this tree's root (the copy under .cache/h21g); ≤ 160 s.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/h21g; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
timeout 80 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1 & P0=$!
timeout -s INT 80 $PY $T/test_flip_sparse_g2p_block_gpu.py > $L/g1.log 2>&1 & P1=$!
timeout -s INT 80 $PY $T/test_flip_sparse_g2p_gpu.py > $L/g2.log 2>&1 & P2=$!
wait $P0; echo "warm-up rc=$? elapsed $SECONDS"
wait $P1; echo "G1 g2p block file rc=$?"; pytest_lines $L/g1.log 10
wait $P2; echo "G2 g2p file rc=$?"; pytest_lines $L/g2.log 10
echo "elapsed $SECONDS"
timeout 50 python3 bench/flip_sparse_g2p_project.py --repeat 7 --shapes select:4x256 table:4x256 select:8x128 \
    table:8x128 > $L/stage.log 2>&1
echo "stage bench rc=$? elapsed $SECONDS"; grep -E "^(G2P|case|end of|time-centred)" $L/stage.log
i=0
for w in base new base new; do
  [ $SECONDS -gt 140 ] && { echo "row $w skipped (time)"; continue; }
  i=$((i+1))
  if [ $w = base ]; then (cd base && timeout 25 python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2) > $L/row$i.log 2>&1
  else timeout 25 python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2 > $L/row$i.log 2>&1; fi
  echo "row $i $w rc=$? elapsed $SECONDS"
  grep -E "^sparse" $L/row$i.log | cut -d'|' -f6-13; grep -E "CG iterations" $L/row$i.log | cut -c1-200
done
echo "elapsed $SECONDS"
tar czf $OUT/logs.tgz -C /tmp h21g 2>/dev/null
