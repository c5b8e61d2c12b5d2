# h21k's device call (issue 24): the topology stage's launch scalars made once (sparse_topology_args,
# VOXFX_SPARSE_TOPOLOGY_ARGS). Run from this tree's copy (.cache/h21k) with main's tree in base/: the
# topology/reach/margins GPU files and the new args file beside the warm-up, then the stage bench (main and
# this tree alternating, 2 processes each; this tree's substeps alternate kept / plain in one simulation), the
# 8M row (alternating, 2 each), CuPy's host costs. ≤ 120 s of script.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/h21k; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
timeout 100 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1 & P0=$!
timeout -s INT 75 $PY $T/test_flip_sparse_topology_args_gpu.py $T/test_flip_sparse_topology_gpu.py > $L/g1.log 2>&1 & P1=$!
timeout -s INT 75 $PY $T/test_flip_sparse_reach_gpu.py $T/test_flip_sparse_margins_gpu.py $T/test_flip_sparse_device_margin_gpu.py $T/test_sparse_mac_retopologize_gpu.py > $L/g2.log 2>&1 & P2=$!
wait $P0; echo "warm-up rc=$? elapsed $SECONDS"
wait $P1; echo "G1 args, topology rc=$?"; pytest_lines $L/g1.log 12
wait $P2; echo "G2 reach, margins, device margin, retopologize rc=$?"; pytest_lines $L/g2.log 12
echo "elapsed $SECONDS"
S="--row 8m --steps 8 --warm 2"
R="--row 8m --steps 8 --warm 2"
for i in 1 2; do  # pairs interleaved: a cut-short call still has one of each
  [ $SECONDS -gt 100 ] && continue
  timeout 25 python3 base/bench/flip_sparse_topology_stage.py $S > $L/stage_main$i.log 2>&1; echo "stage main #$i rc=$? at $SECONDS"
  grep -E "^median µs, bricks changed|^stage ms|bricks, capacity" $L/stage_main$i.log | cut -c1-400
  timeout 25 python3 bench/flip_sparse_topology_stage.py $S --ab '' --ab VOXFX_SPARSE_TOPOLOGY_ARGS=plain > $L/stage_h21k$i.log 2>&1; echo "stage h21k #$i rc=$? at $SECONDS"
  grep -E "^== |^median µs, bricks changed|^stage ms|bricks, capacity" $L/stage_h21k$i.log | cut -c1-400
  [ $SECONDS -gt 108 ] && continue
  timeout 15 python3 base/bench/flip_sparse.py $R > $L/row_main$i.log 2>&1; echo "row main #$i rc=$? at $SECONDS"
  grep -E "^sparse|sub-stages" $L/row_main$i.log | cut -c1-300
  timeout 15 python3 bench/flip_sparse.py $R > $L/row_h21k$i.log 2>&1; echo "row h21k #$i rc=$? at $SECONDS"
  grep -E "^sparse|sub-stages" $L/row_h21k$i.log | cut -c1-300
done
[ $SECONDS -lt 112 ] && timeout 8 python3 bench/cupy_host_ops.py --calls 500 > $L/ops.log 2>&1; grep -E "launch|CScalar|empty\(" $L/ops.log
echo "elapsed $SECONDS"
tar czf $OUT/logs.tgz -C /tmp h21k 2>/dev/null
