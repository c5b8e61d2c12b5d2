# Ran at commit 0af32de (session 22, call 2 of s22c); the x-pair table (tablex) was removed after it (slower:
# bench/RESULTS.md "s22c"), so its tablex builds and shape no longer run as they are.
# s22c's second device call (issue 24: G2P + advection at 8M toward ≤ 0.40 ms). Call 1 measured the x-pair table
# (tablex) slower than the default's table despite ~6% fewer instructions (its 96 KiB of shared memory an SM, likely
# the L1 the faces' loads hit); here the word table with split codes (tablew: 32 B a thread, as the default's). The
# warm-up and the new builds compiling in parallel with the GPU files (the block G2P file's corners test: every
# corners incl. tablew; with tablew set: the shapes test, every G2P kernel against NumPy, the sparse FLIP file), then
# the timings alone: the kernel alone (table-centred = the default's, tablew, tablex; 8 × 128; FLIP and APIC, end and
# time-centred) and the G2P call's host time with the launch's scalars plain and kept; the 8M row with the default
# and the faster new corners alternating substep by substep, in both orders (one process each); last, where time is
# left, ncu on one launch of each table (instructions, L1 hit rate, the shared-memory carve-out). Run from this
# tree's root (the copy under .cache/s22c); ≤ 200 s.
OUT_DEFAULT=$OUT; . bench/_device_call.sh
L=/tmp/s22c; mkdir -p $L
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
timeout 80 python3 bench/flip_sparse.py --row 8m --steps 2 --warm 1 > $L/warm.log 2>&1 & P0=$!
timeout 80 python3 - > $L/compile.log 2>&1 <<'PYEOF' & P1=$!
from tools.package import load
load()
from voxfx.kernels.flip import sparse_g2p_gpu as g
for e in g.G2P_BLOCK_ENTRIES.values():
    g.G2P_BLOCK_TABLEW.get(e)
    g.G2P_BLOCK_TABLEX.get(e)
print("compiled")
PYEOF
timeout -s INT 95 $PY $T/test_flip_sparse_g2p_block_gpu.py -k "corners" > $L/g1.log 2>&1 & P2=$!
VOXFX_SPARSE_G2P_CORNERS=tablew timeout -s INT 95 $PY $T/test_flip_sparse_g2p_block_gpu.py \
  $T/test_flip_sparse_g2p_gpu.py -k "shape or not block_gpu" > $L/g2.log 2>&1 & P3=$!
VOXFX_SPARSE_G2P_CORNERS=tablew timeout -s INT 95 $PY $T/test_flip_sparse_gpu.py > $L/g3.log 2>&1 & P4=$!
wait $P0; echo "warm-up rc=$? elapsed $SECONDS"
wait $P1; echo "compile rc=$? elapsed $SECONDS"; tail -1 $L/compile.log
wait $P2; echo "G1 g2p block file, every corners incl. tablew rc=$?"; pytest_lines $L/g1.log 10
wait $P3; echo "G2 tablew: block shapes + g2p file rc=$?"; pytest_lines $L/g2.log 10
wait $P4; echo "G3 tablew: sparse flip file rc=$?"; pytest_lines $L/g3.log 10
echo "elapsed $SECONDS"
timeout 45 python3 bench/flip_sparse_g2p_project.py --repeat 9 --apic --host 100 \
  --shapes table-centred:8x128 tablew:8x128 tablex:8x128 > $L/g2p.log 2>&1
echo "g2p bench rc=$? elapsed $SECONDS"
grep -E "^(G2P|case|end of|time-centred|APIC|Traceback|[A-Za-z]*Error)" $L/g2p.log
grep -A22 "Ordered by" $L/g2p.log | cut -c1-150
# the new way of the row: the faster of tablew and tablex at the end of the substep (the row's variant)
BEST=$(awk -F' [|] ' '/^end of substep [|] table[wx]:/{split($2,a,":"); print $3, a[1]}' $L/g2p.log | sort -n | head -1 \
  | awk '{print $2}'); BEST=${BEST:-tablew}; echo "row's new corners: $BEST"
for ORDER in "auto $BEST" "$BEST auto"; do
  set -- $ORDER
  [ $SECONDS -lt 165 ] && { timeout 30 python3 bench/flip_sparse.py --row 8m --steps 12 --warm 2 \
    --ab VOXFX_SPARSE_G2P_CORNERS=$1 --ab VOXFX_SPARSE_G2P_CORNERS=$2 > $L/ab_$1.log 2>&1
    echo "row A/B ($1, $2) rc=$? elapsed $SECONDS"; grep -E "particles|G2P_CORNERS|sub-stages" $L/ab_$1.log; }
done
[ $SECONDS -lt 160 ] && { timeout 35 ncu --kernel-name regex:g2p_advect_block_end --launch-skip 4 --launch-count 3 \
  --metrics gpu__time_duration.sum,smsp__inst_executed.sum,l1tex__t_sector_hit_rate.pct,lts__t_sector_hit_rate.pct,smsp__issue_active.avg.pct_of_peak_sustained_active,launch__shared_mem_config_size,launch__occupancy_limit_shared_mem,launch__registers_per_thread,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio \
  python3 bench/flip_sparse_g2p_project.py --repeat 1 --shapes table-centred:8x128 tablew:8x128 tablex:8x128 \
  > $L/ncu.log 2>&1; echo "ncu rc=$? elapsed $SECONDS"
  grep -E "g2p_advect_block_end|gpu__time|inst_executed|hit_rate|issue_active|shared_mem|registers|wavefronts|long_scoreboard|ERR|==PROF==" $L/ncu.log | cut -c1-140 | head -50; }
tar czf $OUT/logs.tgz -C /tmp s22c 2>/dev/null
