# s22d's device calls (issue 24): the substep as the simulation runs it (bench/flip_sparse.py --pace: blocks of
# substeps back to back, no sync of their own, beside the synced row in one simulation) on the 8M row; the
# device's pace, idle and busy time a substep. Call 2: blocks of 3 whose order turns each round (call 1's fixed
# order let the growing states rank the kinds), then the same with the topology's launch scalars kept against
# plain (h21k's open A/B, VOXFX_SPARSE_TOPOLOGY_ARGS) alternating in one simulation. Run from this tree's root
# (the copy under .cache/s22d); ≤ 200 s.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/s22d; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
timeout 80 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1 & P0=$!
timeout -s INT 90 $PY $T/test_flip_sparse_gpu.py > $L/g1.log 2>&1 & P1=$!
wait $P0; echo "warm-up rc=$? elapsed $SECONDS"; grep -E "^sparse" $L/warm.log | head -2
wait $P1; echo "G1 test_flip_sparse_gpu rc=$?"; pytest_lines $L/g1.log 10
timeout 50 python3 bench/flip_sparse.py --row 8m --pace 3 --rounds 4 --warm 2 > $L/pace.log 2>&1
echo "pace rc=$? elapsed $SECONDS"; grep -vE "^(device|VoxFX)" $L/pace.log | cut -c1-1500
[ $SECONDS -lt 140 ] && { timeout 55 python3 bench/flip_sparse.py --row 8m --pace 3 --rounds 4 --warm 2 --ab '' \
  --ab VOXFX_SPARSE_TOPOLOGY_ARGS=plain > $L/args.log 2>&1
  echo "pace A/B rc=$? elapsed $SECONDS"; grep -vE "^(device|VoxFX)|longest" $L/args.log | cut -c1-700; }
tar czf $OUT/logs.tgz -C /tmp s22d 2>/dev/null
