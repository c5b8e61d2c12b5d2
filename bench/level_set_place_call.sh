#!/usr/bin/env bash
# The device call for the level set's binning ways (issue 24, branch h17e; kernels/flip/surface_place.py,
# VOXFX_LEVEL_SET_PLACE; WAYS, default "tags tags-plain"): the GPU tests in two groups side by side — the
# new file and the surface files with the first way, the surface files with the second — and beside them
# two 8M frames to make the sparse kernels (CuPy's disk cache), untimed; then the 8M Fast frames: one
# process with lean and every way on each frame's same particles (--level-set-modes: the binning's stages
# per way, φ compared), then separate processes with --stages alternating lean and the way of least
# binning time there (2 each). Logs in /tmp/h17e, tarred into $OUT/logs.tgz; short lines
# (bench/level_set_place_summary.py) printed. Session 17's call (H100, 93 s) ran it at 1b84aa5 with the
# ways then, "grouped tags" (bench/RESULTS.md, h17e).
OUT_DEFAULT=$OUT; . "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
L=/tmp/h17e
mkdir -p $L
P=VOXFX_LEVEL_SET_PLACE
W=(${WAYS:-tags tags-plain})
MODES="lean"
for w in "${W[@]}"; do MODES="$MODES lean:$P=$w"; done
S="$T/test_flip_surface_gpu.py $T/test_flip_closed_surface_gpu.py $T/test_flip_surface_bricks_gpu.py \
$T/test_flip_surface_interior_gpu.py"
F="bench/flip_sparse.py --row 8m --frames 12 --timing fast --level-set --trim"
timeout -s INT ${TESTS_S:-80} python3 ${F/--frames 12/--frames 2} --level-set-modes $MODES > $L/warm.log 2>&1 &
PW=$!
env $P=${W[0]} timeout -s INT ${TESTS_S:-80} python3 -m pytest -q -p no:cacheprovider -rf \
    $T/test_flip_surface_place_gpu.py $S > $L/tests_a.log 2>&1 &
PA=$!
sleep 2
env $P=${W[1]:-${W[0]}} timeout -s INT ${TESTS_S:-80} python3 -m pytest -q -p no:cacheprovider -rf $S \
    > $L/tests_b.log 2>&1 &
PB=$!
wait $PA; echo "tests (the new file + surface files, ${W[0]}) rc=$?"; pytest_lines $L/tests_a.log 12
wait $PB; echo "tests (surface files, ${W[1]:-${W[0]}}) rc=$?"; pytest_lines $L/tests_b.log 12
wait $PW; echo "warm-up frames rc=$?"; grep -E "^[0-9]+ \|" $L/warm.log | cut -c1-160
echo "elapsed $SECONDS"
timeout -s INT ${MODES_S:-35} python3 $F --level-set-modes $MODES > $L/modes.log 2>&1
echo "modes rc=$? elapsed $SECONDS"
python3 bench/level_set_place_summary.py modes $L/modes.log | cut -c1-180 | tail -40
ON=$(python3 bench/level_set_place_summary.py pick $L/modes.log 2>/dev/null || echo ${W[0]})
echo "on: $ON"
for i in 1 2; do
    for way in lean $ON; do
        env $P=$way timeout -s INT ${FRAMES_S:-18} python3 $F --stages > $L/frames_${way}_$i.log 2>&1
        echo "frames $way #$i rc=$? elapsed $SECONDS"
    done
done
python3 bench/level_set_place_summary.py frames $L/frames_lean_1.log $L/frames_${ON}_1.log $L/frames_lean_2.log \
    $L/frames_${ON}_2.log
tar czf "$OUT/logs.tgz" -C /tmp h17e
echo "elapsed $SECONDS"
