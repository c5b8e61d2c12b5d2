#!/usr/bin/env bash
# The device call for the frame's level set (issue 24, branch i24s; surface_gpu "lean"): the
# surface GPU files (lean against bricks and legacy bit for bit, the quotient over whole
# binades, both ways against the CPU reference), then bench/flip_level_set.py on the 8M and
# 65M dam breaks (the ways alternating in one process). Each part under its own timeout;
# logs under $OUT.
OUT=${OUT:-out}; mkdir -p "$OUT"; export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
T=tests/gpu
timeout ${TESTS_S:-70} python3 -m pytest -q -p no:cacheprovider -rf --durations=5 $T/test_flip_surface_bricks_gpu.py \
    $T/test_flip_surface_gpu.py $T/test_flip_closed_surface_gpu.py > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; grep -E 'passed|failed|error' "$OUT/tests.log" | tail -1; grep -E '^(FAILED|ERROR)' "$OUT/tests.log" | head
grep -E "^E  " "$OUT/tests.log" | head -20
VOXFX_LEVEL_SET=${LEAN_MODE:-lean} timeout ${LEAN_TESTS_S:-40} python3 -m pytest -q -p no:cacheprovider -rf \
    $T/test_flip_surface_gpu.py $T/test_flip_closed_surface_gpu.py > "$OUT/tests_lean.log" 2>&1
echo "lean tests rc=$?"; grep -E 'passed|failed|error' "$OUT/tests_lean.log" | tail -1
grep -E '^(FAILED|ERROR)|^E  ' "$OUT/tests_lean.log" | head -10
echo "elapsed $SECONDS"
timeout ${AB8_S:-45} python3 bench/flip_level_set.py --res 256 --particles 8e6 --substeps ${SUBSTEPS:-24} \
    --repeat ${REPEAT:-8} > "$OUT/ab8.log" 2>&1
echo "8M rc=$?"; grep -vE "^ *$|Warning|warn" "$OUT/ab8.log" | tail -8
echo "elapsed $SECONDS"
timeout ${AB65_S:-60} python3 bench/flip_level_set.py --res 512 --particles 65.5e6 --substeps ${SUBSTEPS65:-4} \
    --repeat ${REPEAT65:-4} > "$OUT/ab65.log" 2>&1
echo "65M rc=$?"; grep -vE "^ *$|Warning|warn" "$OUT/ab65.log" | tail -8
echo "elapsed $SECONDS"
