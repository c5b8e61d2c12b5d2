#!/usr/bin/env bash
# The device call for the level set's fused sums (issue 24, branch h18e; VOXFX_LEVEL_SET_SUMS, surface_gpu.
# level_set_sums, voxfx_surface.cuh's add_terms): the lean gather's SASS in both builds (instruction counts);
# the surface GPU files with the fused sums in two groups side by side, beside them two 8M frames with both
# modes to make the kernels (untimed); then the 8M Fast frames with --level-set-modes lean and
# lean:VOXFX_LEVEL_SET_SUMS=fused (both on each frame's same particles, their order reversed every other
# frame) in two processes, the second with the modes' order reversed. Prints per frame and mode the level
# set's device ms and its gather ms, φ's largest difference between the modes in units of R (the 8M row's
# R = 4·(1/256)/2 = 1/128 m), and frames 6–11's sums. Logs in /tmp/h18e, tarred into $OUT/logs.tgz.
OUT_DEFAULT=$OUT; . "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
L=/tmp/h18e
mkdir -p $L
S=VOXFX_LEVEL_SET_SUMS
for f in 0 1; do  # the lean gather's SASS (cuobjdump where the device has it)
    nvcc -cubin -arch=sm_90 --std=c++17 -Ikernels/cuda/include --fmad=false -DTILE_X=32 -DTILE_Y=4 -DTILE_Z=4 \
        -DLEVEL_SET_SUMS_FUSED=$f kernels/cuda/flip_surface_lean.cu -o $L/lean$f.cubin 2> $L/nvcc$f.log &&
        cuobjdump -sass -fun particle_level_set_lean $L/lean$f.cubin > $L/lean$f.sass 2>&1
    echo "SASS particle_level_set_lean fused=$f: $(grep -cE '^ +/\*[0-9a-f]{4}\*/' $L/lean$f.sass) instructions;" \
        $(for op in FFMA FMUL FADD FSEL FSETP FMNMX LDG; do echo -n "$op $(grep -cE " $op[ .]" $L/lean$f.sass) "; done)
done
F="bench/flip_sparse.py --row 8m --frames 12 --timing fast --level-set --trim"
A="$T/test_flip_surface_gpu.py $T/test_flip_closed_surface_gpu.py $T/test_flip_surface_interior_gpu.py"
B="$T/test_flip_surface_bricks_gpu.py $T/test_flip_surface_place_gpu.py $T/test_flip_surface_compile_ahead_gpu.py"
timeout -s INT ${TESTS_S:-85} python3 ${F/--frames 12/--frames 2} --level-set-modes lean lean:$S=fused \
    > $L/warm.log 2>&1 &
PW=$!
env $S=fused timeout -s INT ${TESTS_S:-85} python3 -m pytest -q -p no:cacheprovider -rf $A > $L/tests_a.log 2>&1 &
PA=$!
sleep 2
env $S=fused timeout -s INT ${TESTS_S:-85} python3 -m pytest -q -p no:cacheprovider -rf $B > $L/tests_b.log 2>&1 &
PB=$!
wait $PA; echo "tests fused (surface, closed, interior) rc=$?"; pytest_lines $L/tests_a.log 12
wait $PB; echo "tests fused (bricks, place, compile ahead) rc=$?"; pytest_lines $L/tests_b.log 12
wait $PW; echo "warm-up frames rc=$?"; grep -E "φ against" $L/warm.log | cut -c1-160
echo "elapsed $SECONDS"
timeout -s INT ${MODES_S:-45} python3 $F --stages --level-set-modes lean lean:$S=fused > $L/modes_1.log 2>&1
echo "modes lean, fused rc=$? elapsed $SECONDS"
timeout -s INT ${MODES_S:-45} python3 $F --stages --level-set-modes lean:$S=fused lean > $L/modes_2.log 2>&1
echo "modes fused, lean rc=$? elapsed $SECONDS"
python3 - $L/modes_1.log $L/modes_2.log <<'PY'
import re, sys
R = 1 / 128
for path in sys.argv[1:]:
    rows, frame = {}, None
    for line in open(path):
        m = re.match(r"^(\d+) \|", line)
        if m:
            frame = int(m.group(1))
            continue
        m = re.match(r"^   (lean\S*): device ([\d.]+) ms.*?, gather ([\d.]+)", line)
        if m and frame is not None:
            way = "fused" if "fused" in m.group(1) else "plain"
            rows.setdefault(frame, {})[way] = (float(m.group(2)), float(m.group(3)))
        m = re.match(r"^   φ against \S+: nodes differing \[(\d+)\], max \|Δφ\| \[([\d.e+-]+)\] \(([\d,]+) nodes", line)
        if m and frame is not None:
            rows.setdefault(frame, {})["phi"] = (int(m.group(1)), float(m.group(2)) / R, m.group(3))
    print(f"{path}: frame | plain device / gather | fused device / gather | gather fused/plain | φ nodes differing, "
          f"max |Δφ|/R")
    sums = [0.0] * 4
    for f in sorted(rows):
        r = rows[f]
        if "plain" not in r or "fused" not in r:
            continue
        (pd, pg), (fd, fg) = r["plain"], r["fused"]
        phi = r.get("phi", (None, float("nan"), ""))
        print(f"  {f} | {pd:.2f} / {pg:.2f} | {fd:.2f} / {fg:.2f} | {fg / pg:.3f} | {phi[0]} of {phi[2]}, {phi[1]:.2e}")
        if 6 <= f <= 11:
            sums = [a + b for a, b in zip(sums, (pd, pg, fd, fg))]
    print(f"  frames 6-11 summed: plain {sums[0]:.2f} / {sums[1]:.2f}, fused {sums[2]:.2f} / {sums[3]:.2f} ms; "
          f"gather {100 * (1 - sums[3] / max(sums[1], 1e-9)):.1f}% shorter, level set "
          f"{100 * (1 - sums[2] / max(sums[0], 1e-9)):.1f}% shorter")
PY
tar czf "$OUT/logs.tgz" -C /tmp h18e
echo "elapsed $SECONDS"
