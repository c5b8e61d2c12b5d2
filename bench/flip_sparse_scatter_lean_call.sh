#!/usr/bin/env bash
# The device call for the scatter's lean code (issue 24, helper i24q2; sparse_scatter.kernel_mode):
# ptxas and the SASS opcode counts of p2g_scatter_brick in either code, the scatter and binning GPU
# files, bench/flip_sparse_scatter_lean.py (bits, launches, whole P2G, classify, extrapolate),
# bench/flip_sparse.py's 8M row with the substeps alternating between each code and the defaults, then
# ncu's counts of the scatter's shared atomics and global loads in either code (NCU_SECTIONS=1: also
# ncu's sections on one launch of each P2G kernel). Each part under its own timeout (≤ 200 s in all
# without the sections); logs under $OUT.
. "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
CUDA_BIN=/usr/local/cuda/bin
for lean in 0 1; do
    $CUDA_BIN/nvcc --std=c++17 -Ikernels/cuda/include --fmad=false -DSCATTER_MIN_BLOCKS=4 -DSCATTER_PAIRED=1 \
        -DSCATTER_LEAN=$lean -arch=sm_90 -cubin -Xptxas -v -o "$OUT/scatter_$lean.cubin" \
        kernels/cuda/flip_sparse_scatter.cu 2>&1 | grep -A2 "p2g_scatter_brick' for" | tail -1 | sed "s/^/lean=$lean /"
    $CUDA_BIN/cuobjdump -sass -fun p2g_scatter_brick "$OUT/scatter_$lean.cubin" > "$OUT/sass_$lean.txt" 2>&1
    python3 - "$OUT/sass_$lean.txt" <<'PY'
import collections, re, sys
ops = collections.Counter()
for line in open(sys.argv[1]):
    m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_.]+)", line)
    if m:
        ops[m.group(1).split(".")[0]] += 1
print(f"  {sum(ops.values())} SASS instructions:", ", ".join(f"{k} {v}" for k, v in ops.most_common(24)))
PY
done
rm -f "$OUT"/*.cubin
echo "elapsed $SECONDS"
timeout ${TESTS_S:-50} python3 -m pytest -q -p no:cacheprovider -rf $T/test_flip_sparse_scatter_lean_gpu.py \
    $T/test_flip_sparse_scatter_gpu.py $T/test_flip_sparse_binning_gpu.py $T/test_flip_sparse_grouped_count_gpu.py \
    > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; pytest_lines "$OUT/tests.log" 20
echo "elapsed $SECONDS"
timeout ${BENCH_S:-55} python3 bench/flip_sparse_scatter_lean.py --repeat 9 > "$OUT/bench.log" 2>&1
echo "bench rc=$?"; grep -vE "^ *$|Warning|warn" "$OUT/bench.log" | tail -24
echo "elapsed $SECONDS"
for way in lean classic; do  # the other code against the defaults (lean), then classic against lean
    timeout ${ROW_S:-30} python3 bench/flip_sparse.py --row 8m --steps 8 --warm 1 --ab VOXFX_SPARSE_SCATTER_KERNEL=$way \
        --ab '' > "$OUT/row_$way.log" 2>&1
    echo "row $way rc=$?"; grep -vE "^ *$|Warning|warn|VoxFX|device" "$OUT/row_$way.log" | tail -5
done
echo "elapsed $SECONDS"
# the scatter's shared atomics and global loads in either code (classic first)
timeout ${NCU_METRICS_S:-30} $CUDA_BIN/ncu --profile-from-start off -k regex:p2g_scatter_brick --metrics \
smsp__inst_executed.sum,smsp__inst_executed_op_shared_atom.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_atom.sum,\
l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_atom.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,\
l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__throughput.avg.pct_of_peak_sustained_active,gpu__time_duration.sum \
    python3 bench/flip_sparse_scatter_lean.py --ncu > "$OUT/ncu_metrics.log" 2>&1
echo "ncu metrics rc=$?"; grep -E "^  [a-z_]+.*\(|sum|pct" "$OUT/ncu_metrics.log" | head -24
echo "elapsed $SECONDS"
if [ -n "${NCU_SECTIONS:-}" ]; then  # the sections of call 1 (NCU_SECTIONS=1)
timeout ${NCU_S:-50} $CUDA_BIN/ncu --profile-from-start off --section SpeedOfLight --section LaunchStats \
    --section Occupancy --section InstructionStats --section WarpStateStats --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis_Tables python3 bench/flip_sparse_scatter_lean.py --ncu > "$OUT/ncu.log" 2>&1
echo "ncu rc=$?"; grep -E "^  [a-z_]+.*\(|Duration|Executed Instructions  |Issue Slots Busy|L1/TEX Cache|Achieved Occ" \
    "$OUT/ncu.log" | head -60
echo "elapsed $SECONDS"
fi
