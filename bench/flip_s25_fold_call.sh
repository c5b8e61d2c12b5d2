# Session 25 (issue 24 review item): the level set's row walk folded into voxfx_surface.cuh's for_reached_rows
# (node_phi, node_phi_lean, gather_work): compare_ptx gives "same floating-point operation sequence" but other
# PTX for the gathers. The surface GPU files on this tree, then the 65M Fast frames' lean gather, this tree and
# the tree before the fold (a copy under $BEFORE, default .cache/s25/head) in turn, A B B A, a process each.
# Run from the repository root: bash bench/flip_s25_fold_call.sh (≤ ~240 s of wall time on an H100).
OUT_DEFAULT=$OUT; . "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
L=/tmp/s25fold; mkdir -p $L; BEFORE=${BEFORE:-.cache/s25/head}; HERE=$PWD
PY="python3 -m pytest -q -p no:cacheprovider -rfE"
timeout 60 python3 bench/flip_sparse.py --row 8m --frames 2 --timing fast --level-set --level-set-modes lean \
  > $L/warm.log 2>&1 & P0=$!
(cd $BEFORE && timeout 60 python3 bench/flip_sparse.py --row 8m --frames 2 --timing fast --level-set \
  --level-set-modes lean > $L/warm_before.log 2>&1) & P1=$!
timeout -s INT 140 $PY $T/test_flip_surface_bricks_gpu.py $T/test_flip_surface_gpu.py \
  $T/test_flip_closed_surface_gpu.py $T/test_flip_surface_interior_gpu.py $T/test_flip_surface_overlap_gpu.py > $L/g1.log 2>&1 & P2=$!
wait $P0 $P1; echo "warm-ups at $SECONDS"; grep -hE "Error|Traceback" $L/warm*.log | head -3
wait $P2; echo "surface files rc=$?"; pytest_lines $L/g1.log 12
run() {  # run NAME DIR: the 65M frames' lean gather in DIR, its per-frame gather ms and their sum
    (cd $2 && timeout 75 python3 bench/flip_sparse.py --row 65m --frames 12 --timing fast --level-set --trim \
      --level-set-modes lean > $L/$1.log 2>&1); echo "$1 rc=$? at $SECONDS"
    grep -E "^   lean" $L/$1.log | awk -v n=$1 '{for (i = 1; i <= NF; ++i) if ($i ~ /^gather/) {s += $(i + 1);
      f = f sprintf("%.2f ", $(i + 1))}} END {printf "%s gather ms a frame: %s; sum %.2f\n", n, f, s}'
}
for r in "after1 $HERE" "before1 $BEFORE" "before2 $BEFORE" "after2 $HERE"; do
  set -- $r; [ $SECONDS -lt 230 ] && run $1 $2
done
tar czf $OUT/s25fold.tgz -C /tmp s25fold 2>/dev/null
echo "end at $SECONDS"
