"""The flakes' random streams (seed 002 §3.3.1): one independent number per use of the
counter-based RNG of ``kernels/rng.py``, keyed by (seed, flake id, spawn count)."""

from __future__ import annotations

# Streams: one independent number per use; snow_flakes.cu gets them as -D options (flakes.py)
# (tests/unit/test_snow_flakes.py checks that it does).
STREAM_X = 0
STREAM_Y = 1
STREAM_Z = 2
STREAM_VX = 3
STREAM_VY = 4
STREAM_VMAX = 5
STREAM_RADIUS = 6
STREAM_OMEGA = 7
STREAM_OMEGA_SIGN = 8
STREAM_PHASE = 9
INIT_ATTEMPTS = 8  # first-spawn tries to start above the ground (rejection sampling)
INIT_ATTEMPT_STRIDE = 16  # try a draws streams STREAM_X/Y/Z + a·INIT_ATTEMPT_STRIDE
