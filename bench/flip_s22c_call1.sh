# Ran at commit 07ef777 (session 22, call 1 of s22c); the x-pair table (tablex) and VOXFX_SPARSE_G2P_ARGS were
# removed after call 2 (slower / no cheaper: bench/RESULTS.md "s22c"), so this script no longer runs as it is.
# s22c's first device call (issue 24: G2P + advection at 8M toward ≤ 0.40 ms): the x-pair brick table
# (VOXFX_SPARSE_G2P_CORNERS=tablex) and the launch's scalars kept (VOXFX_SPARSE_G2P_ARGS=kept). The warm-up and the
# tablex builds compiling in parallel with the GPU files (the block G2P file: every corners incl. tablex, the args
# test; with tablex set: the shapes test, every G2P kernel against NumPy, the sparse FLIP file with kept args), then
# the timings alone: the block G2P kernel alone (table-centred, the default's, against tablex, 8 × 128 and 9 × 128,
# FLIP and APIC, end and time-centred, with the call's host time), then the 8M row with the old and new ways
# alternating substep by substep in one process. Run from this tree's root (the copy under .cache/s22c); ≤ 200 s.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/s22c; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
which ncu || echo "no ncu"
timeout 80 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1 & P0=$!
timeout 80 python3 - > $L/compile.log 2>&1 <<'PYEOF' & P1=$!
from tools.package import load
load()
from voxfx.kernels.flip import sparse_g2p_gpu as g
for e in g.G2P_BLOCK_ENTRIES.values():
    g.G2P_BLOCK_TABLEX.get(e)
    g.g2p_block_module(9, 128, "tablex").get(e)
    g.g2p_block_module(9, 128, "table", g.G2P_TABLE_OR["centred"]).get(e)
print("compiled")
PYEOF
timeout -s INT 95 $PY $T/test_flip_sparse_g2p_block_gpu.py -k "not shape" > $L/g1.log 2>&1 & P2=$!
VOXFX_SPARSE_G2P_CORNERS=tablex timeout -s INT 95 $PY $T/test_flip_sparse_g2p_block_gpu.py \
  $T/test_flip_sparse_g2p_gpu.py -k "shape or not block_gpu" > $L/g2.log 2>&1 & P3=$!
VOXFX_SPARSE_G2P_CORNERS=tablex VOXFX_SPARSE_G2P_ARGS=kept timeout -s INT 95 $PY $T/test_flip_sparse_gpu.py \
  > $L/g3.log 2>&1 & P4=$!
wait $P0; echo "warm-up rc=$? elapsed $SECONDS"
wait $P1; echo "compile rc=$? elapsed $SECONDS"; tail -1 $L/compile.log
wait $P2; echo "G1 g2p block file (every corners incl. tablex, args kept) rc=$?"; pytest_lines $L/g1.log 10
wait $P3; echo "G2 tablex: block shapes + g2p file rc=$?"; pytest_lines $L/g2.log 10
wait $P4; echo "G3 tablex + kept: sparse flip file rc=$?"; pytest_lines $L/g3.log 10
echo "elapsed $SECONDS"
timeout 40 python3 bench/flip_sparse_g2p_project.py --repeat 7 --apic \
  --shapes table-centred:8x128 tablex:8x128 tablex+kept:8x128 tablex:9x128 table-centred:9x128 > $L/g2p.log 2>&1
echo "g2p bench rc=$? elapsed $SECONDS"; grep -E "^(G2P|case|end of|time-centred|APIC|Traceback|[A-Za-z]*Error)" $L/g2p.log
[ $SECONDS -lt 160 ] && { timeout 40 python3 bench/flip_sparse.py --row 8m --steps 12 --warm 2 \
  --ab VOXFX_SPARSE_G2P_CORNERS=table VOXFX_SPARSE_G2P_ARGS=plain \
  --ab VOXFX_SPARSE_G2P_CORNERS=tablex VOXFX_SPARSE_G2P_ARGS=kept > $L/ab1.log 2>&1
  echo "row A/B (old, new) rc=$? elapsed $SECONDS"; grep -E "particles|G2P_CORNERS|sub-stages" $L/ab1.log; }
tar czf $OUT/logs.tgz -C /tmp s22c 2>/dev/null
