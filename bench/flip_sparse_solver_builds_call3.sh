#!/usr/bin/env bash
# Issue 24's solver-build switches made safe (helper i24b2, session 15; the coordinator runs it,
# ≤ 90 s): the memory tests by themselves (device-wide free bytes) with VOXFX_SPARSE_PCG_BLOCK=singles,
# then with it and VOXFX_SPARSE_SETUP_CAPS=together (its new-level-count rule: every level fresh);
# the sparse pressure workspace / solver release / pressure GPU files with both on (two processes);
# then, where time is left (88 s in all), the memory check's spreading 1M liquid frame by frame
# (bench/_memory_check_probe.py): main's ways, BLOCK alone, CAPS alone. One log: $OUT/i24b2.log.
OUT_DEFAULT=$OUT
. "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
exec > >(tee "$OUT/i24b2.log") 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
PT="python3 -m pytest -q -p no:cacheprovider -rf"
MEM="$T/test_liquid_memory_check_gpu.py $T/test_memory_release_gpu.py"
B="VOXFX_SPARSE_PCG_BLOCK=singles"
C="VOXFX_SPARSE_SETUP_CAPS=together"
timeout 30 env $B $PT $MEM > /tmp/i24b2_m1.log 2>&1
echo "memory tests, BLOCK singles: rc=$? (${SECONDS}s)"; pytest_lines /tmp/i24b2_m1.log 8
timeout 30 env $B $C $PT $MEM > /tmp/i24b2_m2.log 2>&1
echo "memory tests, BLOCK singles + CAPS together: rc=$? (${SECONDS}s)"; pytest_lines /tmp/i24b2_m2.log 8
timeout 25 env $B $C $PT $T/test_flip_sparse_pressure_workspace_gpu.py $T/test_solver_release_gpu.py \
    > /tmp/i24b2_t1.log 2>&1 & P1=$!
timeout 25 env $B $C $PT $T/test_flip_sparse_pressure_gpu.py > /tmp/i24b2_t2.log 2>&1 & P2=$!
wait $P1 $P2  # not the log's tee
echo "workspace + solver release, both on:"; pytest_lines /tmp/i24b2_t1.log 8
echo "sparse pressure, both on:"; pytest_lines /tmp/i24b2_t2.log 8
echo "(${SECONDS}s)"
for way in "" "$B" "$C"; do
    left=$((88 - SECONDS)); [ "$left" -gt 5 ] || break
    timeout "$left" env $way python3 bench/_memory_check_probe.py > /tmp/i24b2_p.log 2>&1
    echo "probe rc=$? (${SECONDS}s)"; grep -E "^(way|frame)|Error" /tmp/i24b2_p.log
done
