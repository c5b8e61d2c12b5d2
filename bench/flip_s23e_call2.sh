# s23e's device call 2 (issue 24; VOXFX_SPARSE_TOPOLOGY_LEAN, kernels/flip/sparse_topology_lean.py): the new GPU
# file and the topology, tables-ahead, args, occupied-ahead and sparse FLIP files with "1", beside the warm-up;
# then the 8M row "0" against "1" in one process, both orders (the topology stage and the substep), --pace's step
# blocks both orders, the stage bench's fine marks and cProfile of "1", CuPy's small operations' host cost.
# Run from this tree's root (the copy under .cache/s23e); ≤ 200 s.
# A record of call 2: the lean way (VOXFX_SPARSE_TOPOLOGY_LEAN, commit 4f63834) was removed after it (slower: the
# tables' one allocation missed the memory pool), so this script no longer runs as is.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/s23e2; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
V=VOXFX_SPARSE_TOPOLOGY_LEAN
timeout 80 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1 & P0=$!
timeout -s INT 90 $PY $T/test_flip_sparse_topology_lean_gpu.py > $L/g1.log 2>&1 & P1=$!
env $V=1 timeout -s INT 90 $PY $T/test_flip_sparse_topology_gpu.py $T/test_flip_sparse_tables_ahead_gpu.py \
  $T/test_flip_sparse_topology_args_gpu.py $T/test_flip_sparse_occupied_ahead_gpu.py > $L/g2.log 2>&1 & P2=$!
env $V=1 timeout -s INT 90 $PY $T/test_flip_sparse_gpu.py > $L/g3.log 2>&1 & P3=$!
wait $P0; echo "warm-up rc=$? at $SECONDS"
wait $P1; echo "G1 lean file rc=$?"; pytest_lines $L/g1.log 12
wait $P2; echo "G2 topology, tables-ahead, args, occupied-ahead ($V=1) rc=$?"; pytest_lines $L/g2.log 12
wait $P3; echo "G3 sparse FLIP ($V=1) rc=$?"; pytest_lines $L/g3.log 12
echo "at $SECONDS"
row() { timeout 22 python3 bench/flip_sparse.py --row 8m --steps 12 --warm 2 "$@" > $L/row_$SECONDS.log 2>&1
  echo "row A/B ($*) rc=$? at $SECONDS"; grep -E "LEAN|sub-stages" $(ls -t $L/row_*.log | head -1) | cut -c1-300; }
pace() { timeout 34 python3 bench/flip_sparse.py --row 8m --pace 4 --rounds 10 --warm 2 --pace-kinds step "$@" \
  > $L/pace_$SECONDS.log 2>&1; echo "pace A/B ($*) rc=$? at $SECONDS"
  grep -vE "^(device|VoxFX)" $(ls -t $L/pace_*.log | head -1) | cut -c1-400; }
[ $SECONDS -lt 110 ] && row --ab $V=0 --ab $V=1
[ $SECONDS -lt 126 ] && row --ab $V=1 --ab $V=0
[ $SECONDS -lt 142 ] && pace --ab $V=0 --ab $V=1
[ $SECONDS -lt 160 ] && pace --ab $V=1 --ab $V=0
[ $SECONDS -lt 182 ] && { timeout 14 python3 bench/flip_sparse_topology_stage.py --row 8m --steps 8 --warm 2 --fine \
  --ab $V=1 --ab $V=0 --profile 6 > $L/stage.log 2>&1; echo "stage rc=$? at $SECONDS"
  grep -vE "^[0-9]+ \|" $L/stage.log | grep -vE "^(device|VoxFX)" | cut -c1-1500 | head -120; }
[ $SECONDS -lt 192 ] && { timeout 6 python3 bench/cupy_host_ops.py --calls 500 > $L/ops.log 2>&1; echo "ops rc=$?"
  grep -E "launch|address|empty" $L/ops.log; }
echo "end at $SECONDS"
tar czf $OUT/logs.tgz -C /tmp s23e2 2>/dev/null
