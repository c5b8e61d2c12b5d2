# s23e's device call 1 (issue 24): where the topology stage's host time goes at 8M, piece by piece, on the
# code as it is (main f505831): the stage bench with its fine marks (host gaps mark to mark) and cProfile
# (own and cumulative), CuPy's small operations' host cost, the row. Run from this tree's root; ≤ 200 s.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/s23e; mkdir -p $L
timeout 80 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1; echo "warm-up rc=$? at $SECONDS"
timeout 40 python3 bench/cupy_host_ops.py --calls 1000 > $L/ops.log 2>&1; echo "ops rc=$? at $SECONDS"
cat $L/ops.log | cut -c1-160
timeout 50 python3 bench/flip_sparse_topology_stage.py --row 8m --steps 12 --warm 2 --fine --profile 8 > $L/stage.log 2>&1
echo "stage rc=$? at $SECONDS"
grep -vE "^[0-9]+ \|" $L/stage.log | cut -c1-2000
[ $SECONDS -lt 170 ] && timeout 25 python3 bench/flip_sparse.py --row 8m --steps 12 --warm 2 > $L/row.log 2>&1
echo "row rc=$? at $SECONDS"; grep -E "topology|sub-stages" $L/row.log | cut -c1-300
tar czf $OUT/logs.tgz -C /tmp s23e 2>/dev/null
