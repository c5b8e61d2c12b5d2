# s23f's device call 2 (issue 24): VOXFX_CPU_AFFINITY=quick (kernels/cpu_affinity.py: the row's main thread
# pinned, after the set-up, to the CPU whose probe reads quickest) against "off", processes in turn (ABBA).
# First bench/host_pace.py once (every CPU: launch, elementwise, Python, and NumPy's dependent cumsum against
# its vectorised add: a lower clock slows both, a busy SMT sibling mostly the second) and --hold 10 (every
# CPU's probe each 0.5 s: how long a quick CPU stays quick); the warm-up; then the 8M row (--steps 12 --warm 2)
# in turn "off" / "quick", each followed in its process by its host's µs. Run from this tree's root; ≤ 200 s.
# A record of call 2: VOXFX_CPU_AFFINITY (kernels/cpu_affinity.py, commit a0f65bd) was removed after it ("quick"
# read as "off", the probe's quick CPUs do not last), so its rows now run as "off"; hold() probes through
# bench/_host_probe.py (the same code).
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/s23f2; mkdir -p $L
echo "steal jiffies $(head -1 /proc/stat | awk '{print $9}'), load $(cat /proc/loadavg)"
timeout 30 python3 bench/host_pace.py --calls 500 --hold 10 > $L/pace.log 2>&1; echo "host_pace rc=$? at $SECONDS"
grep -vE "^(device|VoxFX)" $L/pace.log | cut -c1-200
timeout 90 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1; echo "warm-up rc=$? at $SECONDS"
row() {  # row TAG WAY: the 8M row with VOXFX_CPU_AFFINITY=WAY, then its process's host µs (host_pace --after)
  local t0=$SECONDS
  VOXFX_CPU_AFFINITY=$2 timeout 20 python3 bench/host_pace.py --cpus --calls 500 --after bench/flip_sparse.py \
    --row 8m --steps 12 --warm 2 > $L/row_$1.log 2>&1
  echo "$1 $2 rc=$? $((SECONDS - t0)) s: $(grep -E '^sparse' $L/row_$1.log | cut -d'|' -f6-12 | tr -s ' ')" \
    "| $(grep -E '^after' $L/row_$1.log | sed 's/.*: on CPU \([0-9]*\).*/CPU \1/')" \
    "| launch/Python µs $(grep -E '^start' $L/row_$1.log | awk -F'|' '{printf "%s/%s ", $3+0, $5+0}')"
  grep -E "^CPU affinity" $L/row_$1.log | cut -c1-160 | sed 's/^/   /'
}
i=0
while [ $SECONDS -lt 178 ]; do
  i=$((i + 1))
  if [ $((i % 2)) -eq 1 ]; then row o$i off; [ $SECONDS -lt 184 ] && row q$i quick
  else row q$i quick; [ $SECONDS -lt 184 ] && row o$i off; fi
done
echo "end at $SECONDS"
tar czf $OUT/logs.tgz -C /tmp s23f2 2>/dev/null
