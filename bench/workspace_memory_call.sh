#!/usr/bin/env bash
# The one device call for the set-up workspace's memory (issue 24 + issue 21 §6, branch i24w;
# kernels/flip/sparse_pressure_workspace.py). Phase 1, side by side (in-use bytes are counted per
# process, so the processes beside a memory run do not enter its numbers): GPU tests in workspace
# mode (and the release and workspace files in the default mode, the workspace file with the coarse
# scratch kept too), and the 8M dam break's memory over 60 frames (bench/memory_liquid.py) with the
# fresh set-up, the workspace and the workspace with its coarse scratch kept. Phase 2, alone: the 8M
# pressure stage timed in each of the three (bench/flip_sparse.py). Logs and the per-mode
# memory_liquid json under $OUT; ≤ 150 s in all.
. "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
PY="python3 -m pytest -q -p no:cacheprovider -rf --durations=6"
VARIANTS="fresh:set-up workspace:set-up workspace:kept"
for v in $VARIANTS; do
    mode=${v%%:*}; scratch=${v##*:}; name=${mode}_${scratch}
    (mkdir -p "$OUT/m_$name"
     VOXFX_SPARSE_SETUP=$mode VOXFX_SPARSE_SETUP_SCRATCH=$scratch OUT="$OUT/m_$name" timeout 72 python3 \
        bench/memory_liquid.py --rows dam --frames 60 --budget 40 --dam-cap 25 > "$OUT/memory_$name.log" 2>&1
     echo "memory $name rc=$?" > "$OUT/memory_$name.rc"
     cp "$OUT/m_$name/memory_liquid.json" "$OUT/memory_liquid_$name.json") &
done
VOXFX_SPARSE_SETUP=workspace timeout 80 $PY $T/test_flip_centred_advection_gpu.py > "$OUT/tests_ws_a.log" 2>&1 &
A=$!
VOXFX_SPARSE_SETUP=workspace timeout 80 $PY $T/test_solver_release_gpu.py $T/test_flip_sparse_pressure_workspace_gpu.py \
    $T/test_liquid_memory_check_gpu.py > "$OUT/tests_ws_b.log" 2>&1 &
B=$!
VOXFX_SPARSE_SETUP=fresh timeout 80 $PY $T/test_solver_release_gpu.py $T/test_flip_sparse_pressure_workspace_gpu.py \
    > "$OUT/tests_fresh.log" 2>&1 &
C=$!
VOXFX_SPARSE_SETUP_SCRATCH=kept timeout 80 $PY $T/test_flip_sparse_pressure_workspace_gpu.py \
    > "$OUT/tests_kept.log" 2>&1 &
D=$!
wait $A; echo "tests workspace (centred advection) rc=$?"
wait $B; echo "tests workspace (release, workspace, memory check) rc=$?"
wait $C; echo "tests fresh (release, workspace) rc=$?"
wait $D; echo "tests workspace file, coarse scratch kept rc=$?"
wait
for f in tests_ws_a tests_ws_b tests_fresh tests_kept; do
    echo "== $f"; pytest_lines "$OUT/$f.log" 10
done
for v in $VARIANTS; do
    name=${v%%:*}_${v##*:}
    cat "$OUT/memory_$name.rc"; grep -E "^dam 8M|^== |^(1|10|20|23|30|40|50|60) \|" "$OUT/memory_$name.log" | cut -c1-200
done
echo "elapsed $SECONDS"
for v in $VARIANTS; do  # timing: alone on the device
    mode=${v%%:*}; scratch=${v##*:}; name=${mode}_${scratch}
    VOXFX_SPARSE_SETUP=$mode VOXFX_SPARSE_SETUP_SCRATCH=$scratch timeout 21 python3 bench/flip_sparse.py --row 8m \
        --steps 8 --warm 2 > "$OUT/flip_$name.log" 2>&1
    echo "== flip_sparse 8m $name rc=$?"; grep -E "^sparse|pressure ms per substep" "$OUT/flip_$name.log" | cut -c1-260
done
echo "elapsed $SECONDS"
