#!/usr/bin/env bash
# (Run in session 17's call 3 with the crowded-warp build "--mins 8", since removed.)
# Helper h17d's cut for a next call (≤ ~200 s; not yet run): the brick scatter split over blocks
# (VOXFX_SPARSE_SCATTER_SPLIT, flip_sparse_scatter.cu's SCATTER_SPLIT, off by default). Two GPU test groups
# in parallel (the new split file; the scatter, P2G tail and cell-type files with the switch on), then alone:
# P2G launch by launch at frame 0 and after 12 Fast frames with the heaviest bricks printed, the scatter's
# split builds (≥ T particles a block, ≤ K blocks a brick) against the default, the stage off / on
# (bench/flip_sparse_p2g_crowd.py), then the 8M Fast frames off / on in separate processes, alternating, two
# each (per frame step+level set=user frame ms (p2g host/device ms), and frames 6–11 summed). Logs in
# /tmp/h17d2, tarred to $OUT/logs.tgz.
OUT_DEFAULT=$OUT
. bench/_device_call.sh
L=/tmp/h17d2; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
timeout -s INT ${TESTS_S:-70} $PY $T/test_flip_sparse_scatter_split_gpu.py > $L/t1.log 2>&1 & P1=$!
VOXFX_SPARSE_SCATTER_SPLIT=on timeout -s INT ${TESTS_S:-70} $PY $T/test_flip_sparse_scatter_gpu.py \
    $T/test_flip_sparse_p2g_tail_gpu.py $T/test_flip_sparse_p2g_cells_gpu.py > $L/t2.log 2>&1 & P2=$!
wait $P1; echo "split file rc=$?"; pytest_lines $L/t1.log 10
wait $P2; echo "scatter, p2g tail, cells files (split on) rc=$?"; pytest_lines $L/t2.log 8
echo "elapsed $SECONDS"
timeout ${BENCH_S:-45} python3 bench/flip_sparse_p2g_crowd.py --repeat 5 --splits 4096x16 2048x16 8192x32 \
    1024x32 --way VOXFX_SPARSE_SCATTER_SPLIT=off --way VOXFX_SPARSE_SCATTER_SPLIT=on > $L/p2g_split.log 2>&1
echo "p2g split bench rc=$? elapsed $SECONDS"
grep -vE "^ *$|Warning|warn|VoxFX:|^   frame [0-9]" $L/p2g_split.log | cut -c1-1000 | tail -16
FR="--row 8m --frames 12 --timing fast --level-set --trim --stages"
for i in 1 2; do
    for way in off on; do
        [ $SECONDS -gt 172 ] && { echo "skipped $way #$i (elapsed $SECONDS)"; continue; }
        VOXFX_SPARSE_SCATTER_SPLIT=$way timeout ${FRAMES_S:-27} python3 bench/flip_sparse.py $FR > $L/$way$i.log 2>&1
        echo "$way #$i rc=$? elapsed $SECONDS"; frame_sums $L/$way$i.log p2g
    done
done
tar czf $OUT/logs.tgz -C /tmp h17d2 2>/dev/null
