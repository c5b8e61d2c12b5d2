#!/usr/bin/env bash
# The device call for the particle transfers' A/B (issue 24, helper i24p): bench/flip_sparse_transfers_ab.py
# on the 8M dam break (G2P bricks / lean / auto, the scatter's serial / paired atomics, whole substeps old /
# new, end-of-substep and time-centred, in one process), the transfers' GPU files (the scatter files twice:
# paired, the default, and serial atomics), then, with NCU=1 where ncu is on the machine and time is left,
# one launch of each kernel profiled. Logs under $OUT; ≤ ~155 s in all.
. "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
echo "ncu: $(which ncu || echo none)"
timeout ${AB_S:-80} python3 bench/flip_sparse_transfers_ab.py --rounds 7 --steps 8 --centred-steps 8 > "$OUT/ab.log" 2>&1
echo "ab rc=$? elapsed $SECONDS"
grep -vE "^ *$" "$OUT/ab.log" | grep -vE "Warning|warn" | tail -30
timeout ${TESTS_S:-45} python3 -m pytest -q -p no:cacheprovider -x -rf $T/test_flip_sparse_g2p_gpu.py \
    $T/test_flip_centred_advection_gpu.py::test_sparse_kernels_in_both_orders_give_the_reference_bits $T/test_flip_sparse_scatter_gpu.py \
    $T/test_flip_sparse_binning_gpu.py $T/test_flip_sparse_grouped_count_gpu.py > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; pytest_lines "$OUT/tests.log" 12
VOXFX_SPARSE_SCATTER_ATOMICS=serial timeout ${TESTS2_S:-20} python3 -m pytest -q -p no:cacheprovider -x -rf \
    $T/test_flip_sparse_scatter_gpu.py $T/test_flip_sparse_binning_gpu.py > "$OUT/tests_serial.log" 2>&1
echo "tests (serial) rc=$?"; pytest_lines "$OUT/tests_serial.log" 6
echo "elapsed $SECONDS"
LEFT=$(( ${TOTAL_S:-152} - SECONDS ))
if [ -n "$NCU" ] && command -v ncu > /dev/null && [ "$LEFT" -gt 25 ]; then
    timeout $LEFT ncu --set full -k regex:"g2p_advect|p2g_scatter_brick" --launch-skip 4 --launch-count 6 \
        -o "$OUT/prof" python3 bench/flip_sparse_transfers_ab.py --profile --substeps 2 > "$OUT/ncu_run.log" 2>&1
    echo "ncu rc=$? elapsed $SECONDS"; tail -3 "$OUT/ncu_run.log"
    if [ -f "$OUT/prof.ncu-rep" ]; then
        ncu -i "$OUT/prof.ncu-rep" --page details > "$OUT/ncu_details.txt" 2>&1
        ncu -i "$OUT/prof.ncu-rep" --page raw --csv > "$OUT/ncu_raw.csv" 2>&1
        grep -E "^  [a-z_0-9]+.*\(|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Compute \(SM\) Th|Memory Throughput|Executed Ipc A|Issue Slots Busy|L1/TEX Hit|L2 Hit|Warp Cycles Per Issued|Executed Instructions  " \
            "$OUT/ncu_details.txt" | head -80
    fi
fi
echo "elapsed $SECONDS"
