"""Binary little-endian PLY point files with float/int vertex properties: the per-frame
flake cache, loaded in Blender by the Geometry Nodes "Import PLY" node (render-safe:
no handler edits data; the node reads the file for the current frame)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..kernels.errors import VoxFXError
from . import fsio

_TYPES = {np.dtype(np.float32): "float", np.dtype(np.int32): "int", np.dtype(np.uint8): "uchar"}


def write_points(path, positions, attributes=None) -> Path:
    """Write points (N, 3) with named per-point attributes: (N,) scalars become one
    property, (N, 3) vectors become ``name_x/_y/_z``. Atomic: temp file + rename."""
    path = Path(path)
    positions = np.ascontiguousarray(positions, dtype=np.float32)
    n = len(positions)
    columns = [("x", positions[:, 0]), ("y", positions[:, 1]), ("z", positions[:, 2])]
    for name, values in (attributes or {}).items():
        values = np.asarray(values)
        values = values.astype(np.float32) if values.dtype.kind == "f" else values.astype(np.int32)
        if values.shape[0] != n:
            raise VoxFXError(f"PLY attribute '{name}' has {values.shape[0]} values for {n} points")
        if values.ndim == 1:
            columns.append((name, values))
        else:
            columns += [(f"{name}_{axis}", values[:, c]) for c, axis in enumerate("xyz"[: values.shape[1]])]
    dtype = np.dtype([(name, values.dtype.newbyteorder("<")) for name, values in columns])
    table = np.empty(n, dtype=dtype)
    for name, values in columns:
        table[name] = values
    header = ["ply", "format binary_little_endian 1.0", "comment VoxFX", f"element vertex {n}"]
    header += [f"property {_TYPES[np.dtype(values.dtype)]} {name}" for name, values in columns]
    header.append("end_header")

    def write(temporary):
        with open(temporary, "xb") as f:
            f.write(("\n".join(header) + "\n").encode("ascii"))
            f.write(table.tobytes())

    try:
        fsio.write_atomic(path, write)
    except OSError as e:
        raise VoxFXError(f"Cannot write '{path}': {e.strerror or e}") from e
    return path


MAX_HEADER = 4096  # bytes: VoxFX writes a few hundred


def read_points(path):
    """(positions, {name: values}) of a file written by ``write_points``.

    The file is untrusted (a cache can come from anywhere): the header must be VoxFX's
    own layout, and its point count must match the file's length exactly; anything else
    raises ``VoxFXError`` naming the file, never a crash or a huge allocation.
    """
    path = Path(path)
    data = path.read_bytes()
    marker = data.find(b"end_header\n", 0, MAX_HEADER)
    if not data.startswith(b"ply\n") or marker < 0:
        raise VoxFXError(f"'{path.name}' is not a VoxFX point file (no PLY header)")
    end = marker + len(b"end_header\n")
    try:
        lines = data[:end].decode("ascii").splitlines()
        if "format binary_little_endian 1.0" not in lines:
            raise ValueError("not binary little-endian")
        counts = [line.split() for line in lines if line.startswith("element ")]
        if len(counts) != 1 or counts[0][1] != "vertex" or len(counts[0]) != 3:
            raise ValueError("one 'element vertex N' expected")
        n = int(counts[0][2])
        inverse = {v: k for k, v in _TYPES.items()}
        props = [(line.split()[2], inverse[line.split()[1]]) for line in lines if line.startswith("property")]
        dtype = np.dtype([(name, t.newbyteorder("<")) for name, t in props])
        if not {"x", "y", "z"} <= set(dtype.names or ()):
            raise ValueError("no x, y, z")
    except (ValueError, KeyError, IndexError, UnicodeDecodeError, TypeError) as e:
        raise VoxFXError(f"'{path.name}' has a PLY header VoxFX did not write ({e})") from None
    if n < 0 or len(data) - end != n * dtype.itemsize:
        raise VoxFXError(f"'{path.name}' is damaged: its header promises {n:,} points "
                         f"({n * dtype.itemsize:,} bytes) but {len(data) - end:,} bytes follow")
    table = np.frombuffer(data, dtype=dtype, count=n, offset=end)
    positions = np.stack([table["x"], table["y"], table["z"]], axis=1)
    return positions, {name: table[name].copy() for name, _ in props if name not in "xyz"}
