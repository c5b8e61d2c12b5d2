"""Compact particle frames (``.vxp``): liquid particles and snow flakes in a few bytes each.

An uncompressed PLY frame costs 28 bytes per liquid particle (224 MB per frame at 8M
particles). Here a frame stores:

* **positions** as the particle's grid cell plus a 10-bit fraction per axis inside it
  (30 bits in 4 bytes, ``_pack_fraction``):
  16 bits per axis over a brick of 64 cells, the subcell resolution seed 003 §6 keeps
  (1/1024 of a cell). Decoded at the centre of its 1/1024 step, a coordinate is off by at
  most 1/2048 of a cell (a point by at most √3/2048 < 1/1000 of a cell). Particles are
  sorted by cell; the occupied cells are stored once each (key deltas and counts), not
  per particle;
* **velocities** and other float attributes as half floats rounded to 8 of their 10
  mantissa bits (relative error ≤ 2⁻⁹ ≈ 0.2 %, far below what motion blur can show; the
  two noise bits cost 0.7 byte per particle on a real liquid frame); |v| is clipped to
  65 000; integer attributes as int32;
* every column split into byte planes (all low bytes, then all high bytes), which a
  general-purpose compressor packs far better, then compressed as one block: Zstandard
  when the ``zstandard`` module is importable (Blender ships it in its Python, as does
  the ``bpy`` wheel: nothing to bundle), else zlib from the standard library. The header
  says which; a reader without ``zstandard`` says so in one line.

Particle order is not kept (nothing downstream relies on it: motion blur comes from the
``velocity`` attribute).

**Layout** (little-endian): a 120-byte header (magic ``VOXFXPTS``, format version,
particle count, occupied-cell count, column count, codec, raw and packed byte counts,
CRC-32 of the raw block, grid origin and cell size, the grid's cells per axis), one
32-byte record per column (name, kind, components), then the compressed block. The file
is untrusted input (``read_points``): every count is checked against the file's length
and the raw block's exact size before anything is allocated; a file that does not
decode exactly raises ``VoxFXError`` naming the file. The cache manifest's size and
CRC-32 of the whole file are checked before that (``cache_manifest.shown_frame``).

No ``bpy`` here.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

from ..kernels import backend
from ..kernels.errors import VoxFXError
from . import fsio

SUFFIX = ".vxp"
MAGIC = b"VOXFXPTS"
VERSION = 1
SUBCELL_BITS = 10  # 1/1024 of a cell: 16 bits per axis over a 64-cell brick (seed 003 §6)
STEPS = 1 << SUBCELL_BITS
HALF_MAX = 65000.0  # rounds to a finite half even after the mantissa is shortened
MANTISSA_BITS = 8  # of a half float's 10
_HEADER = struct.Struct("<8sIIQQIIQQI4x3dd3q")  # 120 bytes, see the module text
_COLUMN = struct.Struct("<24sBB6x")  # name, kind, components
KIND_HALF, KIND_INT32 = 1, 2
CODEC_ZLIB, CODEC_ZSTD = 1, 2
MAX_RATIO = 4096  # a raw block more than this many times its packed size is refused (a bomb)
ZSTD_LEVEL = 3
ZLIB_LEVEL = 6


def _zstd():
    try:
        import zstandard
    except ImportError:
        return None
    return zstandard


def best_codec() -> int:
    return CODEC_ZSTD if _zstd() is not None else CODEC_ZLIB


# ---------------------------------------------------------------------------------------
# Writing


def encode(positions, attributes=None, *, cell: float, codec: int | None = None) -> bytes:
    """The bytes of one compact frame: *positions* (N, 3) in metres quantized on cells of
    *cell* metres, *attributes* name → (N,) or (N, k) arrays (floats as half, ints as
    int32). NumPy or CuPy arrays (the array work then runs on the device and only the
    packed planes come back; the bytes are the same, tests/gpu/test_compact_points_gpu.py)."""
    xp = backend.array_module(positions)
    positions = xp.asarray(positions, dtype=xp.float64).reshape(-1, 3)
    n = len(positions)
    cell = float(cell)
    if not cell > 0 or not np.isfinite(cell):
        raise VoxFXError(f"A compact particle frame needs a positive cell size, not {cell}")
    if n and not bool(xp.isfinite(positions).all()):
        raise VoxFXError("Particle positions are not finite: the frame cannot be stored")
    origin = xp.floor(positions.min(axis=0) / cell) * cell if n else xp.zeros(3)
    steps = positions - origin
    steps *= STEPS / cell
    steps = xp.floor(steps, out=steps).astype(xp.int64)  # 1/1024-cell steps, ≥ 0
    cells = steps >> SUBCELL_BITS
    dims = backend.to_numpy(cells.max(axis=0) + 1) if n else np.ones(3, np.int64)
    origin = backend.to_numpy(origin)
    if np.prod(dims.astype(np.float64)) >= 2.0 ** 62:
        raise VoxFXError(f"The particles span {dims.tolist()} cells of {cell} m: too many for one frame")
    key = (cells[:, 2] * int(dims[1]) + cells[:, 1]) * int(dims[0]) + cells[:, 0]
    if np.prod(dims.astype(np.float64)) < 2.0 ** 31:
        key = key.astype(xp.int32)  # sorts faster
    fraction = (steps & (STEPS - 1)).astype(xp.uint16)
    del steps, cells
    # Stable (CuPy's sort always is): the same bytes from NumPy 1 and 2 and from CuPy.
    order = np.argsort(key, kind="stable") if xp is np else xp.argsort(key)
    key = key[order].astype(xp.int64)
    starts = xp.flatnonzero(xp.diff(key, prepend=-1))
    unique = key[starts]
    counts = xp.diff(xp.append(starts, n)).astype(xp.uint32)
    fraction = fraction[order]
    columns, planes = [], [_shuffle(xp.diff(unique, prepend=0).astype(xp.int64)), _shuffle(counts),
                           _pack_fraction(fraction)]
    for name, values in (attributes or {}).items():
        values = xp.asarray(values)
        if values.shape[0] != n:
            raise VoxFXError(f"Particle attribute '{name}' has {values.shape[0]} values for {n} particles")
        values = values.reshape(n, int(np.prod(values.shape[1:], dtype=np.int64)))
        if values.dtype.kind == "f":
            kind, stored = KIND_HALF, _short_half(values)[order]
        else:
            kind, stored = KIND_INT32, values.astype(xp.int32)[order]
        columns.append(_COLUMN.pack(name.encode("ascii")[:24], kind, values.shape[1]))
        planes.append(_shuffle(xp.ascontiguousarray(stored.T)))
    raw = b"".join(planes)
    codec = best_codec() if codec is None else codec
    packed = _compress(raw, codec)
    header = _HEADER.pack(MAGIC, VERSION, len(columns), n, len(unique), codec, 0, len(raw), len(packed),
                          zlib.crc32(raw) & 0xFFFFFFFF, *origin.tolist(), cell, *[int(d) for d in dims])
    return header + b"".join(columns) + packed


def _pack_fraction(fraction) -> bytes:
    """(N, 3) 10-bit fractions as 4 byte planes: the low 8 bits of x, of y, of z, then
    the top 2 bits of all three in one byte (30 bits in 4 bytes; the low bytes are noise,
    the last plane has 64 symbols that the compressor's entropy coder packs to ~6 bits)."""
    xp = backend.array_module(fraction)
    high = (fraction[:, 0] >> 8) | ((fraction[:, 1] >> 8) << 2) | ((fraction[:, 2] >> 8) << 4)
    planes = xp.concatenate([(fraction & 0xFF).T.astype(xp.uint8).ravel(), high.astype(xp.uint8)])
    return backend.to_numpy(planes).tobytes()


def _unpack_fraction(planes, n):
    planes = planes.reshape(4, n)
    high = planes[3].astype(np.uint16)
    return np.stack([planes[a].astype(np.uint16) | (((high >> (2 * a)) & 3) << 8) for a in range(3)], axis=1)


def _short_half(values):
    """Half floats rounded to MANTISSA_BITS mantissa bits (to nearest, ties away from 0):
    rounding the bit pattern's magnitude, which is monotone in the value."""
    xp = backend.array_module(values)
    bits = xp.clip(values, -HALF_MAX, HALF_MAX).astype(xp.float16).view(xp.uint16)
    drop = 10 - MANTISSA_BITS
    magnitude = bits & np.uint16(0x7FFF)  # ≤ 0x7BEF after the clip: no overflow below
    magnitude += np.uint16(1 << (drop - 1))
    magnitude &= np.uint16(0xFFFF ^ ((1 << drop) - 1))
    magnitude |= bits & np.uint16(0x8000)
    return magnitude.view(xp.float16)


def _shuffle(array) -> bytes:
    """The array's bytes as planes: byte 0 of every value, then byte 1, …"""
    xp = backend.array_module(array)
    a = xp.ascontiguousarray(array)
    planes = a.reshape(-1).view(xp.uint8).reshape(-1, a.dtype.itemsize).T
    return backend.to_numpy(planes).tobytes()  # C order: plane after plane


def _compress(raw: bytes, codec: int) -> bytes:
    if codec == CODEC_ZSTD:
        zstd = _zstd()
        if zstd is None:
            raise VoxFXError("Zstandard compression asked for, but the 'zstandard' module is missing")
        return zstd.ZstdCompressor(level=ZSTD_LEVEL).compress(raw)
    if codec == CODEC_ZLIB:
        return zlib.compress(raw, ZLIB_LEVEL)
    raise VoxFXError(f"Unknown compact frame codec {codec}")


def write_points(path, positions, attributes=None, *, cell: float) -> Path:
    """Write one compact frame to *path* atomically (temp file, fsync, rename)."""
    path = Path(path)
    data = encode(positions, attributes, cell=cell)

    def write(temporary):
        with open(temporary, "xb") as f:
            f.write(data)

    try:
        fsio.write_atomic(path, write)
    except OSError as e:
        raise VoxFXError(f"Cannot write '{path}': {e.strerror or e}") from e
    return path


# ---------------------------------------------------------------------------------------
# Reading


def read_points(path):
    """(positions (N, 3) float32, {name: values}) of a compact frame; float attributes
    come back as float32, (N, 3) columns as ``name_x/_y/_z`` like ``ply.read_points``."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise VoxFXError(f"'{path.name}' cannot be read ({e.strerror or e})") from None
    return decode(data, path.name)


def decode(data: bytes, name: str = "frame"):
    def bad(why):
        return VoxFXError(f"'{name}' is not a readable VoxFX particle frame ({why})")

    if len(data) < _HEADER.size or data[:8] != MAGIC:
        raise bad("no VoxFX particle header")
    (_, version, ncol, n, ncells, codec, _, raw_size, packed_size, crc,
     ox, oy, oz, cell, dx, dy, dz) = _HEADER.unpack_from(data)
    if version != VERSION:
        raise bad(f"format version {version}; this VoxFX reads version {VERSION}")
    if ncol > 64 or _HEADER.size + ncol * _COLUMN.size + packed_size != len(data):
        raise bad(f"its header promises {packed_size:,} packed bytes, but the file has {len(data):,} in all")
    if not (np.isfinite([ox, oy, oz, cell]).all() and cell > 0) or min(dx, dy, dz) < 1 or \
            float(dx) * dy * dz >= 2.0 ** 62 or ncells > n or (n and not ncells):
        raise bad("its grid is malformed")
    columns = _columns(data, ncol, bad)
    offset = _HEADER.size + ncol * _COLUMN.size
    expected = 12 * ncells + 4 * n + sum((2 if k == KIND_HALF else 4) * c * n for _, k, c in columns)
    if raw_size != expected or raw_size > MAX_RATIO * max(packed_size, 1) + (1 << 20):
        raise bad(f"its counts ({n:,} particles, {ncells:,} cells) do not match its {raw_size:,} raw bytes")
    raw = _decompress(data[offset:], codec, raw_size, bad)
    if len(raw) != raw_size or zlib.crc32(raw) & 0xFFFFFFFF != crc:
        raise bad("its data is damaged (checksum)")
    view, at = memoryview(raw), 0

    def take(dtype, count):
        nonlocal at
        size = np.dtype(dtype).itemsize * count
        width = np.dtype(dtype).itemsize
        planes = np.frombuffer(view[at:at + size], np.uint8).reshape(width, count)
        at += size
        word = np.dtype(f"<u{width}")
        out = planes[0].astype(word)
        for b in range(1, width):  # byte b of every value: faster than a strided transpose
            out |= planes[b].astype(word) << np.array(8 * b, word)
        return out.view(dtype)

    keys = np.cumsum(take(np.int64, ncells))
    counts = take(np.uint32, ncells).astype(np.int64)
    if ncells and (keys[0] < 0 or (ncells > 1 and np.diff(keys).min() <= 0) or keys[-1] >= dx * dy * dz
                   or counts.min() < 1 or int(counts.sum()) != n):
        raise bad("its cell table is inconsistent")
    if n and int(np.frombuffer(view[at + 3 * n:at + 4 * n], np.uint8).max()) >= 64:
        raise bad("a subcell position is out of range")
    fraction = _unpack_fraction(np.frombuffer(view[at:at + 4 * n], np.uint8), n)
    at += 4 * n
    ijk = np.stack([keys % dx, (keys // dx) % dy, keys // (dx * dy)], axis=1)  # per cell, not per particle
    corner = (ijk * cell + np.array([ox, oy, oz])).astype(np.float32)
    positions = np.repeat(corner, counts, axis=0)
    positions += (fraction.astype(np.float32) + np.float32(0.5)) * np.float32(cell / STEPS)
    out = {}
    for cname, kind, comps in columns:
        values = take(np.float16 if kind == KIND_HALF else np.int32, comps * n).reshape(comps, n).T
        values = values.astype(np.float32) if kind == KIND_HALF else np.ascontiguousarray(values)
        if comps == 1:
            out[cname] = values[:, 0].copy()
        else:
            for c in range(comps):
                out[f"{cname}_{'xyzw'[c]}"] = values[:, c].copy()
    return positions, out


def _columns(data, ncol, bad) -> list:
    """(name, kind, components) of each column record after the header."""
    columns = []
    for c in range(ncol):
        cname, kind, comps = _COLUMN.unpack_from(data, _HEADER.size + c * _COLUMN.size)
        try:
            cname = cname.rstrip(b"\0").decode("ascii")
        except UnicodeDecodeError:
            raise bad("a column name is not ASCII") from None
        if kind not in (KIND_HALF, KIND_INT32) or not 1 <= comps <= 4 or not cname.isidentifier():
            raise bad(f"column {cname!r} is malformed")
        columns.append((cname, kind, comps))
    return columns


def _decompress(packed, codec, raw_size, bad) -> bytes:
    if codec == CODEC_ZSTD:
        zstd = _zstd()
        if zstd is None:
            raise bad("it is Zstandard-compressed and this Python has no 'zstandard' module")
        try:
            return zstd.ZstdDecompressor().decompress(bytes(packed), max_output_size=raw_size)
        except zstd.ZstdError as e:
            raise bad(f"Zstandard: {e}") from None
    if codec == CODEC_ZLIB:
        d = zlib.decompressobj()
        try:
            raw = d.decompress(bytes(packed), raw_size)
        except zlib.error as e:
            raise bad(f"zlib: {e}") from None
        if d.unconsumed_tail or not d.eof:
            raise bad("its compressed data does not end where it should")
        return raw
    raise bad(f"unknown codec {codec}")
