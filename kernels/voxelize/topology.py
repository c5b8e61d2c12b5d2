"""Mesh topology checks that decide how to voxelize."""

from __future__ import annotations

import numpy as np


def open_edge_count(triangles, object_index=None) -> int:
    """Edges not shared by exactly two triangles (boundary or non-manifold edges).

    A closed (watertight) mesh has none; parity-based solid voxelization needs that,
    otherwise the majority vote is the safer choice. *object_index* keeps edges of
    different objects apart when their vertex indices are global.
    """
    t = np.asarray(triangles, dtype=np.int64)
    if len(t) == 0:
        return 0
    e = np.concatenate([t[:, [0, 1]], t[:, [1, 2]], t[:, [2, 0]]])
    e.sort(axis=1)
    _, counts = np.unique(e, axis=0, return_counts=True)
    return int((counts != 2).sum())


def open_objects(triangles, object_index, names) -> list[str]:
    """Names of the objects whose triangles do not form closed surfaces."""
    t = np.asarray(triangles, dtype=np.int64)
    oi = np.asarray(object_index)
    return [name for k, name in enumerate(names) if open_edge_count(t[oi == k])]
