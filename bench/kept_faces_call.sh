# h18d (issue 24): the time-centred advection's kept faces without copies (sparse_kept: the keep takes
# the grid's face arrays, u_n written into them by one kernel for the three components) against main.
# Run from this tree's root on the device, main's tree extracted at ./base (git archive main). GPU
# tests of what changed (three groups side by side), then the 8M Fast frames with --stages, main's
# way (base) and this one in separate processes alternating (ABBAAB), each beside a CPU probe (a
# fixed Python loop's ms); then, where time is left, this tree with VOXFX_SPARSE_P2G_TAIL=tail (the
# old faces' copies in the P2G tail's kernel, never measured after the splash) and one process
# profiled over frames 9-11. Per run bench/frame_gaps.py's sums over frames 6-11. ≤ 200 s.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/h18d; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
timeout -s INT 85 $PY $T/test_flip_sparse_kept_faces_gpu.py $T/test_flip_centred_advection_gpu.py -k \
    "kept or select or sparse" > $L/g1.log 2>&1 & P1=$!
timeout -s INT 85 $PY $T/test_flip_sparse_air_band_gpu.py $T/test_flip_checkpoint_gather_gpu.py \
    $T/test_flip_sparse_g2p_block_gpu.py > $L/g2.log 2>&1 & P2=$!
timeout -s INT 85 $PY $T/test_flip_sparse_gpu.py > $L/g3.log 2>&1 & P3=$!
wait $P1; echo "kept faces + centred advection (sparse) rc=$?"; pytest_lines $L/g1.log 8
wait $P2; echo "air band, checkpoint gather, g2p block rc=$?"; pytest_lines $L/g2.log 8
wait $P3; echo "sparse FLIP rc=$?"; pytest_lines $L/g3.log 8
echo "elapsed $SECONDS"
cpuprobe() { python3 -c "
import time
t = time.perf_counter(); s = 0
for i in range(1_000_000): s += i * i
print(f'cpu probe {1e3 * (time.perf_counter() - t):.0f} ms', end='; ')"; }
FR="--row 8m --frames 12 --timing fast --level-set --trim --stages"
frames() {  # frames NAME DIR [ENV...]: one process of the 8M Fast frames in DIR, its log $L/NAME.log
  local name=$1 dir=$2; shift 2
  if [ $SECONDS -lt 178 ]; then
    cpuprobe
    (cd $dir && env "$@" timeout 25 python3 bench/flip_sparse.py $FR) > $L/$name.log 2>&1
    echo "$name rc=$? (elapsed $SECONDS)"
    python3 bench/frame_gaps.py $L/$name.log | sed 's|/tmp/h18d/||'
  fi
}
frames base1 base X=1
frames kept1 . X=1
frames kept2 . X=1
frames base2 base X=1
frames base3 base X=1
frames kept3 . X=1
frames tail1 . VOXFX_SPARSE_P2G_TAIL=tail
frames tail2 . VOXFX_SPARSE_P2G_TAIL=tail
if [ $SECONDS -lt 170 ]; then
  timeout 25 python3 bench/flip_sparse.py $FR --profile-frames 9-11 > $L/prof.log 2>&1
  echo "profiled frames 9-11 rc=$? (elapsed $SECONDS)"
  grep -A 22 "by own time" $L/prof.log | cut -c1-150
fi
tar czf $OUT/logs.tgz -C /tmp h18d 2>/dev/null
echo "elapsed $SECONDS"
