#!/usr/bin/env bash
# The device call for the P2G tail's memory (issue 24, session 16: call 8 found the 8M row's pool peak
# 916 MiB with VOXFX_SPARSE_P2G_TAIL=apart, the default, and 1150 with "fused"; "tail" never measured).
# For each way, one process: the row's pool peak and, with --memory-trace, the live bytes' high-water
# mark, its stage and its largest arrays by allocating line (bench/_memory_trace.py) — live arrays or
# the pool's caching of a new allocation order. Then the memory check with each non-default way on.
# ≤ 150 s on an H100. Run from the repository root.
OUT_DEFAULT=out
. "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
L=/tmp/p2g_tail_memory; mkdir -p $L
R="--row 8m --steps 8 --warm 2"
for way in apart tail fused; do
    VOXFX_SPARSE_P2G_TAIL=$way timeout 30 python3 bench/flip_sparse.py $R > $L/row_$way.log 2>&1
    echo "$way row rc=$?: $(grep '^sparse' $L/row_$way.log | awk -F'|' '{print "p2g",$7,"substep",$12,"pool peak",$15,"estimate",$17}')"
    VOXFX_SPARSE_P2G_TAIL=$way timeout 40 python3 bench/flip_sparse.py $R --memory-trace > $L/trace_$way.log 2>&1
    echo "$way trace rc=$?"; grep -A8 "memory trace:" $L/trace_$way.log | head -10
done
for way in tail fused; do
    VOXFX_SPARSE_P2G_TAIL=$way timeout 60 python3 -m pytest -q -p no:cacheprovider -rf \
        $T/test_liquid_memory_check_gpu.py > $L/check_$way.log 2>&1
    echo "memory check with $way rc=$?"; pytest_lines $L/check_$way.log 6
done
tar czf "$OUT/logs.tgz" -C /tmp p2g_tail_memory 2>/dev/null
