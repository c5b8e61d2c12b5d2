# h21h's second call (issue 24: an 8M Fast user frame <= 30 ms): the host cuts (the switches read once a frame,
# settings.env_scope; the launch's device look-up; the set-up's extra values by 4-byte copies) against main's tree
# (.cache/h21h/base, `git archive main`). The GPU files the change touches in three groups beside the two trees'
# warm-ups, then the 8M Fast frames alternating base / head in separate processes (CPU probe before each), then one
# cProfile of frames 8-11 each (the switches' reads and the launches' own host ms). <= 160 s.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/h21h; mkdir -p $L
BASE=base
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
cpuprobe() { python3 -c "
import time
t=time.perf_counter(); s=0
for i in range(2_000_000): s+=i*i
print(f'[cpu {1e3*(time.perf_counter()-t):.0f} ms]', end=' ')"; }
frames() { grep -E "^[0-9]+ \|" "$1" | awk -F'|' '{gsub(/ /,"",$1); u=$10; gsub(/ /,"",u); printf "%s:%s ", $1,u}'; echo; }
(cd $BASE && timeout 80 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm_base.log 2>&1) & P0=$!
timeout 80 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1 & P1=$!
timeout -s INT 90 $PY $T/test_flip_sparse_pressure_workspace_gpu.py $T/test_flip_sparse_pressure_scan_gpu.py \
  $T/test_cancel_gpu.py > $L/g1.log 2>&1 & P2=$!
timeout -s INT 90 $PY $T/test_flip_sparse_gpu.py $T/test_flip_sparse_pressure_warm_gpu.py > $L/g2.log 2>&1 & P3=$!
timeout -s INT 90 $PY $T/test_flip_sparse_air_band_gpu.py $T/test_flip_density_gpu.py > $L/g3.log 2>&1 & P4=$!
wait $P0; echo "warm base rc=$?"; wait $P1; echo "warm head rc=$? elapsed $SECONDS"
wait $P2; echo "G1 workspace, scan, cancel rc=$?"; pytest_lines $L/g1.log 8
wait $P3; echo "G2 sparse, pressure warm rc=$?"; pytest_lines $L/g2.log 8
wait $P4; echo "G3 air band, density rc=$?"; pytest_lines $L/g3.log 8
echo "elapsed $SECONDS"
FR="--row 8m --frames 12 --timing fast --level-set --trim --stages"
for i in 1 2 3; do
  [ $SECONDS -gt 118 ] && continue
  cpuprobe; (cd $BASE && timeout 25 python3 bench/flip_sparse.py $FR) > $L/base$i.log 2>&1; echo "main #$i rc=$?"; frames $L/base$i.log
  cpuprobe; timeout 25 python3 bench/flip_sparse.py $FR > $L/head$i.log 2>&1; echo "h21h #$i rc=$?"; frames $L/head$i.log
done
for f in $L/base*.log $L/head*.log; do echo "$(basename $f): $(frame_sums $f topology | tail -1) / $(frame_sums $f pressure | tail -1 | sed 's/.*user [0-9.]* ms, //')"; done
python3 bench/frame_gaps.py $L/base*.log $L/head*.log 2>&1 | grep -E "frames 6-11" | cut -c1-330
echo "elapsed $SECONDS"
if [ $SECONDS -lt 140 ]; then
  PF="--profile-frames 8-11"
  (cd $BASE && timeout 12 python3 bench/flip_sparse.py $FR $PF) > $L/pbase.log 2>&1; echo "main profile rc=$?"
  timeout 12 python3 bench/flip_sparse.py $FR $PF > $L/phead.log 2>&1; echo "h21h profile rc=$?"
  for f in pbase phead; do echo "$f: $(grep -m1 '^profile of' $L/$f.log | cut -c1-110)"
    sed -n '/^profile of/,/by time inside/p' $L/$f.log | grep -E "env_choice|env_value|frozen os|launch.py|put_values|workspace.py:.*unknowns" | cut -c1-110; done
fi
echo "elapsed $SECONDS"
tar czf $OUT/logs.tgz -C /tmp h21h 2>/dev/null
