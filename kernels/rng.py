"""Counter-based random numbers, one implementation for every effect (issue 19): a pure
function of (seed, id, counter, stream), so the CPU and the GPU draw identical bits
without storing any RNG state. Snow flakes use (flake id, spawn count): a respawned flake
gets fresh numbers without touching its neighbours; FLIP seeding uses (cell, slot).

The thesis draws respawn positions from float-bit noise (seed 002 §3.3.1); we hash
instead. Construction (all uint32 with wraparound):

    mix(x)                 = MurmurHash3's 32-bit finalizer (a bijection on uint32)
    seed_key(seed)         = mix(seed folded to 32 bits)
    key(s, id, counter)    = mix(mix(seed_key ^ id) ^ counter)
    uniform(key, stream)   = (mix(mix(key ^ stream·0x9E3779B9)) >> 8) · 2⁻²⁴   ∈ [0, 1)

Every absorption is xor-then-bijection, so for a fixed seed, counter and stream distinct
ids map to distinct keys. The top 24 bits make the float exactly, so the value is the
same on every device. ``kernels/cuda/include/voxfx_rng.cuh`` is the CUDA half (``mix32``,
``rng_key``, ``rng_uniform``); each effect numbers its own streams (``snow/rng.py``,
``flip/particles.py``).

NumPy note: every operand is cast to uint32 (arrays of at least one dimension), so
multiplication wraps silently and no promotion to int64 happens, under NumPy 1.x value
based casting and 2.x NEP 50 alike.
"""

from __future__ import annotations

import numpy as np

from .backend import array_module
from .grid.launch import Kernels

_K = Kernels("rng.cu")  # cuda/rng.cu, on voxfx_rng.cuh

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


def key(key_of_seed, ids, counter):
    """Key of each (id, counter) under a seed: hash of (seed, id, counter). *ids*, *counter*:
    uint32 arrays (a flake's id and spawn count; a seeded cell and its slot)."""
    xp = array_module(ids)
    ids = xp.asarray(ids, dtype=xp.uint32)
    counter = xp.asarray(counter, dtype=xp.uint32)
    return mix32(mix32(ids ^ np.uint32(key_of_seed)) ^ counter)


def uniform_from_key(key, stream: int):
    """float32 in [0, 1) for each key, independent across streams."""
    xp = array_module(key)
    h = mix32(mix32(xp.asarray(key, dtype=xp.uint32) ^ stream_word(stream)))
    return (h >> _S8).astype(xp.float32) * _TO_UNIT


def uniform(seed: int, ids, counter, stream: int):
    """float32 in [0, 1) from (seed, ids, counter, stream). NumPy arrays are hashed here;
    CuPy arrays by the CUDA twin (``cuda/rng.cu`` on ``include/voxfx_rng.cuh``, the same
    bits: the GPU tests compare)."""
    xp = array_module(ids)
    if xp is np:
        return uniform_from_key(key(seed_key(seed), ids, counter), stream)
    return _uniform_gpu(seed, ids, counter, stream)


def _uniform_gpu(seed, ids, counter, stream):
    import cupy as cp

    ids = cp.ascontiguousarray(ids, dtype=cp.uint32).reshape(-1)
    counter = cp.ascontiguousarray(cp.broadcast_to(cp.asarray(counter, dtype=cp.uint32), ids.shape))
    out = cp.empty(ids.shape, cp.float32)
    _K.launch("rng_uniforms", ids.size, (ids, counter, np.int64(ids.size), seed_key(seed), np.uint32(stream), out))
    return out
