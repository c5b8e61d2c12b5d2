#!/usr/bin/env bash
# The device call for the topology stage's host work (issue 24, helper i24h, session 16; made once,
# bench/RESULTS.md "i24h"): the kept table sets (VOXFX_SPARSE_TOPOLOGY_TABLE_SETS, removed after this
# call: no faster) and the switches' kept ways (settings.env_choice; VOXFX_ENV_CHOICE=plain the
# baseline). The GPU files of the topology, the sparse grid and the sparse simulation (three groups at
# once), then the stage bench and the 8M row, each an A/B of the new ways against OLD in one simulation
# (substeps alternating), twice, the order reversed the second time. Logs under /tmp/i24h, tarred into
# $OUT/logs.tgz; summaries on stdout. Since the table sets' removal OLD's first variable names nothing.
OUT_DEFAULT=$OUT; . "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
L=/tmp/i24h; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rf"
OLD="VOXFX_SPARSE_TOPOLOGY_TABLE_SETS=fresh VOXFX_ENV_CHOICE=plain"
timeout ${TESTS_S:-80} $PY $T/test_flip_sparse_topology_gpu.py $T/test_sparse_mac_retopologize_gpu.py \
    $T/test_sparse_grid_gpu.py $T/test_flip_sparse_bodies_gpu.py > $L/ta.log 2>&1 &
timeout ${TESTS_S:-80} $PY $T/test_flip_sparse_gpu.py $T/test_flip_sparse_air_band_gpu.py \
    $T/test_flip_centred_advection_gpu.py > $L/tb.log 2>&1 &
timeout ${TESTS_S:-80} $PY $T/test_flip_sparse_pressure_gpu.py $T/test_flip_sparse_pressure_warm_gpu.py \
    $T/test_flip_sparse_device_margin_gpu.py $T/test_flip_sparse_margins_gpu.py $T/test_flip_sparse_reach_gpu.py \
    > $L/tc.log 2>&1 &
wait
for g in a b c; do echo "tests $g:"; pytest_lines $L/t$g.log 10; tail -c 200 $L/t$g.log | tail -1; done
echo "elapsed $SECONDS"
STAGE="python3 bench/flip_sparse_topology_stage.py --steps 8 --warm 2"
ROW="python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2"
stage_lines() { grep -E "^== |^median µs, bricks changed|^stage ms|bricks, capacity" "$1"; }
for i in 1 2; do
    if [ $i = 1 ]; then A=(--ab '' --ab $OLD); P="--profile 2"; else A=(--ab $OLD --ab ''); P=""; fi
    timeout ${STAGE_S:-34} $STAGE "${A[@]}" $P > $L/stage$i.log 2>&1
    echo "stage #$i rc=$? elapsed $SECONDS"; stage_lines $L/stage$i.log
    timeout ${ROW_S:-26} $ROW "${A[@]}" > $L/row$i.log 2>&1
    echo "row #$i rc=$? elapsed $SECONDS"; grep -vE "^ *$|Warning|warn|VoxFX:" $L/row$i.log | tail -8
done
grep -A22 "== cProfile" $L/stage1.log | head -24
echo "elapsed $SECONDS"
tar czf $OUT/logs.tgz -C /tmp i24h 2>/dev/null
exit 0
