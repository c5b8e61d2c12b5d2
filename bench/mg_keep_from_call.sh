# h19f's one call (issue 24): VOXFX_SPARSE_MG_KEEP_FROM "3" (levels ≥ 3 held) — the kept GPU file, the pressure
# and workspace files with KEEP=3 FROM=3 (beside the warm-up), then the 8M Fast frames in separate processes
# alternating off / KEEP=3 FROM=3 / KEEP=3 FROM=2 (a CPU probe before each), the 8M row off / FROM=3, and the
# frames a second time where the budget (~200 s) leaves room.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/f19; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
cpuprobe() { python3 -c "
import time
t=time.perf_counter(); s=0
for i in range(2_000_000): s+=i*i
print(f'[cpu {1e3*(time.perf_counter()-t):.0f} ms]', end=' ')"; }
frames() { grep -E "^[0-9]+ \|" "$1" | awk -F'|' '{gsub(/ /,"",$1); u=$10; gsub(/ /,"",u); c=$6; gsub(/ /,"",c);
  printf "%s:%s(%s) ", $1,u,c; if ($1+0>=6 && $1+0<=11) cg+=c} END{printf "\n   CG it frames 6-11: %d\n", cg}'; }
builds() { grep -cE "solvers built [1-9]" "$1"; }
timeout 100 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1 & P0=$!
K="VOXFX_SPARSE_MG_KEEP=3 VOXFX_SPARSE_MG_KEEP_FROM=3"
timeout -s INT 100 env $K $PY $T/test_flip_sparse_pressure_kept_gpu.py > $L/g1.log 2>&1 & P1=$!
timeout -s INT 100 env $K $PY $T/test_flip_sparse_pressure_gpu.py $T/test_flip_sparse_pressure_workspace_gpu.py > $L/g2.log 2>&1 & P2=$!
wait $P0; echo "warm-up rc=$? elapsed $SECONDS"
wait $P1; echo "KEEP=3 FROM=3 kept file rc=$?"; pytest_lines $L/g1.log 14
wait $P2; echo "KEEP=3 FROM=3 pressure, workspace rc=$?"; pytest_lines $L/g2.log 10
echo "elapsed $SECONDS"
FR="--row 8m --frames 12 --timing fast --level-set --trim --stages"
fr() {  # fr NAME KEEP FROM
  cpuprobe; VOXFX_SPARSE_MG_KEEP=$2 VOXFX_SPARSE_MG_KEEP_FROM=$3 timeout 40 python3 bench/flip_sparse.py $FR > $L/fr_$1.log 2>&1
  echo "frames $1 (keep=$2 from=$3) rc=$? builds $(builds $L/fr_$1.log) elapsed $SECONDS"; frames $L/fr_$1.log
  frame_sums $L/fr_$1.log pressure | tail -1
}
fr off1 0 2; fr f3a 3 3; fr f2a 3 2
for k in "0 2 off" "3 3 f3"; do
  set -- $k
  [ $SECONDS -gt 175 ] && continue
  cpuprobe; VOXFX_SPARSE_MG_KEEP=$1 VOXFX_SPARSE_MG_KEEP_FROM=$2 timeout 25 python3 bench/_mg_keep_count.py --row 8m --steps 8 --warm 2 > $L/row_$3.log 2>&1
  echo "row $3 rc=$?"; grep -E "^sparse \|" $L/row_$3.log | cut -d'|' -f6-13
  grep -E "CG iterations per substep|levels >= 2" $L/row_$3.log | sed 's/^ */  /' | cut -c1-200
done
[ $SECONDS -lt 150 ] && fr off2 0 2
[ $SECONDS -lt 165 ] && fr f3b 3 3
[ $SECONDS -lt 175 ] && fr f2b 3 2
echo "elapsed $SECONDS"
tar czf $OUT/logs.tgz -C /tmp f19 2>/dev/null
