#!/usr/bin/env bash
# The device call for the frame's level set (issue 24, branch i24s; surface_gpu "lean", the
# default): the surface GPU files (lean against bricks and legacy bit for bit, its gather built
# for 2 and 3 blocks an SM, the quotient over whole binades, the default way against the CPU
# reference, the open liquid's region with and without particle_bounds), then
# bench/flip_level_set.py on the 8M and 65M dam breaks (the ways alternating in one process;
# at 65M lean without and with VOXFX_LEVEL_SET_BOUNDS), then bench/flip_sparse.py's 8M user
# frames with the level set each way (device + the pinned copy to the host). Each part under
# its own timeout (≤ ~160 s in all); logs under $OUT.
. "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
timeout ${TESTS_S:-50} python3 -m pytest -q -p no:cacheprovider -rf --durations=3 $T/test_flip_surface_bricks_gpu.py \
    $T/test_flip_surface_gpu.py $T/test_flip_closed_surface_gpu.py $T/test_flip_sparse_output_gpu.py \
    > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; pytest_lines "$OUT/tests.log" 20
echo "elapsed $SECONDS"
timeout ${AB8_S:-35} python3 bench/flip_level_set.py --res 256 --particles 8e6 --substeps ${SUBSTEPS:-24} \
    --modes bricks lean --lean-blocks 2 3 --repeat ${REPEAT:-8} > "$OUT/ab8.log" 2>&1
echo "8M rc=$?"; grep -vE "^ *$|Warning|warn" "$OUT/ab8.log" | tail -7
echo "elapsed $SECONDS"
timeout ${AB65_S:-35} python3 bench/flip_level_set.py --res 512 --particles 65.5e6 --substeps ${SUBSTEPS65:-4} \
    --modes bricks lean --lean-blocks 2 3 --region-bounds 0 1 --repeat ${REPEAT65:-4} > "$OUT/ab65.log" 2>&1
echo "65M rc=$?"; grep -vE "^ *$|Warning|warn" "$OUT/ab65.log" | tail -7
echo "elapsed $SECONDS"
timeout ${FRAMES_S:-30} python3 bench/flip_sparse.py --row 8m --frames ${FRAMES:-3} --level-set \
    --level-set-modes bricks lean > "$OUT/frames8.log" 2>&1
echo "frames rc=$?"; grep -E "^[0-9]+ \||^   " "$OUT/frames8.log" | tail -12
echo "elapsed $SECONDS"
