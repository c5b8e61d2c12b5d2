# A record: VOXFX_LEVEL_SET_PLACE=tags-batch was removed after call 2 (no faster), so this script no longer runs as is.
# s23c's second device call (issue 24: the 65M user frame's level set, ~52 ms → ≤ 35). Call 1 ran the surface GPU
# files (split gather, tags-batch: passed) and the 8M frames, but its 65M frames stopped on a bench format error
# (a list in STATS), now fixed. Here: the new overlap file and the bricks/place files beside the warm-up, then the
# 65M Fast frames with the ways in one process (--level-set-modes; each way also timed as level_set() to the host,
# its bits checked against the device φ), then the 8M frames. Ways: lean (the base); the gather split in 4
# (VOXFX_LEVEL_SET_GATHER_SPLIT); the tags placed with the images' atomics together (VOXFX_LEVEL_SET_PLACE=tags-batch);
# φ copied while it is made (VOXFX_LEVEL_SET_COPY=overlap, 8 chunks); the three together, with the gather's work
# counters (VOXFX_LEVEL_SET_GATHER_WORK=1). Run from this tree's root (the copy under .cache/s23c); ≤ 200 s.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/s23c2; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
S=VOXFX_LEVEL_SET_GATHER_SPLIT; P=VOXFX_LEVEL_SET_PLACE; C=VOXFX_LEVEL_SET_COPY; W=VOXFX_LEVEL_SET_GATHER_WORK
MODES="lean lean:$S=4 lean:$P=tags-batch lean:$C=overlap lean:$S=4,$P=tags-batch,$C=overlap,$W=1"
timeout 80 python3 bench/flip_sparse.py --row 8m --frames 2 --timing fast --level-set --level-set-modes $MODES \
  > $L/warm.log 2>&1 & P0=$!
timeout -s INT 85 $PY $T/test_flip_surface_overlap_gpu.py $T/test_flip_surface_place_gpu.py > $L/g1.log 2>&1 & P1=$!
timeout -s INT 85 $PY $T/test_flip_surface_bricks_gpu.py > $L/g2.log 2>&1 & P2=$!
wait $P0; echo "warm-up rc=$? elapsed $SECONDS"; grep -E "Error|Traceback" $L/warm.log | head -5
wait $P1; echo "G1 overlap + place files rc=$?"; pytest_lines $L/g1.log 12
wait $P2; echo "G2 bricks file rc=$?"; pytest_lines $L/g2.log 12
echo "elapsed $SECONDS"
# each way's device ms + pinned copy per frame; frames 9-11's stage lines, shortened
summ() {
    grep -E "^[0-9]+ \|" "$1" | cut -d'|' -f1,5 | sed -e "s/VOXFX_LEVEL_SET_//g" | cut -c1-260
    grep -E "^   (lean|φ)" "$1" | sed -e "s/VOXFX_LEVEL_SET_//g; s/to host pinned/pinned/; s/pageable [0-9.]* ms;//" \
      | awk '/^   φ/ {print substr($0,1,110); next} {print substr($0,1,520)}' | tail -${2:-18}
}
timeout 115 python3 bench/flip_sparse.py --row 65m --frames 12 --timing fast --level-set --trim \
  --level-set-modes $MODES > $L/f65.log 2>&1
echo "65M frames rc=$? elapsed $SECONDS"; grep -E "Error|Traceback" $L/f65.log | head -3; summ $L/f65.log 18
[ $SECONDS -lt 178 ] && { timeout $((196 - SECONDS)) python3 bench/flip_sparse.py --row 8m --frames 12 --timing fast \
  --level-set --trim --level-set-modes lean lean:$S=4,$C=overlap lean:$S=4 > $L/f8.log 2>&1
  echo "8M frames rc=$? elapsed $SECONDS"; summ $L/f8.log 4; }
tar czf $OUT/logs.tgz -C /tmp s23c2 2>/dev/null
