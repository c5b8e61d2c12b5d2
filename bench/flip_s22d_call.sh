# s22d's device call (issue 24): the substep as the simulation runs it (bench/flip_sparse.py --pace: blocks of
# substeps back to back, no sync of their own, beside the synced row in one simulation) on the 8M row; the
# device's pace, idle and busy time a substep. Run from this tree's root (the copy under .cache/s22d); ≤ 200 s.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/s22d; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
timeout 80 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1
echo "warm-up rc=$? elapsed $SECONDS"; grep -E "^sparse" $L/warm.log | head -2
timeout 70 python3 bench/flip_sparse.py --row 8m --pace 8 --rounds 3 --warm 2 > $L/pace.log 2>&1
echo "pace rc=$? elapsed $SECONDS"; grep -vE "^device" $L/pace.log | tail -30
[ $SECONDS -lt 150 ] && { timeout 40 python3 bench/flip_sparse.py --row 8m --steps 12 --warm 2 > $L/row.log 2>&1
  echo "row rc=$? elapsed $SECONDS"; grep -E "^sparse|sub-stages|CG iterations" $L/row.log; }
tar czf $OUT/logs.tgz -C /tmp s22d 2>/dev/null
