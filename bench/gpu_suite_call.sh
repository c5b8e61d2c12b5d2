# The whole GPU suite in one device call (session 22's closing calls, made a script): a warm-up, then every
# tests/gpu file in N parallel shards (SHARD_S seconds each), the compile-ahead file apart (it times its own first
# frame), and after them, alone on the GPU, the files that read the device's free memory (GPU-wide: beside five
# other test processes, their pools' growth read as a loss in session 22's F4). Then, where time is left, the 65M
# and 8M Fast frames and the 8M row (issue 24's rows). Run from the repository root: SHARD_S=300 bash
# bench/gpu_suite_call.sh (≤ ~330 s of wall time with N=6 on an H100).
OUT_DEFAULT=$OUT; . "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
SHARD_S=${SHARD_S:-300}; N=${SHARDS:-6}
L=/tmp/gpu_suite; mkdir -p $L; rm -f $L/shard*.txt
ALONE="$T/test_memory_release_gpu.py $T/test_backend_gpu.py"
timeout 90 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1; echo "warm rc=$? at $SECONDS"
i=0; for f in $(ls $T/test_*.py | grep -v -e compile_ahead -e memory_release_gpu -e test_backend_gpu); do
  echo $f >> $L/shard$((i % N)).txt; i=$((i+1)); done
for s in $(seq 0 $((N-1))); do
  timeout -s INT $SHARD_S python3 -m pytest -q -p no:cacheprovider -rfE $(cat $L/shard$s.txt) > $L/s$s.log 2>&1 &
done
timeout -s INT 120 python3 -m pytest -q -p no:cacheprovider -rfE $T/test_flip_surface_compile_ahead_gpu.py > $L/ca.log 2>&1 &
wait
for s in $(seq 0 $((N-1))); do echo "shard $s:"; pytest_lines $L/s$s.log 8; done
echo "compile-ahead:"; pytest_lines $L/ca.log 4
timeout -s INT 90 python3 -m pytest -q -p no:cacheprovider -rfE $ALONE > $L/alone.log 2>&1
echo "alone (device free memory):"; pytest_lines $L/alone.log 6
[ $SECONDS -lt 420 ] && { timeout 150 python3 bench/flip_sparse.py --row 65m --frames 12 --timing fast --level-set --trim \
  --stages > $L/f65.log 2>&1; echo "65M Fast frames rc=$? at $SECONDS"; grep -E "^ *[0-9]+ \|" $L/f65.log | cut -c1-160; }
[ $SECONDS -lt 500 ] && { timeout 40 python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2 > $L/row.log 2>&1
  echo "8M row rc=$? at $SECONDS"; grep -E "^sparse \|" $L/row.log | cut -d'|' -f6-13
  grep -E "floors|sub-stages|CG iterations" $L/row.log | cut -c1-260; }
[ $SECONDS -lt 540 ] && { timeout 50 python3 bench/flip_sparse.py --row 8m --frames 12 --timing fast --level-set --trim \
  --stages > $L/frames.log 2>&1; echo "8M Fast frames rc=$? at $SECONDS"; frame_sums $L/frames.log pressure; }
echo "end at $SECONDS"
tar czf $OUT/gpu_suite.tgz -C /tmp gpu_suite
