#!/usr/bin/env bash
# The device call for the P2G stage's tail (issue 24, helper i24a, session 16;
# sparse_transfer.P2G_TAILS, VOXFX_SPARSE_P2G_TAIL=fused|tail|apart): three GPU test groups in
# parallel (the tail's and ring's bits, the sparse FLIP file, the scatter and band files), then
# alone: the 8M row with the three ways alternating in one simulation, the P2G stage accounted
# with the three ways alternating (bench/flip_sparse_p2g_stage.py), the G2P stage against its
# kernel alone (bench/flip_sparse_g2p_stage.py). Logs in /tmp/i24a, tarred to $OUT/logs.tgz.
OUT_DEFAULT=$OUT
. "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
L=/tmp/i24a
mkdir -p $L
tests() {  # tests TAG FILES...
    local tag=$1
    shift
    timeout ${TESTS_S:-75} python3 -m pytest -q -p no:cacheprovider -rf "$@" > "$L/tests_$tag.log" 2>&1
    echo "tests $tag rc=$?"
}
tests tail $T/test_flip_sparse_p2g_tail_gpu.py $T/test_flip_sparse_p2g_cells_gpu.py \
    $T/test_flip_sparse_binning_gpu.py &
tests sparse $T/test_flip_sparse_gpu.py &
tests scatter $T/test_flip_sparse_scatter_gpu.py $T/test_flip_sparse_band_gpu.py &
wait
for tag in tail sparse scatter; do echo "[$tag]"; pytest_lines "$L/tests_$tag.log" 12; done
echo "elapsed $SECONDS"
timeout ${ROW_S:-45} python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2 --ab VOXFX_SPARSE_P2G_TAIL=apart \
    --ab VOXFX_SPARSE_P2G_TAIL=tail --ab '' > "$L/row_ab.log" 2>&1
echo "row ab rc=$? elapsed $SECONDS"
grep -vE "^ *$|Warning|warn|VoxFX:" "$L/row_ab.log" | tail -8
timeout ${STAGE_S:-35} python3 bench/flip_sparse_p2g_stage.py --repeat 7 --way VOXFX_SPARSE_P2G_TAIL=apart \
    --way VOXFX_SPARSE_P2G_TAIL=tail --way '' > "$L/p2g_stage.log" 2>&1
echo "p2g stage rc=$? elapsed $SECONDS"
grep -vE "^ *$|Warning|warn|VoxFX:" "$L/p2g_stage.log" | tail -28
timeout ${G2P_S:-30} python3 bench/flip_sparse_g2p_stage.py --repeat 9 > "$L/g2p_stage.log" 2>&1
echo "g2p stage rc=$? elapsed $SECONDS"
grep -vE "^ *$|Warning|warn|VoxFX:" "$L/g2p_stage.log" | tail -4
tar czf "$OUT/logs.tgz" -C /tmp i24a
