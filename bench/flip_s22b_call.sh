# s22b's device call (issue 24): the set-up's one-launch tail on one cluster of blocks
# (VOXFX_SPARSE_SETUP_TAIL_GROUP cluster / cluster16: mgs_tail_levels_cluster*; "block" the old way, the
# default). The new GPU file (cluster against block: tables on random scenes, dam breaks bit for bit) beside
# the warm-up, and the set-up files (fuse, workspace, set-up graph, scan join) with "cluster" in the
# environment; then each set-up kernel's device ms for the groups and the tail's start (TAIL_BOUND 2048:
# level 4 launched, the tail from 5; 32768: the tail from level 3), and the 8M row's A/B in one process,
# both orders. ≤ 200 s of script.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/s22b; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
G=VOXFX_SPARSE_SETUP_TAIL_GROUP
timeout 80 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1 & P0=$!
timeout -s INT 85 $PY $T/test_flip_sparse_setup_cluster_gpu.py > $L/g1.log 2>&1 & P1=$!
env $G=cluster timeout -s INT 85 $PY $T/test_flip_sparse_pressure_fuse_gpu.py $T/test_flip_sparse_pressure_workspace_gpu.py \
  $T/test_flip_sparse_setup_graph_gpu.py $T/test_flip_sparse_pressure_scan_join_gpu.py > $L/g2.log 2>&1 & P2=$!
wait $P0; echo "warm-up rc=$? elapsed $SECONDS"
wait $P1; echo "G1 cluster tail file rc=$?"; pytest_lines $L/g1.log 12
wait $P2; echo "G2 fuse, workspace, setup graph, scan join ($G=cluster) rc=$?"; pytest_lines $L/g2.log 12
echo "elapsed $SECONDS"
[ $SECONDS -lt 100 ] && timeout 42 python3 bench/flip_sparse_setup_kernels.py --substeps 4 --set $G=block \
  --set $G=cluster --set $G=cluster16 --set $G=block sparse_pressure_setup.TAIL_BOUND=2048 \
  --set $G=cluster sparse_pressure_setup.TAIL_BOUND=32768 --set $G=cluster16 sparse_pressure_setup.TAIL_BOUND=32768 \
  > $L/kernels.log 2>&1; echo "kernels rc=$? at $SECONDS"
grep -E "^device|^way|coarse levels\]|mgs_tail|stages|bricks" $L/kernels.log | head -60 | cut -c1-200
[ $SECONDS -lt 140 ] && timeout 28 python3 bench/flip_sparse.py --row 8m --steps 12 --warm 2 \
  --ab $G=block --ab $G=cluster > $L/ab.log 2>&1; echo "A/B rc=$? at $SECONDS"
grep -vE "^\s*$" $L/ab.log | tail -14 | cut -c1-300
[ $SECONDS -lt 170 ] && timeout 28 python3 bench/flip_sparse.py --row 8m --steps 12 --warm 2 \
  --ab $G=cluster --ab $G=block > $L/ba.log 2>&1; echo "B/A rc=$? at $SECONDS"
grep -vE "^\s*$" $L/ba.log | tail -14 | cut -c1-300
echo "elapsed $SECONDS"
tar czf $OUT/logs.tgz -C /tmp s22b 2>/dev/null
