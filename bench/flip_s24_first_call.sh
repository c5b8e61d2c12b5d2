# The first device call of the session after session 23 (issue 24), written on the CPU in session 24 (no device
# left there): session 23's three CPU-proven calls in one command, each in its own time box and with its own logs,
# then the level set's surface files (s23c's split default, the gather_work counters after the sm_75 mend, the
# overlap copy's new test). ≤ ~420 s of wall time on an H100; run from the repository root:
#     bash bench/flip_s24_first_call.sh
# Then, in a second call, the whole GPU suite: SHARD_S=300 bash bench/gpu_suite_call.sh.
OUT_DEFAULT=$OUT; . "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
TOP=$OUT; L=/tmp/s24first; mkdir -p $L
part() {  # part NAME SCRIPT [ARGS]: the script with its own $OUT (its logs.tgz kept as NAME.tgz), a line at its end
    local name=$1; shift; local start=$SECONDS
    mkdir -p $L/$name; OUT=$L/$name bash "$@" 2>&1 | tee $L/$name.log
    echo "== $name rc=${PIPESTATUS[0]} in $((SECONDS - start)) s (at $SECONDS)"
    [ -f $L/$name/logs.tgz ] && cp $L/$name/logs.tgz $TOP/$name.tgz
}
part s23j bench/flip_s23j_call.sh        # the marks GPU file, the occupied-ahead file, the paced A/B
part s23i bench/flip_s23i_call.sh        # tail stop + cells pairs: GPU files, set-up kernels, A/B (0 first)
[ $SECONDS -lt 300 ] && part s23i_rev bench/flip_s23i_call.sh 1   # the A/B the other way round
part s23h bench/flip_s23h_call.sh        # the balanced gather: GPU file, 65M frames lean / balance
timeout -s INT 60 python3 -m pytest -q -p no:cacheprovider -rfE $T/test_flip_surface_bricks_gpu.py \
  $T/test_flip_surface_overlap_gpu.py > $L/surface.log 2>&1
echo "== surface files rc=$? at $SECONDS"; pytest_lines $L/surface.log 12
tar czf $TOP/first_call_logs.tgz -C /tmp s24first 2>/dev/null
echo "end at $SECONDS"
