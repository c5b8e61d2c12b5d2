#!/usr/bin/env bash
# The device call for the kept channels' fills with the topology tables and the joined kept-channel
# launches (issue 24, branch i24t; VOXFX_SPARSE_TOPOLOGY_FILL, VOXFX_SPARSE_KEPT_JOIN): the topology /
# retopologize / reach / margin / sparse grid GPU files and the warm-start and centred-advection ones
# (two groups at once); the stage bench with the time-centred substep's kept channels, the ways
# alternating in one simulation (host marks, events, kernels, a cProfile); the 8M row with the fill's
# ways alternating in one simulation; then the row on the base tree ($BASE, the repository root:
# main) and on this one in separate processes. Each part under its own timeout; logs under $OUT.
# CALL=1 runs call 1's parts as they ran; the default, the second call planned (not made in session 15:
# the shared budget was under 1000 s): the remaining GPU files, main's row against this one, the stage.
. "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
BASE=${BASE:-../..}
OLD="VOXFX_SPARSE_TOPOLOGY_FILL=retopologize VOXFX_SPARSE_KEPT_JOIN=each"
if [ "${CALL:-2}" = 1 ]; then  # call 1 (as run): tests in two groups, the stage, the row A/B, base and new rows
timeout ${TESTS_S:-70} python3 -m pytest -q -p no:cacheprovider -rf $T/test_flip_sparse_topology_gpu.py \
    $T/test_sparse_mac_retopologize_gpu.py $T/test_sparse_grid_gpu.py > "$OUT/tests_a.log" 2>&1 &
timeout ${TESTS_S:-70} python3 -m pytest -q -p no:cacheprovider -rf $T/test_flip_sparse_reach_gpu.py \
    $T/test_flip_sparse_margins_gpu.py $T/test_flip_sparse_device_margin_gpu.py \
    $T/test_flip_sparse_pressure_warm_gpu.py $T/test_flip_centred_advection_gpu.py > "$OUT/tests_b.log" 2>&1 &
wait
for g in a b; do echo "tests $g:"; pytest_lines "$OUT/tests_$g.log" 12; done
echo "elapsed $SECONDS"
timeout ${STAGE_S:-40} python3 bench/flip_sparse_topology_stage.py --kept-channels --steps 10 --warm 2 --profile 2 \
    --ab '' --ab $OLD > "$OUT/stage.log" 2>&1
echo "stage rc=$? elapsed $SECONDS"
grep -E "^== |^median|^stage ms|^device|bricks|^topology_|^fill_|^copy_|^mark_|^reach_" "$OUT/stage.log" | head -60
grep -A25 "== cProfile" "$OUT/stage.log" | head -28
timeout ${ROW_S:-25} python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2 --ab '' --ab $OLD > "$OUT/row_ab.log" 2>&1
echo "row ab rc=$? elapsed $SECONDS"
grep -vE "^ *$|Warning|warn|VoxFX:" "$OUT/row_ab.log" | tail -8
for tag in base new; do
    tree=.; [ $tag = base ] && tree=$BASE
    (cd "$tree" && timeout ${ROW_S:-22} python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2) > "$OUT/row_$tag.log" 2>&1
    echo "row $tag rc=$? elapsed $SECONDS"
    grep -vE "^ *$|Warning|warn|VoxFX:" "$OUT/row_$tag.log" | tail -6
done
exit 0
fi
# call 2: the GPU files in three groups at once (call 1's second group ran out of time), the row on the
# base tree (its changed kernels compile: more time) then this one, separate processes; the stage with
# the kept channels again (the fills' arguments kept since call 1)
timeout ${TESTS_S:-85} python3 -m pytest -q -p no:cacheprovider -rf $T/test_flip_sparse_topology_gpu.py \
    $T/test_sparse_mac_retopologize_gpu.py $T/test_sparse_grid_gpu.py > "$OUT/tests_a.log" 2>&1 &
timeout ${TESTS_S:-85} python3 -m pytest -q -p no:cacheprovider -rf $T/test_flip_sparse_reach_gpu.py \
    $T/test_flip_sparse_margins_gpu.py $T/test_flip_sparse_device_margin_gpu.py > "$OUT/tests_b.log" 2>&1 &
timeout ${TESTS_S:-85} python3 -m pytest -q -p no:cacheprovider -rf $T/test_flip_sparse_pressure_warm_gpu.py \
    $T/test_flip_centred_advection_gpu.py > "$OUT/tests_c.log" 2>&1 &
wait
for g in a b c; do echo "tests $g:"; pytest_lines "$OUT/tests_$g.log" 12; tail -c 300 "$OUT/tests_$g.log" | tail -2; done
echo "elapsed $SECONDS"
for tag in base new; do
    tree=.; [ $tag = base ] && tree=$BASE
    limit=${ROW_S:-22}; [ $tag = base ] && limit=${BASE_S:-45}
    (cd "$tree" && timeout $limit python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2) > "$OUT/row_$tag.log" 2>&1
    echo "row $tag rc=$? elapsed $SECONDS"
    grep -vE "^ *$|Warning|warn|VoxFX:" "$OUT/row_$tag.log" | tail -5
done
timeout ${STAGE_S:-33} python3 bench/flip_sparse_topology_stage.py --kept-channels --steps 8 --warm 2 \
    --ab '' --ab $OLD > "$OUT/stage.log" 2>&1
echo "stage rc=$? elapsed $SECONDS"
grep -E "^== |^median|^stage ms|bricks|^topology_|^fill_|^copy_|^mark_|^reach_" "$OUT/stage.log" | head -40
