"""Compact particle frames (``.vxp``): liquid particles and snow flakes in a few bytes each.

An uncompressed PLY frame costs 28 bytes per liquid particle (224 MB per frame at 8M
particles). Here a frame stores:

* **positions** as the particle's grid cell plus a 10-bit fraction per axis inside it
  (30 bits in 4 bytes, ``_put_fraction``):
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
  (level 1, on every core) when the ``zstandard`` module is importable (Blender ships it
  in its Python, as does the ``bpy`` wheel: nothing to bundle), else zlib (level 1) from
  the standard library. The header says which; a reader without ``zstandard`` says so in
  one line. ``encode`` is ``prepare`` (the array work, on the device for CuPy arrays, and
  the raw block's copy to the host) then ``RawFrame.pack`` (CRC-32 and compression, CPU
  only): a GPU bake packs on its writer thread (``liquid_files``).

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
from .jobs import is_out_of_memory

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
ZSTD_LEVEL = 1  # 1.6 % larger than level 3, a third of its time (bench/cache_formats.py)
ZLIB_LEVEL = 1  # the fallback: 2 % larger than level 6, under half its time


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
#
# One pass over the particles on the CPU costs more than the arithmetic in it: the
# positions are quantized in chunks whose float64 temporaries stay in the cache, the
# particles are gathered in cell order one 1-D column at a time (a row gather of 6-byte
# rows is 1.5× slower), and every byte plane is copied straight into one raw block that
# the compressor reads in place (no per-column bytes, no join). CuPy does the same on the
# device (quantizing a million particles at a time, so the bake's memory grows by about
# 50 bytes a particle while a frame is encoded) and copies back only the raw block.

CHUNK = 1 << 14  # particles quantized at a time on the CPU (3 × 8 bytes each: 384 KB)
DEVICE_CHUNK = 1 << 20  # on the GPU: the float64 and int64 temporaries stay at 24 MB each


def encode(positions, attributes=None, *, cell: float, codec: int | None = None) -> bytes:
    """The bytes of one compact frame: *positions* (N, 3) in metres quantized on cells of
    *cell* metres, *attributes* name → (N,) or (N, k) arrays (floats as half, ints as
    int32). NumPy or CuPy arrays (the array work then runs on the device and only the
    raw block comes back; the bytes are the same, tests/gpu/test_compact_points_gpu.py).
    ``prepare(...).pack()``."""
    return prepare(positions, attributes, cell=cell, codec=codec).pack()


class RawFrame:
    """A compact frame up to its compression (``prepare``): the raw block (NumPy, the
    frame's own copy) and the header's fields. ``pack()`` compresses it and returns the
    file's bytes (CRC-32, codec work: CPU only, any thread; the particles are no longer
    needed), exactly ``encode``'s."""

    __slots__ = ("raw", "n", "ncells", "columns", "origin", "cell", "dims", "codec")

    def __init__(self, raw, n, ncells, columns, origin, cell, dims, codec):
        self.raw, self.n, self.ncells, self.columns = raw, n, ncells, columns
        self.origin, self.cell, self.dims, self.codec = origin, cell, dims, codec

    def pack(self) -> bytes:
        packed = _compress(self.raw, self.codec)
        header = _HEADER.pack(MAGIC, VERSION, len(self.columns), self.n, self.ncells, self.codec, 0, len(self.raw),
                              len(packed), zlib.crc32(self.raw) & 0xFFFFFFFF, *self.origin.tolist(), self.cell,
                              *[int(d) for d in self.dims])
        return header + b"".join(self.columns) + packed


def prepare(positions, attributes=None, *, cell: float, codec: int | None = None) -> RawFrame:
    """``encode`` up to the compression: the array work (on the device for CuPy arrays)
    and the raw block's copy to the host; a bake calls it before the next step moves the
    particles and leaves ``pack`` to its writer thread."""
    codec = best_codec() if codec is None else codec
    if codec not in (CODEC_ZLIB, CODEC_ZSTD):
        raise VoxFXError(f"Unknown compact frame codec {codec}")
    if codec == CODEC_ZSTD and _zstd() is None:  # said before the array work, as before the split
        raise VoxFXError("Zstandard compression asked for, but the 'zstandard' module is missing")
    xp = backend.array_module(positions)
    positions = xp.asarray(positions).reshape(-1, 3)
    if positions.dtype not in (xp.float32, xp.float64):
        positions = positions.astype(xp.float64)  # every float converts to float64 exactly
    n = len(positions)
    cell = float(cell)
    if not cell > 0 or not np.isfinite(cell):
        raise VoxFXError(f"A compact particle frame needs a positive cell size, not {cell}")
    origin, dims = np.zeros(3), np.ones(3, np.int64)
    if n:  # min and max carry a NaN through: finite bounds mean finite positions
        low, high = _bounds(positions)
        if not (np.isfinite(low).all() and np.isfinite(high).all()):
            raise VoxFXError("Particle positions are not finite: the frame cannot be stored")
        origin = np.floor(low / cell) * cell + 0.0  # + 0.0: never a -0.0 in the header
        # Rounding is monotone: the largest particle's step is the largest step.
        dims = (np.floor((high - origin) * (STEPS / cell)).astype(np.int64) >> SUBCELL_BITS) + 1
    if np.prod(dims.astype(np.float64)) >= 2.0 ** 62:
        raise VoxFXError(f"The particles span {dims.tolist()} cells of {cell} m: too many for one frame")
    key_type = xp.int32 if np.prod(dims.astype(np.float64)) < 2.0 ** 31 else xp.int64  # int32 sorts faster
    chunk, at_origin = (CHUNK, origin) if xp is np else (DEVICE_CHUNK, xp.asarray(origin))
    key, fraction = xp.empty(n, key_type), xp.empty(n, xp.uint32)
    for a in range(0, n, chunk):
        key[a:a + chunk], fraction[a:a + chunk] = _quantize(positions[a:a + chunk], at_origin, cell, dims, key_type)
    # Stable (CuPy's sort always is): the same bytes from NumPy 1 and 2 and from CuPy.
    order = np.argsort(key, kind="stable") if xp is np else xp.argsort(key)
    key = key[order]
    first = xp.ones(n, bool)  # a particle is its cell's first when its key differs from the one before
    xp.not_equal(key[1:], key[:-1], out=first[1:])
    starts = xp.flatnonzero(first)
    unique = key[starts].astype(xp.int64)
    counts = xp.diff(xp.append(starts, n)).astype(xp.uint32)
    del key, starts
    columns, stored = [], []
    for name, values in (attributes or {}).items():
        values = xp.asarray(values)
        if values.shape[0] != n:
            raise VoxFXError(f"Particle attribute '{name}' has {values.shape[0]} values for {n} particles")
        values = values.reshape(n, int(np.prod(values.shape[1:], dtype=np.int64)))
        kind = KIND_HALF if values.dtype.kind == "f" else KIND_INT32
        columns.append(_COLUMN.pack(name.encode("ascii")[:24], kind, values.shape[1]))
        stored.append(_short_half(values).view(xp.uint16) if kind == KIND_HALF else values.astype(xp.int32))
    raw_size = 12 * len(unique) + 4 * n + sum(2 * v.size if v.dtype == xp.uint16 else 4 * v.size for v in stored)
    raw = xp.empty(raw_size, xp.uint8)
    at = _put_planes(raw, 0, [xp.diff(unique, prepend=0)])
    at = _put_planes(raw, at, [counts])
    at = _put_fraction(raw, at, fraction[order])
    del fraction
    for values in stored:  # one 1-D gather per component (of a strided view): faster than gathering rows
        at = _put_planes(raw, at, [values[:, c][order] for c in range(values.shape[1])])
    assert at == raw_size
    return RawFrame(backend.to_numpy(raw), n, len(unique), columns, origin, cell, dims, codec)


def _bounds(positions):
    """(lowest, highest) coordinate per axis as float64 (NaN if any is NaN). NumPy
    reduces an (N, 3) array along its long axis three values at a time; as rows of 3072
    (1024 particles) the inner loop runs over 3072 values."""
    xp = backend.array_module(positions)
    if xp is not np or len(positions) < 2048:
        return (backend.to_numpy(positions.min(axis=0)).astype(np.float64),
                backend.to_numpy(positions.max(axis=0)).astype(np.float64))
    whole = len(positions) // 1024 * 1024
    rows, rest = positions[:whole].reshape(-1, 3 * 1024), positions[whole:]
    low = np.minimum(rows.min(axis=0).reshape(-1, 3).min(axis=0), rest.min(axis=0, initial=np.inf))
    high = np.maximum(rows.max(axis=0).reshape(-1, 3).max(axis=0), rest.max(axis=0, initial=-np.inf))
    return low.astype(np.float64), high.astype(np.float64)


# The device encoder's own arrays per particle (``encode`` on CuPy, a liquid frame with its
# velocity and size): the cell keys (4; 8 above 2³¹ cells) and fractions (4) through the
# sort, the argsort's order (8) and CuPy's sort scratch (a key copy and int64 indices,
# ~12), the sorted keys (4) and first-of-cell flags (1), per occupied cell (≤ 1 per
# particle, ~1/8 in a liquid) its start, key, count and their deltas (8 + 8 + 4 + 8), the
# velocity and size as half floats (8), the raw block (4 + 8 per particle, 12 per cell)
# and the gathered column being written (4): about 37 B at 8 particles a cell, 65 B at
# one. The NumPy encoder, the same arrays but CuPy's sort scratch, traces 50.7 B at 8 and
# 69.2 B at one (tests/unit/test_liquid_encoder_guard.py); counted as 60
# (``tests/gpu/test_encoder_memory_gpu.py`` measures the device).
ENCODER_BYTES_PER_PARTICLE = 60
# ``_quantize``'s transients for one DEVICE_CHUNK: float64 steps, their int64 floor, the
# cells, the key's int64 products and the packed fractions (about 150 B a particle).
QUANTIZE_BYTES_PER_PARTICLE = 150


def device_encoder_bytes(particles: int) -> int:
    """Peak device bytes of ``encode`` for a frame of *particles* on the GPU, beyond the
    particles themselves (the simulation's own arrays)."""
    n = max(0, int(particles))
    return ENCODER_BYTES_PER_PARTICLE * n + QUANTIZE_BYTES_PER_PARTICLE * min(n, DEVICE_CHUNK)


def with_device_encoder(stages: dict, particles: int) -> int:
    """The peak of a GPU bake whose frames are encoded on the device: its estimate's
    largest stage (*stages*: ``flip_memory(..., parts=True)`` or the sparse one, with
    ``state`` and ``total``) or the encoder beside the simulation's state, whichever is
    larger (the encoder runs between steps, when only the state is alive)."""
    return int(max(stages["total"], stages["state"] + device_encoder_bytes(particles)))


def encode_here(positions, attributes=None, *, cell: float) -> bytes:
    """``encode`` where the arrays are (a GPU bake's on the device: only the raw block
    comes back); a device that cannot spare the encoder's memory (about 50 bytes a
    particle) encodes a host copy instead: the same bytes, the bake goes on."""
    return prepare_here(positions, attributes, cell=cell).pack()


def prepare_here(positions, attributes=None, *, cell: float) -> RawFrame:
    """``encode_here`` up to the compression (``prepare``): ``pack()`` the result for the
    bytes, on any thread."""
    try:
        return prepare(positions, attributes, cell=cell)
    except Exception as e:  # noqa: BLE001 - only running out of device memory is handled
        if backend.array_module(positions) is np or not is_out_of_memory(e):
            raise
    host = {name: backend.to_numpy(values) for name, values in (attributes or {}).items()}
    return prepare(backend.to_numpy(positions), host, cell=cell)


def _quantize(positions, origin, cell, dims, key_type):
    """(cell key, packed 10-bit fractions x | y << 10 | z << 20) of each particle: its
    1/1024-cell steps from *origin* (float64: (p − origin) · 1024 / cell, floored)."""
    xp = backend.array_module(positions)
    steps = positions.astype(xp.float64)  # a copy (the caller's array is never changed)
    steps -= origin
    steps *= STEPS / cell
    steps = xp.floor(steps, out=steps).astype(xp.int64)  # ≥ 0
    cells = steps >> SUBCELL_BITS
    key = ((cells[:, 2] * int(dims[1]) + cells[:, 1]) * int(dims[0]) + cells[:, 0]).astype(key_type)
    fraction = (steps & (STEPS - 1)).astype(xp.uint32)
    return key, fraction[:, 0] | (fraction[:, 1] << 10) | (fraction[:, 2] << 20)


def _put_planes(raw, at, components) -> int:
    """Write the byte planes of a column into *raw* from *at*: its *components* (1-D
    arrays of one dtype) byte 0 of each in turn, then byte 1 of each, … (the layout of the
    transposed column's bytes, plane after plane)."""
    xp = backend.array_module(components[0])
    width = components[0].dtype.itemsize
    views = [xp.ascontiguousarray(c).view(xp.uint8) for c in components]  # little-endian: byte b at b
    for b in range(width):
        for view in views:
            m = len(view) // width
            raw[at:at + m] = view[b::width]
            at += m
    return at


def _put_fraction(raw, at, fraction) -> int:
    """The (N,) packed 10-bit fractions as 4 byte planes: the low 8 bits of x, of y, of z,
    then the top 2 bits of all three in one byte (30 bits in 4 bytes; the low bytes are
    noise, the last plane has 64 symbols that the entropy coder packs to ~6 bits).
    Storing a uint32 into the uint8 block keeps its low byte."""
    n = len(fraction)
    raw[at:at + n] = fraction
    raw[at + n:at + 2 * n] = fraction >> 10
    raw[at + 2 * n:at + 3 * n] = fraction >> 20
    raw[at + 3 * n:at + 4 * n] = ((fraction >> 8) & 3) | ((fraction >> 16) & 0xC) | ((fraction >> 24) & 0x30)
    return at + 4 * n


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


def _compress(raw, codec: int) -> bytes:
    if codec == CODEC_ZSTD:
        zstd = _zstd()
        if zstd is None:
            raise VoxFXError("Zstandard compression asked for, but the 'zstandard' module is missing")
        # threads=-1: one worker per core. Zstandard's output does not depend on how many
        # workers there are (only on there being some): a farm node writes the bytes a
        # workstation does.
        return zstd.ZstdCompressor(level=ZSTD_LEVEL, threads=-1).compress(raw)
    if codec == CODEC_ZLIB:
        return zlib.compress(raw, ZLIB_LEVEL)
    raise VoxFXError(f"Unknown compact frame codec {codec}")


def write_points(path, positions, attributes=None, *, cell: float) -> Path:
    """Write one compact frame to *path* atomically (temp file, fsync, rename)."""
    return write_encoded(path, encode(positions, attributes, cell=cell))


def write_encoded(path, data: bytes) -> Path:
    """Write the bytes of an encoded frame (``encode``) to *path* atomically."""
    path = Path(path)

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


def read_points(path, *, vectors: bool = False):
    """(positions (N, 3) float32, {name: values}) of a compact frame; float attributes
    come back as float32, (N, 3) columns as ``name_x/_y/_z`` like ``ply.read_points``
    (with *vectors*: as one (N, 3) array, what the frame loader hands Blender)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise VoxFXError(f"'{path.name}' cannot be read ({e.strerror or e})") from None
    return decode(data, path.name, vectors=vectors)


# Every half float as float32: a 256 KB table, faster than NumPy's own conversion.
_HALF_TO_FLOAT = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)


def decode(data: bytes, name: str = "frame", *, vectors: bool = False):
    """``read_points`` of the bytes *data* (*name*: the file's, for the messages). The
    work is per byte plane (one pass each), positions per cell where they can be: the
    cell corners once per cell, the 1024 subcell offsets from a table."""
    def bad(why):
        return VoxFXError(f"'{name}' is not a readable VoxFX particle frame ({why})")

    n, ncells, origin, cell, dims, columns, raw = _checked_block(data, bad)
    block, at = np.frombuffer(raw, np.uint8), 0

    def planes(width, count):
        """The next *width* byte planes of *count* values, (width, count)."""
        nonlocal at
        at += width * count
        return block[at - width * count:at].reshape(width, count)

    keys = np.cumsum(_join(planes(8, ncells)[:, None], np.int64)[:, 0])
    counts = _join(planes(4, ncells)[:, None], np.uint32)[:, 0].astype(np.int64)
    dx, dy, dz = dims
    if ncells and (keys[0] < 0 or (ncells > 1 and np.diff(keys).min() <= 0) or keys[-1] >= dx * dy * dz
                   or counts.min() < 1 or int(counts.sum()) != n):
        raise bad("its cell table is inconsistent")
    fraction = planes(4, n)
    if n and int(fraction[3].max()) >= 64:
        raise bad("a subcell position is out of range")
    rows, i = np.divmod(keys, dx)  # per cell, not per particle
    k, j = np.divmod(rows, dy)
    corner = (np.stack([i, j, k], axis=1) * cell + np.array(origin)).astype(np.float32)
    offsets = (np.arange(STEPS, dtype=np.float32) + np.float32(0.5)) * np.float32(cell / STEPS)
    positions = np.empty((n, 3), np.float32)
    for a in range(3):  # step = low 8 bits | top 2 bits << 8; at the centre of its 1/1024 of the cell
        step = ((fraction[3] >> (2 * a)) & 3).astype(np.uint16)
        step <<= 8
        step |= fraction[a]
        np.add(np.repeat(corner[:, a], counts), offsets[step], out=positions[:, a])
    out = {}
    for cname, kind, comps in columns:
        word = np.uint16 if kind == KIND_HALF else np.int32
        width = np.dtype(word).itemsize
        values = _join(planes(width, comps * n).reshape(width, comps, n), word)
        if kind == KIND_HALF:
            values = _HALF_TO_FLOAT[values]
        if comps == 1:
            out[cname] = values.reshape(n)
        elif vectors and comps == 3:
            out[cname] = values
        else:
            for c in range(comps):
                out[f"{cname}_{'xyzw'[c]}"] = np.ascontiguousarray(values[:, c])
    return positions, out


def _checked_block(data, bad):
    """(particles, cells, origin, cell size, cells per axis, columns, raw block) of a
    frame whose header, sizes and checksum all check out; else ``bad(why)`` raised."""
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
    raw = _decompress(memoryview(data)[offset:], codec, raw_size, bad)
    if len(raw) != raw_size or zlib.crc32(raw) & 0xFFFFFFFF != crc:
        raise bad("its data is damaged (checksum)")
    return n, ncells, (ox, oy, oz), cell, (dx, dy, dz), columns, raw


def _join(planes, dtype):
    """(N, k) values of *dtype* from their byte planes (width, k, N): each plane stored
    into its byte of every value (little-endian), one strided pass per plane."""
    width, k, n = planes.shape
    out = np.empty((n, k), dtype)
    view = out.view(np.uint8).reshape(n, k * width)
    for b in range(width):
        for c in range(k):
            view[:, c * width + b] = planes[b, c]
    return out


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
            return zstd.ZstdDecompressor().decompress(packed, max_output_size=raw_size)
        except zstd.ZstdError as e:
            raise bad(f"Zstandard: {e}") from None
    if codec == CODEC_ZLIB:
        d = zlib.decompressobj()
        try:
            raw = d.decompress(packed, raw_size)
        except zlib.error as e:
            raise bad(f"zlib: {e}") from None
        if d.unconsumed_tail or not d.eof:
            raise bad("its compressed data does not end where it should")
        return raw
    raise bad(f"unknown codec {codec}")
