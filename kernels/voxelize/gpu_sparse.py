"""The sparse voxelizer on the device in a handful of launches (issue 11; seed 003 §5.1,
seed 004 §5), for surface, thin, solid and solid+surface (the 3-axis vote stays on the
tile path of ``sparse.py``).

Every voxel is decided by the dense kernels' own device functions (``cuda/voxelize.cu``'s, in
``cuda/include/voxfx_voxelize.cuh``, included by the stages' files ``cuda/voxelize_sparse.cu``,
``_tiles.cu`` and ``_solid.cu``) over the same columns as the dense launch of the whole grid,
so the set voxels are the dense voxelizer's bit for bit; only where a bit is stored differs.

* **Triangle setups** are built once per chunk of ``SETUP_CHUNK`` triangles into device
  memory and shared by the threads of a triangle (built per thread a setup lives in local
  memory); a mesh of up to that many triangles keeps them for both surface stages.
* **Surface topology** (003 §5.1): each triangle's brick range → the bricks that may hold
  one of its voxels (a conservative brick test with the exact test's own rounding bounds,
  ×1024: a brick it drops holds no voxel the exact test could set) → CUB radix sort +
  unique, ``PAIR_BATCH`` items at a time → the candidate bricks, sorted, with the first
  index of each brick row (a short search per lookup, no dense index).
* **Surface voxels**: one warp per (triangle, 8 × 8 column tile across its dominant axis):
  each column tested as the dense kernel tests it, set bits ORed into the warp's shared
  copy of the few bricks the tile's plane crosses, then each non-empty word ORed into its
  brick once. ``tiles3`` (auto's tile launch, ``TILED``) finds the warp's triangle with 32
  probes a round and tests in each column only the voxels the plane can meet over it
  (about two, not four); ``tiles`` is the first version, kept for A/B. Small triangles
  fill few of a tile's 64 columns: a chunk whose tiles hold fewer than
  ``TILE_MIN_COLUMNS`` columns on average (coarse grids) runs one thread per column
  instead, each voxel ORed into its brick (``SURFACE_KERNEL`` forces any of them, for
  ``bench/voxelize_sparse.py --surface-kernel``). All set the same bits. Bricks left empty
  are dropped.
* **Solid** (004 §4.1, §5): the dense pass's flip starts, appended as keys (brick row, x,
  row inside the brick) grouped by brick slice instead of XORed into a dense grid → sorted
  ``SORT_CHUNK`` keys at a time (a group of slices, sorted in place; 32-bit keys, the
  slice counted from the group's first, where a group can hold ``MIN_GROUP_SLICES``:
  ``SOLID_KEYS``; bunny 4096³ peak 140 MiB against 267 MiB with 64-bit keys sorted through
  a copy, H200) → one thread per brick row walks along x with its 64 rows' parity:
  bricks where crossings land are stored bit by bit, runs of bricks whose rows are all
  inside become one **full run** (``SparseGrid.tiles``), mixed runs are stored brick by
  brick. Memory follows the surface: interior bricks cost 32 bytes per run, not 64 per
  brick.
* solid+surface: the solid's bricks join the surface candidates, the surface ORs in,
  and surface bricks inside a full run are dropped (already full).
* The kept bricks' rows move to the front of the candidates' pool in place,
  ``COMPACT_CHUNK`` rows at a time (no second pool at the end: the peak is the pool, plus
  the solid's rows while they are copied in); the result views the pool unless more than
  ``TRIM_WASTE`` of it would be held empty.

The transient device memory is bounded by the chunks (setups, brick items, sorted keys),
not by the grid: bunny 4096³ surface about 0.15 GB besides the result (``sparse_guard``).
Host syncs: per chunk its totals (and the input flags), per candidate batch its count, the
solid's slice counts, rows, bricks and runs, the check (a handful, independent of the
grid's size). *progress* hears after the solid and the surface stages (no cancel inside a
launch: 0.5 s at 16384³).
"""

from __future__ import annotations

import numpy as np

from ..grid.launch import Kernels
from ..grid.sparse import BITS, OFFSET, Tiles
from ..progress import report
from . import gpu

# The kernel files by stage: the setups, the surface topology and the surface one thread per
# column; the surface one warp per tile; the solid.
_CU = {"surface": "voxelize_sparse.cu", "tiles": "voxelize_sparse_tiles.cu", "solid": "voxelize_sparse_solid.cu"}
# Each includes the dense kernels' device functions from include/voxfx_voxelize.cuh, whose bytes
# are in the compiled text's headers digest (backend.cuda_source): a change to them recompiles.
THREADS = 128  # per block: sparse_surface_tiles' shared windows, one per warp (VOXFX_TILE_WARPS)
DEPTH_BRICKS = 4  # bricks along the dominant axis in a tile's shared window (a plane crosses ≤ 4)
SURFACE_KERNEL = "auto"  # "tiles", "tiles3", "columns", or per chunk: TILED where tiles hold TILE_MIN_COLUMNS
TILED = "tiles3"  # auto's tile launch: "tiles3" (warp owner search, tight column depths) or "tiles"
TILE3_BLOCKS = 8  # sparse_surface_tiles3's blocks per SM asked of nvcc: 8 → 64 registers (4 → 128: 30% slower, H200)
TILE3_SHARED_SETUP = 1  # 1: sparse_surface_tiles3 copies its warp's setup to shared memory first
TILE_MIN_COLUMNS = 16  # a warp's 64 column slots at least a quarter busy (small triangles: a few columns a tile)
SETUP_CHUNK = 1 << 17  # triangles whose setups are on the device at once (~91 MB at 696 B each)
PAIR_BATCH = 1 << 23  # brick-range items tested per candidate batch (≤ 32 MiB of 32-bit brick numbers listed)
CANDIDATE_KEYS = 32  # candidate brick numbers of 32 bits where the grid has under 2^32 bricks, or 64
SORT_CHUNK = 1 << 22  # solid crossings sorted at once (plus at most one brick slice)
SOLID_KEYS = 32  # crossing keys of 32 bits (half the memory; 64 where a group would hold too few slices) or 64
MIN_GROUP_SLICES = 8  # 32-bit keys only where a sort group may hold this many brick slices
COMPACT_CHUNK = 1 << 19  # kept brick rows moved at once to the pool's front (32 MiB transient)
TRIM_WASTE = 0.25  # the result's rows copied out of the pool where more of it would be held empty


def kernels() -> dict:
    """{stage: Kernels} of the module's kernel files (``_CU``) compiled with its settings (a
    bench may change them, then call it); the tile constants go to the tiles' file alone."""
    options = ("--fmad=false",)
    defines = gpu.DEFINES
    tiles = {"VOXFX_SPARSE_DEPTH_BRICKS": DEPTH_BRICKS, "VOXFX_TILE_WARPS": THREADS // 32,
             "VOXFX_TILE3_BLOCKS": TILE3_BLOCKS, "VOXFX_TILE3_SHARED_SETUP": TILE3_SHARED_SETUP}
    return {stage: Kernels(name, options, THREADS, defines={**defines, **(tiles if stage == "tiles" else {})})
            for stage, name in _CU.items()}


_K = kernels()
_WORK = ("bricks", "tiles", "columns")  # sparse_surface_counts' outputs


STAGES = None  # a list to time the stages: (name, CUDA event) appended (bench/voxelize_sparse_profile.py)


def _stage(name: str) -> None:
    if STAGES is not None:
        import cupy as cp

        event = cp.cuda.Event()
        event.record()
        STAGES.append((name, event))


_SIZES: dict = {}


def setup_bytes(cp) -> int:
    """sizeof(Setup) of the compiled kernels (asked once per device)."""
    dev = cp.cuda.Device().id
    if dev not in _SIZES:
        out = cp.zeros(1, cp.int64)
        _K["surface"].launch("sparse_setup_size", 1, (out,))
        _SIZES[dev] = int(out[0])
    return _SIZES[dev]


def _lin_to_keys(lin, nbx, nby, cp):
    """SparseGrid keys (kernels/grid/sparse.py) of brick numbers (bz·nby + by)·nbx + bx
    (one elementwise launch on the device)."""
    if cp is np:
        bx, rest = lin % nbx, lin // nbx
        by, bz = rest % nby, rest // nby
        return ((bz + OFFSET) << (2 * BITS)) | ((by + OFFSET) << BITS) | (bx + OFFSET)
    return _keys_kernel(cp)(lin, np.int64(nbx), np.int64(nby))


_KEYS: dict = {}


def _keys_kernel(cp):
    if "k" not in _KEYS:
        _KEYS["k"] = cp.ElementwiseKernel(
            "int64 lin, int64 nbx, int64 nby", "int64 key",
            f"long long rest = lin / nbx, bx = lin - rest * nbx, bz = rest / nby, by = rest - bz * nby;"
            f" key = ((bz + {OFFSET}LL) << {2 * BITS}) | ((by + {OFFSET}LL) << {BITS}) | (bx + {OFFSET}LL);",
            "voxfx_sparse_lin_to_keys")
    return _KEYS["k"]


def _compact_rows(pool, idx, chunk, xp):
    """pool[idx] written over pool's first len(idx) rows, in place (*idx* strictly
    ascending), chunk rows at a time: chunk c writes rows [c·K, (c+1)·K) from rows
    idx[c·K ...] ≥ c·K, which no later chunk reads (its idx[j] ≥ j ≥ (c+1)·K). The
    transient is one chunk, not a second pool. Returns pool[:len(idx)], a view, unless more
    than TRIM_WASTE of the pool would be held empty by it: then a copy of that size (the
    peak as without compaction, pool + kept rows, but not held after)."""
    n = int(idx.shape[0])
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        pool[a:b] = pool[idx[a:b]]  # the gather is a copy: its reads finish before the write
    if n < (1.0 - TRIM_WASTE) * pool.shape[0]:
        return pool[:n].copy()
    return pool[:n]


def _unique_sorted(a, cp):
    """*a* sorted in place, then its distinct values (a new array)."""
    a.sort()  # CUB radix sort
    if a.shape[0] < 2:
        return a.copy()
    first = cp.empty(a.shape[0], cp.bool_)
    first[0] = True
    cp.not_equal(a[1:], a[:-1], out=first[1:])
    return a[first]


def _chunks(mesh, thin: bool, cp):
    """Per chunk of triangles: (setups, n, {work: (counts, ends, total)}) for the brick
    ranges, tiles and columns of its triangles; one sync each (totals and input flags)."""
    T = mesh.n_tris
    nx, ny, nz = mesh.shape
    size = setup_bytes(cp)
    for first in range(0, T, SETUP_CHUNK):
        n = min(SETUP_CHUNK, T - first)
        setups = cp.empty(n * size, cp.uint8)
        _K["surface"].launch("sparse_surface_setups", n, (mesh.pv, mesh.tris, np.int64(first), np.int64(n),
                                               np.int64(mesh.pv.shape[0]), np.int32(nx), np.int32(ny), np.int32(nz),
                                               np.int32(1 if thin else 0), setups, mesh.flags))
        counts = cp.empty((len(_WORK), n), cp.int64)
        _K["surface"].launch("sparse_surface_counts", n, (setups, np.int64(n), *counts))
        ends = cp.cumsum(counts, axis=1)
        host = cp.concatenate([mesh.flags.view(cp.int64), ends[:, -1]]).get()  # sync
        gpu.check_flags(host)
        _stage("surface setups")
        yield setups, n, {w: (counts[i], ends[i], int(host[2 + i])) for i, w in enumerate(_WORK)}


def _candidates(chunks, nb, extra, cp):
    """Sorted unique int64 numbers of every brick that may hold a surface voxel, and
    *extra*'s. One launch per batch of brick items into a buffer of the batch's size
    (reused), its count read once (sync), then the listed part sorted in place and made
    unique. The numbers are 32-bit where the grid has under 2^32 bricks (CANDIDATE_KEYS;
    half the radix passes and bytes; PAIR_BATCH items a batch), else 64-bit (PAIR_BATCH / 2
    items)."""
    narrow = CANDIDATE_KEYS == 32 and nb[0] * nb[1] * nb[2] < 1 << 32
    dtype, kernel = (cp.uint32, "sparse_surface_bricks32") if narrow else (cp.int64, "sparse_surface_bricks")
    batch = max(1, PAIR_BATCH if narrow else PAIR_BATCH // 2)
    parts = [extra.astype(dtype)] if extra is not None and extra.shape[0] else []
    n_out = cp.zeros(1, cp.uint64)
    buf = None
    for setups, n, work in chunks:
        counts, ends, total = work["bricks"]
        for first in range(0, total, batch):
            items = min(batch, total - first)
            if buf is None or buf.shape[0] < items:
                buf = None
                buf = cp.empty(items, dtype)
            args = (setups, ends, counts, np.int64(n), np.int64(first), np.int64(items), np.int64(nb[0]),
                    np.int64(nb[1]))
            n_out.fill(0)
            _K["surface"].launch(kernel, items, args + (np.int32(1), buf, n_out))
            m = int(n_out[0])  # sync
            if m:
                parts.append(_unique_sorted(buf[:m], cp))  # a new array: buf is free again
    del buf
    _stage("surface candidates listed")
    if not parts:
        return cp.zeros(0, cp.int64)
    if len(parts) > 1:
        joined = cp.concatenate(parts)
        parts = [_unique_sorted(joined, cp)]
        del joined
        _stage("surface candidates merged")
    return parts[0].astype(cp.int64, copy=False)


def _surface_voxels(chunks, cand, row_start, pool, nb, cp):
    """OR every surface voxel into *pool* (16 words per candidate brick); returns the count
    of voxels whose brick was not a candidate (a bug if ever non-zero)."""
    missing = cp.zeros(1, cp.uint64)
    for setups, n, work in chunks:
        kernel = SURFACE_KERNEL
        if kernel == "auto":
            kernel = TILED if work["columns"][2] >= TILE_MIN_COLUMNS * work["tiles"][2] else "columns"
        tiles = kernel != "columns"
        counts, ends, total = work["tiles" if tiles else "columns"]
        if total:
            _K["tiles" if tiles else "surface"].launch(
                f"sparse_surface_{kernel}", 32 * total if tiles else total,
                (setups, ends, counts, np.int64(n), np.int64(total), cand, row_start, np.int64(nb[0]), np.int64(nb[1]),
                 pool, missing))
    _stage("surface voxels")
    return missing


def _sort_groups(starts, limit):
    """[(a, b), ...] key ranges of whole brick slices (*starts*: each slice's first key, then
    the total) of at most *limit* keys plus one slice, covering every key."""
    n = int(starts[-1])
    at = np.searchsorted(starts, np.arange(1, n // limit + 1, dtype=np.int64) * limit, side="right") - 1
    cuts = np.unique(np.concatenate([[0], starts[at], [n]]))
    return list(zip(cuts[:-1].tolist(), cuts[1:].tolist()))


def _slice_groups(starts, limit, max_slices):
    """[(z0, z1), ...] consecutive slice ranges covering every slice (*starts*: each slice's
    first key, then the total), each of at most *max_slices* slices and at most *limit* keys
    unless it is one slice: the sort groups of 32-bit crossing keys (a key holds its slice
    as bz − z0 in the bits left above the row, x and brick row)."""
    groups, z, nbz = [], 0, len(starts) - 1
    while z < nbz:
        e = z + 1
        while e < nbz and e - z < max_slices and starts[e + 1] - starts[z] <= limit:
            e += 1
        groups.append((z, e))
        z = e
    return groups


def _key_plan(starts, xbits: int, ybits: int, cp):
    """The crossing keys' layout: (dtype, key ranges sorted one at a time, slice_z0 per slice,
    gstart, gz0) on the device (voxelize_sparse_solid.cu, crossing keys). 32-bit keys where
    SOLID_KEYS asks and a group can hold at least MIN_GROUP_SLICES slices, else 64-bit."""
    nbz = len(starts) - 1
    n = int(starts[-1])
    free = 32 - (ybits + xbits + 6)  # bits for bz − z0 in a 32-bit key
    if SOLID_KEYS == 32 and free >= MIN_GROUP_SLICES.bit_length() - 1:
        groups = _slice_groups(starts, SORT_CHUNK, 1 << free)
        z0 = np.zeros(nbz, np.int64)
        for a, b in groups:
            z0[a:b] = a
        ranges = [(int(starts[a]), int(starts[b])) for a, b in groups if starts[b] > starts[a]]
        gz0 = np.array([a for a, _ in groups], np.int64)
        gstart = np.array([starts[a] for a, _ in groups] + [n], np.int64)
        return cp.uint32, ranges, cp.asarray(z0), cp.asarray(gstart), cp.asarray(gz0)
    return (cp.int64, _sort_groups(starts, SORT_CHUNK), cp.zeros(nbz, cp.int64), cp.asarray([0, n], cp.int64),
            cp.zeros(1, cp.int64))


def _solid(mesh, work, nb, cp):
    """(brick numbers, (n, 8, 8) uint8 rows, (m, 4) int64 full runs) of the solid."""
    counts, ends, total = work
    k = _K["solid"]
    nx, ny, nz = mesh.shape
    xbits = max(1, (nx - 1).bit_length())
    ybits = (nb[1] - 1).bit_length()
    empty = (cp.zeros(0, cp.int64), cp.zeros((0, 8, 8), cp.uint8), cp.zeros((0, 4), cp.int64))
    if not total:
        return empty
    slice_at = cp.zeros(nb[2], cp.uint64)
    args = (mesh.pv, mesh.tris, ends, counts, np.int64(mesh.n_tris), np.int64(total), np.int32(nx), np.int32(ny),
            np.int32(nz), np.int32(xbits), np.int32(ybits))
    dummy = cp.zeros(1, cp.int64)
    k.launch("sparse_solid_crossings", total, args + (dummy, np.int32(0), slice_at, dummy))  # count per slice
    starts = np.concatenate([[0], np.cumsum(slice_at.get().astype(np.int64))])  # sync
    n = int(starts[-1])
    if n == 0:
        return empty
    _stage("solid count")
    dtype, ranges, slice_z0, gstart, gz0 = _key_plan(starts, xbits, ybits, cp)
    sfx = "32" if dtype == cp.uint32 else ""
    slice_at.set(starts[:-1].astype(np.uint64))
    keys = cp.empty(n, dtype)
    k.launch("sparse_solid_crossings" + sfx, total, args + (slice_z0, np.int32(1), slice_at, keys))
    del slice_at, slice_z0
    _stage("solid keys")
    for a, b in ranges:  # slices are in key order: each group sorted in place sorts the list
        keys[a:b].sort()  # CUB radix sort of a contiguous view
    _stage("solid sort")
    n_groups = np.int64(gz0.shape[0])
    seg = cp.empty(min(n, nb[1] * nb[2]), cp.int64)
    n_seg = cp.zeros(1, cp.uint64)
    k.launch("sparse_row_segments" + sfx, n, (keys, np.int64(n), np.int32(xbits), gstart, n_groups, seg, n_seg))
    n_segs = int(n_seg[0])  # sync
    seg = cp.concatenate([cp.sort(seg[:n_segs]), cp.asarray([n], cp.int64)])
    nbk, nrn = cp.zeros(n_segs, cp.int64), cp.zeros(n_segs, cp.int64)
    args = (keys, seg, np.int64(n_segs), np.int32(xbits), np.int32(ybits), gstart, gz0, n_groups, np.int64(nb[0]),
            np.int64(nb[1]))
    rows_kernel = "sparse_solid_rows" + sfx
    k.launch(rows_kernel, n_segs, args + (np.int32(0), nbk, nrn, dummy, dummy.view(cp.uint8), dummy))
    bk_end, rn_end = cp.cumsum(nbk), cp.cumsum(nrn)
    n_bricks, n_runs = (int(x) for x in cp.concatenate([bk_end[-1:], rn_end[-1:]]).get())  # sync
    _stage("solid rows counted")
    lin = cp.empty(n_bricks, cp.int64)
    rows = cp.empty((n_bricks, 8, 8), cp.uint8)
    runs = cp.empty((n_runs, 4), cp.int64)
    k.launch(rows_kernel, n_segs, args + (np.int32(1), bk_end - nbk, rn_end - nrn, lin if n_bricks else dummy,
                                           rows if n_bricks else dummy.view(cp.uint8), runs if n_runs else dummy))
    _stage("solid rows")
    return lin, rows, runs


def _in_runs(lin, runs, nb, cp):
    """Whether each brick number lies in one of the sorted, disjoint full runs."""
    nbx, nby = nb[0], nb[1]
    start = (runs[:, 3] * nby + runs[:, 2]) * nbx + runs[:, 0]
    at = cp.searchsorted(start, lin, side="right") - 1
    r = runs[cp.maximum(at, 0)]
    return (at >= 0) & (lin // nbx == r[:, 3] * nby + r[:, 2]) & (lin % nbx < r[:, 1])


def _surface(mesh, nb, thin, held, runs, cp):
    """(brick numbers, rows) of the surface ORed into the solid's bricks *held* = [numbers,
    rows] (empty for surface alone; taken from the list, so that they are freed once in the
    pool), without the bricks inside *runs*."""
    lin, rows = held
    held.clear()
    # one chunk: its setups serve both stages; more: built again for the second
    chunks = list(_chunks(mesh, thin, cp)) if mesh.n_tris <= SETUP_CHUNK else None
    cand = _candidates(chunks or _chunks(mesh, thin, cp), nb, lin, cp)
    pool = cp.zeros((int(cand.shape[0]), 16), cp.uint32)
    if lin.shape[0]:
        pool.view(cp.uint64).reshape(-1, 8)[cp.searchsorted(cand, lin)] = rows.view(cp.uint64).reshape(-1, 8)
    del lin, rows
    if cand.shape[0]:
        row_start = cp.searchsorted(cand, cp.arange(nb[1] * nb[2] + 1, dtype=cp.int64) * nb[0])
        _stage("surface pool")
        missing = _surface_voxels(chunks or _chunks(mesh, thin, cp), cand, row_start, pool, nb, cp)
        del row_start
        if int(missing[0]):  # sync
            raise RuntimeError("the sparse voxelizer set a voxel outside its bricks (a bug: please report it)")
    del chunks
    keep = pool.view(cp.uint64).reshape(-1, 8).any(axis=1)
    if runs.shape[0]:
        keep &= ~_in_runs(cand, runs, nb, cp)
    idx = cp.flatnonzero(keep)
    del keep
    lin = cand[idx]
    del cand
    # in place: the kept rows need no second pool (the result views the pool's first rows)
    rows = _compact_rows(pool.view(cp.uint64).reshape(-1, 8), idx, COMPACT_CHUNK, cp)
    del pool, idx
    _stage("surface kept")
    return lin, rows.view(cp.uint8).reshape(-1, 8, 8)


def voxelize_bricks(vertices, triangles, spec, mode: str, progress=None):
    """(keys, (n, 8, 8) uint8 rows, Tiles or None) of ``voxelize(vertices, triangles,
    spec, mode)`` (not the vote) on the device; *spec*'s shape a multiple of 8."""
    import cupy as cp

    mesh = gpu.DeviceMesh(vertices, triangles, spec)
    nx, ny, nz = mesh.shape
    nb = (nx // 8, ny // 8, nz // 8)
    solid = mode in ("solid", "solid+surface")
    surface = mode in ("surface", "thin", "solid+surface")
    empty = cp.zeros(0, cp.int64), cp.zeros((0, 8, 8), cp.uint8), None
    if mesh.n_tris == 0:
        return empty
    lin, rows, runs = cp.zeros(0, cp.int64), cp.zeros((0, 8, 8), cp.uint8), cp.zeros((0, 4), cp.int64)
    if solid:
        work = gpu.plan([(mesh, "solid")])  # validates the input (one sync)
        lin, rows, runs = _solid(mesh, work[0], nb, cp)
        del work
        report(progress, 0.5 if surface else 1.0, "solid bricks")
    if surface:
        held = [lin, rows]
        del lin, rows
        lin, rows = _surface(mesh, nb, mode == "thin", held, runs, cp)
        report(progress, 1.0, "surface bricks")
    tiles = Tiles(runs, 1) if runs.shape[0] else None
    return _lin_to_keys(lin, nb[0], nb[1], cp), cp.ascontiguousarray(rows), tiles
