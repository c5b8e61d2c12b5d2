#!/usr/bin/env bash
# The device call for the coarsest level's dense inverse sized by its unknowns (issue 24, session
# 15, branch i24b3; kernels/flip/sparse_pressure_buffers.py DENSE_ROWS). Side by side (in-use bytes
# are per process): GPU tests with VOXFX_SPARSE_MG_DENSE_ROWS=bound (the dense, pressure, solve-ahead
# and persist files; the memory check alone and with VOXFX_SPARSE_SETUP_CAPS=together), the default
# way's dense and workspace files (its switched ways take "bound"), and the spreading 1M liquid frame
# by frame (bench/_memory_check_probe.py: peak, in use, each solver's dense MiB) in four ways:
# main, CAPS together, DENSE_ROWS bound, both. Logs under $OUT; ≤ 200 s in all.
OUT_DEFAULT=out
. "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
PY="python3 -m pytest -q -p no:cacheprovider -rf --durations=4"
for way in main:level:stride together:together:stride bound:level:bound both:together:bound; do
    name=${way%%:*}; rest=${way#*:}; caps=${rest%%:*}; rows=${rest##*:}
    (VOXFX_SPARSE_SETUP_CAPS=$caps VOXFX_SPARSE_MG_DENSE_ROWS=$rows timeout 170 python3 bench/_memory_check_probe.py \
        > "$OUT/probe_$name.log" 2>&1; echo "probe $name rc=$?" >> "$OUT/probe_$name.log") &
done
VOXFX_SPARSE_MG_DENSE_ROWS=bound timeout 170 $PY $T/test_flip_sparse_mg_dense_gpu.py \
    $T/test_flip_sparse_pressure_solve_ahead_gpu.py $T/test_flip_sparse_pressure_persist_gpu.py \
    > "$OUT/tests_bound_a.log" 2>&1 &
A=$!
VOXFX_SPARSE_MG_DENSE_ROWS=bound timeout 170 $PY $T/test_flip_sparse_pressure_gpu.py $T/test_liquid_memory_check_gpu.py \
    > "$OUT/tests_bound_b.log" 2>&1 &
B=$!
VOXFX_SPARSE_MG_DENSE_ROWS=bound VOXFX_SPARSE_SETUP_CAPS=together timeout 170 $PY $T/test_liquid_memory_check_gpu.py \
    > "$OUT/tests_bound_together.log" 2>&1 &
C=$!
timeout 170 $PY $T/test_flip_sparse_mg_dense_gpu.py $T/test_flip_sparse_pressure_workspace_gpu.py \
    > "$OUT/tests_main.log" 2>&1 &
D=$!
wait $A; echo "tests bound (dense, solve ahead, persist) rc=$?"
wait $B; echo "tests bound (pressure, memory check) rc=$?"
wait $C; echo "tests bound + CAPS together (memory check) rc=$?"
wait $D; echo "tests main (dense, workspace with the switched ways) rc=$?"
wait
for f in tests_bound_a tests_bound_b tests_bound_together tests_main; do
    echo "== $f"; pytest_lines "$OUT/$f.log" 10
done
for name in main together bound both; do
    echo "== probe $name"; grep -E "^way|^frame (7|8|9|10|11) |rc=" "$OUT/probe_$name.log"
done
