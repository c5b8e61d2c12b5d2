#!/usr/bin/env bash
# The device call for issue 24's frames after the splash (helper i24f): the 8M Fast frames
# with each frame's step stages, cudaMallocs, solvers built and level set stages (--stages,
# --compile-log: where frames 6–11's growth and frame 10's spike go), the level set's
# crowded-cell limit A/B in one process (VOXFX_LEVEL_SET_SORT_CELL_MAX 1024 / 4096 / 8192, the
# same φ bits checked every frame) while the GPU test files run beside it, then the 65M Fast
# frames with the next pinned size class page-locked ahead (VOXFX_LEVEL_SET_PIN_AHEAD, default
# on; session 14's numbers the "before"). Each part under its own timeout; logs under $OUT.
OUT_DEFAULT=$OUT
. "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
FR="--frames 12 --timing fast --level-set --trim"
timeout ${PLAIN_S:-40} python3 bench/flip_sparse.py --row 8m $FR --stages --compile-log > "$OUT/plain8.log" 2>&1
echo "8M plain rc=$?"; grep -vE "^ *$|Warning|warn" "$OUT/plain8.log" | tail -60
echo "elapsed $SECONDS"
timeout ${TESTS_S:-75} python3 -m pytest -q -p no:cacheprovider -rf --durations=3 $T/test_flip_surface_bricks_gpu.py \
    $T/test_flip_surface_gpu.py $T/test_flip_closed_surface_gpu.py $T/test_flip_surface_interior_gpu.py \
    > "$OUT/testsA.log" 2>&1 &
A=$!
timeout ${TESTS_S:-75} python3 -m pytest -q -p no:cacheprovider -rf --durations=3 $T/test_liquid_frame_outputs_gpu.py \
    $T/test_flip_sparse_output_gpu.py $T/test_flip_checkpoint_outputs_gpu.py $T/test_flip_surface_compile_ahead_gpu.py \
    > "$OUT/testsB.log" 2>&1 &
B=$!
timeout ${AB_S:-45} python3 bench/flip_sparse.py --row 8m $FR --stages --level-set-modes lean \
    lean:VOXFX_LEVEL_SET_SORT_CELL_MAX=4096 lean:VOXFX_LEVEL_SET_SORT_CELL_MAX=8192 > "$OUT/ab8.log" 2>&1
echo "8M A/B rc=$?"; grep -vE "^ *$|Warning|warn|step stages" "$OUT/ab8.log" | tail -60
wait $A; echo "tests A rc=$?"; pytest_lines "$OUT/testsA.log" 20
wait $B; echo "tests B rc=$?"; pytest_lines "$OUT/testsB.log" 20
echo "elapsed $SECONDS"
timeout $(( ${END_S:-195} - SECONDS )) python3 bench/flip_sparse.py --row 65m $FR > "$OUT/frames65.log" 2>&1
echo "65M rc=$?"; grep -vE "^ *$|Warning|warn" "$OUT/frames65.log" | tail -60
echo "elapsed $SECONDS"
