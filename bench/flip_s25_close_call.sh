# Session 25's closing device call (issue 24): the whole GPU suite with the session's new defaults
# (VOXFX_SPARSE_CELLS_PAIRS "1", VOXFX_SPARSE_G2P_MARKS "1") and its mends (the level set's gather arguments let go
# before the smoothing, the memory check's tests started as a bake starts), then, where time is left, the G2P
# marks in frames (their gain needs substeps in a row: one simulation a way, frames alternating, both orders).
# Run from the repository root: bash bench/flip_s25_close_call.sh (≤ ~420 s of wall time on an H100).
OUT_DEFAULT=$OUT; . "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
SHARD_S=${SHARD_S:-300} bash "$(dirname "${BASH_SOURCE[0]}")/gpu_suite_call.sh"
L=/tmp/s25close; mkdir -p $L; V=VOXFX_SPARSE_G2P_MARKS
for order in "1 0" "0 1"; do
  set -- $order
  [ $SECONDS -lt 480 ] && { timeout 60 python3 bench/flip_sparse.py --row 8m --frames 12 --timing fast --time-cap 40 \
    --ab $V=$1 --ab $V=$2 > $L/marks_$1$2.log 2>&1; echo "marks frames $1,$2 rc=$? at $SECONDS"
    grep -E "^way|same bits|^[0-9]+ \|" $L/marks_$1$2.log | cut -c1-200; }
done
tar czf $OUT/s25close.tgz -C /tmp s25close 2>/dev/null
echo "end at $SECONDS"
