"""Counter-based random numbers for the flakes: a pure function of (seed, flake id, spawn
count, stream), so the CPU and the GPU draw identical bits without storing any RNG state,
and a respawned flake (spawn + 1) gets fresh numbers without touching its neighbours.

The thesis draws respawn positions from float-bit noise (seed 002 §3.3.1); we hash
instead. Construction (all uint32 with wraparound):

    mix(x)                = MurmurHash3's 32-bit finalizer (a bijection on uint32)
    seed_key(seed)        = mix(seed folded to 32 bits)
    flake_key(s, id, sp)  = mix(mix(seed_key ^ id) ^ sp)
    uniform(key, stream)  = (mix(mix(key ^ stream·0x9E3779B9)) >> 8) · 2⁻²⁴   ∈ [0, 1)

Every absorption is xor-then-bijection, so for a fixed seed, spawn and stream distinct
flake ids map to distinct keys. The top 24 bits make the float exactly, so the value is
the same on every device. ``kernels/cuda/snow_flakes.cu`` mirrors these functions
(``mix32``, ``flake_key``, ``flake_uniform``) and the stream numbers below.

NumPy note: every operand is cast to uint32 (arrays of at least one dimension), so
multiplication wraps silently and no promotion to int64 happens, under NumPy 1.x value
based casting and 2.x NEP 50 alike.
"""

from __future__ import annotations

import numpy as np

from ..backend import array_module

# Streams: one independent number per use. Keep in sync with the #defines in snow_flakes.cu
# (tests/unit/test_snow_flakes.py checks).
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

_MASK = 0xFFFFFFFF
_C1 = 0x85EBCA6B
_C2 = 0xC2B2AE35
_GOLDEN = 0x9E3779B9
_U1 = np.uint32(_C1)
_U2 = np.uint32(_C2)
_S16 = np.uint32(16)
_S13 = np.uint32(13)
_S8 = np.uint32(8)
_TO_UNIT = np.float32(2.0 ** -24)


def _mix_int(x: int) -> int:
    """``mix`` on a Python int (host-side constants)."""
    x &= _MASK
    x ^= x >> 16
    x = (x * _C1) & _MASK
    x ^= x >> 13
    x = (x * _C2) & _MASK
    return x ^ (x >> 16)


def mix32(x):
    """MurmurHash3's finalizer on a uint32 array (NumPy or CuPy): avalanche + bijection."""
    xp = array_module(x)
    shape = np.shape(x)
    x = xp.asarray(x, dtype=xp.uint32).reshape(-1)  # ≥ 1-d: array ops wrap without warnings
    x = x ^ (x >> _S16)
    x = x * _U1
    x = x ^ (x >> _S13)
    x = x * _U2
    x = x ^ (x >> _S16)
    return x.reshape(shape)


def seed_key(seed: int) -> np.uint32:
    """The 32-bit key of a user seed (any Python int, negative or wider than 64 bits)."""
    s = int(seed) & 0xFFFFFFFFFFFFFFFF
    return np.uint32(_mix_int((s ^ (s >> 32)) & _MASK))


def stream_word(stream: int) -> np.uint32:
    return np.uint32((int(stream) * _GOLDEN) & _MASK)


def flake_key(key_of_seed, ids, spawn):
    """Per-life key of each flake: hash of (seed, id, spawn). *ids*, *spawn*: uint32 arrays."""
    xp = array_module(ids)
    ids = xp.asarray(ids, dtype=xp.uint32)
    spawn = xp.asarray(spawn, dtype=xp.uint32)
    return mix32(mix32(ids ^ np.uint32(key_of_seed)) ^ spawn)


def uniform_from_key(key, stream: int):
    """float32 in [0, 1) for each key, independent across streams."""
    xp = array_module(key)
    h = mix32(mix32(xp.asarray(key, dtype=xp.uint32) ^ stream_word(stream)))
    return (h >> _S8).astype(xp.float32) * _TO_UNIT


def uniform(seed: int, ids, spawn, stream: int):
    """float32 in [0, 1) from (seed, ids, spawn, stream). NumPy arrays are hashed here; CuPy
    arrays by the CUDA twin in snow_flakes.cu (same bits: the GPU tests compare)."""
    xp = array_module(ids)
    if xp is np:
        return uniform_from_key(flake_key(seed_key(seed), ids, spawn), stream)
    from .flakes import uniform_gpu

    return uniform_gpu(seed, ids, spawn, stream)
