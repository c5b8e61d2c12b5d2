#!/usr/bin/env bash
# The device call for the block G2P kernel (issue 24, branch i24g; VOXFX_SPARSE_G2P_KERNEL=block):
# bench/flip_sparse_g2p_block.py on the 8M dam break (bricks, block and lean on the same
# particles, bits compared, then substeps alternating block and the defaults in one process),
# ncu on one launch of bricks and of block at 8M (-s 2: past the two substeps' G2P), the G2P GPU
# files, then bench/flip_sparse.py --row 8m --ab block against bricks. Each part under its own
# timeout (≤ 195 s in all); logs under $OUT.
. "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
timeout ${BENCH_S:-70} python3 bench/flip_sparse_g2p_block.py --steps ${STEPS:-8} > "$OUT/bench.log" 2>&1
echo "bench rc=$? elapsed $SECONDS"
grep -vE "^ *$" "$OUT/bench.log" | grep -vE "Warning|warn" | tail -20
NCU=${NCU:-/usr/local/cuda/bin/ncu}
timeout ${NCU_S:-35} "$NCU" -k regex:g2p_advect_ -s 2 -c 2 --section SpeedOfLight --section InstructionStats \
    --section WarpStateStats --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis \
    --section SchedulerStats --section ComputeWorkloadAnalysis --print-details all \
    python3 bench/flip_sparse_g2p_block.py --substeps 2 --ncu > "$OUT/ncu.log" 2>&1
echo "ncu rc=$? elapsed $SECONDS"
grep -E "g2p_advect_|Duration|Executed Ipc A|Issue Slots Busy|Registers Per|Achieved Occupancy|Theoretical Occ|Executed Instructions  |Memory Throughput|L1/TEX Hit|Stall|Local|No Eligible|Compute \(SM\)" \
    "$OUT/ncu.log" | head -80
timeout ${TESTS_S:-40} python3 -m pytest -q -p no:cacheprovider -rf --durations=5 \
    $T/test_flip_sparse_g2p_block_gpu.py $T/test_flip_sparse_g2p_gpu.py > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; pytest_lines "$OUT/tests.log" 20
echo "elapsed $SECONDS"
timeout ${ROW_S:-50} python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2 --ab VOXFX_SPARSE_G2P_KERNEL=block \
    --ab VOXFX_SPARSE_G2P_KERNEL=bricks > "$OUT/row_ab.log" 2>&1
echo "row ab rc=$?"; grep -E "VOXFX|sub-stages|bricks;" "$OUT/row_ab.log" | head -6
echo "elapsed $SECONDS"
