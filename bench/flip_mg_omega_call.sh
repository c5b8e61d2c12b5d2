#!/usr/bin/env bash
# Issue 24, i24m: the over-relaxed V-cycle on a device in one call. The 8M dam break
# (bench/flip_sparse.py --row 8m) with VOXFX_SPARSE_MG_OMEGA=1 (today) and 1.3, separate
# processes in the order old, new, old, new (ω is compiled into the kernels), then the GPU
# tests of the over-relaxed kernels in the time left (CALL_SECONDS in all; TESTS=0: none), and
# the 8M row once for each ω of EXTRA (other values of ω) while time is left.
#     bash bench/flip_mg_omega_call.sh [rows: 8m | 8m 65m]
set -u
OUT_DEFAULT=/tmp/mg_omega
. "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
CALL_SECONDS=${CALL_SECONDS:-150}
start=$(date +%s)
rows=${*:-8m}
for row in $rows; do
    args="--row 8m --steps 8 --warm 2"
    [ "$row" = 65m ] && args="--row 65m --steps 3 --warm 1"
    for i in 1 2; do
        for w in 1 1.3; do
            log="$OUT/${row}_omega${w}_$i.log"
            VOXFX_SPARSE_MG_OMEGA=$w timeout 60 python3 bench/flip_sparse.py $args > "$log" 2>&1
            echo "== $row omega $w run $i ($(( $(date +%s) - start )) s)"
            grep -E "^sparse \||CG iterations|pressure ms|Error" "$log" | cut -c1-400
        done
    done
done
for w in ${EXTRA:-}; do
    [ $(( CALL_SECONDS - ($(date +%s) - start) )) -gt 45 ] || break
    log="$OUT/8m_omega${w}_extra.log"
    VOXFX_SPARSE_MG_OMEGA=$w timeout 40 python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2 > "$log" 2>&1
    echo "== 8m omega $w ($(( $(date +%s) - start )) s)"
    grep -E "^sparse \||CG iterations|Error" "$log" | cut -c1-400
done
left=$(( CALL_SECONDS - ($(date +%s) - start) ))
if [ "${TESTS:-1}" != 0 ] && [ "$left" -gt 20 ]; then
    timeout "$left" python3 -m pytest -q -x -p no:cacheprovider tests/gpu/test_flip_sparse_mg_omega_gpu.py \
        > "$OUT/gpu_tests.log" 2>&1
    echo "== GPU tests rc $? ($(( $(date +%s) - start )) s)"
    tail -5 "$OUT/gpu_tests.log"
fi
