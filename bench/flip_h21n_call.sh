# h21n's device call (issue 24; written in session 21 without a device, first run next session): the P2G sums
# re-zeroed by their reader (VOXFX_SPARSE_SCATTER_REZERO=1) and the block G2P's time-centred entries with h21g's
# per-axis code (VOXFX_SPARSE_G2P_TABLE_CODE=centred). The warm-up and the opt-in builds compiling in parallel with
# the GPU files (the new rezero file; the block G2P file with the table and the centred code), then the timings
# alone: the 8M row with the switch alternating substep by substep in one process (the solvers the same), and the
# block G2P kernel alone, table against table-centred at 8 × 128 (FLIP and APIC, end and time-centred). Run from
# this tree's root (the copy under .cache/h21n); ≤ 150 s.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/h21n; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
timeout 75 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1 & P0=$!
timeout 70 python3 - > $L/compile.log 2>&1 <<'PYEOF' & P1=$!
from tools.package import load
load()
from voxfx.kernels.flip import sparse_g2p_gpu as g, sparse_scatter as s
b = s._build(s.SCATTER_MIN_BLOCKS, 1, 1, 1, s.SPLIT_PARTICLES, 1)  # VOXFX_SPARSE_SCATTER_REZERO=1's
for e in ("p2g_scatter_brick", "p2g_scatter_finish", "p2g_scatter_finish_cells", "p2g_scatter_finish_live"):
    b.get(e)
for e in g.G2P_BLOCK_ENTRIES.values():
    g.G2P_BLOCK_TABLE_CENTRED.get(e)
    g.G2P_BLOCK_TABLE.get(e)
print("compiled")
PYEOF
timeout -s INT 75 $PY $T/test_flip_sparse_scatter_rezero_gpu.py -k "not table_code" > $L/g1.log 2>&1 & P2=$!
VOXFX_SPARSE_G2P_CORNERS=table VOXFX_SPARSE_G2P_TABLE_CODE=centred timeout -s INT 75 $PY \
  $T/test_flip_sparse_g2p_block_gpu.py $T/test_flip_sparse_scatter_rezero_gpu.py -k "table_code or block" \
  > $L/g2.log 2>&1 & P3=$!
wait $P0; echo "warm-up rc=$? elapsed $SECONDS"
wait $P1; echo "compile rc=$? elapsed $SECONDS"; tail -1 $L/compile.log
wait $P2; echo "G1 rezero file rc=$?"; pytest_lines $L/g1.log 10
wait $P3; echo "G2 g2p block file (table, centred code) + table-code runs rc=$?"; pytest_lines $L/g2.log 10
echo "elapsed $SECONDS"
timeout 45 python3 bench/flip_sparse.py --row 8m --steps 12 --warm 2 --ab VOXFX_SPARSE_SCATTER_REZERO=0 \
  --ab VOXFX_SPARSE_SCATTER_REZERO=1 > $L/ab.log 2>&1
echo "row A/B rc=$? elapsed $SECONDS"; grep -E "particles|REZERO|sub-stages" $L/ab.log
[ $SECONDS -lt 122 ] && { timeout 30 python3 bench/flip_sparse_g2p_project.py --repeat 7 --apic \
  --shapes table:8x128 table-centred:8x128 > $L/g2p.log 2>&1
  echo "g2p bench rc=$? elapsed $SECONDS"; grep -E "^(G2P|case|end of|time-centred|APIC)" $L/g2p.log; }
tar czf $OUT/logs.tgz -C /tmp h21n 2>/dev/null
