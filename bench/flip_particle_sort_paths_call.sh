#!/usr/bin/env bash
# The device call for the particle sort's paths (issue 24, branch i24o2; kernels/flip/particle_sort.py,
# VOXFX_SPARSE_PARTICLE_SORT_PATH: argsort + one fancy index an array / argsort + gather_particles):
# bench/flip_sparse_particle_order.py --sort-only first, alone (8M Fast dam break: keys, argsort, the
# gathers by each path on frame 0's order and a shuffle), then the GPU tests in two groups side by side:
# the sort's own file (every path), and the checkpoint outputs / centred advection (its resume) with the
# sort every frame by the gather path ($WAY). Run in session 15 (call 4, with a third path, the pairs'
# sort, measured slower and removed after it).
OUT_DEFAULT=$OUT; . "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
timeout ${BENCH_S:-70} python3 bench/flip_sparse_particle_order.py --sort-only --repeat 5 > "$OUT/sort.log" 2>&1
echo "sort parts rc=$? elapsed $SECONDS"
grep -vE "^ *$|Warning|warn|VoxFX:" "$OUT/sort.log" | tail -12
A=${A:-"$T/test_flip_particle_sort_gpu.py"}
B=${B:-"$T/test_flip_checkpoint_outputs_gpu.py $T/test_flip_centred_advection_gpu.py"}
WAY=${WAY:-gather}
timeout ${TESTS_S:-110} python3 -m pytest -q -p no:cacheprovider -rf --durations=5 $A > "$OUT/tests_sort.log" 2>&1 &
PA=$!
sleep 3
VOXFX_SPARSE_PARTICLE_SORT=1 VOXFX_SPARSE_PARTICLE_SORT_PATH=$WAY timeout ${TESTS_S:-110} python3 -m pytest -q \
    -p no:cacheprovider -rf --durations=5 $B > "$OUT/tests_on.log" 2>&1 &
PB=$!
wait $PA; echo "tests (the sort's file) rc=$?"; pytest_lines "$OUT/tests_sort.log" 16
wait $PB; echo "tests (sort 1, $WAY) rc=$?"; pytest_lines "$OUT/tests_on.log" 16
echo "elapsed $SECONDS"
