#!/usr/bin/env bash
# For the next session's first call (issue 24, session 17; ≤ ~150 s on an H100, not yet run): the P2G
# stage's tail fused (VOXFX_SPARSE_P2G_TAIL=fused: the first extrapolation ring in the division's pass, the
# second ring, FLIP's old faces and the boundaries in one kernel) after the splash. It was measured only
# before the splash (the 8M row: 1.008 against 0.983 ms in one process, within the spread; the same 662 MiB
# live either way); after 12 Fast frames the pool holds ~6.2M cells (1.6M at frame 0) and P2G's passes over
# them grow 0.22 → ~0.78 ms a substep (h17d), so joining two of them may pay there. The P2G tail GPU file,
# then P2G launch by launch at frame 0 and after 12 frames with both ways (bench/flip_sparse_p2g_crowd.py),
# then the 8M Fast frames apart / fused in separate processes, alternating, two each: each frame's
# step + level set = user frame ms (P2G host/device ms), and frames 6–11 summed. Logs in /tmp/p2g_tail2.
OUT_DEFAULT=$OUT
. "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
L=/tmp/p2g_tail2; mkdir -p $L
timeout -s INT ${TESTS_S:-60} python3 -m pytest -q -p no:cacheprovider -rfE $T/test_flip_sparse_p2g_tail_gpu.py \
    > $L/t1.log 2>&1; echo "P2G tail file rc=$?"; pytest_lines $L/t1.log 8
timeout ${BENCH_S:-45} python3 bench/flip_sparse_p2g_crowd.py --repeat 5 --splits \
    --way VOXFX_SPARSE_P2G_TAIL=apart --way VOXFX_SPARSE_P2G_TAIL=fused > $L/p2g.log 2>&1
echo "p2g launches rc=$? elapsed $SECONDS"
grep -vE "^ *$|Warning|warn|VoxFX:|^   frame [0-9]" $L/p2g.log | cut -c1-900 | tail -12
FR="--row 8m --frames 12 --timing fast --level-set --trim --stages"
for i in 1 2; do
    for way in apart fused; do
        VOXFX_SPARSE_P2G_TAIL=$way timeout ${FRAMES_S:-40} python3 bench/flip_sparse.py $FR > $L/$way$i.log 2>&1
        echo "$way #$i rc=$? elapsed $SECONDS"; frame_sums $L/$way$i.log p2g
    done
done
tar czf $OUT/logs.tgz -C /tmp p2g_tail2 2>/dev/null
