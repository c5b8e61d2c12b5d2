# h21d's first device call (profile): the projection stage with VOXFX_SPARSE_PROJECT_FLUID 0 / 1 and the
# block G2P kernel's launch shapes at 8M (bench/flip_sparse_g2p_project.py), beside the new GPU test;
# ptxas' registers of the shapes. ≤ 120 s of script.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/h21d; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
timeout -s INT 100 $PY $T/test_flip_sparse_pressure_gpu.py -k "project" > $L/g1.log 2>&1 & P1=$!
timeout 110 python3 bench/flip_sparse_g2p_project.py --repeat 9 > $L/bench.log 2>&1; echo "bench rc=$? elapsed $SECONDS"
grep -v "^device" $L/bench.log | tail -30
wait $P1; echo "G1 project tests rc=$?"; pytest_lines $L/g1.log 10
echo "elapsed $SECONDS"
tar czf $OUT/logs.tgz -C /tmp h21d 2>/dev/null
