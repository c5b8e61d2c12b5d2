#!/usr/bin/env bash
# The next device call for issue 24's solver builds (helper i24b; not run in session 15): the GPU
# tests with VOXFX_SPARSE_PCG_BLOCK=singles and VOXFX_SPARSE_SETUP_CAPS=together alone (GROW off),
# the memory tests by themselves (device-wide free bytes), then the 8M Fast frames with --stages,
# main's ways and the two switches, alternating twice. Logs under $OUT.
OUT_DEFAULT=$OUT
. "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
FR="--row 8m --frames 12 --timing fast --level-set --trim --stages"
SW="env VOXFX_SPARSE_PCG_BLOCK=singles VOXFX_SPARSE_SETUP_CAPS=together"
PT="python3 -m pytest -q -p no:cacheprovider -rf"
timeout 90 $SW $PT $T/test_flip_sparse_pressure_gpu.py $T/test_flip_sparse_pressure_workspace_gpu.py \
    $T/test_solver_release_gpu.py > "$OUT/t1.log" 2>&1
echo "tests rc=$?"; pytest_lines "$OUT/t1.log" 12
timeout 60 $SW $PT $T/test_liquid_memory_check_gpu.py $T/test_memory_release_gpu.py > "$OUT/t2.log" 2>&1
echo "memory tests rc=$?"; pytest_lines "$OUT/t2.log" 12
show() { grep -E "^[0-9]+ \||solver event: (built|workspace|first solve)" "$1"; }
for i in 1 2; do
    timeout 33 python3 bench/flip_sparse.py $FR > "$OUT/before$i.log" 2>&1; echo "before $i rc=$?"
    show "$OUT/before$i.log"
    timeout 33 $SW python3 bench/flip_sparse.py $FR > "$OUT/after$i.log" 2>&1; echo "after $i rc=$?"
    show "$OUT/after$i.log"
    echo "elapsed $SECONDS"
done
