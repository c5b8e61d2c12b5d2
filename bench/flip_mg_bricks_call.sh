# Helper h19a's one device call (issue 24): level 0 smoothed brick by brick (VOXFX_SPARSE_MG_SMOOTHER
# "brick") against today's red-black sweeps ("rb"). GPU tests first (the brick file; the pressure files
# with the switch on), beside the warm-up that compiles the row's kernels; then the PCG loop's pace
# (bench/flip_sparse_pcg_loop.py, both ways in one process) and the 8M row in separate processes
# alternating rb, brick, rb, brick. Logs under /tmp/h19a, tarred into $OUT/logs.tgz.
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
G3=$(ls $T/test_flip_sparse_pressure*_gpu.py | grep -vE "pressure_gpu.py|pressure_vcycle_gpu.py|pressure_warm_gpu.py")
timeout -s INT 95 env $B $PY $G3 > $L/g3.log 2>&1 &
P3=$!
wait $P1; echo "brick GPU file rc=$?"; pytest_lines $L/g1.log 12; grep -E "^iterations" $L/g1.log
wait $P2; echo "pressure, vcycle, vcycle bricks, warm files with brick rc=$?"; pytest_lines $L/g2.log 12
wait $P3; echo "the other pressure files with brick rc=$?"; pytest_lines $L/g3.log 12
wait $W; echo "warm-up rc=$? elapsed $SECONDS"
V="rb:1:2:-:-:-:-:-:-:-:rb brick:1:2:-:-:-:-:-:-:-:brick"
timeout 45 python3 bench/flip_sparse_pcg_loop.py --substeps 2 --repeats 3 --replays 5 --pace-rounds 2 \
    --substep-runs 0 --variants $V > $L/loop.log 2>&1
echo "pcg loop rc=$? elapsed $SECONDS"
grep -vE "^ *$|Warning|warn|VoxFX:" $L/loop.log | cut -c1-400 | tail -24
for i in 1 2; do
  for way in rb brick; do
    if [ $SECONDS -gt 190 ]; then echo "skipped $way #$i (elapsed $SECONDS)"; continue; fi
    VOXFX_SPARSE_MG_SMOOTHER=$way timeout 20 python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2 \
        > $L/row_$way$i.log 2>&1
    echo "row $way #$i rc=$? elapsed $SECONDS"
    grep -vE "^ *$|Warning|warn|VoxFX:|^---" $L/row_$way$i.log | cut -c1-400 | tail -5
  done
done
echo "elapsed $SECONDS"
tar czf $OUT/logs.tgz -C /tmp h19a 2>/dev/null
