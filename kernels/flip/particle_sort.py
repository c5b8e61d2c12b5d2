"""Particle order (helper i24o, issue 24): the sparse solver's particle arrays put in brick
order at the end of a frame, so that the particles a brick holds lie together in memory.

Why. P2G bins the particles by pool cell every substep and reads them through the bins'
order (``sparse_gpu.bin_particles_order``, ``p2g_scatter_brick``), G2P reads them through the
same order (``sparse_g2p_gpu``): both gather pos and vel from wherever the particles are. The
dam break's particles are seeded cell by cell; the splash scatters them through the arrays
(``disorder`` at each frame's end of the 8M Fast dam break, never sorted: 0.014, 0.024, 0.041,
0.074, 0.13, 0.22, 0.34, 0.48, 0.60, 0.69, 0.77, 0.82 over frames 0–11).

Measured (H100 80GB HBM3, driver 580.159.04, ``bench/flip_sparse_particle_order.py``, two calls;
one substep of 1/72 s from the same state in each order, ms, call 2):

    order           frame 0: P2G   G2P+adv  substep   frame 12 (never sorted): P2G   G2P+adv  substep
    as they are              0.832  0.504    2.211                             2.386  1.034    4.932
    brick order              0.840  0.496    2.229                             2.169  0.510    4.169
    P2G's bins' order        0.845  0.496    2.237                             2.256  0.508    4.289
    random shuffle           1.500  1.878    4.421                             2.681  1.857    6.161

At frame 0 the seeding's order is as good as sorted; after the splash brick order halves G2P and
takes 0.2 ms off P2G (``place_particles`` 0.176 → 0.054, ``count_particles_grouped`` 0.198 →
0.147, ``p2g_scatter_brick`` 1.163 → 1.137 ms, the same bricks): 0.76 ms a substep, 2.3 ms a
Fast frame of three. The sort costs 0.85–0.91 ms at 8M (keys 0.084 in one launch, CuPy's argsort
of int32 keys 0.44–0.47, the gathers of pos and vel 0.33–0.35; call 1's array-code keys made it
3.2 ms and no frame faster). Whole frames from frame 0's state, the ways in turn, two runs each
(the second runs' frames 6–11 summed, ms; the medians in the bench's table): off 162.0, every
frame 152.0 (−6%; the first runs 157.0 → 151.6), every 2 frames 157.8, auto (``AUTO_DISORDER`` 0.2,
sorting from frame 5, then every frame or two as the splash re-mixes them within a frame) 160.5,
auto at 0.08 162.2; over frames 1–5 the sort every frame costs its 0.9 ms within the runs' noise
(second runs: 120.1 off, 118.6 every frame; the first off run's frames 1–5 were 4–5 ms faster
than every other run's). Each way moves the same particles: the same substeps and CG
iterations every frame. Not made the default on one pair of runs: the gain is a few percent of
a splash frame, within the spread between two runs of the same way.

What. ``VOXFX_SPARSE_PARTICLE_SORT`` (``SORTS``): "off" (the default), "auto", or K (1, 2, 4, 8):
after every K-th frame's last substep and its count control (``SparseFlipSimulation.step``, when
the frame count is a multiple of K; auto: when ``disorder`` exceeds ``AUTO_DISORDER``, one
launch and one host read a frame) the particles are reordered by ``brick_keys``: the lattice
brick (z, then y, then x) and the cell within it (``(lz·8 + ly)·8 + lx``, the pool's own cell
order), a stable sort, so particles of one cell keep their relative order. pos, vel and C
(APIC) are moved through the one permutation (every per-particle array the solver keeps: the
narrow band, the kept faces and the carried pressure live on the grid). On CuPy by
``VOXFX_SPARSE_PARTICLE_SORT_PATH`` (``PATHS``, helper i24o2): "argsort" (the default: CuPy's
argsort, then one fancy index an array), "gather" (the argsort, then ``gather_particles``: pos,
vel and C in one launch into the arrays the previous sort left, the state's arrays kept for the
next: ``gather``). The same permutation and the same arrays bit for bit on either path (a copy; host
harness and NumPy: tests/unit/test_cuda_particle_sort_host.py, tests/unit/test_flip_particle_sort.py;
GPU: tests/gpu/test_flip_particle_sort_gpu.py). H100 80GB HBM3 (session 15, call 4,
``bench/flip_sparse_particle_order.py --sort-only``, 8M): frame 0's order, argsort 0.443 + the
arrays one at a time 0.327 ms, + ``gather_particles`` 0.163; a random shuffle, 0.544 against 0.601
(the default stays argsort). A third path, key·2³² + index pairs sorted as one uint64 (the index
breaking every tie), sorted in 0.685–0.691 ms against argsort's 0.443–0.469, was removed.
The keys and the disorder count are ``flip_particle_sort.cu``'s on CuPy (int32 keys: closed
boxes and open domains up to 2³¹ cells of key frame), array code otherwise; the same integers
(host harness tests/unit/test_cuda_particle_sort_host.py, GPU tests).

What it keeps. The order is a function of the positions alone (lattice cells, not pool slots:
a resumed bake's pool numbers its bricks otherwise, its lattice is the same) and of the order
before it (stable), on NumPy and CuPy alike (``argsort(kind="stable")``; CuPy's sort is
Thrust's stable sort): the CPU reference and the GPU reorder the same particles the same way
given the same positions (tests/gpu/test_flip_particle_sort_gpu.py), and a resumed bake the same
as an uninterrupted one (the sort runs before the frame's checkpoint, on the frame count the
checkpoint holds) where the resume is bit for bit (the CPU reference without a narrow band:
tests/unit/test_flip_particle_sort.py). Where a resume or a CPU/GPU comparison is only within
float32 rounding (the GPU's resume, the narrow band's, GPU against CPU), a particle within
rounding of a cell border may sort to the other side of it: a few particles' indices then
differ, the set is the same within rounding (a narrow-band resume on the CPU, 728 particles 3
frames on: two indices hold each other's particle, 0.062 m apart, every other within 4.2e-5 m,
as the sets are); auto's choice to sort may differ there too (a disorder within rounding of
``AUTO_DISORDER``), a count K's never does. Tests that compare two runs index by index (sparse
against dense particle for particle, tests/unit/test_flip_sparse.py; the narrow band's resume,
tests/unit/test_flip_sparse_band.py) hold only with the sort off. The GPU's P2G sums integers,
its G2P is per particle: the motion is the same as a set with the sort on or off, bit for bit
(GPU test, six frames). What follows the array order does change with it: the particle count
control's hash takes the particle's index (``particle_count.keep_mask``), the level set sums a
node's particles in their order, cache frames write the particles in it. Particles have no
identity from frame to frame beyond their index; with the sort on the index is renumbered on
the sort's frames (an emitter's append and the kill pass's compaction renumber them too).

Cost: the keys (4 B a particle; 8 with int64 keys), the argsort's int64 order and its own
temporaries (CuPy: a copy of the keys and the index), one array's copy at a time (12 B pos or
vel, 36 B C) beside the state, at the frame's end (no substep stage is alive then). The
gather path: no per-array temporary, but a second pos, vel and C (24 B a particle, 60 with APIC) held from one
sort to the next (``sort_spare``; a checkpoint's and a cache frame's arrays are host copies
before the next step: addon/cache_writer.py, so nothing outside the solver reads the spare).
Counted by ``sparse_memory.memory_at`` where the sort is on, and only then (issue 24, i24k):
the spare (``spare_bytes``) in the state and so in every stage, the frame-end work
(``frame_end_bytes``) as a stage beside the state. Both are bounds read from the code, not
measured on a device: the work is ``KEY_BYTES`` 8 (int64 keys, a bound), ``ORDER_BYTES`` 8 and
``ARGSORT_BYTES`` 32 (CuPy's copy of the keys and its index array, Thrust's double buffers)
during the argsort, then the keys and order beside one array's copy (argsort path) or beside a
new spare while the old one is held (gather path, once the count changed: an emitter, the
count control, a band's refill).
"""

from __future__ import annotations

import math

import numpy as np

from ..grid.launch import THREADS, Kernels
from ..settings import env_choice

KERNELS = Kernels("flip_particle_sort.cu", ("--fmad=false",), THREADS)

SWITCH = "VOXFX_SPARSE_PARTICLE_SORT"
SORTS = ("off", "auto", "1", "2", "4", "8")  # off, when disordered (``AUTO_DISORDER``), or every K frames
PATH_SWITCH = "VOXFX_SPARSE_PARTICLE_SORT_PATH"
# CuPy's: argsort + one fancy index an array; argsort + ``gather_particles`` (one launch, helper i24o2).
# The same permutation and arrays, bit for bit.
PATHS = ("argsort", "gather")
_GATHER_INDEX = 1 << 32  # particles gather_particles can number (it takes an order's low 32 bits)
AUTO_DISORDER = 0.2  # auto: sort when this share of the particles jump away from the one before (``disorder``)
_BRICK = 8  # cells a brick's edge (grid.sparse_mac: 512 cells a brick)
_INT32_KEYS = 1 << 31  # keys below this are int32 (a radix sort of half the bytes)
_INT64_KEYS = 1 << 62
# B a particle the sort asks for (module text, "Cost"; bounds from the code, not measured): its keys (int64, a
# bound), its order, CuPy's argsort's own (a copy of the keys, its index, Thrust's double buffers); the gather
# path's spare pos and vel, and C with APIC
KEY_BYTES, ORDER_BYTES, ARGSORT_BYTES = 8, 8, 32
SPARE_BYTES, SPARE_APIC_BYTES = 24, 36


def mode(way=None) -> str:
    """The sort's way: *way*, else ``VOXFX_SPARSE_PARTICLE_SORT``, else off."""
    return env_choice(SWITCH, SORTS, way)


def path(way=None) -> str:
    """The sort's path on CuPy: *way*, else ``VOXFX_SPARSE_PARTICLE_SORT_PATH``, else argsort."""
    return env_choice(PATH_SWITCH, PATHS, way)


def every(way=None) -> int:
    """Frames between sorts of ``mode(way)``: 0 off, −1 auto."""
    chosen = mode(way)
    return 0 if chosen == "off" else -1 if chosen == "auto" else int(chosen)


def _spare_held(way, path_way, gpu: bool, particles: int) -> bool:
    """Whether the sort of ``mode(way)`` keeps a spare (``gather``: on CuPy, the gather path
    ``path(path_way)``, fewer than 2³² particles)."""
    return bool(gpu and every(way) and path(path_way) == "gather" and int(particles) < _GATHER_INDEX)


def spare_bytes(particles: int, apic: bool = False, way=None, path_way=None, gpu: bool = True) -> int:
    """Device bytes the sort holds from one sort to the next (module text, "Cost"): the gather
    path's second pos and vel (and C with *apic*) of *particles* particles; 0 with the sort off
    (``mode(way)``), on the argsort path (``path(path_way)``) or on NumPy (not *gpu*)."""
    if not _spare_held(way, path_way, gpu, particles):
        return 0
    return int(particles) * (SPARE_BYTES + (SPARE_APIC_BYTES if apic else 0))


def frame_end_bytes(particles: int, apic: bool = False, way=None, path_way=None, gpu: bool = True) -> int:
    """Bytes the sort asks for at a frame's end beside the state and its spare, at most: during
    the argsort its keys, order and the argsort's own; then the keys and order beside a new spare
    while the old one is held (gather path) or beside one array's copy (``permute``). 0 with the
    sort off."""
    if not every(way):
        return 0
    kept = KEY_BYTES + ORDER_BYTES
    if _spare_held(way, path_way, gpu, particles):
        then = SPARE_BYTES + (SPARE_APIC_BYTES if apic else 0)
    else:
        then = 36 if apic else 12  # C, else pos or vel
    return int(particles) * max(kept + ARGSORT_BYTES, kept + then)


def key_frame(spec, closed: bool, kill_distance: float):
    """(lo, bricks): the lattice cell the keys count from (a multiple of the brick's edge)
    and the bricks a key's axis spans, per axis (x, y, z). A closed box holds its particles'
    cells (the solver clamps them into it); an open one holds them within the kill distance
    beyond the box (a cell more for rounding); cells outside are clamped onto its border."""
    reach = 0 if closed else int(math.ceil(float(kill_distance) / float(spec.voxel_size))) + 1
    lo = [-((reach + _BRICK - 1) // _BRICK) * _BRICK] * 3
    hi = [int(n) - 1 + reach for n in spec.shape]
    bricks = [(h - low) // _BRICK + 1 for h, low in zip(hi, lo)]
    return lo, bricks


def brick_keys(pos, spec, closed: bool, kill_distance: float, xp):
    """A sort key per particle (int32 where every key fits, else int64; None when not even the
    bricks alone fit 62 bits): its lattice brick in z, y, x order, then its cell within the
    brick in the pool's cell order. The lattice cell as ``SparseFlipSimulation`` takes it
    (``floor((p − origin) / h)`` in float32), clamped into the key frame in float32; a
    non-finite particle sorts last. CuPy with int32 keys: ``particle_brick_keys`` (one launch,
    the same keys); otherwise array code."""
    lo, (bx, by, bz) = key_frame(spec, closed, kill_distance)
    total = bx * by * bz
    local = total * _BRICK ** 3 < _INT64_KEYS
    if not local and total >= _INT64_KEYS:
        return None
    last = total * (_BRICK ** 3 if local else 1)  # past every finite key
    if last < _INT32_KEYS and xp is not np:
        key = xp.empty(int(pos.shape[0]), xp.int32)
        KERNELS.launch("particle_brick_keys", key.size, (
            xp.ascontiguousarray(pos, dtype=xp.float32), np.int64(key.size), *np.asarray(spec.origin, np.float32),
            np.float32(spec.voxel_size), *np.asarray(lo, np.float32), np.int32(bx), np.int32(by), np.int32(bz),
            np.int32(local), np.int32(last), key))
        return key
    dtype = xp.int32 if last < _INT32_KEYS else xp.int64
    ok = xp.isfinite(pos).all(axis=1)
    cell = xp.floor((xp.where(ok[:, None], pos, 0) - xp.asarray(spec.origin, dtype=xp.float32))
                    / np.float32(spec.voxel_size))
    upper = xp.asarray([n * _BRICK - 1 for n in (bx, by, bz)], dtype=xp.float32)
    cell = xp.clip(cell - xp.asarray(lo, dtype=xp.float32), 0, upper).astype(xp.int64)
    b = cell // _BRICK
    key = (b[:, 2] * by + b[:, 1]) * bx + b[:, 0]
    if local:
        r = cell % _BRICK
        key = key * _BRICK ** 3 + (r[:, 2] * _BRICK + r[:, 1]) * _BRICK + r[:, 0]
    return xp.where(ok, key, xp.asarray(last, dtype=xp.int64)).astype(dtype)


def disorder(key, spec, closed: bool, kill_distance: float, xp) -> float:
    """How scattered the particles lie in memory: the share of particles whose cell (decoded
    from ``brick_keys``' *key*) is neither the previous particle's nor one of its 26 neighbours.
    Low in brick order (a jump where a brick's row of 8 cells or the brick ends) and in the
    seeding's order (cell by cell along x rows), about 1 in a random order; a particle that
    moves to a neighbouring cell does not count. 0 for keys without their cell part (an open
    domain beyond 2⁵³ bricks: never sorted by auto). CuPy with int32 keys: ``key_jumps``."""
    n = int(key.shape[0])
    lo, (bx, by, bz) = key_frame(spec, closed, kill_distance)
    if n < 2 or bx * by * bz * _BRICK ** 3 >= _INT64_KEYS:
        return 0.0
    if xp is not np and key.dtype == xp.int32:
        count = xp.zeros(1, xp.uint64)
        KERNELS.launch("key_jumps", n, (key, np.int64(n), np.int32(bx), np.int32(by), count))
        return int(count.get()[0]) / (n - 1)
    k = key.astype(xp.int64)
    b, cell = k >> 9, k & 511
    x = (b % bx) * _BRICK + (cell & 7)
    y = ((b // bx) % by) * _BRICK + ((cell >> 3) & 7)
    z = (b // (bx * by)) * _BRICK + (cell >> 6)
    far = (xp.abs(xp.diff(x)) > 1) | (xp.abs(xp.diff(y)) > 1) | (xp.abs(xp.diff(z)) > 1)
    return int(xp.count_nonzero(far)) / (n - 1)


def brick_order(pos, spec, closed: bool, kill_distance: float, xp):
    """The permutation (int64, new index → old) that puts *pos* in ``brick_keys`` order,
    stable; None where no key fits (an open domain of more than 2⁶² bricks: not sorted)."""
    key = brick_keys(pos, spec, closed, kill_distance, xp)
    return order_of(key, xp)


def order_of(key, xp):
    """The stable permutation that sorts *key* (None for None)."""
    if key is None:
        return None
    return np.argsort(key, kind="stable") if xp is np else xp.argsort(key)  # CuPy's: stable (Thrust)


def permute(sim, order) -> None:
    """Reorder *sim*'s particle arrays (pos, vel, C) by *order*, one array at a time."""
    sim.pos = sim.pos[order]
    sim.vel = sim.vel[order]
    if sim.c is not None:
        sim.c = sim.c[order]


def gather(sim, order) -> None:
    """Reorder *sim*'s particle arrays as ``permute`` does, in one ``gather_particles`` launch
    (CuPy), *order* an ``order_of`` permutation (fewer than 2³² particles). Into the arrays the
    previous gather left (``sort_spare``, where their shapes still hold) or fresh ones, and the
    state's arrays kept as the next gather's: no per-array temporaries, one more copy of pos, vel
    and C held between frames."""
    xp = sim.xp
    n = int(sim.pos.shape[0])
    arrays = (sim.pos, sim.vel, sim.c)
    if n >= _GATHER_INDEX or not all(a is None or (a.dtype == xp.float32 and a.flags.c_contiguous) for a in arrays):
        permute(sim, order)  # not the kernel's layout (float32 rows, contiguous)
        return
    spare = getattr(sim, "sort_spare", None)
    if spare is None or any((a is None) != (b is None) or (a is not None and (
            a.shape != b.shape or a.data.ptr == b.data.ptr)) for a, b in zip(arrays, spare)):  # never onto itself
        spare = tuple(None if a is None else xp.empty_like(a) for a in arrays)
    apic = sim.c is not None
    none = xp.zeros(1, xp.float32)
    KERNELS.launch("gather_particles", n, (
        xp.ascontiguousarray(order, dtype=xp.int64), np.int64(n), sim.pos, sim.vel, sim.c if apic else none,
        np.int32(apic), spare[0], spare[1], spare[2] if apic else none))
    sim.pos, sim.vel, sim.c = spare
    sim.sort_spare = arrays


def reorder(sim, key, way=None) -> None:
    """*sim*'s particles put in *key*'s stable order (``order_of``) by ``path(way)`` on CuPy
    (argsort: ``permute``; gather: ``gather``) and by the NumPy reference otherwise."""
    xp = sim.xp
    order = order_of(key, xp)
    if xp is np or path(way) == "argsort":
        permute(sim, order)
    else:
        gather(sim, order)


def after_frame(sim, way=None) -> bool:
    """The sort at a frame's end (``SparseFlipSimulation.step``): every ``every(way)`` frames
    (the frame count ``sim.frames``, counted already, a multiple of it), or with auto when
    ``disorder`` exceeds ``AUTO_DISORDER`` (one host read a frame). Returns whether it sorted."""
    k = every(way)
    if not k or (k > 0 and sim.frames % k) or len(sim.pos) == 0:
        return False
    xp = sim.xp
    key = brick_keys(sim.pos, sim.spec, sim.boundary == "closed", sim.kill_distance, xp)
    if key is None:
        return False
    if k < 0:
        sim.last_disorder = disorder(key, sim.spec, sim.boundary == "closed", sim.kill_distance, xp)
        if sim.last_disorder <= AUTO_DISORDER:
            return False
    reorder(sim, key)
    return True
