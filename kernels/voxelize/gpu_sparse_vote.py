"""The 3-axis (hole-tolerant) vote of the sparse voxelizer on bricks, on the device
(issue 11; seed 004 §4.1 parity along each axis, §5 sparse; ``solid.majority_vote_cpu``
is the dense rule: a voxel is inside where at least two of the parities along x, y and z
say so).

    lin, rows, runs = vote_bricks(axis_solids(mesh, nb), nb, cp)

1. **Three sparse solids** (``axis_solids``): the device solid of ``gpu_sparse`` on the
   mesh relabelled so that axis a is x (frame coordinate f = world coordinate (f + a) % 3,
   ``DeviceMesh.permuted``): per axis its partial bricks (sorted brick numbers of its own
   frame, 64 row bytes) and its runs of full bricks along its own x: along x, y or z of
   the world. Each follows the surface, as the solid alone does.
2. **The box.** A voxel outside the reach of two parities along world x (the y and z
   solids) has at most one vote, so the result lies within the bricks the other two
   axes' solids reach along each world axis: the bitmaps below cover that box only.
3. **Full bitmaps** (``vote_fill_runs``): per axis one bit per brick of the box, set in
   its runs. Outside the three solids' partial bricks, every axis is full or empty at a
   brick, so the vote there is brick-wise: maj(F₀, F₁, F₂) word by word.
4. **Partial bricks** U, the union of the three axes' partial bricks (world numbers,
   sorted unique): per brick and axis its state (``vote_brick_slots``: a partial slot, full
   from the bitmap, or empty), then per voxel row the majority of the three axes' bits,
   the y and z solids' rows read across (``vote_brick_rows``). A brick of U whose rows are
   all set is full, all clear is empty, else it is stored.
5. **Runs** (``vote_override``, ``vote_row_runs``): the result's full bitmap is the
   majority of step 3 with the bricks of U set as step 4 found them, and its rows of set
   bits are the runs of full bricks along x, maximal and sorted, as ``sparse._assemble``
   makes them: the same bricks, rows and runs as the NumPy tile walk (``sparse.py``).

Memory: the three solids (surface-sized), U's rows, and three bitmaps of the box (one
bit a brick: 16 MiB each for a 4096³ box, ``bitmap_bytes``); no array of the grid's voxels.
Every kernel has a NumPy twin here (``_*_numpy``), so the algorithm runs and is tested on
the CPU (tests/unit/test_voxelize_sparse_vote.py) and the kernels are checked against
the NumPy reference on the host by nvcc (tests/unit/test_cuda_sparse_vote_host.py).
"""

from __future__ import annotations

import numpy as np

from ..grid.launch import Kernels
from ..grid.sparse import BRICK
from ..progress import report, scaled
from .solid import VOTE_AXES

_CU = "voxelize_sparse_vote.cu"
_K = Kernels(_CU, (), 128)
EMPTY, FULL = -1, -2  # a brick's state on an axis without a partial brick there


def frame_nb(nb, a):
    """Bricks along each axis of axis *a*'s frame (frame f = world (f + a) % 3)."""
    return tuple(int(nb[(f + a) % 3]) for f in range(3))


def bitmap_bytes(box_bricks) -> int:
    """Device bytes of the three full bitmaps and the majority's temporary over a box of
    *box_bricks* (mx, my, mz) bricks."""
    mx, my, mz = (int(n) for n in box_bricks)
    return 4 * 4 * mz * my * (-(-mx // 32))


# ------------------------------------------------------------------ the three solids
def axis_solids(vertices, triangles, spec, progress=None):
    """(the ``DeviceMesh``, [(lin, rows, runs)] of the solid with parity along x, y and z
    (frames of ``frame_nb``)), on the device: ``gpu_sparse``'s solid pass of the
    relabelled mesh."""
    from . import gpu
    from .gpu_sparse import _solid

    mesh = gpu.DeviceMesh(vertices, triangles, spec)
    nb = tuple(int(n) // BRICK for n in mesh.shape)
    out = []
    for a, (order, _) in enumerate(VOTE_AXES):
        m = mesh if a == 0 else mesh.permuted(order)
        work = gpu.plan([(m, "solid")])  # validates the input (one sync)
        out.append(_solid(m, work[0], frame_nb(nb, a), _cupy()))
        del m, work
        report(progress, (a + 1) / 3, f"solid: vote along {'xyz'[a]}")
    return mesh, out


def axis_solids_numpy(vertices, triangles, spec):
    """The same three solids from the NumPy sparse voxelizer (tests; the CPU path of
    ``voxelize_sparse`` keeps its tile walk)."""
    from ..grid import GridSpec
    from ..grid.sparse import brick_coords
    from .sparse import CHANNEL, voxelize_sparse

    v = np.asarray(vertices, np.float64)
    nb = tuple(int(n) // BRICK for n in spec.shape)
    out = []
    for a, (order, _) in enumerate(VOTE_AXES):
        s = GridSpec(tuple(spec.origin[i] for i in order), spec.voxel_size, tuple(spec.shape[i] for i in order))
        g = voxelize_sparse(v[:, list(order)], triangles, s, "solid", xp=np, tiles=True)
        n0, n1, n2 = frame_nb(nb, a)
        c = brick_coords(g.topology.keys, np)
        inside = (c < np.array([n0, n1, n2])).all(axis=1)  # its shape is rounded up to whole tiles
        lin = (c[inside, 2] * n1 + c[inside, 1]) * n0 + c[inside, 0]
        runs = g.tiles[CHANNEL].runs.copy() if CHANNEL in g.tiles else np.zeros((0, 4), np.int64)
        runs[:, 1] = np.minimum(runs[:, 1], n0)
        runs = runs[(runs[:, 1] > runs[:, 0]) & (runs[:, 2] < n1) & (runs[:, 3] < n2)]
        out.append((lin, g.channels[CHANNEL][g.topology.slots[inside]], runs))
    return out


def _cupy():
    import cupy

    return cupy


# ------------------------------------------------------------------ the vote
def world_coords(lin, a, nb, xp):
    """(n, 3) world brick coordinates (x, y, z) of axis *a*'s brick numbers *lin*."""
    n0, n1, _ = frame_nb(nb, a)
    frame = (lin % n0, (lin // n0) % n1, lin // (n0 * n1))
    out = [None] * 3
    for f in range(3):
        out[(f + a) % 3] = frame[f]
    return xp.stack(out, axis=1)


def _extents(lin, runs, a, nb, xp):
    """Per world axis (lo, hi) brick range an axis's solid reaches, or None (empty)."""
    los, his = [], []
    if lin.shape[0]:
        c = world_coords(lin, a, nb, xp)
        los.append(c.min(axis=0))
        his.append(c.max(axis=0) + 1)
    if runs.shape[0]:
        frame_lo = xp.stack([runs[:, 0].min(), runs[:, 2].min(), runs[:, 3].min()])
        frame_hi = xp.stack([runs[:, 1].max(), runs[:, 2].max() + 1, runs[:, 3].max() + 1])
        perm = [(w - a) % 3 for w in range(3)]  # world w is frame (w − a) % 3
        los.append(frame_lo[perm])
        his.append(frame_hi[perm])
    if not los:
        return None
    lo = np.min([np.asarray(_host(x)) for x in los], axis=0)
    hi = np.max([np.asarray(_host(x)) for x in his], axis=0)
    return lo.astype(np.int64), hi.astype(np.int64)


def _host(a):
    return a.get() if hasattr(a, "get") else a


def vote_box(parts, nb, xp):
    """(lo, hi) world bricks where the vote may be set (module notes, 2.), or None."""
    ext = [_extents(lin, runs, a, nb, xp) for a, (lin, _, runs) in enumerate(parts)]
    lo, hi = np.zeros(3, np.int64), np.zeros(3, np.int64)
    for w in range(3):
        others = [e for a, e in enumerate(ext) if a != w and e is not None]
        if not others:
            return None
        lo[w] = min(int(e[0][w]) for e in others)
        hi[w] = max(int(e[1][w]) for e in others)
    lo, hi = np.maximum(lo, 0), np.minimum(hi, np.asarray(nb, np.int64))
    return None if (hi <= lo).any() else (lo, hi)


def vote_bricks(parts, nb, xp, progress=None):
    """(world brick numbers (sorted), (n, 8, 8) uint8 rows, (m, 4) int64 runs) of the
    3-axis vote of the three solids *parts* (``axis_solids``): partial bricks stored, full
    bricks as maximal runs along x (module notes)."""
    empty = (xp.zeros(0, xp.int64), xp.zeros((0, BRICK, BRICK), xp.uint8), xp.zeros((0, 4), xp.int64))
    box = vote_box(parts, nb, xp)
    if box is None:
        return empty
    lo, hi = box
    m = tuple(int(x) for x in hi - lo)
    words = -(-m[0] // 32)
    ops = _Numpy if xp is np else _Device
    bitmaps = xp.zeros((3, m[2], m[1], words), xp.uint32)
    for a, (_, _, runs) in enumerate(parts):  # 3. the full bitmaps
        ops.fill_runs(runs, a, lo, m, words, bitmaps[a])
    report(progress, 0.3, "vote: full bricks")
    # 4. U: the partial bricks of any axis inside the box, world numbers
    nbx, nby, _ = (int(n) for n in nb)
    u = []
    for a, (lin, _, _) in enumerate(parts):
        c = world_coords(lin, a, nb, xp)
        inside = ((c >= xp.asarray(lo)) & (c < xp.asarray(hi))).all(axis=1)
        c = c[inside]
        u.append((c[:, 2] * nby + c[:, 1]) * nbx + c[:, 0])
    u = xp.unique(xp.concatenate(u))
    slot = ops.brick_slots(u, nb, lo, m, words, parts, bitmaps)
    rows = ops.brick_rows(slot, [p[1] for p in parts])
    del slot
    flat = rows.reshape(int(u.shape[0]), 64).view(xp.uint64)  # (n, 8): a brick's rows, 8 words
    full = (flat == ~np.uint64(0)).all(axis=1)
    keep = flat.any(axis=1) & ~full
    del flat
    report(progress, 0.7, "vote: partial bricks")
    # 5. the result's full bitmap: the majority, U's bricks as their rows say
    f0, f1, f2 = bitmaps[0], bitmaps[1], bitmaps[2]
    t = f0 | f1
    t &= f2
    f0 &= f1
    f0 |= t
    del t
    ops.override(u, full, nb, lo, m, words, f0)
    runs = ops.row_runs(f0, lo, m, words)
    del bitmaps, f0, f1, f2
    idx = xp.flatnonzero(keep)
    report(progress, 1.0, "vote: runs")
    return u[idx], rows[idx], runs


# ------------------------------------------------------------------ NumPy twins
class _Numpy:
    """The kernels' NumPy twins (the reference the host harness checks them against)."""

    @staticmethod
    def fill_runs(runs, a, lo, m, words, bitmap):
        if runs.shape[0] == 0:
            return
        n = runs[:, 1] - runs[:, 0]
        owner = np.repeat(np.arange(len(runs)), n)
        f0 = runs[owner, 0] + np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
        frame = (f0, runs[owner, 2], runs[owner, 3])
        w = [None] * 3
        for f in range(3):
            w[(f + a) % 3] = frame[f] - lo[(f + a) % 3]
        x, y, z = w
        ok = (x >= 0) & (x < m[0]) & (y >= 0) & (y < m[1]) & (z >= 0) & (z < m[2])
        x, y, z = x[ok], y[ok], z[ok]
        np.bitwise_or.at(bitmap.reshape(-1), (z * m[1] + y) * words + (x >> 5),
                         (np.uint32(1) << (x & 31).astype(np.uint32)).astype(np.uint32))

    @staticmethod
    def brick_slots(u, nb, lo, m, words, parts, bitmaps):
        w = world_coords(u, 0, nb, np) - lo
        word = (w[:, 2] * m[1] + w[:, 1]) * words + (w[:, 0] >> 5)
        bit = (np.uint32(1) << (w[:, 0] & 31).astype(np.uint32)).astype(np.uint32)
        slot = np.empty((len(u), 3), np.int64)
        c = world_coords(u, 0, nb, np)
        for a, (lin, _, _) in enumerate(parts):
            n0, n1, _ = frame_nb(nb, a)
            key = (c[:, (2 + a) % 3] * n1 + c[:, (1 + a) % 3]) * n0 + c[:, a % 3]
            at = np.minimum(np.searchsorted(lin, key), max(len(lin) - 1, 0))
            found = (at < len(lin)) & (lin[at] == key) if len(lin) else np.zeros(len(u), bool)
            full = (bitmaps[a].reshape(-1)[word] & bit) != 0
            slot[:, a] = np.where(found, at, np.where(full, FULL, EMPTY))
        return slot

    @staticmethod
    def brick_rows(slot, rows):
        votes = np.zeros((len(slot), BRICK, BRICK, BRICK), np.uint8)
        for a, (_, back) in enumerate(VOTE_AXES):
            s = slot[:, a]
            bits = np.zeros((len(slot), BRICK, BRICK, BRICK), np.uint8)
            part = s >= 0
            if part.any():  # frame [z', y', x'] back to world [z, y, x], as the dense vote
                one = (rows[a][s[part]][..., None] >> np.arange(BRICK, dtype=np.uint8)) & 1
                bits[part] = one.transpose((0,) + tuple(1 + i for i in back)) if a else one
            bits[s == FULL] = 1
            votes += bits
        return np.packbits(votes >= 2, axis=-1, bitorder="little").reshape(-1, BRICK, BRICK)

    @staticmethod
    def override(u, full, nb, lo, m, words, bitmap):
        w = world_coords(u, 0, nb, np) - lo
        word = (w[:, 2] * m[1] + w[:, 1]) * words + (w[:, 0] >> 5)
        bit = (np.uint32(1) << (w[:, 0] & 31).astype(np.uint32)).astype(np.uint32)
        flat = bitmap.reshape(-1)
        np.bitwise_and.at(flat, word, ~bit)
        np.bitwise_or.at(flat, word[full], bit[full])

    @staticmethod
    def row_runs(bitmap, lo, m, words):
        from .sparse import _runs_of_full

        bits = np.unpackbits(bitmap.view(np.uint8), axis=-1, bitorder="little")[..., :m[0]].astype(bool)
        return _runs_of_full(bits, lo, np)


# ------------------------------------------------------------------ CuPy launches
class _Device:
    @staticmethod
    def fill_runs(runs, a, lo, m, words, bitmap):
        _K.launch("vote_fill_runs", runs.shape[0], (runs, np.int64(runs.shape[0]), np.int32(a),
                                                    *(np.int64(x) for x in lo), *(np.int64(x) for x in m),
                                                    np.int64(words), bitmap))

    @staticmethod
    def brick_slots(u, nb, lo, m, words, parts, bitmaps):
        cp = _cupy()
        slot = cp.empty((int(u.shape[0]), 3), cp.int64)
        lists = []
        for lin, _, _ in parts:
            lists += [lin if lin.shape[0] else cp.zeros(1, cp.int64), np.int64(lin.shape[0])]
        _K.launch("vote_brick_slots", u.shape[0], (u, np.int64(u.shape[0]), *(np.int64(n) for n in nb),
                                                   *(np.int64(x) for x in lo), np.int64(m[1]), np.int64(words),
                                                   *lists, bitmaps, np.int64(bitmaps[0].size), slot))
        return slot

    @staticmethod
    def brick_rows(slot, rows):
        cp = _cupy()
        n = int(slot.shape[0])
        out = cp.empty((n, BRICK, BRICK), cp.uint8)
        src = [r if r.shape[0] else cp.zeros((1, BRICK, BRICK), cp.uint8) for r in rows]
        _K.launch("vote_brick_rows", 64 * n, (slot, np.int64(n), *src, out))
        return out

    @staticmethod
    def override(u, full, nb, lo, m, words, bitmap):
        cp = _cupy()
        _K.launch("vote_override", u.shape[0], (u, full.astype(cp.uint8), np.int64(u.shape[0]), np.int64(nb[0]),
                                                np.int64(nb[1]), *(np.int64(x) for x in lo), np.int64(m[1]),
                                                np.int64(words), bitmap))

    @staticmethod
    def row_runs(bitmap, lo, m, words):
        cp = _cupy()
        n_rows = m[1] * m[2]
        count = cp.zeros(n_rows, cp.int64)
        args = (bitmap, np.int64(n_rows), np.int64(words), np.int64(m[1]), *(np.int64(x) for x in lo))
        _K.launch("vote_row_runs", n_rows, args + (np.int32(0), count, count))
        ends = cp.cumsum(count)
        total = int(ends[-1]) if n_rows else 0  # sync
        runs = cp.empty((total, 4), cp.int64)
        if total:
            _K.launch("vote_row_runs", n_rows, args + (np.int32(1), ends - count, runs))
        return runs


def fold_full(lin, rows, runs, nb, xp):
    """(lin, rows, runs) with the stored bricks whose rows are all set moved into the runs
    (maximal again): the surface ORed into the vote's bricks can fill one, which the NumPy
    tile walk keeps in a run (``sparse._assemble``)."""
    from .sparse import merged_runs

    full = (rows.reshape(int(lin.shape[0]), 64).view(xp.uint64) == ~np.uint64(0)).all(axis=1)
    if not bool(full.any()):
        return lin, rows, runs
    done = lin[full]
    x, yz = done % nb[0], done // nb[0]
    runs = merged_runs([runs, xp.stack([x, x + 1, yz % nb[1], yz // nb[1]], axis=1)], xp)
    return lin[~full], rows[~full], runs


# ------------------------------------------------------------------ the sparse voxelizer's hook
def voxelize_bricks_vote(vertices, triangles, spec, mode: str, progress=None):
    """(keys, (n, 8, 8) uint8 rows, Tiles or None) of ``voxelize(vertices, triangles,
    spec, mode, vote=True)`` for the solid modes on the device (``gpu_sparse.voxelize_bricks``'s
    contract); *spec*'s shape a multiple of 8."""
    cp = _cupy()
    from ..grid.sparse import Tiles
    from .gpu_sparse import _lin_to_keys, _surface

    nb = tuple(int(n) // BRICK for n in spec.shape)
    if len(triangles) == 0:
        return cp.zeros(0, cp.int64), cp.zeros((0, BRICK, BRICK), cp.uint8), None
    surface = mode == "solid+surface"
    mesh, parts = axis_solids(vertices, triangles, spec, scaled(progress, 0.0, 0.5 if surface else 0.8))
    lin, rows, runs = vote_bricks(parts, nb, cp, scaled(progress, 0.5 if surface else 0.8, 0.6 if surface else 1.0))
    del parts
    if surface:  # the surface ORed in (gpu_sparse._surface), bricks it fills folded into the runs
        held = [lin, rows]
        del lin, rows
        lin, rows = _surface(mesh, nb, False, held, runs, cp)
        lin, rows, runs = fold_full(lin, rows, runs, nb, cp)
        report(progress, 1.0, "surface bricks")
    tiles = Tiles(runs, 1) if runs.shape[0] else None
    return _lin_to_keys(lin, nb[0], nb[1], cp), cp.ascontiguousarray(rows), tiles
