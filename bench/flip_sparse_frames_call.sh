#!/usr/bin/env bash
# The device calls for issue 24's frames after the splash (helper i24f). Call 2: the 65M Fast
# frames before (VOXFX_LEVEL_SET_PINNED=class, VOXFX_LEVEL_SET_SORT_CELL_MAX=1024: main's ways)
# and after (the "domain" pinned block, SORT_CELL_MAX 8192), twice each alternating; the sort
# limit's A/B at 65M in one process (φ bits compared each frame) while the GPU test files run
# beside it; the 8M Fast frames before / after with each frame's stages (--stages); what
# page-locking costs (bench/pinned_lock.py). Each part under its own timeout; logs under $OUT.
# Session 15 ran call 1 only (bench/RESULTS.md, i24f); this call 2 is ready, not yet run.
OUT_DEFAULT=$OUT
. "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
FR="--frames 12 --timing fast --level-set --trim"
BEFORE="env VOXFX_LEVEL_SET_PINNED=class VOXFX_LEVEL_SET_SORT_CELL_MAX=1024"
AFTER="env VOXFX_LEVEL_SET_PINNED=domain"
rows() { grep -E "^[0-9]+ \||trimmed|set-up" "$1" | sed -E 's/pool trimmed before the frame/  trim/'; }
for i in 1 2; do
    timeout 40 $BEFORE python3 bench/flip_sparse.py --row 65m $FR > "$OUT/b65_$i.log" 2>&1
    echo "65M before $i rc=$?"; rows "$OUT/b65_$i.log"
    timeout 40 $AFTER python3 bench/flip_sparse.py --row 65m $FR > "$OUT/a65_$i.log" 2>&1
    echo "65M after $i rc=$?"; rows "$OUT/a65_$i.log"
    echo "elapsed $SECONDS"
done
timeout 60 python3 -m pytest -q -p no:cacheprovider -rf --durations=3 $T/test_flip_surface_bricks_gpu.py \
    $T/test_flip_surface_gpu.py $T/test_flip_closed_surface_gpu.py > "$OUT/testsA.log" 2>&1 &
A=$!
timeout 60 python3 -m pytest -q -p no:cacheprovider -rf --durations=3 $T/test_liquid_frame_outputs_gpu.py \
    $T/test_flip_sparse_output_gpu.py $T/test_flip_surface_interior_gpu.py > "$OUT/testsB.log" 2>&1 &
B=$!
timeout 45 $AFTER python3 bench/flip_sparse.py --row 65m $FR --level-set-modes \
    lean:VOXFX_LEVEL_SET_SORT_CELL_MAX=1024 lean > "$OUT/ab65.log" 2>&1
echo "65M sort A/B rc=$?"; grep -E "^[0-9]+ \||device .* ms|φ against" "$OUT/ab65.log" | sed -E 's/, \[pinned class copy\].*\[fullest\]/ ... fullest/'
wait $A; echo "tests A rc=$?"; pytest_lines "$OUT/testsA.log" 20
wait $B; echo "tests B rc=$?"; pytest_lines "$OUT/testsB.log" 20
echo "elapsed $SECONDS"
timeout 35 $BEFORE python3 bench/flip_sparse.py --row 8m $FR --stages > "$OUT/b8.log" 2>&1
echo "8M before rc=$?"; grep -E "^[0-9]+ \||level set device" "$OUT/b8.log"
timeout 35 $AFTER python3 bench/flip_sparse.py --row 8m $FR --stages > "$OUT/a8.log" 2>&1
echo "8M after rc=$?"; grep -E "^[0-9]+ \||level set device" "$OUT/a8.log"
echo "elapsed $SECONDS"
timeout 20 python3 bench/pinned_lock.py > "$OUT/lock.log" 2>&1; echo "pinned_lock rc=$?"; cat "$OUT/lock.log"
echo "elapsed $SECONDS"
