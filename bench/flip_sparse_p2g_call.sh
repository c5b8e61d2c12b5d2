#!/usr/bin/env bash
# The device call for P2G's grouped count (issue 24, branch i24y; sparse_gpu.bin_count_mode):
# bench/flip_sparse_p2g.py --ab on the 8M dam break (bits, launches, whole P2G and whole substeps,
# the atomic and grouped counts in one process), the P2G GPU files, then bench/flip_sparse.py's 8M
# row with either count in separate processes. Each part under its own timeout (≤ 170 s in all);
# logs under $OUT.
. "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
timeout ${AB_S:-100} python3 bench/flip_sparse_p2g.py --ab ${AB_SUBSTEPS:-9} --repeat 7 > "$OUT/ab.log" 2>&1
echo "ab rc=$? elapsed $SECONDS"
grep -vE "^ *$" "$OUT/ab.log" | grep -vE "Warning|warn" | tail -40
timeout ${TESTS_S:-60} python3 -m pytest -q -p no:cacheprovider -rf --durations=5 \
    $T/test_flip_sparse_grouped_count_gpu.py $T/test_flip_sparse_scatter_gpu.py $T/test_flip_sparse_binning_gpu.py \
    $T/test_flip_sparse_g2p_gpu.py $T/test_flip_sparse_gpu.py > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; pytest_lines "$OUT/tests.log" 20
echo "elapsed $SECONDS"
# the coordinator's row, the old count and the new default in separate processes (if time is left)
for mode in atomic grouped; do
    VOXFX_SPARSE_BIN_COUNT=$mode timeout ${ROW_S:-30} python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2 \
        > "$OUT/row_$mode.log" 2>&1
    echo "row $mode rc=$?"; grep -E "^sparse|floors|sub-stages" "$OUT/row_$mode.log" | head -4
done
echo "elapsed $SECONDS"
