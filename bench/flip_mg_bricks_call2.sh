# Helper h19a2's one device call (issue 24, the brick smoother's second round): the kernels a block a
# slot with their loads issued together (VOXFX_SPARSE_MG_BRICK_THREADS 128, 64, 256, 512, 128x16;
# sparse_pressure_vcycle.SMOOTH_GRID slots or reduce) against the red-black sweeps. GPU tests first
# (the brick file; the pressure files with the switch on) beside the warm-up; then the PCG loop's
# pace (bench/flip_sparse_pcg_loop.py, every shape in one process) at 2 sweeps in a brick and at 3
# (VOXFX_SPARSE_MG_BRICK_SWEEPS, compiled in: another process); then the 8M row in separate
# processes rb, brick 2 sweeps, brick 3 sweeps, twice, the brick's block the loop's fastest.
# Logs under /tmp/h19a, tarred into $OUT/logs.tgz.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/h19a; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
B=VOXFX_SPARSE_MG_SMOOTHER=brick
timeout 100 env $B python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1 &
W=$!
timeout -s INT 95 $PY $T/test_flip_sparse_mg_bricks_gpu.py -s > $L/g1.log 2>&1 &
P1=$!
timeout -s INT 95 env $B $PY $T/test_flip_sparse_pressure_gpu.py $T/test_flip_sparse_pressure_vcycle_gpu.py \
    $T/test_flip_sparse_vcycle_bricks_gpu.py $T/test_flip_sparse_pressure_warm_gpu.py > $L/g2.log 2>&1 &
P2=$!
wait $P1; echo "brick GPU file rc=$?"; pytest_lines $L/g1.log 12; grep -E "^iterations" $L/g1.log
wait $P2; echo "pressure, vcycle, vcycle bricks, warm files with brick (128 threads, slots) rc=$?"; pytest_lines $L/g2.log 6
wait $W; echo "warm-up rc=$? elapsed $SECONDS"
S=1:2:-:-:-:-:-:-:-:brick  # the brick variants' fields up to SMOOTHER
V="rb:1:2:-:-:-:-:-:-:-:rb b512r:$S:512:reduce b128:$S:128 b64:$S:64 b256:$S:256 b128x16:$S:128x16 b512:$S:512"
loop() {  # LOG TIMEOUT ENV VARIANTS…
    local log=$1 t=$2 e=$3; shift 3
    timeout $t env $e python3 bench/flip_sparse_pcg_loop.py --substeps 2 --repeats 3 --replays 5 --pace-rounds 2 \
        --substep-runs 0 --variants "$@" > $log 2>&1
    echo "pcg loop ($e) rc=$? elapsed $SECONDS"
    grep -E "bricks|slots|^  [a-z0-9]+:.* \| |Error|error" $log | sed -E 's/^  ([a-z0-9]+):[^ ]*/  \1/' | cut -c1-200
    grep -oE "(rb|b[0-9xr]+):[^ ]*: total [0-9.]+ ms in [0-9]+ launches|mg_brick_(pre|post)_smooth(_16)? [0-9.]+" $log \
        | tr '\n' ' '
    echo
}
loop $L/loop2.log 75 VOXFX_X=0 $V
BEST=$(awk -F'|' '/^  b[0-9x]+:[^ ]* \|/ {n=$1; gsub(/ /,"",n); sub(/:.*/,"",n); split($3,a,","); v=a[1]+0; if (best=="" || v<bv) {best=n; bv=v}} END{print best}' $L/loop2.log)
BT=${BEST#b}; BT=${BT:-128}; echo "fastest brick block: $BT"
OTHER=64; [ "$BT" = 64 ] && OTHER=128
loop $L/loop3.log 55 VOXFX_SPARSE_MG_BRICK_SWEEPS=3 rb:1:2:-:-:-:-:-:-:-:rb b$BT:$S:$BT b$OTHER:$S:$OTHER
for i in 1 2; do
  for way in rb brick2 brick3; do
    if [ $SECONDS -gt 188 ]; then echo "skipped $way #$i (elapsed $SECONDS)"; continue; fi
    case $way in
      rb) E="VOXFX_SPARSE_MG_SMOOTHER=rb";;
      brick2) E="$B VOXFX_SPARSE_MG_BRICK_THREADS=$BT";;
      brick3) E="$B VOXFX_SPARSE_MG_BRICK_THREADS=$BT VOXFX_SPARSE_MG_BRICK_SWEEPS=3";;
    esac
    timeout 20 env $E python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2 > $L/row_$way$i.log 2>&1
    echo "row $way #$i rc=$? elapsed $SECONDS"
    grep -vE "^ *$|Warning|warn|VoxFX:|^---" $L/row_$way$i.log | cut -c1-300 | tail -4
  done
done
echo "elapsed $SECONDS"
tar czf $OUT/logs.tgz -C /tmp h19a 2>/dev/null
