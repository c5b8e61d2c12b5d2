#!/usr/bin/env bash
# The one device call for the time-centred advection (branch i24u; bench/flip_advection_gpu.py's
# notes): its GPU tests, the regression tests of the kernels it changed, its cost per substep and
# the 8M frame at CFL 4 / Max Substeps 5 with it off and on. Each part under its own timeout
# (≤ 200 s in all); logs under $OUT.
. "$(dirname "${BASH_SOURCE[0]}")/_device_call.sh"
timeout 90 python3 -m pytest -q -p no:cacheprovider -rf --durations=8 $T/test_flip_centred_advection_gpu.py \
    $T/test_flip_transfer_gpu.py::test_gpu_grid_to_particles_matches_cpu \
    $T/test_flip_transfer_gpu.py::test_gpu_advect_and_fused_step_match_cpu $T/test_flip_sparse_g2p_gpu.py \
    $T/test_flip_checkpoint_outputs_gpu.py $T/test_flip_sim_gpu.py::test_gpu_resume_from_checkpoint_matches_an_uninterrupted_run \
    $T/test_liquid_memory_check_gpu.py > "$OUT/tests.log" 2>&1
echo "tests rc=$?"; pytest_lines "$OUT/tests.log"
for args in "" "--sparse"; do
    timeout 25 python3 bench/flip_advection_gpu.py $args > "$OUT/cost${args:+_sparse}.log" 2>&1
    echo "cost $args rc=$?"; cat "$OUT/cost${args:+_sparse}.log"
done
timeout 50 python3 bench/flip_advection_gpu.py --frames 6 > "$OUT/frames.log" 2>&1
echo "frames rc=$?"; cat "$OUT/frames.log"
echo "elapsed $SECONDS"
