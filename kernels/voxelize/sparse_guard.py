"""The sparse voxelizer's memory guard (issue 11, "Bad input"): the bricks a grid will
hold, estimated from a coarse pass before anything of the grid's size exists, checked
against the memory this process may use (``backend.usable_bytes``: cgroup limits and
``RLIMIT_AS`` included, ``kernels.memory``), and the largest grid that fits named.

The coarse pass. Bricks are 8³ voxels on the lattice of the grid's origin, so a grid of
voxel size 8·h over the same origin has one voxel per brick. A fine voxel a triangle
touches lies in a brick the triangle touches, so the coarse conservative surface holds
every brick of the fine surface; a fine voxel centre inside the mesh lies in a brick
that either meets the surface or lies wholly inside, where its centre is inside: the
coarse solid+surface holds every brick of a fine solid. So at f = 8 the coarse count
bounds the bricks from above (ties aside). Above 256³ coarse voxels the pass runs at f =
8·2^m (coarse grid ≤ 256³): each coarse surface voxel then stands for (f/8)² bricks
and each coarse solid one for (f/8)³.

Bytes. The peak is the larger of the coarse pass (the dense voxelizer's estimate at the
coarse grid) and the sparse pass: per brick near the surface and inside, per triangle,
and a base, fitted to the RSS peaks of fresh processes (bench/voxelize_sparse_auto.py,
bench/RESULTS.md "Sparse voxelizer for users").
"""

from __future__ import annotations

import numpy as np

from .. import backend
from ..errors import InputError
from ..grid import GridSpec
from ..grid.sparse import BRICK

COARSE_MAX = 256  # coarse voxels per axis at most
# Host bytes, fitted to the peaks bench/voxelize_sparse_auto.py measures (bunny, 128³–1024³,
# surface and solid+surface; bench/RESULTS.md): a brick near the surface costs its tile's
# passes (work items, hit lists) besides its rows and keys; a brick inside, filled from a
# row's parity, only its rows and key, found → concatenated → sorted.
BYTES_PER_SURFACE_BRICK = 1400
# A brick inside costs the walk almost nothing since full bricks became runs as it goes
# (32 B a run, a run a brick row): refitted on the solid of a box, fresh processes
# (bench/voxelize_sparse_cpu.py, 2-core EPYC): 512³ → 1024³ adds 1.77 M inside bricks and
# 56 k surface bricks for 27 MiB of peak, so at most 16 B an inside brick (was 100).
BYTES_PER_INSIDE_BRICK = 16
# The device (gpu_sparse.py, gpu_sparse_vote.py): what the kernels allocate, per stage, in
# CuPy's pool (which keeps what it ever held until the job ends, so a later stage's
# arrays mostly add to an earlier stage's freed blocks). S: the coarse pass's surface
# bricks. Refitted to the pool peaks measured on an H100 (bunny 1024³–8192³, every mode,
# vote on and off: /work/.device/8/vs.log, /work/.device/11/vote.log; the rows are in
# tests/unit/test_sparse_device_estimate.py, every one within 1.0–1.5× of its peak).
# - The mesh: float64 voxel-unit vertices (24 B) and int32 triangles (12 B).
# - Surface: the setups of one chunk (sizeof(Setup) 696 B) and its work counts and scans
#   (48 B) a triangle, held through both surface stages; then the candidate bricks'
#   pool rows (64 B) and numbers (8 B), about 1.5 S candidates (the conservative brick
#   test keeps more bricks than the fine surface sets); the row index (8 B a brick row).
DEVICE_SETUP_BYTES = 696 + 48
DEVICE_SURFACE_BASE = 4 << 20  # small arrays, sort scratch (1024³ surface: 80.4 MiB measured, 78.9 without it)
DEVICE_CANDIDATES_PER_SURFACE_BRICK = 1.5
DEVICE_BYTES_PER_CANDIDATE = 72
# - Solid: the flip crossings, one key each (4 B where a sort group of 32-bit keys holds
#   MIN_GROUP_SLICES brick slices, else 8 B: ``solid_key_bytes``), about 26 per surface
#   brick (fitted: 8192³'s 64-bit keys set it), all held until the walk has written the
#   partial bricks (rows 64 B and number 8 B, 1.25 S of them) and the runs of full bricks
#   (32 B each, at most two per brick row of the grid here); the plan's counts and scans
#   (16 B a triangle) and a few MiB of small arrays and sort scratch.
DEVICE_CROSSINGS_PER_SURFACE_BRICK = 26
DEVICE_PARTIAL_PER_SURFACE_BRICK = 1.25
DEVICE_BYTES_PER_PARTIAL = 72
DEVICE_SOLID_BASE = 4 << 20
# - The vote: the three axes' solids (partial bricks and runs) held while the third is
#   built and through the vote; then per surface brick U's world coordinates and numbers
#   (the union of the three axes' partial bricks, sorted unique), its slots, rows, the
#   kept bricks' copies and the bitmaps' share: 560 B (fitted, bunny 1024³–4096³, peaks of
#   bench/voxelize_sparse_vote.py and of tests/gpu/test_sparse_device_estimate_gpu.py: 1024³ 39–46 MiB); a
#   second copy of the vertices (the permuted frame).
DEVICE_VOTE_PER_SURFACE_BRICK = 560
# Kept beside the outputs: a stored brick's rows and key (72 B); an inside brick lies in a
# run (32 B), and a run ends at a stored brick or the grid's end: at most one per stored brick.
KEPT_PER_BRICK = 72
KEPT_PER_RUN = 32
BYTES_PER_TRIANGLE = 160  # voxel-unit vertices, triangles, the four reach arrays, tile pairs
BASE_BYTES = 72 << 20  # one tile's arrays, a batch of work items, allocator slack
# The operator's outputs (``sparse_outputs``), per set voxel N and exposed face F, counted
# from their arrays: ijk, material, RGBA and coverage kept to the end (36 B), Blender's
# point cloud (position, radius, colour, material, coverage: 40 B), the .vox's palette
# indices and chunks (104 B, as ``guard.VOX_PER_VOXEL``); the block mesh's corner keys
# and their ``unique`` (225 B) and Blender's mesh (60 B).
# The solid modes' coverage on the host (``sparse_coverage``: a sparse solid 4× finer, then
# the density counted a chunk at a time), per stored brick of the result: its ~24 fine
# surface bricks found, concatenated and sorted by the tile walk, and the density brick;
# fitted to the RSS peaks of Volume jobs in fresh Blender processes (cube 200–400³,
# Suzanne with the vote 200–400³, 2-core EPYC: bench/voxelize_sparse_cpu.py --volume; the
# model within 0.77–1.15 of the measured growth where the coverage sets the peak).
COVERAGE_BASE = 16 << 20
COVERAGE_PER_BRICK = 7680
# The coverage's density kept beside the outputs: a float32 brick (2 KiB), its ``uncovered``
# bits (64 B), key and slot (16 B) per stored brick of the result.
DENSITY_PER_BRICK = 2128
KEPT_PER_VOXEL = 36
POINTS_PER_VOXEL = 40
VOX_PER_VOXEL = 104
BLOCKS_PER_FACE = 285
# Set voxels per brick, measured (bunny 1024³): a surface brick holds 64 of a surface,
# about 210 of a solid (its inside part), an inside brick all 512; exposed faces about
# 1.5 per voxel of a surface brick's surface.
VOXELS_PER_SURFACE_BRICK = {"surface": 64, "thin": 40, "solid": 256, "solid+surface": 256}
FACES_PER_SURFACE_BRICK = 96
ATTR_PER_SURFACE_VOXEL = 450  # the owners' pass: work items (400 B, surface.py) and hits


def coarse_factor(spec: GridSpec) -> int:
    f = BRICK
    while -(-max(spec.shape) // f) > COARSE_MAX:
        f *= 2
    return f


def brick_counts(vertices, triangles, spec: GridSpec, mode: str, vote: bool = False, xp=np):
    """(surface bricks, interior bricks) estimated from the coarse pass at *spec*, run on
    *xp*'s device (the dense voxelizer is exact on both, so the counts are the same; on
    the GPU the pass takes milliseconds where the host took ~1 s at 4096³)."""
    from . import voxelize

    f = coarse_factor(spec)
    coarse = coarse_spec(spec)
    surface = voxelize(vertices, triangles, coarse, "surface", xp=xp).count()
    scale = f // BRICK
    inside = 0
    if mode in ("solid", "solid+surface"):
        both = voxelize(vertices, triangles, coarse, "solid+surface", vote=vote, xp=xp).count()
        inside = max(0, both - surface)
    return surface * scale ** 2, inside * scale ** 3


def solid_key_bytes(shape) -> int:
    """Bytes of one flip crossing's key in the device solid of a grid of *shape* (the rule
    of ``gpu_sparse._key_plan``: 32-bit keys where the bits left above the row, x and
    brick row hold ``MIN_GROUP_SLICES`` brick slices, else 64-bit)."""
    from .gpu_sparse import MIN_GROUP_SLICES, SOLID_KEYS

    nx, ny = (-(-int(n) // BRICK) * BRICK for n in shape[:2])
    xbits, ybits = max(1, (nx - 1).bit_length()), (ny // BRICK - 1).bit_length()
    free = 32 - (ybits + xbits + 6)
    return 4 if SOLID_KEYS == 32 and free >= MIN_GROUP_SLICES.bit_length() - 1 else 8


def device_bytes(surface_bricks: int, inside_bricks: int, n_vertices: int, n_triangles: int, mode: str,
                 vote: bool = False, shape=None) -> int:
    """Peak bytes of CuPy's pool over a sparse voxelization on the device (``gpu_sparse``,
    ``gpu_sparse_vote`` with *vote*) of a grid of *shape* (None: 64-bit keys assumed), from
    the coarse pass's brick counts (module constants: stage by stage)."""
    from .gpu_sparse import SETUP_CHUNK

    s, i = int(surface_bricks), int(inside_bricks)
    mesh = 24 * n_vertices + 12 * n_triangles
    partial = DEVICE_PARTIAL_PER_SURFACE_BRICK * s
    kept = DEVICE_BYTES_PER_PARTIAL * partial + KEPT_PER_RUN * min(i, partial)  # a run ends at a partial brick

    def surface_stage():
        rows = 1 if shape is None else (-(-int(shape[1]) // BRICK)) * (-(-int(shape[2]) // BRICK)) + 1
        return (DEVICE_SURFACE_BASE + DEVICE_SETUP_BYTES * min(n_triangles, SETUP_CHUNK) + 8 * rows
                + DEVICE_BYTES_PER_CANDIDATE * DEVICE_CANDIDATES_PER_SURFACE_BRICK * s)

    def solid_stage(frame):  # the crossings' keys held until the walk has written its bricks and runs
        keys = 8 if frame is None else solid_key_bytes(frame)
        return DEVICE_SOLID_BASE + 16 * n_triangles + keys * DEVICE_CROSSINGS_PER_SURFACE_BRICK * s + kept

    if mode not in ("solid", "solid+surface"):
        return int(mesh + surface_stage())
    if not vote:
        solid = mesh + solid_stage(shape)
    else:  # 3 solids, the third built beside the first two; then the vote beside all three
        frames = [None] * 3 if shape is None else [tuple(int(shape[(f + a) % 3]) for f in range(3)) for a in range(3)]
        build = max(a * kept + solid_stage(frames[a]) for a in range(3))
        solid = mesh + 24 * n_vertices + max(build, 3 * kept + DEVICE_SOLID_BASE + DEVICE_VOTE_PER_SURFACE_BRICK * s)
    # solid+surface: the surface's arrays, of other sizes than the solid's, mostly add to its freed
    # blocks; after the vote's many sizes, about one more candidate row a surface brick
    # (4096³: 976 MiB measured against 753 for the vote's solid alone)
    if mode != "solid+surface":
        return int(solid)
    return int(solid + surface_stage() + (DEVICE_BYTES_PER_CANDIDATE * s if vote else 0))


def sparse_bytes(surface_bricks: int, inside_bricks: int, n_vertices: int, n_triangles: int, xp=np,
                 vote: bool = False, mode=None, shape=None) -> int:
    """Peak bytes of the sparse voxelization itself (after the coarse pass); *vote*: the
    3-axis vote of a solid (on the device: ``gpu_sparse_vote``); on the device
    ``device_bytes`` (*mode* None: solid+surface where there are inside bricks, else surface)."""
    if xp is not np:
        mode = mode or ("solid+surface" if inside_bricks else "surface")
        return device_bytes(surface_bricks, inside_bricks, n_vertices, n_triangles, mode, vote, shape)
    mesh = BYTES_PER_TRIANGLE * n_triangles + 24 * n_vertices
    return int(BASE_BYTES + mesh + BYTES_PER_SURFACE_BRICK * surface_bricks + BYTES_PER_INSIDE_BRICK * inside_bricks)


def coarse_bytes(vertices, triangles, spec: GridSpec, mode: str, vote: bool = False, xp=np) -> int:
    """Peak bytes of the coarse pass on *xp*: the dense voxelizer's own estimate at the
    coarse grid."""
    from . import estimate_bytes, work_items

    c = coarse_spec(spec)
    m = "solid+surface" if mode in ("solid", "solid+surface") else "surface"
    return estimate_bytes(c, m, len(vertices), len(triangles), vote, xp=xp,
                          items=work_items(vertices, triangles, c, m))


def coarse_spec(spec: GridSpec) -> GridSpec:
    f = coarse_factor(spec)
    return GridSpec(spec.origin, spec.voxel_size * f, tuple(-(-int(n) // f) for n in spec.shape))


def growth(spec: GridSpec, surface: int, inside: int):
    """(surface, inside) bricks at a longest side of r voxels, from the counts at *spec*:
    the surface grows like r², the inside like r³."""
    r0 = max(spec.shape)
    return lambda r: (int(surface * (r / r0) ** 2), int(inside * (r / r0) ** 3))


def scaled_spec(spec: GridSpec, r: int) -> GridSpec:
    """*spec* with its longest side at *r* voxels (the same origin and extent)."""
    size = spec.voxel_size * max(spec.shape) / r
    return GridSpec(spec.origin, size, tuple(max(1, -(-int(n) * r // max(spec.shape))) for n in spec.shape))


def outputs_bytes(outputs, voxels: int, faces: int, surface_voxels: int) -> int:
    """Host bytes of the operator's outputs of *voxels* set voxels (*surface_voxels* of
    them hit by a triangle) and *faces* exposed faces, beyond the grid: the per-voxel
    arrays kept to the end, plus the larger of the owners' pass (a chunk's conservative
    hits and its batch of work items, as the dense surface pass, at most
    ``surface.CHUNK_ITEMS`` items) and the outputs themselves."""
    from .surface import CHUNK_ITEMS

    outputs = set(outputs or ())
    if not outputs & {"points", "blocks", "vox"}:
        return 0
    attributes = ATTR_PER_SURFACE_VOXEL * min(int(surface_voxels), CHUNK_ITEMS)
    made = ((POINTS_PER_VOXEL if "points" in outputs else 0) + (VOX_PER_VOXEL if "vox" in outputs else 0)) * voxels
    made += BLOCKS_PER_FACE * faces if "blocks" in outputs else 0
    return int(KEPT_PER_VOXEL * voxels + max(attributes, made))


def coverage_bytes(surface: int, nv: int, nt: int, xp=np):
    """(fine pass, density grid kept) bytes of the solid modes' coverage
    (``sparse_coverage``) of a result of *surface* stored bricks: the sparse solid 4×
    finer (on the host ``COVERAGE_BASE`` and ``COVERAGE_PER_BRICK`` a stored brick,
    measured; on the device the sparse model at ``FINE_BRICKS_PER_STORED`` fine surface
    bricks a stored brick), then the density's float bricks kept to the end."""
    from .sparse_coverage import FINE_BRICKS_PER_STORED

    kept = DENSITY_PER_BRICK * surface
    if xp is not np:
        return sparse_bytes(FINE_BRICKS_PER_STORED * surface, 0, nv, nt, xp, mode="solid"), kept  # a solid, finer
    return int(COVERAGE_BASE + BYTES_PER_TRIANGLE * nt + 24 * nv + COVERAGE_PER_BRICK * surface), kept


def job_bytes(surface: int, inside: int, nv: int, nt: int, mode: str, outputs, xp=np, vote: bool = False,
              shape=None) -> int:
    """Peak host bytes of a sparse job of *surface* and *inside* bricks: the voxelization,
    then (solid modes with Points or a Volume) the coverage's fine pass beside the
    voxelization's stored bricks and runs, then those and the density beside the outputs'
    arrays (built from bricks and runs a chunk at a time); *shape*: the grid's (the device
    solid's key size)."""
    solid = mode in ("solid", "solid+surface")
    voxels = VOXELS_PER_SURFACE_BRICK.get(mode, 256) * surface + 512 * inside
    kernel = sparse_bytes(surface, inside, nv, nt, xp, vote and solid, mode, shape)
    kept = KEPT_PER_BRICK * surface + KEPT_PER_RUN * min(surface, inside)
    fine = density = 0
    if solid and set(outputs or ()) & {"points", "volume"}:
        fine, density = coverage_bytes(surface, nv, nt, xp)
    return int(max(kernel, kept + fine, BASE_BYTES + kept + density
                   + outputs_bytes(outputs, voxels, FACES_PER_SURFACE_BRICK * surface, 64 * surface)))


def check_sparse(vertices, triangles, spec: GridSpec, mode: str, vote: bool, xp, usable=None, outputs=()) -> int:
    """Refuse (``InputError``) a sparse voxelization (with the operator's *outputs*) whose
    estimate does not fit, naming the largest longest side (and voxel size) that does;
    returns the estimate."""
    from ..memory import largest_that_fits

    usable = backend.usable_bytes(xp) if usable is None else int(usable)
    if len(triangles) == 0:
        return BASE_BYTES
    first = coarse_bytes(vertices, triangles, spec, mode, vote, xp)
    if first > usable:
        raise InputError(f"Estimating a sparse {'×'.join(map(str, spec.shape))} voxel grid needs "
                         f"{backend.format_bytes(first)} of {'host' if xp is np else 'device'} memory but only "
                         f"{backend.format_bytes(usable)} is usable")
    surface, inside = brick_counts(vertices, triangles, spec, mode, vote, xp)
    nv, nt = len(vertices), len(triangles)

    def need_at(s, i, shape=spec.shape):
        return max(first, job_bytes(s, i, nv, nt, mode, outputs, xp, vote, shape))

    need = need_at(surface, inside)
    if outputs:  # the operator's estimate, for bench/memory.py (guard.LAST_ESTIMATE)
        from .guard import LAST_ESTIMATE

        LAST_ESTIMATE.clear()
        LAST_ESTIMATE.update({"total": need, "sparse": True, "surface bricks": surface, "inside bricks": inside})
    if need <= usable:
        return need
    bricks = growth(spec, surface, inside)
    r0 = max(spec.shape)
    best = largest_that_fits(lambda r: need_at(*bricks(r), scaled_spec(spec, r).shape), usable, 2, r0 - 1)
    for _ in range(8):  # the model's answer checked with the coarse pass at that size
        at = None if best is None else scaled_spec(spec, best)
        if best is None or need_at(*brick_counts(vertices, triangles, at, mode, vote, xp), at.shape) <= usable:
            break
        best = best - max(1, best // 32) if best > 2 else None
    where = "host" if xp is np else "device"
    what = (f"A sparse {'×'.join(map(str, spec.shape))} voxel grid"
            + (f" with its outputs ({', '.join(sorted(outputs))})" if outputs else "")
            + f" needs about {backend.format_bytes(need)} of {where} memory ({surface + inside:,} bricks) but only "
            f"{backend.format_bytes(usable)} is usable")
    if best is None:
        raise InputError(f"{what}; not even the smallest grid fits")
    size = spec.voxel_size * r0 / best
    raise InputError(f"{what}. The largest size that fits is {best} voxels along the longest side "
                     f"(voxel size {size:.4g} m)")


def outputs_need(result, outputs, faces=None) -> int:
    """Host bytes of the operator's *outputs* of a sparse *result* (its grid held): the
    exact voxel count, faces (*faces*, or at most 6 a voxel and ``FACES_PER_SURFACE_BRICK``
    a stored brick) and voxels a triangle touches (at most 64 a stored brick, measured: a
    full brick in a run lies inside, with no triangle and no exposed face)."""
    n, stored = result.count(), result.stored_bricks
    faces = 6 * n if faces is None else faces
    return int(BASE_BYTES + result.nbytes + outputs_bytes(outputs, n, min(faces, FACES_PER_SURFACE_BRICK * stored),
                                                          min(n, 64 * stored)))


OUTPUTS_PROBE = 128  # the cheap size the outputs' growth is fitted on, with the refused one


def largest_outputs_size(result, spec: GridSpec, outputs, usable: int, voxelize_at=None, faces=None):
    """The largest longest side below *spec*'s whose *outputs* fit in *usable*, or None
    (as ``split_search``): the counts the need depends on (voxels, stored bricks, the
    grid's bytes) fitted as A r² + B r³ through the refused size and a probe at
    ``OUTPUTS_PROBE``, the fitted need bisected, then the answer checked with the exact
    counts of ``voxelize_at(r)`` (a sparse result at longest side r): stepping down while
    it fails, up while the next size passes. Without *voxelize_at* the counts are scaled
    like the surface (r², more than a solid keeps as it shrinks), unchecked."""
    from ..memory import largest_that_fits
    from .split_search import fit_powers

    r0 = max(spec.shape)
    now = (result.count(), result.stored_bricks, result.nbytes)
    if voxelize_at is None:
        fits = [fit_powers(r0, x, r0, x, 2, 2) for x in now]
    else:
        r1 = max(8, min(OUTPUTS_PROBE, r0 // 2))
        probe = voxelize_at(r1)
        fits = [fit_powers(r1, x1, r0, x, 2, 3) for x1, x in
                zip((probe.count(), probe.stored_bricks, probe.nbytes), now)]

    def model(r):
        n, stored, held = (f(r) for f in fits)
        f = 6 * n if faces is None else faces * (r / r0) ** 2
        return int(BASE_BYTES + held + outputs_bytes(outputs, n, min(f, FACES_PER_SURFACE_BRICK * stored),
                                                     min(n, 64 * stored)))

    best = largest_that_fits(model, usable, 2, r0 - 1)
    if voxelize_at is None or best is None:
        return best
    fits_at = {}

    def runs(r):  # the exact need at longest side r fits
        if r not in fits_at:
            fits_at[r] = outputs_need(voxelize_at(r), outputs) <= usable
        return fits_at[r]

    for _ in range(12):  # down while the exact counts do not fit
        if runs(best):
            break
        best = best - max(1, best // 32)
        if best < 2:
            return None
    else:
        return None
    for _ in range(12):  # up while the next size fits
        if best + 1 >= r0 or not runs(best + 1):
            break
        best += 1
    return best


def check_outputs(result, spec: GridSpec, outputs, faces=None, usable=None, voxelize_at=None) -> None:
    """With the exact voxel count, before any per-voxel array exists: refuse outputs that
    do not fit, naming the largest longest side that does (``largest_outputs_size``,
    checked with ``voxelize_at`` where given)."""
    usable = backend.usable_bytes(np) if usable is None else int(usable)
    need = outputs_need(result, outputs, faces)
    if need <= usable:
        return
    r0 = max(spec.shape)
    best = largest_outputs_size(result, spec, outputs, usable, voxelize_at, faces)
    what = (f"The {result.count():,} voxels of a sparse {'×'.join(map(str, spec.shape))} grid with their outputs "
            f"({', '.join(sorted(outputs))}) need about {backend.format_bytes(need)} of host memory but only "
            f"{backend.format_bytes(usable)} is usable")
    if best is None:
        raise InputError(f"{what}; not even the smallest grid fits")
    about = "" if voxelize_at is not None else "about "
    raise InputError(f"{what}. The largest size that fits is {about}{best} voxels along the longest side "
                     f"(voxel size {spec.voxel_size * r0 / best:.4g} m)")


class DenseRefused(InputError):
    """The dense guard refused a Voxelize group (``MemoryGuard._refuse``), before or after
    voxelizing: the operator may run it sparse instead. ``explain()`` is the dense guard's
    own refusal, the largest dense resolution named (searched only when asked)."""

    def __init__(self, guard, spec, need, exact):
        super().__init__(f"the dense {'×'.join(map(str, spec.shape))} job needs {backend.format_bytes(need)}")
        self.guard, self.spec, self.need, self.exact = guard, spec, need, exact

    def explain(self) -> str:
        from .guard import MemoryGuard

        try:
            MemoryGuard._refuse(self.guard, self.spec, self.need, self.exact)
        except InputError as e:
            return str(e)
        return str(self)  # pragma: no cover - _refuse always raises


def _fallback_guard(soup, segments, request, vote, lo, hi):
    """A dense ``MemoryGuard`` whose refusals raise ``DenseRefused``."""
    from .guard import MemoryGuard

    class Guard(MemoryGuard):
        def _refuse(self, spec, need, exact):
            raise DenseRefused(self, spec, need, exact)

    return Guard(soup, segments, request, vote, lo, hi)


def sparse_instead(refused: DenseRefused, soup, spec: GridSpec, request, vote) -> str:
    """The note for running a group the dense guard refused sparse, if its estimate fits;
    else ``InputError``: the dense refusal (naming the largest dense resolution), then the
    sparse one (naming the largest sparse size)."""
    try:
        check_sparse(soup.vertices, soup.triangles, spec, request.mode, vote, np, outputs=request.outputs)
    except InputError as sparse:
        raise InputError(f"{refused.explain()}. Sparse: {sparse}") from None
    return f"{refused} of host memory, more than is usable: voxelized sparse (8³ bricks)"


# Above this many grid voxels a Volume alone goes sparse on the CPU (auto). Measured in
# fresh Blender processes (bench/voxelize_sparse_cpu.py --volume, cube, 2-core EPYC shared
# with other jobs), dense (Sparse: never) against sparse (always), time and RSS growth:
#   256³ surface 3.9 s, 220 MiB | 4.6 s, 29 MiB;   solid 25.7 s, 649 MiB | 27.8 s, 52 MiB
#   512³ surface 34 s, 1119 MiB | 24 s, 63 MiB;    solid 436 s, 1120 MiB | 266 s, 184 MiB
#  1024³ surface — | 58 s, 233 MiB;                 solid 728 s, 8.48 GiB (bench/RESULTS.md,
#        idle box) | 332 s, 613 MiB (estimate 746 MiB). From 512³ on sparse is faster too.
AUTO_CPU_VOLUME_VOXELS = 512 ** 3


def plan_group(spec: GridSpec, request, soup, segments, vote, lo, hi):
    """Dense or sparse for one Voxelize group (``request.sparse``: auto, always, never):
    returns (dense ``MemoryGuard`` or None, sparse?, note or None).

    ``auto`` goes sparse for a mesh (loose edges and curves join it: ``sparse_lines``)
    where, on the GPU, the dense grid does not fit on the device; on the CPU, above
    ``sparse_result.AUTO_CPU_VOXELS`` voxels when the job wants per-voxel outputs, and
    above ``AUTO_CPU_VOLUME_VOXELS`` for a Volume alone (measured: faster and a sixth of
    the memory or less there);
    and wherever the dense guard refuses but the sparse estimate fits (before
    voxelizing here; after, with the exact counts, the guard raises ``DenseRefused`` from
    the dense job and the operator calls ``sparse_instead``). When both refuse, the dense
    refusal stands, with the sparse one after it."""
    from . import estimate_bytes
    from .guard import check_memory
    from .sparse_result import AUTO_CPU_VOXELS

    choice = (getattr(request, "sparse", "auto") or "auto").lower()
    if choice not in ("auto", "always", "never"):
        raise InputError(f"sparse must be auto, always or never, not {choice!r}")
    meshy = soup is not None and len(soup.triangles) > 0
    if choice == "never" or not meshy:
        return check_memory(spec, request, soup, segments, vote, lo, hi), False, None
    xp = backend.xp()
    nv, nt = len(soup.vertices), len(soup.triangles)
    if choice == "always":
        check_sparse(soup.vertices, soup.triangles, spec, request.mode, vote, np, outputs=request.outputs)
        return None, True, None
    if xp is not np and estimate_bytes(spec, request.mode, nv, nt, vote, xp=xp) > backend.usable_bytes(xp):
        return None, True, "the dense grid does not fit on the GPU: voxelized sparse"
    if xp is np and spec.voxel_count > (AUTO_CPU_VOXELS if request.outputs - {"volume"} else AUTO_CPU_VOLUME_VOXELS):
        try:
            check_sparse(soup.vertices, soup.triangles, spec, request.mode, vote, np, outputs=request.outputs)
            return None, True, None
        except InputError as sparse:
            try:
                return check_memory(spec, request, soup, segments, vote, lo, hi), False, None
            except InputError as dense:
                raise InputError(f"{dense}. Sparse: {sparse}") from None
    guard = _fallback_guard(soup, segments, request, vote, lo, hi)
    try:
        guard.check_before(spec)
    except DenseRefused as refused:
        return None, True, sparse_instead(refused, soup, spec, request, vote)
    return guard, False, None
