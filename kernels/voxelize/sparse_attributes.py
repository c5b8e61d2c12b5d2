"""Per-voxel owner (triangle), material and colour on a sparse voxelization (issue 11),
equal at every set voxel to what the dense path gives (``attributes.owner_triangles``,
``outputs.voxel_attributes``).

The owner of a set voxel is the smallest triangle whose conservative test covers it;
voxels no triangle touches (a solid's inside) take the owner of the nearest owned voxel
before them in their x row, else after them (``attributes.py``). Rows of voxels run
along x across bricks, so the work goes by *rows of bricks*: bricks of one (by, bz) are
consecutive in key order, and a chunk of whole rows of bricks holds whole rows of voxels.
Per chunk: the conservative hits of the triangles near the chunk's box (the whole grid's
setup, ``surface_voxels_cpu(box=…)``), the smallest per voxel, then the fill along rows
— the dense path's own functions on the chunk's voxels in linear order. Memory follows
one chunk, not the grid.

Both backends: the owners are decided on the host (NumPy), from the same arrays on either
(a grid on the device is read one chunk at a time); the channels go where the grid is.
"""

from __future__ import annotations

import numpy as np

from .. import backend
from ..grid.sparse import BRICK
from .attributes import fill_along_rows, smallest_owner
from .sparse_result import CHUNK_BRICKS, SparseVoxels
from .surface import surface_voxels_cpu

DEFAULT_COLOR = (0.8, 0.8, 0.8, 1.0)  # a voxel without a material: Blender's default grey


def row_chunks(result: SparseVoxels, bricks: int = CHUNK_BRICKS):
    """(start, stop) ranges of bricks in brick order (stored bricks and runs of full
    bricks merged, ``SparseVoxels.row_chunks``), about *bricks* each, cut only between
    rows of bricks (a new (by, bz)), so each holds whole x rows of voxels."""
    return result.row_chunks(bricks)


class OwnerMesh:
    """The triangles in the grid's voxel units and their reach (``slabs.SplitMesh``)."""

    def __init__(self, vertices, triangles, spec):
        from .slabs import SplitMesh

        self.mesh = SplitMesh(vertices, triangles, spec)
        self.spec = spec

    def owners(self, ijk):
        """int32 owner triangle of each voxel *ijk* ((m, 3) int64, the set voxels of whole
        rows of bricks), in the order given; −1 where the row holds no owned voxel."""
        if len(ijk) == 0:
            return np.zeros(0, np.int32)
        shape = np.asarray(self.spec.shape, np.int64)
        lo = (ijk.min(axis=0) // BRICK) * BRICK
        hi = np.minimum((ijk.max(axis=0) // BRICK + 1) * BRICK, shape)
        lo[0], hi[0] = 0, shape[0]  # whole x rows: the fill runs along them
        nx, ny = int(hi[0] - lo[0]), int(hi[1] - lo[1])
        rel = ijk - lo
        linear = (rel[:, 2] * ny + rel[:, 1]) * nx + rel[:, 0]
        order = np.argsort(linear, kind="stable")
        linear = linear[order]
        sel = self.mesh.for_surface(lo, hi)
        hits = []
        if len(sel):
            surface_voxels_cpu(self.mesh.pv, self.mesh.triangles[sel], self.spec.shape, tri_ids=hits, box=(lo, hi))
        owner = fill_along_rows(smallest_owner(linear, hits, index=sel), linear // nx)
        out = np.empty(len(ijk), np.int32)
        out[order] = owner
        return out


def chunk_attributes(result: SparseVoxels, owner_mesh: OwnerMesh, start: int, stop: int):
    """(ijk (m, 3) int32 on the host, owner (m,) int32) of the set voxels of bricks
    start … stop (whole rows of bricks, ``row_chunks``), in brick order."""
    ijk = np.asarray(backend.to_numpy(result.coordinates_of(start, stop)))
    return ijk, owner_mesh.owners(ijk.astype(np.int64))


def material_and_color(owner, material_index, table=None, corner_colors=None, colored=None, object_index=None):
    """Per voxel: material (int32 into the selection's materials, −1 none) and RGBA colour
    (None where no source has a colour attribute): the dense path's rule
    (``outputs.voxel_attributes``): a source with a colour attribute gives the mean of
    the owner triangle's corner colours, the others their material's colour (*table*)."""
    ok = owner >= 0
    o = np.maximum(owner, 0)
    material = np.where(ok, np.asarray(material_index)[o], -1).astype(np.int32) if len(material_index) else \
        np.full(len(owner), -1, np.int32)
    color = None
    if corner_colors is not None and colored is not None and any(colored):
        table = np.asarray(table if table is not None else [DEFAULT_COLOR], np.float32)
        color = table[np.where(material >= 0, material, len(table) - 1)]
        from_attribute = ok & np.asarray(colored, bool)[np.asarray(object_index)[o]]
        color[from_attribute] = np.asarray(corner_colors)[o[from_attribute]].mean(axis=1).astype(np.float32)
    return material, color


def add_channels(result: SparseVoxels, vertices, triangles, material_index=None, *, table=None,
                 corner_colors=None, colored=None, object_index=None, progress=None,
                 bricks: int = CHUNK_BRICKS) -> SparseVoxels:
    """Give *result*'s grid the channels ``owner`` (int32 triangle, −1 background) and,
    with *material_index* ((T,) per triangle), ``material`` (int32, −1) and, where
    sources have colours, ``color`` (float32 RGBA, 0 background), set at every set voxel
    as the dense path sets them, *bricks* at a time (whole rows). Returns *result*."""
    from ..progress import report

    if result.full_bricks:  # the channels are per voxel: runs become bricks (not lean: issue 11)
        result.grid = _expanded(result.grid)
    grid, xp = result.grid, result.xp
    topo = grid.topology
    owner_mesh = OwnerMesh(vertices, triangles, result.spec)
    owner_pool = np.full((topo.capacity, BRICK, BRICK, BRICK), -1, np.int32)
    material_pool = np.full_like(owner_pool, -1) if material_index is not None else None
    color_pool = None
    chunks = row_chunks(result, bricks)
    slots = backend.to_numpy(topo.slots)
    base = backend.to_numpy(topo.coords()) * BRICK
    for n, (s, e) in enumerate(chunks):
        ijk, owner = chunk_attributes(result, owner_mesh, s, e)
        # the voxel's brick within the chunk: bricks are in key order, voxels z y x inside
        brick = _brick_of(ijk, base[s:e]) + s
        local = ijk - base[brick]
        at = (slots[brick], local[:, 2], local[:, 1], local[:, 0])
        owner_pool[at] = owner
        if material_pool is not None:
            material, color = material_and_color(owner, material_index, table, corner_colors, colored, object_index)
            material_pool[at] = material
            if color is not None:
                if color_pool is None:
                    color_pool = np.zeros(owner_pool.shape + (4,), np.float32)
                color_pool[at] = color
        report(progress, (n + 1) / len(chunks), "voxel attributes")
    _put(grid, "owner", owner_pool, -1, xp)
    if material_pool is not None:
        _put(grid, "material", material_pool, -1, xp)
    if color_pool is not None:
        _put(grid, "color", color_pool, 0.0, xp)
    return result


def _expanded(grid):
    """*grid* with its runs of full bricks stored as bricks, its other channels kept."""
    from .sparse import CHANNEL

    out = grid.expanded(CHANNEL)
    if any(name != CHANNEL for name in grid.channels):
        raise ValueError("add_channels expands runs of full bricks before any other channel exists")
    return out


def _brick_of(ijk, base):
    """Index into *base* ((b, 3) brick min voxels in key order) of each voxel's brick."""
    from ..grid.sparse import brick_keys

    keys = brick_keys(base // BRICK, np)
    return np.searchsorted(keys, brick_keys(ijk.astype(np.int64) // BRICK, np))


def _put(grid, name, pool, background, xp):
    grid.channels[name] = pool if xp is np else xp.asarray(pool)
    grid.backgrounds[name] = background
