#!/usr/bin/env bash
# The device call for the particle order (issue 24, branch i24o; kernels/flip/particle_sort.py,
# VOXFX_SPARSE_PARTICLE_SORT): bench/flip_sparse_particle_order.py first, alone (8M Fast dam break:
# P2G / G2P stages by particle order at frame 0 and after the splash, the frames with the sort off
# and every 1 / 2 frames in turn), then the GPU tests in two groups side by side: the sort's own
# file and the sparse solver / sim / checkpoint files with the default (sort off); accuracy,
# checkpoint outputs and centred advection (its resume) with the sort on ($ON, every frame unless
# given). Call 1 ran it as such (the bench's --sorts 1 2); call 2 with SORTS=, ON=auto and
# A="the sort's file + checkpoint outputs", B="accuracy + test_flip_sparse_gpu.py".
OUT_DEFAULT=$OUT; . "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
timeout ${BENCH_S:-95} python3 bench/flip_sparse_particle_order.py --repeat 3 --runs 2 ${SORTS:-} \
    > "$OUT/order.log" 2>&1
echo "order rc=$? elapsed $SECONDS"
grep -vE "^ *$|Warning|warn|VoxFX:" "$OUT/order.log" | tail -70
A=${A:-"$T/test_flip_particle_sort_gpu.py $T/test_flip_sparse_gpu.py $T/test_flip_sim_gpu.py $T/test_flip_checkpoint_gather_gpu.py"}
B=${B:-"$T/test_flip_accuracy_gpu.py $T/test_flip_checkpoint_outputs_gpu.py $T/test_flip_centred_advection_gpu.py"}
ON=${ON:-1}  # the sort's way for group B
timeout ${TESTS_S:-85} python3 -m pytest -q -p no:cacheprovider -rf --durations=5 $A > "$OUT/tests_off.log" 2>&1 &
PA=$!
sleep 3
VOXFX_SPARSE_PARTICLE_SORT=$ON timeout ${TESTS_S:-85} python3 -m pytest -q -p no:cacheprovider -rf --durations=5 $B \
    > "$OUT/tests_sort1.log" 2>&1 &
PB=$!
wait $PA; echo "tests (sort off) rc=$?"; pytest_lines "$OUT/tests_off.log" 16; head -c 600 "$OUT/tests_off.log" | head -3
wait $PB; echo "tests (sort $ON) rc=$?"; pytest_lines "$OUT/tests_sort1.log" 16; head -c 600 "$OUT/tests_sort1.log" | head -3
echo "elapsed $SECONDS"
