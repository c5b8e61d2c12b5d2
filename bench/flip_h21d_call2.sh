# h21d's second device call (A/B): VOXFX_SPARSE_PROJECT_FLUID=1 (project_faces_fluid) and
# VOXFX_SPARSE_G2P_BLOCK_SHAPE=8x128 against the defaults — GPU tests with the switches (the new tests, the
# sparse FLIP and G2P files with both on), the projection stage and the G2P shapes alternating
# (bench/flip_sparse_g2p_project.py), then the 8M row in separate processes, the ways alternating.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/h21d; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
NEW="VOXFX_SPARSE_PROJECT_FLUID=1 VOXFX_SPARSE_G2P_BLOCK_SHAPE=8x128"
timeout 85 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1 & P0=$!
timeout -s INT 85 $PY $T/test_flip_sparse_pressure_gpu.py -k "project" > $L/g1.log 2>&1 & P1=$!
timeout -s INT 85 $PY $T/test_flip_sparse_g2p_block_gpu.py > $L/g4.log 2>&1 & P4=$!
env $NEW timeout -s INT 85 $PY $T/test_flip_sparse_gpu.py > $L/g2.log 2>&1 & P2=$!
env $NEW timeout -s INT 85 $PY $T/test_flip_sparse_g2p_gpu.py > $L/g3.log 2>&1 & P3=$!
wait $P0; echo "warm-up rc=$? elapsed $SECONDS"
wait $P1; echo "G1 pressure file -k project rc=$?"; pytest_lines $L/g1.log 10
wait $P4; echo "G4 g2p block file rc=$?"; pytest_lines $L/g4.log 10
wait $P2; echo "G2 sparse FLIP file, switches on rc=$?"; pytest_lines $L/g2.log 10
wait $P3; echo "G3 G2P file, switches on rc=$?"; pytest_lines $L/g3.log 10
echo "elapsed $SECONDS"
timeout 55 python3 bench/flip_sparse_g2p_project.py --repeat 7 --shapes 4x256 8x128 16x64 32x32 > $L/stage.log 2>&1
echo "stage bench rc=$? elapsed $SECONDS"; grep -v "^device\|^VoxFX" $L/stage.log | tail -14
# the row's shape: the fastest at the end of the substep (the row's variant) among the stage bench's, else 8x128
BEST=$(awk -F' [|] ' '/^end of substep [|]/ && $4=="True" {if (b=="" || $3+0 < m) {m=$3+0; b=$2}} END{print b}' $L/stage.log)
NEW="VOXFX_SPARSE_PROJECT_FLUID=1 VOXFX_SPARSE_G2P_BLOCK_SHAPE=${BEST:-8x128}"; echo "row ways: (defaults) / $NEW"
i=0
for w in base new base new; do
  [ $SECONDS -gt 182 ] && { echo "row $w skipped (time)"; continue; }
  i=$((i+1))
  if [ $w = new ]; then env $NEW timeout 40 python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2 > $L/row$i.log 2>&1
  else timeout 40 python3 bench/flip_sparse.py --row 8m --steps 8 --warm 2 > $L/row$i.log 2>&1; fi
  echo "row $i $w rc=$? elapsed $SECONDS"
  grep -E "^sparse" $L/row$i.log | cut -d'|' -f6-13; grep -E "sub-stages|CG iterations" $L/row$i.log | cut -c1-260
done
echo "elapsed $SECONDS"
tar czf $OUT/logs.tgz -C /tmp h21d 2>/dev/null
