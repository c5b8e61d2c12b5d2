# h21i's device call (issue 24): the block G2P's table corners — the cheaper per-axis code (table_axis_code),
# the table with APIC, the default launch shape. The G2P GPU files (the block file with
# VOXFX_SPARSE_G2P_CORNERS=table: the table with APIC at every shape too) in parallel with the bench's kernels
# compiling, then the kernel alone from one state (bench/flip_sparse_g2p_project.py --apic --base base: main's
# table header as base-table, this tree's as table, select and pairs, at 4x256 and 8x128, the ways in turn, FLIP
# and APIC, end and time-centred). Run from this tree's root (the copy under .cache/h21i, main's table header
# under base/); ≤ 120 s.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/h21i; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
SHAPES="base-table:4x256 table:4x256 base-table:8x128 table:8x128 select:4x256 pairs:4x256 select:8x128 pairs:8x128"
timeout 60 python3 - > $L/compile.log 2>&1 <<'PYEOF' & P0=$!
import sys; sys.path.insert(0, "bench")
import flip_sparse_g2p_project as b
from pathlib import Path
from voxfx.kernels.flip import sparse_g2p_gpu as s
base = b.base_table_modules(Path("base/kernels/cuda/include/voxfx_g2p_block_table.cuh").read_text())
for shape in ((None, None), (8, 128)):
    for m in (*(s.g2p_block_module(*shape, c) for c in ("select", "pairs", "table")), base(*shape, "table")):
        for e in s.G2P_BLOCK_ENTRIES.values():
            m.get(e)
print("compiled")
PYEOF
VOXFX_SPARSE_G2P_CORNERS=table timeout -s INT 75 $PY $T/test_flip_sparse_g2p_block_gpu.py > $L/g1.log 2>&1 & P1=$!
timeout -s INT 75 $PY $T/test_flip_sparse_g2p_gpu.py > $L/g2.log 2>&1 & P2=$!
wait $P0; echo "compile rc=$? elapsed $SECONDS"; tail -2 $L/compile.log
wait $P1; echo "G1 g2p block file (corners table) rc=$?"; pytest_lines $L/g1.log 10
wait $P2; echo "G2 g2p file rc=$?"; pytest_lines $L/g2.log 10
echo "elapsed $SECONDS"
timeout 42 python3 bench/flip_sparse_g2p_project.py --repeat 7 --apic --base base --shapes $SHAPES > $L/stage.log 2>&1
echo "stage bench rc=$? elapsed $SECONDS"; grep -E "^(device|G2P|case|end of|time-centred|APIC)" $L/stage.log
tail -3 $L/stage.log | grep -iE "error|Traceback" && tail -5 $L/stage.log
tar czf $OUT/logs.tgz -C /tmp h21i 2>/dev/null
