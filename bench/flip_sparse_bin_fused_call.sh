#!/usr/bin/env bash
# The device call for P2G's fused binning count and cell types (issue 24, branch i24p8;
# sparse_gpu.bin_fused_mode VOXFX_SPARSE_BIN_FUSED, sparse_gpu.p2g_cells_mode VOXFX_SPARSE_P2G_CELLS):
# the P2G stage accounted launch by launch, every way (bench/flip_sparse_p2g_stage.py), the 8M row
# with the ways alternating in one simulation, the P2G / scatter / binning GPU files (the existing
# ones with both new ways on), then the count A/B of bench/flip_sparse_p2g.py. Each part under its
# own timeout (≤ 195 s in all); logs under $OUT.
. "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
timeout ${STAGE_S:-50} python3 bench/flip_sparse_p2g_stage.py --repeat 7 > "$OUT/stage.log" 2>&1
echo "stage rc=$? elapsed $SECONDS"
grep -vE "^ *$|Warning|warn" "$OUT/stage.log" | tail -60
timeout ${ROW_S:-45} python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2 --ab '' \
    --ab VOXFX_SPARSE_BIN_FUSED=all --ab VOXFX_SPARSE_P2G_CELLS=finish \
    --ab VOXFX_SPARSE_BIN_FUSED=all VOXFX_SPARSE_P2G_CELLS=finish \
    --ab VOXFX_SPARSE_BIN_FUSED=scan --ab VOXFX_SPARSE_BIN_FUSED=zero > "$OUT/row.log" 2>&1
echo "row rc=$? elapsed $SECONDS"
grep -vE "^ *$|Warning|warn" "$OUT/row.log" | tail -14
VOXFX_SPARSE_BIN_FUSED=all VOXFX_SPARSE_P2G_CELLS=finish timeout ${TESTS_S:-70} python3 -m pytest -q \
    -p no:cacheprovider -rf --durations=5 $T/test_flip_sparse_bin_fused_gpu.py \
    $T/test_flip_sparse_grouped_count_gpu.py $T/test_flip_sparse_binning_gpu.py $T/test_flip_sparse_scatter_gpu.py \
    $T/test_flip_sparse_gpu.py > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; pytest_lines "$OUT/tests.log" 20
echo "elapsed $SECONDS"
timeout ${AB_S:-25} python3 bench/flip_sparse_p2g.py --ab 4 --repeat 5 > "$OUT/p2g.log" 2>&1
echo "p2g rc=$? elapsed $SECONDS"
grep -vE "^ *$|Warning|warn" "$OUT/p2g.log" | tail -20
