# h21e's first device call: today's pressure timeline at 8M (brick default) with launches per piece,
# the set-up's kernels one by one, one row for reference. ≤ 120 s.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/h21e; mkdir -p $L
echo "nsys: $(command -v nsys || ls /usr/local/cuda/bin 2>/dev/null | grep -c nsys)"
timeout 90 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1; echo "warm rc=$? t=$SECONDS"
timeout 45 python3 bench/flip_sparse_pressure_timeline.py --substeps 6 --show 2 > $L/tl.log 2>&1; echo "tl rc=$? t=$SECONDS"
sed -n '/^way 0 {}, substep 1/,/^$/p' $L/tl.log
sed -n '/stage medians/,$p' $L/tl.log
[ $SECONDS -lt 85 ] && { timeout 30 python3 bench/flip_sparse_setup_kernels.py --warm 1 --substeps 3 > $L/sk.log 2>&1; echo "sk rc=$? t=$SECONDS"; grep -E "^\s+\[|^way|other" $L/sk.log | head -40; }
[ $SECONDS -lt 100 ] && { timeout 20 python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2 > $L/row.log 2>&1; echo "row rc=$?"; tail -15 $L/row.log; }
echo "elapsed $SECONDS"
tar czf $OUT/logs.tgz -C /tmp h21e 2>/dev/null
