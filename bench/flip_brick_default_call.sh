# h20d's one device call (issue 24): VOXFX_SPARSE_MG_SMOOTHER "brick" as the default — the GPU files it touches
# (3 groups, the tests that need the red-black sweeps pinned), then the 8M Fast frames rb / brick in alternating
# processes ×2 (a CPU probe before each), then the 8M row rb / brick if time remains. ≤ 260 s of script.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/h20d; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
cpuprobe() { python3 -c "
import time
t=time.perf_counter(); s=0
for i in range(2_000_000): s+=i*i
print(f'[cpu {1e3*(time.perf_counter()-t):.0f} ms]', end=' ')"; }
frames() { grep -E "^[0-9]+ \|" "$1" | awk -F'|' '{gsub(/ /,"",$1); u=$10; gsub(/ /,"",u); printf "%s:%s ", $1,u}'; echo; }
timeout 100 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1 & P0=$!
timeout -s INT 140 $PY $T/test_flip_sparse_pressure_gpu.py $T/test_flip_sparse_pressure_workspace_gpu.py \
  $T/test_flip_sparse_pressure_persist_gpu.py $T/test_flip_sparse_pressure_bricks_gpu.py \
  $T/test_flip_sparse_pressure_vcycle_gpu.py $T/test_flip_sparse_vcycle_bricks_gpu.py \
  $T/test_flip_sparse_pressure_warm_gpu.py $T/test_flip_sparse_mg_bricks_gpu.py > $L/g1.log 2>&1 & P1=$!
timeout -s INT 140 $PY $T/test_flip_accuracy_gpu.py $T/test_liquid_memory_check_gpu.py \
  $T/test_flip_sparse_pressure_solve_ahead_gpu.py $T/test_flip_sparse_pressure_kept_gpu.py > $L/g2.log 2>&1 & P2=$!
timeout -s INT 140 $PY $T/test_flip_sparse_gpu.py $T/test_flip_sim_gpu.py $T/test_flip_sparse_pcg_loop_gpu.py \
  $T/test_flip_sparse_pressure_ahead_gpu.py $T/test_flip_sparse_pressure_around_gpu.py \
  $T/test_flip_sparse_pressure_fuse_gpu.py $T/test_flip_sparse_pressure_hook_gpu.py \
  $T/test_flip_sparse_pressure_one_read_gpu.py $T/test_flip_sparse_pressure_restrict_gpu.py \
  $T/test_flip_sparse_pressure_scan_gpu.py > $L/g3.log 2>&1 & P3=$!
wait $P0; echo "warm-up rc=$? elapsed $SECONDS"
wait $P1; echo "G1 pressure, workspace, persist, bricks, vcycle, vcycle-bricks, warm, mg-bricks rc=$?"; pytest_lines $L/g1.log 12
wait $P2; echo "G2 accuracy, memory check, solve-ahead, kept rc=$?"; pytest_lines $L/g2.log 8
wait $P3; echo "G3 sparse flip, sim, pcg loop, ahead, around, fuse, hook, one-read, restrict, scan rc=$?"; pytest_lines $L/g3.log 12
grep -h "iterations rb" $L/g1.log | head -2
echo "elapsed $SECONDS"
FR="--row 8m --frames 12 --timing fast --level-set --trim --stages"
for i in 1 2 3; do
  for w in rb brick; do
    [ $SECONDS -gt 215 ] && continue
    cpuprobe; VOXFX_SPARSE_MG_SMOOTHER=$w timeout 36 python3 bench/flip_sparse.py $FR > $L/fr_$w$i.log 2>&1
    echo "frames $w #$i rc=$?"; frames $L/fr_$w$i.log
    frame_sums $L/fr_$w$i.log pressure | tail -1
  done
done
echo "elapsed $SECONDS"
for w in rb brick; do
  [ $SECONDS -gt 235 ] && continue
  cpuprobe; VOXFX_SPARSE_MG_SMOOTHER=$w timeout 26 python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2 > $L/row_$w.log 2>&1
  echo "row $w rc=$?"; grep -E "^sparse \|" $L/row_$w.log | cut -d'|' -f6-13
  grep -E "CG iterations per substep" $L/row_$w.log | sed 's/^ */  /' | cut -c1-160
done
echo "elapsed $SECONDS"
tar czf $OUT/logs.tgz -C /tmp h20d 2>/dev/null
