#!/usr/bin/env bash
# One device call for the PCG loop's switches (issue 24, helper i24q): their A/B on the 8M dam
# break (bench/flip_sparse_pcg_loop.py, arguments passed on), then the GPU tests ($TESTS).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
T0=$SECONDS
timeout "${BENCH_S:-85}" python3 bench/flip_sparse_pcg_loop.py "$@" > "$OUT/loop.log" 2>&1
echo "bench rc=$? at $((SECONDS - T0)) s"; tail -32 "$OUT/loop.log"
timeout "${TESTS_S:-70}" python3 -m pytest -q -p no:cacheprovider -rs ${TESTS:-tests/gpu/test_flip_sparse_pcg_loop_gpu.py} \
    > "$OUT/gpu_tests.log" 2>&1
echo "tests rc=$? at $((SECONDS - T0)) s"; grep -E "passed|failed|Error|error" "$OUT/gpu_tests.log" | tail -8
