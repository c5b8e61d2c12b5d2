# s23i's device call (issue 24; written on the CPU, not yet run): the set-up's fast tail stopping after the
# V-cycle's last level (VOXFX_SPARSE_SETUP_TAIL_STOP=1: mgs_tail_levels_fast_stop*) and the cells stage's face
# links by pairs and label pass by brick (VOXFX_SPARSE_CELLS_PAIRS=links|label|1: cells_rhs_brick_pairs,
# cells_label_brick), each against the default ("0"). The two new GPU files and the pressure file with both on,
# beside the warm-up; then each set-up kernel's device ms (the ways in turn each substep, one process) and the
# 8M row A/B in both orders. Run from this tree's root (the copy under .cache/s23i); ≤ 120 s.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/s23i; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
S=VOXFX_SPARSE_SETUP_TAIL_STOP; C=VOXFX_SPARSE_CELLS_PAIRS
timeout 55 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1 & P0=$!
timeout -s INT 52 $PY $T/test_flip_sparse_setup_tail_stop_gpu.py > $L/g1.log 2>&1 & P1=$!
timeout -s INT 52 $PY $T/test_flip_sparse_cells_pairs_gpu.py > $L/g2.log 2>&1 & P2=$!
env $S=1 $C=1 timeout -s INT 52 $PY $T/test_flip_sparse_pressure_gpu.py > $L/g3.log 2>&1 & P3=$!
wait $P0; echo "warm-up rc=$? elapsed $SECONDS"; grep -E "Error|Traceback" $L/warm.log | head -3
wait $P1; echo "G1 tail-stop file rc=$?"; pytest_lines $L/g1.log 12
wait $P2; echo "G2 cells-pairs file rc=$?"; pytest_lines $L/g2.log 12
wait $P3; echo "G3 pressure file ($S=1 $C=1) rc=$?"; pytest_lines $L/g3.log 12
echo "elapsed $SECONDS"
[ $SECONDS -lt 62 ] && timeout 28 python3 bench/flip_sparse_setup_kernels.py --substeps 4 --set $S=0 $C=0 \
  --set $S=1 --set $C=links --set $C=label --set $S=1 $C=1 > $L/kernels.log 2>&1
echo "kernels rc=$? at $SECONDS"
grep -E "^way|cells stage|cells_|mgs_tail|coarse levels|stages \(spun" $L/kernels.log | cut -c1-160
# the row A/B in one process (one order fits in 120 s: `bash bench/flip_s23i_call.sh 1` runs the other)
if [ "${1:-0}" = 0 ]; then A="$S=0 $C=0"; B="$S=1 $C=1"; else A="$S=1 $C=1"; B="$S=0 $C=0"; fi
[ $SECONDS -lt 92 ] && timeout $((117 - SECONDS)) python3 bench/flip_sparse.py --row 8m --steps 6 --warm 2 --ab $A \
  --ab $B > $L/ab1.log 2>&1; echo "A/B ($A first) rc=$? at $SECONDS"
grep -E "TAIL_STOP|CELLS_PAIRS|sub-stages" $L/ab1.log | cut -c1-300
echo "elapsed $SECONDS"
tar czf $OUT/logs.tgz -C /tmp s23i 2>/dev/null
