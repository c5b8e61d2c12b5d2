# s23f's device call 1 (issue 24): why the same 8M row reads 5.0 ms in one process and 6.3–6.9 in another.
# The machine (GPU topology, CPUs, NUMA, caches, frequency, clock source, steal, Python); bench/host_pace.py in
# three processes (each visits every CPU: launch, elementwise and pure-Python µs core by core); the warm-up;
# then the 8M row (--steps 12 --warm 2) in turn unpinned and pinned (taskset) to each core group, each
# followed in its process by host_pace's µs (the row's process's own host speed); host_pace once more at
# the end. Run from this tree's root; ≤ 200 s.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/s23f; mkdir -p $L
BUS=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader | head -1 | tr 'A-Z' 'a-z' | sed 's/^0000//')
SYS=/sys/bus/pci/devices/$BUS
{ nvidia-smi topo -m; lscpu; lscpu -e; numactl -H; cat /proc/loadavg; systemd-detect-virt
  grep -H . /sys/devices/system/cpu/cpu*/cpufreq/scaling_{governor,cur_freq,max_freq} 2>/dev/null | head -60
  grep -H . /sys/devices/system/cpu/cpu0/cpuidle/state*/name 2>/dev/null
  grep -H . /sys/devices/system/cpu/cpu*/topology/thread_siblings_list /sys/devices/system/cpu/cpu*/cache/index3/shared_cpu_list
  } > $L/machine.txt 2>&1
echo "GPU $BUS: numa_node $(cat $SYS/numa_node 2>&1) local_cpulist $(cat $SYS/local_cpulist 2>&1); online $(cat /sys/devices/system/cpu/online)"
grep -E "^(Model name|Socket|Core|Thread|NUMA|CPU\(s\)|L3|Hypervisor|Virtualization type|CPU max|CPU MHz)" $L/machine.txt | tr -s ' ' | paste -sd';'
echo "nodes: $(grep -H . /sys/devices/system/node/node*/cpulist 2>/dev/null | sed 's#.*/node\([0-9]*\)/cpulist:#\1:#' | paste -sd' ')"
echo "L3 groups: $(cat /sys/devices/system/cpu/cpu*/cache/index3/shared_cpu_list 2>/dev/null | sort -u | paste -sd' ')"
echo "SMT pairs: $(cat /sys/devices/system/cpu/cpu*/topology/thread_siblings_list | sort -u | paste -sd' ')"
echo "clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource); THP $(cat /sys/kernel/mm/transparent_hugepage/enabled); governor $(cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>&1 | head -c 40); idle $(cat /sys/devices/system/cpu/cpu0/cpuidle/state*/name 2>/dev/null | paste -sd,); virt $(systemd-detect-virt 2>&1)"
echo "python3 $(command -v python3) $(python3 -VV | head -1); PYTHON* env: $(env | grep -E '^PYTHON' | paste -sd' ')"
nvidia-smi topo -m | head -4 | cut -c1-160
echo "steal jiffies $(head -1 /proc/stat | awk '{print $9}'), load $(cat /proc/loadavg)"

pace() { timeout 30 python3 bench/host_pace.py --calls 500 > $L/pace_$1.log 2>&1; echo "host_pace $1 rc=$? at $SECONDS"
  grep -vE "^(device|VoxFX)" $L/pace_$1.log | cut -c1-200; }
pace 1; pace 2; pace 3
timeout 90 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1; echo "warm-up rc=$? at $SECONDS"

# core groups: NUMA nodes if more than one, else L3 domains, else the CPUs' two halves
GROUPS_=$(python3 - <<'EOF'
import glob, os
def sets(paths):
    return sorted({open(p).read().strip() for p in paths})
nodes = sets(glob.glob("/sys/devices/system/node/node*/cpulist"))
l3 = sets(glob.glob("/sys/devices/system/cpu/cpu*/cache/index3/shared_cpu_list"))
cpus = sorted(os.sched_getaffinity(0))
half = len(cpus) // 2
groups = nodes if len(nodes) > 1 else l3 if len(l3) > 1 else [",".join(map(str, cpus[:half])), ",".join(map(str, cpus[half:]))]
print(" ".join(groups))
EOF
)
echo "row groups: $GROUPS_"
row() {  # row TAG [CPUS]: the 8M row, pinned to CPUS if given, then its own process's host µs (host_pace --after)
  local tag=$1 cpus=${2:-} s0 t0
  s0=$(head -1 /proc/stat | awk '{print $9}'); t0=$SECONDS
  timeout 28 ${cpus:+taskset -c $cpus} python3 bench/host_pace.py --cpus --calls 500 --after bench/flip_sparse.py \
    --row 8m --steps 12 --warm 2 > $L/row_$tag.log 2>&1
  echo "$tag (${cpus:-unpinned}) rc=$? $((SECONDS - t0)) s, steal +$(( $(head -1 /proc/stat | awk '{print $9}') - s0 )):" \
    "$(grep -E '^sparse' $L/row_$tag.log | cut -d'|' -f6-12 | tr -s ' ')"
  grep -E "sub-stages" $L/row_$tag.log | cut -c1-200
  grep -E "^(after|start) " $L/row_$tag.log | sed 's/^after bench.*: on/  on/' | cut -c1-160
}
set -- $GROUPS_
i=0
while [ $SECONDS -lt 165 ]; do
  i=$((i + 1))
  row u$i; [ $SECONDS -lt 170 ] || break
  row a$i "$1"; [ $SECONDS -lt 170 ] || break
  row b$i "$2"
done
[ $SECONDS -lt 188 ] && pace 4
echo "end at $SECONDS"
tar czf $OUT/logs.tgz -C /tmp s23f 2>/dev/null
