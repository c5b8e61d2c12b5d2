# A record: VOXFX_LEVEL_SET_PLACE=tags-batch was removed after call 2 (no faster), so this script no longer runs as is.
# s23c's first device call (issue 24: the 65M user frame's level set, ~52 ms → ≤ 35): the lean gather with a
# node tile over 4 or 8 blocks (VOXFX_LEVEL_SET_GATHER_SPLIT) and the tags placed with a particle's images'
# atomics together (VOXFX_LEVEL_SET_PLACE=tags-batch); the gather's work counters (VOXFX_LEVEL_SET_GATHER_WORK=1).
# The surface GPU files beside the warm-up (which compiles every way), then the 65M Fast frames with the ways in one
# process (--level-set-modes: each frame's same particles, φ compared), then the 8M frames. Run from this tree's
# root (the copy under .cache/s23c); ≤ 200 s.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/s23c; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
S=VOXFX_LEVEL_SET_GATHER_SPLIT; P=VOXFX_LEVEL_SET_PLACE; W=VOXFX_LEVEL_SET_GATHER_WORK
MODES="lean lean:$S=4 lean:$S=8 lean:$P=tags-batch lean:$S=4,$P=tags-batch,$W=1"
timeout 80 python3 bench/flip_sparse.py --row 8m --frames 2 --timing fast --level-set --level-set-modes $MODES \
  > $L/warm.log 2>&1 & P0=$!
timeout -s INT 85 $PY $T/test_flip_surface_bricks_gpu.py > $L/g1.log 2>&1 & P1=$!
timeout -s INT 85 $PY $T/test_flip_surface_place_gpu.py $T/test_flip_surface_interior_gpu.py > $L/g2.log 2>&1 & P2=$!
wait $P0; echo "warm-up rc=$? elapsed $SECONDS"; grep -E "Error|Traceback" $L/warm.log | head -5
wait $P1; echo "G1 bricks file (split, work) rc=$?"; pytest_lines $L/g1.log 12
wait $P2; echo "G2 place (tags-batch) + interior files rc=$?"; pytest_lines $L/g2.log 12
echo "elapsed $SECONDS"
# each way's device ms per frame, then frames 6-11's stage lines
summ() {
    grep -E "^[0-9]+ \|" "$1" | cut -d'|' -f1,5 | cut -c1-230
    grep -E "^   (lean|φ)" "$1" | awk '/^   φ/ {print substr($0,1,150); next} {print substr($0,1,420)}' | tail -${2:-36}
}
timeout 110 python3 bench/flip_sparse.py --row 65m --frames 12 --timing fast --level-set --trim \
  --level-set-modes $MODES > $L/f65.log 2>&1
echo "65M frames rc=$? elapsed $SECONDS"; summ $L/f65.log 36
[ $SECONDS -lt 175 ] && { timeout $((195 - SECONDS)) python3 bench/flip_sparse.py --row 8m --frames 12 --timing fast \
  --level-set --trim --level-set-modes lean lean:$S=4,$P=tags-batch lean:$S=4 > $L/f8.log 2>&1
  echo "8M frames rc=$? elapsed $SECONDS"; summ $L/f8.log 12; }
tar czf $OUT/logs.tgz -C /tmp s23c 2>/dev/null
