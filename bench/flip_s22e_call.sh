# s22e's device call (issue 24): the cells stage in one launch and two (VOXFX_SPARSE_CELLS_BRICK=fused|staged:
# cells_rhs_brick[_staged], then cells_label and cells_sealed) against the five launches ("apart"). The new GPU
# file, and the one-read, hook, density and pressure files with a fused way set, beside the warm-up; then each
# set-up kernel's device ms (the ways in turn each substep, one process; "staged" at 128 and 256 threads a
# block) and the 8M row A/B in both orders. Run from this tree's root (the copy under .cache/s22e); ≤ 200 s.
# A record of call 1: the "staged" way it measured was removed after call 2 (slower), so it no longer runs as is.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/s22e; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
V=VOXFX_SPARSE_CELLS_BRICK
timeout 90 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1 & P0=$!
timeout -s INT 85 $PY $T/test_flip_sparse_pressure_cells_brick_gpu.py > $L/g1.log 2>&1 & P1=$!
env $V=fused timeout -s INT 85 $PY $T/test_flip_sparse_pressure_one_read_gpu.py \
  $T/test_flip_sparse_pressure_hook_gpu.py $T/test_flip_density_gpu.py > $L/g2.log 2>&1 & P2=$!
env $V=staged timeout -s INT 85 $PY $T/test_flip_sparse_pressure_gpu.py > $L/g3.log 2>&1 & P3=$!
wait $P0; echo "warm-up rc=$? elapsed $SECONDS"
wait $P1; echo "G1 cells-brick file rc=$?"; pytest_lines $L/g1.log 12
wait $P2; echo "G2 one-read, hook, density ($V=fused) rc=$?"; pytest_lines $L/g2.log 12
wait $P3; echo "G3 pressure ($V=staged) rc=$?"; pytest_lines $L/g3.log 12
echo "elapsed $SECONDS"
[ $SECONDS -lt 120 ] && timeout 45 python3 bench/flip_sparse_setup_kernels.py --substeps 4 --set $V=apart \
  --set $V=fused --set $V=staged --set $V=staged sparse_pressure_cells._FUSED_THREADS=256 > $L/kernels.log 2>&1
echo "kernels rc=$? at $SECONDS"
grep -E "^way|cells stage|cells_|stages \(spun" $L/kernels.log | cut -c1-160
[ $SECONDS -lt 160 ] && timeout 30 python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2 --ab $V=apart \
  --ab $V=staged > $L/ab1.log 2>&1; echo "A/B apart,staged rc=$? at $SECONDS"
grep -E "CELLS_BRICK|sub-stages" $L/ab1.log | cut -c1-300
[ $SECONDS -lt 180 ] && timeout 28 python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2 --ab $V=staged \
  --ab $V=apart > $L/ab2.log 2>&1; echo "A/B staged,apart rc=$? at $SECONDS"
grep -E "CELLS_BRICK|sub-stages" $L/ab2.log | cut -c1-300
echo "elapsed $SECONDS"
tar czf $OUT/logs.tgz -C /tmp s22e 2>/dev/null
