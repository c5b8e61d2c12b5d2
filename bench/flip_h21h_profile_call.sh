# h21h's first call (issue 24: an 8M Fast user frame <= 30 ms): where the host's own time goes in the frames after
# the splash. The 8M Fast frames with --stages twice (CPU probe before each), then one process with
# --profile-frames 8-11 (cProfile of the steps and level sets: own time, time inside, and the callers of the
# largest own times), then bench/cupy_host_ops.py (CuPy's small operations' host µs on this host). <= 100 s.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/h21h; mkdir -p $L
cpuprobe() { python3 -c "
import time
t=time.perf_counter(); s=0
for i in range(2_000_000): s+=i*i
print(f'[cpu {1e3*(time.perf_counter()-t):.0f} ms]', end=' ')"; }
frames() { grep -E "^[0-9]+ \|" "$1" | awk -F'|' '{gsub(/ /,"",$1); u=$10; gsub(/ /,"",u); printf "%s:%s ", $1,u}'; echo; }
timeout 100 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1; echo "warm rc=$? elapsed $SECONDS"
FR="--row 8m --frames 12 --timing fast --level-set --trim --stages"
for i in 1; do
  cpuprobe; timeout 40 python3 bench/flip_sparse.py $FR > $L/plain$i.log 2>&1; echo "plain #$i rc=$?"; frames $L/plain$i.log
  frame_sums $L/plain$i.log topology | tail -1
  python3 bench/frame_gaps.py $L/plain$i.log 2>&1 | tail -6
done
echo "elapsed $SECONDS"
cpuprobe; timeout 50 python3 bench/flip_sparse.py $FR --profile-frames 8-11 > $L/prof.log 2>&1; echo "profile rc=$?"
frames $L/prof.log
grep -A22 "^profile of frames" $L/prof.log | cut -c1-150
echo "elapsed $SECONDS"
timeout 30 python3 bench/cupy_host_ops.py > $L/ops.log 2>&1; echo "ops rc=$?"; tail -25 $L/ops.log | cut -c1-150
python3 -c "
import os, sys, timeit; sys.path.insert(0, '.')
from tools.package import load; load()
from voxfx.kernels.settings import env_choice
n = 200000
print('env_choice us', 1e6 * min(timeit.repeat(lambda: env_choice('VOXFX_SPARSE_X', ('a', 'b')), number=n, repeat=3)) / n)
print('os.environ.get us', 1e6 * min(timeit.repeat(lambda: os.environ.get('VOXFX_SPARSE_X', ''), number=n, repeat=3)) / n)
"
echo "elapsed $SECONDS"
tar czf $OUT/logs.tgz -C /tmp h21h 2>/dev/null
