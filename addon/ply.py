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


def read_points(path):
    """(positions, {name: values}) of a file written by ``write_points`` (for tests)."""
    data = Path(path).read_bytes()
    end = data.index(b"end_header\n") + len(b"end_header\n")
    lines = data[:end].decode("ascii").splitlines()
    n = int(next(line.split()[2] for line in lines if line.startswith("element vertex")))
    inverse = {v: k for k, v in _TYPES.items()}
    props = [(line.split()[2], inverse[line.split()[1]]) for line in lines if line.startswith("property")]
    table = np.frombuffer(data, dtype=np.dtype([(name, t.newbyteorder("<")) for name, t in props]), count=n,
                          offset=end)
    positions = np.stack([table["x"], table["y"], table["z"]], axis=1)
    return positions, {name: table[name].copy() for name, _ in props if name not in "xyz"}
