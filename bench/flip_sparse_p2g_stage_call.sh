#!/usr/bin/env bash
# The device call for the P2G stage's host order and cell types (issue 24, branch i24p8;
# sparse_gpu.particles_to_grid, p2g_cells_mode VOXFX_SPARSE_P2G_CELLS): the stage accounted
# (bench/flip_sparse_p2g_stage.py) on this tree and on the base tree ($BASE: the branch point,
# the bench copied in), alternating processes; the P2G / scatter / binning GPU files; the 8M row
# with the cell types' ways alternating in one simulation, then the row on the base tree and this
# one. Each part under its own timeout; logs under $OUT. (As run in call 2 the ways were '' = apart
# and finish: finish became the default after it; the first stage's 28 s ran out compiling.)
. "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
BASE=${BASE:-base_tree}
cp bench/flip_sparse_p2g_stage.py "$BASE/bench/"
stage() {  # stage TREE TAG WAYS...
    local tree=$1 tag=$2
    shift 2
    (cd "$tree" && timeout ${STAGE_S:-28} python3 bench/flip_sparse_p2g_stage.py --repeat 7 "$@") \
        > "$OUT/stage_$tag.log" 2>&1
    echo "stage $tag rc=$? elapsed $SECONDS"
    grep -vE "^ *$|Warning|warn|VoxFX:" "$OUT/stage_$tag.log" | tail -30
}
STAGE_S=${FIRST_S:-45} stage . new1 --way '' --way VOXFX_SPARSE_P2G_CELLS=apart  # compiles: more time
STAGE_S=${FIRST_S:-45} stage "$BASE" base1 --way ''
timeout ${TESTS_S:-60} python3 -m pytest -q -p no:cacheprovider -rf --durations=5 \
    $T/test_flip_sparse_p2g_cells_gpu.py $T/test_flip_sparse_grouped_count_gpu.py \
    $T/test_flip_sparse_binning_gpu.py $T/test_flip_sparse_scatter_gpu.py $T/test_flip_sparse_gpu.py \
    > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; pytest_lines "$OUT/tests.log" 20
echo "elapsed $SECONDS"
stage "$BASE" base2 --way ''
stage . new2 --way '' --way VOXFX_SPARSE_P2G_CELLS=apart
timeout ${ROW_S:-25} python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2 --ab '' \
    --ab VOXFX_SPARSE_P2G_CELLS=apart > "$OUT/row_ab.log" 2>&1
echo "row ab rc=$? elapsed $SECONDS"
grep -vE "^ *$|Warning|warn|VoxFX:" "$OUT/row_ab.log" | tail -6
for tag in base new; do
    tree=.; [ $tag = base ] && tree=$BASE
    (cd "$tree" && timeout ${ROW_S:-22} python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2) > "$OUT/row_$tag.log" 2>&1
    echo "row $tag rc=$? elapsed $SECONDS"
    grep -vE "^ *$|Warning|warn|VoxFX:" "$OUT/row_$tag.log" | tail -8
done
