# Helper h20a's one device call (issue 24, the brick smoother's span loads: VOXFX_SPARSE_MG_BRICK_THREADS
# span / span12 / spanh against h19a's 128-thread position kernels and the red-black sweeps). GPU tests
# first beside the warm-up (the brick file: every shape's z bit for bit and the span tables against
# NumPy; the pressure files with the switch on); then the PCG loop's pace, every way in one process, at
# 3 sweeps in a brick (the red-black CG counts on the 8M row, h19a2) and at 2; then the 8M row in
# separate processes rb / the fastest span way at 3 sweeps, alternating, twice. Logs under /tmp/h20a,
# tarred into $OUT/logs.tgz.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/h20a; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
B=VOXFX_SPARSE_MG_SMOOTHER=brick
timeout 100 env $B VOXFX_SPARSE_MG_BRICK_THREADS=span python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 \
    > $L/warm.log 2>&1 &
W=$!
timeout -s INT 110 $PY $T/test_flip_sparse_mg_bricks_gpu.py -s > $L/g1.log 2>&1 &
P1=$!
timeout -s INT 110 env $B VOXFX_SPARSE_MG_BRICK_THREADS=spanh $PY $T/test_flip_sparse_pressure_gpu.py \
    $T/test_flip_sparse_pressure_vcycle_gpu.py $T/test_flip_sparse_vcycle_bricks_gpu.py \
    $T/test_flip_sparse_pressure_warm_gpu.py > $L/g2.log 2>&1 &
P2=$!
timeout -s INT 110 env $B VOXFX_SPARSE_MG_BRICK_THREADS=span $PY $T/test_flip_sparse_pressure_workspace_gpu.py \
    $T/test_flip_sparse_pressure_persist_gpu.py $T/test_flip_sparse_pressure_solve_ahead_gpu.py > $L/g3.log 2>&1 &
P3=$!
wait $P1; echo "brick GPU file rc=$?"; pytest_lines $L/g1.log 12; grep -E "^iterations" $L/g1.log
wait $P2; echo "pressure, vcycle, vcycle bricks, warm files with brick spanh rc=$?"; pytest_lines $L/g2.log 6
wait $P3; echo "workspace, persist, solve-ahead files with brick span rc=$?"; pytest_lines $L/g3.log 6
wait $W; echo "warm-up rc=$? elapsed $SECONDS"
S=1:2:-:-:-:-:-:-:-:brick  # the brick variants' fields up to SMOOTHER
V="rb:1:2:-:-:-:-:-:-:-:rb b128:$S:128 span:$S:span span12:$S:span12 spanh:$S:spanh"
loop() {  # LOG TIMEOUT ENV VARIANTS…
    local log=$1 t=$2 e=$3; shift 3
    timeout $t env $e python3 bench/flip_sparse_pcg_loop.py --substeps 2 --repeats 3 --replays 5 --pace-rounds 3 \
        --substep-runs 0 --variants "$@" > $log 2>&1
    echo "pcg loop ($e) rc=$? elapsed $SECONDS"
    grep -E "bricks|slots|^  [a-z0-9]+:.* \| |Error|error" $log | sed -E 's/^  ([a-z0-9]+):[^ ]*/  \1/' | cut -c1-200
    grep -oE "(rb|b128|span[a-z0-9]*):[^ ]*: total [0-9.]+ ms in [0-9]+ launches|mg_brick_(pre|post)_smooth[a-z0-9_]* [0-9.]+" \
        $log | tr '\n' ' '
    echo
}
loop $L/loop3.log 80 VOXFX_SPARSE_MG_BRICK_SWEEPS=3 $V
BEST=$(awk -F'|' '/^  span[a-z0-9]*:[^ ]* \|/ {n=$1; gsub(/ /,"",n); sub(/:.*/,"",n); split($3,a,","); v=a[1]+0;
    if (best=="" || v<bv) {best=n; bv=v}} END{print best}' $L/loop3.log)
BEST=${BEST:-span}; echo "fastest span way at 3 sweeps: $BEST"
for i in 1 2; do
  for way in rb $BEST; do
    if [ $SECONDS -gt 165 ]; then echo "skipped $way #$i (elapsed $SECONDS)"; continue; fi
    case $way in
      rb) E="VOXFX_SPARSE_MG_SMOOTHER=rb";;
      *) E="$B VOXFX_SPARSE_MG_BRICK_THREADS=$way VOXFX_SPARSE_MG_BRICK_SWEEPS=3";;
    esac
    timeout 22 env $E python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2 > $L/row_$way$i.log 2>&1
    echo "row $way (3 sweeps) #$i rc=$? elapsed $SECONDS"
    grep -vE "^ *$|Warning|warn|VoxFX:|^---" $L/row_$way$i.log | cut -c1-300 | tail -4
  done
done
if [ $SECONDS -lt 160 ]; then loop $L/loop2.log $((195 - SECONDS)) VOXFX_X=0 rb:1:2:-:-:-:-:-:-:-:rb b128:$S:128 \
    $BEST:$S:$BEST; fi
echo "elapsed $SECONDS"
tar czf $OUT/logs.tgz -C /tmp h20a 2>/dev/null
