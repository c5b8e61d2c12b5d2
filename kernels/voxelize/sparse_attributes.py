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

Runs. A solid's interior is kept as runs of full bricks along x (``sparse_result``), and
``add_channels`` keeps them: along one voxel row of a run that no triangle touches, every
voxel takes the same owner (the fill's previous owned voxel of the row, else its next
one, and the run holds neither), so each run carries one value per voxel row, an
``(8, 8)`` [z, y] block (``grid.tiles[name].value``: ``(runs, 8, 8[, 4])``). Run bricks
holding a voxel some triangle touches become stored bricks (split off their run): the
channels' memory follows the surface too. ``channel_values`` reads both.

Both backends: the owners are decided where the grid is: on the host (NumPy) from the
listed hits, on the device by ``gpu_sparse_owners`` (the dense device owner pass per chunk,
no hit lists), the same owners; the fill along rows and the channels' values follow.
"""

from __future__ import annotations

import numpy as np

from .. import backend
from ..grid.sparse import BRICK, Tiles, brick_coords, brick_keys
from .attributes import fill_along_rows, smallest_owner
from .sparse import unpack_rows
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

    def box_of(self, brick_min, brick_max):
        """The box lo … hi of whole x rows over bricks *brick_min* … *brick_max* (x y z)."""
        shape = np.asarray(self.spec.shape, np.int64)
        lo = np.asarray(brick_min, np.int64) * BRICK
        hi = np.minimum((np.asarray(brick_max, np.int64) + 1) * BRICK, shape)
        lo[0], hi[0] = 0, shape[0]  # whole x rows: the fill runs along them
        return lo, hi

    def hits(self, lo, hi):
        """(triangles near the box, [(box-relative linear voxel, triangle index into
        them)]): the conservative hits in the box, as the dense owner pass finds them."""
        sel = self.mesh.for_surface(lo, hi)
        hits = []
        if len(sel):
            surface_voxels_cpu(self.mesh.pv, self.mesh.triangles[sel], self.spec.shape, tri_ids=hits, box=(lo, hi))
        return sel, hits

    def context(self, lo, hi):
        """What ``owners`` and ``touched`` need of the box lo … hi: (lo, hi, triangles near
        it, their hits in it)."""
        sel, hits = self.hits(lo, hi)
        return (lo, hi, sel, hits)

    def touched(self, run_keys, context):
        """bool per brick key *run_keys* (sorted): whether a triangle's conservative test
        covers one of its voxels (among the *context*'s hits)."""
        lo, hi, _, hits = context
        touched = np.zeros(len(run_keys), bool)
        if len(run_keys):
            for lin, _ in hits:
                k = _brick_keys_of(lin, lo, hi)
                at = np.minimum(np.searchsorted(run_keys, k), len(run_keys) - 1)
                touched[at[run_keys[at] == k]] = True
        return touched

    def owners(self, ijk, box=None):
        """int32 owner triangle of each voxel *ijk* ((m, 3) int64, the set voxels of whole
        rows of bricks), in the order given; −1 where the row holds no owned voxel. *box*:
        (lo, hi, sel, hits) found already for these rows (``box_of``, ``hits``)."""
        if len(ijk) == 0:
            return np.zeros(0, np.int32)
        if box is None:
            lo, hi = self.box_of(ijk.min(axis=0) // BRICK, ijk.max(axis=0) // BRICK)
            sel, hits = self.hits(lo, hi)
        else:
            lo, hi, sel, hits = box
        nx, ny = int(hi[0] - lo[0]), int(hi[1] - lo[1])
        rel = ijk - lo
        linear = (rel[:, 2] * ny + rel[:, 1]) * nx + rel[:, 0]
        order = np.argsort(linear, kind="stable")
        linear = linear[order]
        owner = fill_along_rows(smallest_owner(linear, hits, index=sel), linear // nx)
        out = np.empty(len(ijk), np.int32)
        out[order] = owner
        return out


def owner_mesh_for(vertices, triangles, spec, xp):
    """The owners' mesh of a result on *xp*: ``OwnerMesh`` on the host, on the device
    ``gpu_sparse_owners.DeviceOwnerMesh`` (the same owners)."""
    if xp is np:
        return OwnerMesh(vertices, triangles, spec)
    from .gpu_sparse_owners import DeviceOwnerMesh

    return DeviceOwnerMesh(vertices, triangles, spec)


def chunk_attributes(result: SparseVoxels, owner_mesh: OwnerMesh, start: int, stop: int):
    """(ijk (m, 3) int32 on the host, owner (m,) int32) of the set voxels of bricks
    start … stop (whole rows of bricks, ``row_chunks``), in brick order
    (``sparse_points.chunk_points``: runs of full bricks never expanded to bit rows)."""
    from .sparse_points import chunk_points

    return chunk_points(result, owner_mesh, start, stop)


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


BACKGROUNDS = {"owner": -1, "material": -1, "color": 0.0}


def add_channels(result: SparseVoxels, vertices, triangles, material_index=None, *, table=None,
                 corner_colors=None, colored=None, object_index=None, progress=None,
                 bricks: int = CHUNK_BRICKS) -> SparseVoxels:
    """Give *result*'s grid the channels ``owner`` (int32 triangle, −1 background) and,
    with *material_index* ((T,) per triangle), ``material`` (int32, −1) and, where
    sources have colours, ``color`` (float32 RGBA, 0 background), equal at every set
    voxel to what the dense path gives, *bricks* at a time (whole rows). Runs of full
    bricks stay runs, with a value per voxel row (module notes, **Runs**); read the
    channels with ``channel_values``. Returns *result*."""
    from ..progress import report
    from .sparse import CHANNEL

    if any(name != CHANNEL for name in result.grid.channels):
        raise ValueError("add_channels runs once, on a voxelization's bit channel alone")
    owner_mesh = owner_mesh_for(vertices, triangles, result.spec, result.xp)
    chunks = row_chunks(result, bricks)
    parts = []
    for n, (s, e) in enumerate(chunks):
        parts.append(_chunk_channels(result, owner_mesh, s, e, material_index,
                                     dict(table=table, corner_colors=corner_colors, colored=colored,
                                          object_index=object_index)))
        report(progress, (n + 1) / len(chunks), "voxel attributes")
    result.grid = _assembled(parts, result.grid, result.xp)
    return result


def fill_entries(keys, rows, runs, owner_mesh):
    """The owners' fill of a chunk (host arrays): run bricks holding a voxel a triangle
    touches become stored full bricks; then the entries — each set voxel of the stored
    bricks (brick index *b*, voxel *ijk* int64) and the first voxel of each voxel row of a
    run (*row_start*). Returns (keys, rows, runs, b, ijk, row_start, context)."""
    from .sparse import merged_runs

    run_keys = Tiles(runs, 1).keys(np)
    both = brick_coords(np.concatenate([keys, run_keys]), np)
    lo, hi = owner_mesh.box_of(both.min(axis=0), both.max(axis=0))
    context = owner_mesh.context(lo, hi)
    if len(run_keys):
        touched = np.asarray(owner_mesh.touched(run_keys, context), bool)
        if touched.any():
            keys = np.concatenate([keys, run_keys[touched]])
            rows = np.concatenate([rows, np.full((int(touched.sum()), BRICK, BRICK), 0xFF, np.uint8)])
            order = np.argsort(keys)
            keys, rows = keys[order], rows[order]
            c = brick_coords(run_keys[~touched], np)
            runs = merged_runs([np.stack([c[:, 0], c[:, 0] + 1, c[:, 1], c[:, 2]], axis=1)], np)
    b, z, y, x = np.nonzero(unpack_rows(rows, np))
    ijk = brick_coords(keys, np)[b] * BRICK + np.stack([x, y, z], axis=1)
    zz, yy = (a.ravel() for a in np.meshgrid(np.arange(BRICK), np.arange(BRICK), indexing="ij"))
    row_start = np.repeat(runs[:, [0, 2, 3]] * BRICK, BRICK * BRICK, axis=0)
    row_start[:, 1] += np.tile(yy, len(runs))
    row_start[:, 2] += np.tile(zz, len(runs))
    return keys, rows, runs, b, ijk, row_start, context


def _chunk_channels(result, owner_mesh, start, stop, material_index, colour_args):
    """The channels of bricks start … stop (whole rows of bricks): {"keys", "rows",
    "runs", name: (pool (n, 8, 8, 8[, 4]), per-row values (m, 8, 8[, 4]))}."""
    keys, rows, runs = (np.asarray(backend.to_numpy(a)) for a in result.parts_of(start, stop))
    keys, rows, runs, b, ijk, row_start, context = fill_entries(keys, rows, runs, owner_mesh)
    owner = owner_mesh.owners(np.concatenate([ijk, row_start]), box=context)
    values = {"owner": owner}
    if material_index is not None:
        values["material"], color = material_and_color(owner, material_index, **colour_args)
        if color is not None:
            values["color"] = color
    out = {"keys": keys, "rows": rows, "runs": runs}
    local = ijk - brick_coords(keys, np)[b] * BRICK  # each entry's place in its brick
    x, y, z = local[:, 0], local[:, 1], local[:, 2]
    for name, v in values.items():
        comp = v.shape[1:]
        pool = np.full((len(keys), BRICK, BRICK, BRICK) + comp, BACKGROUNDS[name], v.dtype)
        pool[b, z, y, x] = v[:len(ijk)]
        out[name] = (pool, v[len(ijk):].reshape((len(runs), BRICK, BRICK) + comp))
    return out


def _brick_keys_of(linear, lo, hi):
    """Brick keys of the voxels *linear* (box-relative) of the box lo … hi."""
    nx, ny = int(hi[0] - lo[0]), int(hi[1] - lo[1])
    ijk = np.stack([linear % nx, (linear // nx) % ny, linear // (nx * ny)], axis=1) + lo
    return brick_keys(ijk // BRICK, np)


def _assembled(parts, grid, xp):
    """One grid of the chunks' stored bricks and runs, every channel on *xp*'s device."""
    from ..grid.sparse import SparseGrid, Topology
    from .sparse import CHANNEL

    def joined(get, empty):
        got = [get(p) for p in parts]
        return np.concatenate(got) if got else empty

    keys = joined(lambda p: p["keys"], np.zeros(0, np.int64))  # chunks in key order: sorted
    runs = xp.asarray(joined(lambda p: p["runs"], np.zeros((0, 4), np.int64)))
    out = SparseGrid(Topology.of_sorted(xp.asarray(keys), xp), grid.origin, grid.voxel_size)
    out.channels[CHANNEL] = xp.asarray(joined(lambda p: p["rows"], np.zeros((0, BRICK, BRICK), np.uint8)))
    out.backgrounds[CHANNEL] = 0
    if runs.shape[0]:
        out.tiles[CHANNEL] = Tiles(runs, 1)
    for name in (n for n in BACKGROUNDS if parts and n in parts[0]):
        out.channels[name] = xp.asarray(np.concatenate([p[name][0] for p in parts]))
        out.backgrounds[name] = BACKGROUNDS[name]
        if runs.shape[0]:
            out.tiles[name] = Tiles(runs, xp.asarray(np.concatenate([p[name][1] for p in parts])))
    return out


def channel_values(result: SparseVoxels, name: str, ijk):
    """Channel *name* (``add_channels``) at voxels *ijk* ((m, 3) integer, x y z), on the
    host: stored bricks' voxels, a run's value of the voxel's row, else the background."""
    g = result.grid
    ijk = np.asarray(backend.to_numpy(ijk)).astype(np.int64)
    pool = np.asarray(backend.to_numpy(g.channels[name]))
    keys = brick_keys(ijk // BRICK, np)
    local = ijk % BRICK
    out = np.full((len(ijk),) + pool.shape[4:], g.backgrounds[name], pool.dtype)
    slot = np.asarray(backend.to_numpy(g.topology.lookup(g.xp.asarray(keys))))
    ok = slot >= 0
    out[ok] = pool[slot[ok], local[ok, 2], local[ok, 1], local[ok, 0]]
    tiles = g.tiles.get(name)
    if tiles is not None and tiles.runs.shape[0]:
        runs, value = np.asarray(backend.to_numpy(tiles.runs)), np.asarray(backend.to_numpy(tiles.value))
        b = ijk // BRICK
        r = np.searchsorted(brick_keys(runs[:, [0, 2, 3]], np), keys, side="right") - 1
        rr = np.maximum(r, 0)
        inside = (r >= 0) & (runs[rr, 2] == b[:, 1]) & (runs[rr, 3] == b[:, 2]) & (b[:, 0] < runs[rr, 1])
        out[inside] = value[rr[inside], local[inside, 2], local[inside, 1]]
    return out
