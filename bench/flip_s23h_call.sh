# s23h's device call, written for the next session's first call (issue 24: the 65M frame's level set 50 → ≤ 35 ms;
# the lean gather's lanes balanced, VOXFX_LEVEL_SET_GATHER_BALANCE=on, proven on the CPU only). ≤ 120 s on an H100:
# the new GPU file (balanced = the gather's bits, split 1/4/8, closed and open, a crowded pile, the overlapped copy,
# the work model) beside an 8M warm-up that compiles both ways; then the 65M Fast frames 0–11 with both ways in one
# process (bench/_sparse_frames.py reverses their order every other frame and prints "nodes differing" against the
# first way) and the gather's work counters (VOXFX_LEVEL_SET_GATHER_WORK=1: lane_slots against balance_slots, the
# model). Run from this tree's root (a copy under .cache/s23h).
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/s23h; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
B=VOXFX_LEVEL_SET_GATHER_BALANCE; W=VOXFX_LEVEL_SET_GATHER_WORK
MODES="lean lean:$B=on lean:$B=on,$W=1"
timeout 45 python3 bench/flip_sparse.py --row 8m --frames 2 --timing fast --level-set --level-set-modes $MODES \
  > $L/warm.log 2>&1 & P0=$!
timeout -s INT 50 $PY $T/test_flip_surface_balance_gpu.py > $L/g1.log 2>&1 & P1=$!
wait $P0; echo "warm-up rc=$? elapsed $SECONDS"; grep -E "Error|Traceback" $L/warm.log | head -5
wait $P1; echo "G1 balance file rc=$?"; pytest_lines $L/g1.log 12
summ() {  # frames' lines; each way's device ms and stages (gather), the φ check, the counters
    grep -E "^[0-9]+ \|" "$1" | cut -d'|' -f1,5 | sed -e "s/VOXFX_LEVEL_SET_//g" | cut -c1-200
    grep -E "^   (lean|φ)" "$1" | sed -e "s/VOXFX_LEVEL_SET_//g; s/to host pinned/pinned/; s/pageable [0-9.]* ms;//" \
      | awk '/^   φ/ {print substr($0,1,110); next} {print substr($0,1,420)}' | tail -${2:-12}
}
timeout $((112 - SECONDS)) python3 bench/flip_sparse.py --row 65m --frames 12 --timing fast --level-set --trim \
  --level-set-modes $MODES > $L/f65.log 2>&1
echo "65M frames rc=$? elapsed $SECONDS"; grep -E "Error|Traceback" $L/f65.log | head -3; summ $L/f65.log 12
grep -E "^   lean" $L/f65.log | sed -e "s/VOXFX_LEVEL_SET_//g" | awk '{for (i = 1; i <= NF; ++i) if ($i ~ /^gather/) \
  g[$1] += $(i + 1)} END {for (m in g) printf "gather sum frames 0-11: %s %.2f ms\n", m, g[m]}'
tar czf $OUT/logs.tgz -C /tmp s23h 2>/dev/null
