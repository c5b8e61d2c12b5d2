# s22e's second device call (issue 24): after call 1 (cells stage 0.179 ms in 5 launches → 0.133 in 3, the fused
# kernel 0.098 ms alone), the fused kernel with its loads issued together, fewer inner links and the "inner" way
# (the faces left to cells_hook_faces). The GPU file (fused, staged, inner) and the one-read, hook, density and
# pressure files with a way set, beside the warm-up; then where the fused kernel's time goes
# (bench/flip_cells_brick_phases.py), each set-up kernel's device ms a substep, and the 8M row A/B in both
# orders. Run from this tree's root (the copy under .cache/s22e); ≤ 200 s.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/s22e2; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
V=VOXFX_SPARSE_CELLS_BRICK
timeout 90 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1 & P0=$!
timeout -s INT 85 $PY $T/test_flip_sparse_pressure_cells_brick_gpu.py > $L/g1.log 2>&1 & P1=$!
env $V=fused timeout -s INT 85 $PY $T/test_flip_sparse_pressure_one_read_gpu.py \
  $T/test_flip_sparse_pressure_hook_gpu.py $T/test_flip_density_gpu.py > $L/g2.log 2>&1 & P2=$!
env $V=inner timeout -s INT 85 $PY $T/test_flip_sparse_pressure_gpu.py > $L/g3.log 2>&1 & P3=$!
wait $P0; echo "warm-up rc=$? elapsed $SECONDS"
wait $P1; echo "G1 cells-brick file rc=$?"; pytest_lines $L/g1.log 12
wait $P2; echo "G2 one-read, hook, density ($V=fused) rc=$?"; pytest_lines $L/g2.log 12
wait $P3; echo "G3 pressure ($V=inner) rc=$?"; pytest_lines $L/g3.log 12
echo "elapsed $SECONDS"
timeout 50 python3 bench/flip_cells_brick_phases.py > $L/phases.log 2>&1; echo "phases rc=$? at $SECONDS"
grep -vE "^\s*$|VoxFX" $L/phases.log | cut -c1-170
[ $SECONDS -lt 140 ] && timeout 30 python3 bench/flip_sparse_setup_kernels.py --substeps 4 --set $V=apart \
  --set $V=fused --set $V=inner --set $V=fused sparse_pressure_cells._FUSED_THREADS=256 > $L/kernels.log 2>&1
echo "kernels rc=$? at $SECONDS"
grep -E "^way|cells stage|cells_|stages \(spun" $L/kernels.log | cut -c1-160
[ $SECONDS -lt 165 ] && timeout 20 python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2 --ab $V=apart \
  --ab $V=fused --ab $V=inner > $L/ab1.log 2>&1; echo "A/B apart,fused,inner rc=$? at $SECONDS"
grep -E "CELLS_BRICK" $L/ab1.log | cut -c1-250
[ $SECONDS -lt 185 ] && timeout 20 python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2 --ab $V=inner \
  --ab $V=fused --ab $V=apart > $L/ab2.log 2>&1; echo "A/B inner,fused,apart rc=$? at $SECONDS"
grep -E "CELLS_BRICK" $L/ab2.log | cut -c1-250
echo "elapsed $SECONDS"
tar czf $OUT/logs.tgz -C /tmp s22e2 2>/dev/null
