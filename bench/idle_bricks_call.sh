#!/usr/bin/env bash
# Helper h18f's device call (≤ ~200 s on an H100): the P2G tail's idle-brick way (VOXFX_SPARSE_P2G_TAIL=live).
# The GPU tail file (live against apart bit for bit, whole runs every tail) and the sparse GPU files under live;
# P2G launch by launch at frame 0 and after 12 Fast frames, apart / tail / live (with the idle bricks' count and
# the ways' output digests); then the 8M Fast frames apart / live in separate processes alternating, two each
# (tail once if time is left). Logs in /tmp/h18f.
OUT_DEFAULT=$OUT
. "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
L=/tmp/h18f; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
timeout -s INT 100 $PY $T/test_flip_sparse_p2g_tail_gpu.py > $L/g1.log 2>&1 &
P1=$!
timeout -s INT 100 env VOXFX_SPARSE_P2G_TAIL=live $PY $T/test_flip_sparse_gpu.py $T/test_flip_sparse_p2g_cells_gpu.py \
    > $L/g2.log 2>&1 &
P2=$!
timeout -s INT 100 env VOXFX_SPARSE_P2G_TAIL=live $PY $T/test_flip_centred_advection_gpu.py \
    $T/test_flip_sparse_scatter_gpu.py > $L/g3.log 2>&1 &
P3=$!
wait $P1; echo "p2g tail file rc=$?"; pytest_lines $L/g1.log 8
wait $P2; echo "sparse + p2g cells files, TAIL=live rc=$?"; pytest_lines $L/g2.log 8
wait $P3; echo "centred advection + scatter files, TAIL=live rc=$?"; pytest_lines $L/g3.log 8
echo "elapsed $SECONDS"
W=VOXFX_SPARSE_P2G_TAIL
timeout ${BENCH_S:-60} python3 bench/flip_sparse_p2g_crowd.py --repeat 5 --splits --way $W=apart --way $W=tail \
    --way $W=live > $L/p2g.log 2>&1
echo "p2g launches rc=$? elapsed $SECONDS"
grep -vE "^ *$|Warning|warn|VoxFX:|^   frame [0-9]" $L/p2g.log | cut -c1-1200 | tail -16
FR="--row 8m --frames 12 --timing fast --level-set --trim --stages"
for i in 1 2; do
    for way in apart live; do
        VOXFX_SPARSE_P2G_TAIL=$way timeout ${FRAMES_S:-40} python3 bench/flip_sparse.py $FR > $L/$way$i.log 2>&1
        echo "$way #$i rc=$? elapsed $SECONDS"; frame_sums $L/$way$i.log p2g; frame_sums $L/$way$i.log extrapolate | tail -1
    done
done
if [ $SECONDS -lt 165 ]; then
    VOXFX_SPARSE_P2G_TAIL=tail timeout ${FRAMES_S:-40} python3 bench/flip_sparse.py $FR > $L/tail1.log 2>&1
    echo "tail #1 rc=$? elapsed $SECONDS"; frame_sums $L/tail1.log p2g; frame_sums $L/tail1.log extrapolate | tail -1
fi
echo "elapsed $SECONDS"
tar czf $OUT/logs.tgz -C /tmp h18f 2>/dev/null
