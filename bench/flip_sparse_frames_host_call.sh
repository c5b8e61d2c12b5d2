# Helper h17b (issue 24): the 8M Fast frames' host time after the splash. One device call (≤ 200 s):
# (A record of h17b's call: VOXFX_POOL_TRIM and memory.PoolTrim, measured no faster, were removed after it.)
# the GPU files of what changed (memory.PoolTrim: the memory release and the liquid memory check), then,
# alone, one profiled process (cProfile and the pressure timeline's marks over frames 8–11; it also
# warms CuPy's kernel cache), then the frames in separate processes, ways in turn: E = main's trim
# (VOXFX_POOL_TRIM=every), G = the branch's default (grown), S = G with VOXFX_SPARSE_SETUP_GRAPH=1.
# Per run: frames' step ms + level set ms, and frames 8–11's stages / between-stages lines.
OUT_DEFAULT=$OUT
. bench/_device_call.sh
L=/tmp/h17b; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
timeout -s INT 70 $PY $T/test_memory_release_gpu.py > $L/t1.log 2>&1 & P1=$!
timeout -s INT 70 $PY $T/test_liquid_memory_check_gpu.py > $L/t2.log 2>&1 & P2=$!
wait $P1; echo "memory release rc=$?"; pytest_lines $L/t1.log 8
wait $P2; echo "liquid memory check rc=$?"; pytest_lines $L/t2.log 8
echo "elapsed $SECONDS"
FR="--row 8m --frames 12 --timing fast --level-set --trim --stages"
frames() {  # LOG: frame:step ms+level set ms=user frame ms (trim + step + level set), one line
    grep -E "^[0-9]+ \|" "$1" | awk -F'|' '{gsub(/ /,"",$1); gsub(/ /,"",$3); gsub(/ /,"",$10); split($5,a," ");
        printf "%s:%s+%s=%s ", $1,$3,a[1],$10}'; echo
}
stages() {  # LOG: frames 9–10's stage lines (all of frames 0–11 are in the logs' tar)
    awk '/^[0-9]+ \|/{f=$1} (f==9 || f==10) && /step stages|device between|pool trimmed/' "$1" | cut -c1-420
}
timeout 75 python3 bench/flip_sparse.py $FR --profile-frames 8-11 --timeline-frames 8-11 > $L/prof.log 2>&1
echo "profiled run rc=$? elapsed $SECONDS"
i=0
for way in E G S E G S; do
    i=$((i + 1))
    [ "$SECONDS" -lt 170 ] || { echo "time: stopped before run $i ($way)"; break; }
    case $way in
        E) env="VOXFX_POOL_TRIM=every" ;;
        G) env="VOXFX_POOL_TRIM=grown" ;;
        S) env="VOXFX_POOL_TRIM=grown VOXFX_SPARSE_SETUP_GRAPH=1" ;;
    esac
    env $env timeout 28 python3 bench/flip_sparse.py $FR > $L/run$i$way.log 2>&1
    echo "run $i $way ($env) rc=$? elapsed $SECONDS"; frames $L/run$i$way.log
    [ $i -le 2 ] && stages $L/run$i$way.log
done
echo "profiled run (frames 8-11 under cProfile):"; frames $L/prof.log
grep -A22 "^profile of frames" $L/prof.log | cut -c1-150
grep -A12 "by time inside" $L/prof.log | cut -c1-150
grep -A26 "^pressure timeline" $L/prof.log | cut -c1-104
grep -iE "Traceback|Error" $L/*.log | head -5
tar czf $OUT/logs.tgz -C /tmp h17b 2>/dev/null
