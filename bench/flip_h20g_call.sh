# h20g's device call, for the next session (issue 24; not run in session 20): the topology by classes past 256
# cells in a closed box (sparse_reach.class_limit) — the reach GPU file and the topology/margins files in
# parallel, then the 65M Fast frames with the brick smoother (session 20: frames 10–11 22–34 s on the array path)
# and with "rb", each to frame 11 with --stages (the "topology reads" line: "array path N, largest margin M
# cells"). ≤ 200 s of script (each 65M run ~25 s with its set-up; the brick one was ~70 s with the array path).
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/h20g; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
frames() { grep -E "^[0-9]+ \|" "$1" | awk -F'|' '{gsub(/ /,"",$1); u=$10; gsub(/ /,"",u); printf "%s:%s ", $1,u}'; echo; }
timeout 100 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1 & P0=$!
timeout -s INT 120 $PY $T/test_flip_sparse_reach_gpu.py $T/test_flip_sparse_margins_gpu.py > $L/g1.log 2>&1 & P1=$!
timeout -s INT 120 $PY $T/test_flip_sparse_device_margin_gpu.py $T/test_flip_sparse_mg_bricks_gpu.py > $L/g2.log 2>&1 & P2=$!
wait $P0; echo "warm-up rc=$? elapsed $SECONDS"
wait $P1; echo "G1 reach, margins rc=$?"; pytest_lines $L/g1.log 10
wait $P2; echo "G2 device margin, mg bricks rc=$?"; pytest_lines $L/g2.log 10
F="--row 65m --frames 12 --timing fast --level-set --trim --stages"
for w in brick rb; do
  [ $SECONDS -gt 150 ] && continue
  VOXFX_SPARSE_MG_SMOOTHER=$w timeout 60 python3 bench/flip_sparse.py $F > $L/f65_$w.log 2>&1; echo "65M $w rc=$?"
  frames $L/f65_$w.log
  grep -E "^(9|10|11) \|" -A3 $L/f65_$w.log | grep -oE "^(9|10|11) \| 3 \([^)]*\)|topology [0-9.]+/[0-9.]+|array path [0-9]+, largest margin [0-9]+ cells"
done
echo "elapsed $SECONDS"
tar czf $OUT/logs.tgz -C /tmp h20g 2>/dev/null
