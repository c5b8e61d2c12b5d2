# h20c (issue 24): the dense-brick probe in one device call — its GPU test (and the CPU one) beside the
# warm-up, then bench/flip_sparse_dense_bricks.py alone on the 8M dam break. Logs in $OUT/logs.tgz.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/h20c; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
timeout 80 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1 & P0=$!
timeout -s INT 70 $PY $T/test_flip_dense_bricks_probe_gpu.py tests/unit/test_flip_dense_bricks_probe.py > $L/tests.log 2>&1 & P1=$!
wait $P1; echo "GPU + CPU probe tests rc=$?"; pytest_lines $L/tests.log 12
wait $P0; echo "warm-up rc=$? elapsed $SECONDS"
timeout 115 python3 bench/flip_sparse_dense_bricks.py > $L/bench.log 2>&1; echo "bench rc=$? elapsed $SECONDS"
cut -c1-700 $L/bench.log | tail -45
tar czf $OUT/logs.tgz -C /tmp h20c 2>/dev/null
