# Helper h17b's cut for the next call (≤ 120 s; not yet run): the time-centred advection's u_n as one
# select a component and the substep's fluid-face masks made once (issue 24). Run from this branch's
# copy on the device, MAIN (default ../..) being main's tree: the centred-advection GPU file (its new
# select test) and the sparse FLIP file, then the 8M Fast frames in separate processes, main's tree and
# this branch's in turn (two each): frame:step+level set=user frame, and frames 9–10's "device between"
# lines (before g2p / speed / count control should fall by ~1 ms a frame together).
OUT_DEFAULT=$OUT
. bench/_device_call.sh
MAIN=${MAIN:-../..}
L=/tmp/h17b2; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
timeout -s INT 60 $PY $T/test_flip_centred_advection_gpu.py > $L/t1.log 2>&1 & P1=$!
timeout -s INT 60 $PY $T/test_flip_sparse_gpu.py > $L/t2.log 2>&1 & P2=$!
wait $P1; echo "centred advection rc=$?"; pytest_lines $L/t1.log 8
wait $P2; echo "sparse FLIP rc=$?"; pytest_lines $L/t2.log 8
FR="--row 8m --frames 12 --timing fast --level-set --trim --stages"
frames() {
    grep -E "^[0-9]+ \|" "$1" | awk -F'|' '{gsub(/ /,"",$1); gsub(/ /,"",$3); gsub(/ /,"",$10); split($5,a," ");
        printf "%s:%s+%s=%s ", $1,$3,a[1],$10}'; echo
}
for i in 1 2; do
    (cd "$MAIN" && timeout 28 python3 bench/flip_sparse.py $FR) > $L/main$i.log 2>&1; echo "main #$i rc=$?"; frames $L/main$i.log
    timeout 28 python3 bench/flip_sparse.py $FR > $L/h17b$i.log 2>&1; echo "h17b #$i rc=$?"; frames $L/h17b$i.log
    awk '/^[0-9]+ \|/{f=$1} (f==9 || f==10) && /device between/' $L/h17b$i.log | cut -c1-240
done
tar czf $OUT/logs.tgz -C /tmp h17b2 2>/dev/null
