#!/usr/bin/env bash
# The device call for the lean scatter's slot order (issue 24, helper i24q4; sparse_scatter.banks_mode):
# ptxas and the SASS opcode counts of p2g_scatter_brick either way, bench/flip_sparse_scatter_banks.py
# (bits, launches, whole P2G) after 4 and after 16 substeps, ncu's counts of the scatter's shared atomics
# (wavefronts, bank conflicts) either way, bench/flip_sparse.py's 8M row with the substeps alternating
# between the flat order and the defaults (ROWS times, separate processes), then the scatter and binning
# GPU files (with test_flip_sparse_grouped_count_gpu.py and test_flip_sparse_gpu.py they ran past 45 s on
# an H100). Each part under its own timeout (≤ 180 s in all); logs under $OUT.
. "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
CUDA_BIN=/usr/local/cuda/bin
for flip in 0 1; do
    $CUDA_BIN/nvcc --std=c++17 -Ikernels/cuda/include --fmad=false -DSCATTER_MIN_BLOCKS=4 -DSCATTER_PAIRED=1 \
        -DSCATTER_LEAN=1 -DSCATTER_FLIP=$flip -arch=sm_90 -cubin -Xptxas -v -o "$OUT/scatter_$flip.cubin" \
        kernels/cuda/flip_sparse_scatter.cu 2>&1 | grep -A2 "p2g_scatter_brick' for" | tail -2 | sed "s/^/flip=$flip /"
    $CUDA_BIN/cuobjdump -sass -fun p2g_scatter_brick "$OUT/scatter_$flip.cubin" > "$OUT/sass_$flip.txt" 2>&1
    python3 - "$OUT/sass_$flip.txt" <<'PY'
import collections, re, sys
ops = collections.Counter()
for line in open(sys.argv[1]):
    m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_.]+)", line)
    if m:
        ops[m.group(1).split(".")[0]] += 1
print(f"  {sum(ops.values())} SASS instructions:", ", ".join(f"{k} {v}" for k, v in ops.most_common(16)))
PY
done
rm -f "$OUT"/*.cubin "$OUT"/sass_*.txt
echo "elapsed $SECONDS"
for sub in 4 16; do
    timeout ${BENCH_S:-42} python3 bench/flip_sparse_scatter_banks.py --substeps $sub --repeat 9 > "$OUT/bench_$sub.log" 2>&1
    echo "bench (after $sub substeps) rc=$?"; grep -vE "^ *$|Warning|warn" "$OUT/bench_$sub.log" | tail -16
    echo "elapsed $SECONDS"
done
timeout ${NCU_S:-30} $CUDA_BIN/ncu --profile-from-start off -k regex:p2g_scatter_brick --metrics \
smsp__inst_executed.sum,smsp__inst_executed_op_shared_atom.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_atom.sum,\
l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_atom.sum,l1tex__throughput.avg.pct_of_peak_sustained_active,\
gpu__time_duration.sum python3 bench/flip_sparse_scatter_banks.py --ncu > "$OUT/ncu_metrics.log" 2>&1
echo "ncu metrics rc=$?"; grep -E "^  [a-z_]+.*\(|sum|pct|profiled" "$OUT/ncu_metrics.log" | head -30
echo "elapsed $SECONDS"
for i in $(seq ${ROWS:-3}); do
    timeout ${ROW_S:-20} python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2 --ab VOXFX_SPARSE_SCATTER_BANKS=flat \
        --ab '' > "$OUT/row_$i.log" 2>&1
    echo "row $i rc=$?"; grep -vE "^ *$|Warning|warn|VoxFX|device" "$OUT/row_$i.log" | tail -5
done
echo "elapsed $SECONDS"
timeout ${TESTS_S:-45} python3 -m pytest -q -p no:cacheprovider -rf $T/test_flip_sparse_scatter_banks_gpu.py \
    $T/test_flip_sparse_scatter_gpu.py $T/test_flip_sparse_scatter_lean_gpu.py $T/test_flip_sparse_binning_gpu.py \
    > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; pytest_lines "$OUT/tests.log" 20
echo "elapsed $SECONDS"
