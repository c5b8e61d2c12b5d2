"""VDB files: dense grids written to ``.vdb`` with Blender's own OpenVDB module
(``openvdb_module``), atomically (temporary name, completeness check, rename), and the
recorded length of a written file. ``writeback.py`` shows them as Volume objects;
the streamed and sparse writers (``vdb_stream.py``, ``sparse_vdb.py``) share the
transform, background and atomic-write helpers.
"""

from __future__ import annotations

import struct
from pathlib import Path

import bpy
import numpy as np

from ..kernels.errors import InputError, VoxFXError
from . import fsio


def openvdb_module():
    """Blender's bundled OpenVDB Python module.

    Found by what is there, not by version: the bpy module has
    ``bpy.utils.expose_bundled_modules()`` (which puts the bundled ``openvdb`` on the path)
    from 4.4 on; Blender binaries before that ship it as ``pyopenvdb``, importable as is
    (the bpy 4.2/4.3 wheels have none at all).
    """
    if hasattr(bpy.utils, "expose_bundled_modules"):
        bpy.utils.expose_bundled_modules()
    try:
        import openvdb

        return openvdb
    except ImportError:
        pass
    try:
        import pyopenvdb

        return pyopenvdb
    except ImportError as error:
        raise VoxFXError(
            f"this Blender build ({bpy.app.version_string}) has no OpenVDB Python module, so volumes "
            "cannot be written"
        ) from error


GRID_CLASSES = ("FOG_VOLUME", "LEVEL_SET")


def write_vdb(
    path, grids, spec, *, grid_class="FOG_VOLUME", background=None, tolerance=0.0, metadata=None, half=False
):
    """Write dense grids to one ``.vdb`` file, atomically, and return its path.

    *grids* maps grid names to arrays indexed ``[k, j, i]`` over *spec* (a GridSpec):
    (nz, ny, nx) floats become float grids, (nz, ny, nx, 3) become vector grids (e.g.
    ``velocity``, which Blender picks up as motion). *grid_class* ('FOG_VOLUME' or
    'LEVEL_SET') and *background* may be one value or a dict per grid name; backgrounds
    default to 0 for fog volumes and 3 voxels for level sets. Only voxels that differ from
    the background by more than *tolerance* are stored active; for level sets, voxels at
    or beyond ±background become inactive inside/outside tiles. Blender lists grids
    alphabetically, whatever their order here. *half* (one value or a dict per grid name)
    stores a grid's values as 16-bit floats (OpenVDB's ``saveFloatAsHalf``; readers get
    floats back): relative error ≤ 2⁻¹¹, about 43 % fewer bytes per active voxel
    (bench/cache_formats.py). OpenVDB compresses every file itself (Blender's build: Blosc);
    its Python module offers no other write option.

    The file appears complete or not at all: it is written to a temporary name in the
    same folder, checked, and renamed.
    """
    path = Path(path)
    if not grids:
        raise InputError(f"no grids to write to {path}")
    vdb = openvdb_module()
    vdb_grids = [
        _vdb_grid(
            vdb, name, values, spec, _per_grid(grid_class, name), _per_grid(background, name), tolerance
        )
        for name, values in grids.items()
    ]
    for grid in vdb_grids:
        grid.saveFloatAsHalf = bool(_per_grid(half, grid.name))
    try:
        _write_atomically(
            path, lambda temporary: vdb.write(str(temporary), vdb_grids, dict(metadata or {}))
        )
    finally:
        vdb_grids.clear()  # a raised error keeps this frame alive, but need not keep the grids
    return path


def _per_grid(setting, name):
    return setting.get(name) if isinstance(setting, dict) else setting


def _vdb_grid(vdb, name, values, spec, grid_class, background, tolerance):
    """One OpenVDB grid holding *values* ([k, j, i] over *spec*) with the spec's transform."""
    if not name:
        raise InputError("every VDB grid needs a name (Blender finds grids by name)")
    grid_class = str(grid_class or "FOG_VOLUME").upper().replace(" ", "_")
    if grid_class not in GRID_CLASSES:
        raise InputError(f"grid {name!r}: class must be one of {GRID_CLASSES}, not {grid_class!r}")
    values = np.asarray(values)
    is_vector = values.shape == spec.array_shape + (3,)
    if values.shape != spec.array_shape and not is_vector:
        raise InputError(
            f"grid {name!r} has shape {values.shape}, but the grid spec needs {spec.array_shape} "
            f"(scalar) or {spec.array_shape + (3,)} (vector), indexed [k, j, i]"
        )
    if not np.isfinite(values).all():
        raise InputError(f"grid {name!r} contains NaN or infinite values")
    level_set = grid_class == "LEVEL_SET"
    if is_vector and level_set:
        raise InputError(f"grid {name!r}: a level set must be a scalar grid")
    background = _background(name, background, is_vector, level_set, spec)
    if tolerance < 0:
        raise InputError(f"the tolerance for inactive voxels must be zero or more, not {tolerance}")

    grid = vdb.Vec3SGrid(background) if is_vector else vdb.FloatGrid(background)
    if level_set:
        # Far from the surface the distance is only known by sign: store ±background as
        # inactive tiles, the way OpenVDB's own level sets are built.
        values = np.where(np.abs(values) < background, values, background)
    # Vector grids compare with the background per component.
    tolerance = (float(tolerance),) * 3 if is_vector else float(tolerance)
    grid.copyFromArray(_xyz_contiguous(values, is_vector), (0, 0, 0), tolerance)
    if level_set:
        grid.signedFloodFill()
    grid.name = name  # Blender needs the 'name' metadata to find the grid
    grid.gridClass = getattr(vdb.GridClass, grid_class)
    grid.transform = _vdb_transform(vdb, spec)
    return grid


def _background(name, background, is_vector, level_set, spec):
    """The grid's background as OpenVDB wants it: a float, or a 3-tuple for vector grids."""
    if background is None:  # OpenVDB's own level sets are 3 voxels wide on each side
        background = 3.0 * spec.voxel_size if level_set else 0.0
    values = np.asarray(background, dtype=np.float64)
    if values.shape not in ((), (3,)) or (values.shape == (3,) and not is_vector):
        raise InputError(
            f"grid {name!r}: background must be one number (or 3 for a vector grid), not {background!r}"
        )
    if level_set and not values > 0:
        raise InputError(
            f"grid {name!r}: a level set's background (its band half-width) must be positive"
        )
    return tuple(np.broadcast_to(values, 3).tolist()) if is_vector else float(values)


def _xyz_contiguous(values, is_vector):
    # copyFromArray reads array axes as (x, y, z) and ignores strides (measured: a
    # transposed view lands voxels in the wrong places), so hand it a real C-order copy.
    axes = (2, 1, 0, 3) if is_vector else (2, 1, 0)
    return np.ascontiguousarray(values.transpose(axes), dtype=np.float32)


def _vdb_transform(vdb, spec):
    """Uniform scale by the voxel size, then a move to voxel (0,0,0)'s centre."""
    transform = vdb.createLinearTransform(spec.voxel_size)
    transform.postTranslate(tuple(float(v) for v in spec.vdb_translation()))
    return transform


def _write_atomically(path: Path, write):
    """Run write(temporary path) beside *path*, check the result, then make it durable
    under *path* (``fsio.write_atomic``: fsync, the umask's mode, rename, fsync folder)."""

    def write_and_check(temporary: Path):
        write(temporary)
        _check_complete_vdb(temporary, path)

    try:
        fsio.write_atomic(path, write_and_check)
    except OSError as error:  # the disk's complaint
        raise VoxFXError(f"could not write {path}: {error.strerror or error}") from error
    except RuntimeError as error:  # OpenVDB's writer's complaint
        raise VoxFXError(f"could not write {path}: {error}") from error


def _check_complete_vdb(temporary: Path, path: Path):
    # OpenVDB does not report failed writes (measured: a write cut short by a full disk
    # returns normally and leaves a truncated file), so compare the file's length with
    # the end offset its own grid table records for the last grid.
    actual = temporary.stat().st_size
    try:
        recorded = vdb_recorded_length(temporary)
    except VoxFXError:
        recorded = None  # cut off inside the header or grid table
    if recorded != actual:
        raise VoxFXError(
            f"could not write {path}: the file came out incomplete ({actual} bytes; is the disk full?)"
        )


def vdb_recorded_length(path) -> int:
    """The file length a seekable ``.vdb`` file's header and grid table promise.

    Layout (OpenVDB io/Archive, file format ≥ 222): magic i64, version u32, library
    major/minor u32, has-grid-offsets u8, UUID 36 chars, file metadata, grid count i32,
    then per grid: name, type and instance-parent strings, and grid/block/end offsets
    (i64). Each grid's end offset is where the next grid's descriptor starts.
    """
    with open(path, "rb") as stream:
        magic, version, _major, _minor, has_offsets = struct.unpack("<qIIIB", _read(stream, 21))
        if magic != 0x56444220 or version < 222 or not has_offsets:
            raise VoxFXError(f"{path} is not a seekable VDB file of format 222 or later")
        _read(stream, 36)  # UUID
        _skip_metadata(stream)
        (grid_count,) = struct.unpack("<i", _read(stream, 4))
        end = stream.tell()
        for _ in range(grid_count):
            stream.seek(end)
            for _string in range(3):
                _read_string(stream)
            _grid_start, _block_start, end = struct.unpack("<qqq", _read(stream, 24))
    return end


def _skip_metadata(stream):
    (count,) = struct.unpack("<I", _read(stream, 4))
    for _ in range(count):
        _read_string(stream)  # name
        _read_string(stream)  # type name
        (size,) = struct.unpack("<I", _read(stream, 4))
        _read(stream, size)


def _read_string(stream) -> bytes:
    (length,) = struct.unpack("<I", _read(stream, 4))
    return _read(stream, length)


def _read(stream, size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise VoxFXError(f"{stream.name} ends early: it is truncated")
    return data
