# Session 23 call 1: the memory-release files alone (F4's failure), branch s23-tail's (the fast tail in the plain
# set-up module) set-up/cluster/fuse/workspace/pressure GPU files, the defaults against the old ways in one process
# (row and paced, both orders), the 65M frames with --stages --compile-log.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/s23c1; mkdir -p $L
timeout 90 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1 &
(cd .cache/s23/tail && timeout 90 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm_tail.log 2>&1) &
wait; echo "warm at $SECONDS"; tail -2 $L/warm_tail.log | cut -c1-200
timeout -s INT 90 python3 -m pytest -q -p no:cacheprovider -rfE $T/test_memory_release_gpu.py $T/test_backend_gpu.py > $L/alone.log 2>&1
echo "alone (main):"; pytest_lines $L/alone.log 6
cd .cache/s23/tail
timeout -s INT 150 python3 -m pytest -q -p no:cacheprovider -rfE $T/test_flip_sparse_setup_cluster_gpu.py $T/test_gpu_setup_gpu.py > $L/t1.log 2>&1 &
timeout -s INT 150 python3 -m pytest -q -p no:cacheprovider -rfE $T/test_flip_sparse_pressure_fuse_gpu.py $T/test_flip_sparse_setup_graph_gpu.py > $L/t2.log 2>&1 &
timeout -s INT 150 python3 -m pytest -q -p no:cacheprovider -rfE $T/test_flip_sparse_pressure_workspace_gpu.py > $L/t3.log 2>&1 &
timeout -s INT 150 python3 -m pytest -q -p no:cacheprovider -rfE $T/test_flip_sparse_pressure_gpu.py $T/test_flip_sparse_pressure_scan_join_gpu.py > $L/t4.log 2>&1 &
wait; cd ../../..
for k in 1 2 3 4; do echo "tail files $k:"; pytest_lines $L/t$k.log 6; done; echo "at $SECONDS"
OLD="VOXFX_SPARSE_SCAN_JOIN=0 VOXFX_SPARSE_G2P_TABLE_CODE=shift VOXFX_SPARSE_SCAN_WAY=0 VOXFX_SPARSE_CELLS_BRICK=apart VOXFX_SPARSE_SETUP_TAIL_GROUP=block VOXFX_SPARSE_G2P_CORNERS=table"
timeout 40 python3 bench/flip_sparse.py --row 8m --steps 12 --warm 2 --ab $OLD --ab VOXFX_SPARSE_SCAN_WAY=1 > $L/ab1.log 2>&1; echo "A/B old first rc=$? at $SECONDS"
grep -E "\| substep|sub-stages" $L/ab1.log | cut -c1-330
timeout 40 python3 bench/flip_sparse.py --row 8m --steps 12 --warm 2 --ab VOXFX_SPARSE_SCAN_WAY=1 --ab $OLD > $L/ab2.log 2>&1; echo "A/B new first rc=$? at $SECONDS"
grep -E "\| substep|sub-stages" $L/ab2.log | cut -c1-330
pace() { timeout 45 python3 bench/flip_sparse.py --row 8m --pace 4 --rounds 10 --warm 2 --pace-kinds step "$@" > $L/pace_$SECONDS.log 2>&1
  echo "pace A/B rc=$? at $SECONDS"; grep -vE "^(device|VoxFX|round)" $(ls -t $L/pace_*.log | head -1) | cut -c1-500; }
[ $SECONDS -lt 260 ] && pace --ab $OLD --ab VOXFX_SPARSE_SCAN_WAY=1
[ $SECONDS -lt 300 ] && pace --ab VOXFX_SPARSE_SCAN_WAY=1 --ab $OLD
[ $SECONDS -lt 330 ] && { timeout 110 python3 bench/flip_sparse.py --row 65m --frames 12 --timing fast --level-set --trim --stages --compile-log > $L/f65.log 2>&1
  echo "65M rc=$? at $SECONDS"; grep -E "^ *[0-9]+ \|" $L/f65.log | cut -c1-170; grep -iE "step stages|compile" $L/f65.log | tail -6 | cut -c1-400; }
echo "end at $SECONDS"
tar czf $OUT/s23c1.tgz -C /tmp s23c1
