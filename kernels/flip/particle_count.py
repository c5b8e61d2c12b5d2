"""Particle count control: the most particles a cell keeps (seed 003 §6 seeds
``particles_per_cell`` a liquid cell; Blender's liquid, Mantaflow's ``adjustNumber``, keeps
at most its "Maximum" a cell the same way). FLIP particles follow the grid velocity, which is
divergence-free on the grid but does not keep them apart: where the liquid is pressed
against a wall, or a fast substep's push-out lands many in the wall's cell layer, they pile
up frame after frame. Measured (H100, the dam break with the Fast timing, ``bench``): at 8M
particles a wall cell held 23,556 (8 seeded a cell) by frame 13, at 65M one held 241,717 by
frame 11 (Accurate: 2,700 at 8M by frame 13); every stage that visits a cell's particles
slows with them (the 65M P2G gather 47 → 184 ms and the level set's 71 → 892 ms a frame over
frames 9–17), while the surface, made of the particles' spheres, does not change.

At the end of each frame (``FlipSimulation.step``) a cell holding c > M particles keeps about
M of them: particle p stays where ⌊h · c / 2³²⌋ < M, h the hash of (Seed, p, frame) of
``kernels/rng.py`` (``key``, then its stream ``STREAM``), so each particle of the cell stays with
chance M/c, the cell keeps M on average, and which ones is the same integer arithmetic on
NumPy and CuPy (the CPU reference and the GPU keep the same particles, bit for bit; a resumed
bake keeps the same as an uninterrupted one: the frame count is in the checkpoint). M is the
``max_particles_per_cell`` setting (0, the default, keeps every particle; e.g. 32, four times
the seeded 8; never below twice ``particles_per_cell``). It runs ``CHUNK`` particles a pass, so
its temporaries are a few MiB and one count a cell (8 bytes a cell of the box, or of the
bricks' pool; 16 while a pass's ``bincount`` is added in); deleting then copies the
particles kept, as an outflow does. The cell of a particle: its lattice cell, clamped into a
closed box (``FlipSimulation._cell_of_particles``); on the sparse solver its pool cell (a
particle outside the bricks counts alone, the same on both backends).

Memory. The memory estimates count this pass when the control is on (``frame_end_bytes``:
``memory.flip_memory`` and ``sparse_memory.memory_at``, *count_control*) as a stage of its
own beside the state: it runs after the frame's last substep has returned (its temporaries
gone) and before the frame's output (the level set), so it never coexists with either.
Measured with tracemalloc on NumPy (dense 64³ and 128×64², sparse pools of 0.1–0.28M cells,
36k–1.76M particles): the first pass holds the counts and one pass's ``bincount`` of every
cell (16 B a cell), the second the counts, the keep mask (1 B a particle) and a pass's
temporaries, 60.5–68.5 B a particle of ``CHUNK`` on the box's cells and 107–115 B on the
pool's (``_particle_cells`` locates through the brick index); the copy of the kept
particles, beside the mask, 32.0 B a kept particle (pos and vel, and the mask's indices),
68.0 with APIC. On CuPy the same arrays, a pass ``CHUNK_GPU`` particles: ~100 B a particle
(the pool's 120 as on NumPy), counted, not measured on a device.
"""

from __future__ import annotations

import numpy as np

from .. import rng

STREAM = 4  # the count control's stream of ``kernels/rng.py`` (the FLIP seeding's are 0–3, ``particles.py``)


def limit_of(settings) -> int:
    """The most particles a cell keeps (0: no limit): ``max_particles_per_cell``, at least twice
    ``particles_per_cell``."""
    most = int(getattr(settings, "max_particles_per_cell", 0))
    return 0 if most <= 0 else max(most, 2 * int(settings.particles_per_cell))


def keep_mask(counts, limit: int, frame: int, xp, first: int = 0, seed: int = 0):
    """bool per particle: whether it stays, *counts* (int64) the particles of its cell (module
    notes), the particles numbered from *first*, hashed with the Seed *seed* and the *frame*
    (``rng.key``); every particle of a cell holding at most *limit* stays."""
    n = int(counts.shape[0])
    ids = xp.arange(first, first + n, dtype=xp.uint32)
    h = rng.mix32(rng.key(rng.seed_key(seed), ids, np.uint32(int(frame) & 0xFFFFFFFF))
                  ^ rng.stream_word(STREAM)).astype(xp.uint64)
    c = counts.astype(xp.uint64)
    return (counts <= limit) | (((h * c) >> xp.uint64(32)) < xp.uint64(limit))


CHUNK = 1 << 18  # particles a pass on NumPy: the passes' temporaries stay a few MiB whatever the particle count
# on CuPy: ~100 B a particle of temporaries (~400 MiB) in passes few enough that their launches do not
# dominate (H100, 65M particles in passes of 1/4 M: ~0.5 s a frame of launches)
CHUNK_GPU = 1 << 22
# the frame-end peak's bytes (module notes): a cell's counts and a pass's ``bincount``; a particle of a pass
# (NumPy on the box's cells, on the pool's cells; CuPy, not measured on a device); a kept particle's copy
CELL_BYTES = 16
PASS_BYTES_CPU, PASS_BYTES_CPU_SPARSE = 70, 120
PASS_BYTES_GPU, PASS_BYTES_GPU_SPARSE = 100, 120
KEPT_BYTES, KEPT_APIC = 32, 36


def frame_end_bytes(cells: int, particles: int, apic: bool = False, gpu: bool = False, sparse: bool = False) -> int:
    """Peak bytes of the count control's frame-end pass beyond the state (module notes): with
    *cells* cells counted (the box's, or the bricks' pool's) and *particles* held, the larger
    of the passes (the counts, one pass's ``bincount``, the keep mask and a pass's temporaries,
    at most ``CHUNK`` or ``CHUNK_GPU`` particles) and the copy of the kept particles (all of
    them at most) beside the mask."""
    P = max(0, int(particles))
    per_pass = (PASS_BYTES_GPU_SPARSE if sparse else PASS_BYTES_GPU) if gpu \
        else (PASS_BYTES_CPU_SPARSE if sparse else PASS_BYTES_CPU)
    passes = CELL_BYTES * int(cells) + P + per_pass * min(P, CHUNK_GPU if gpu else CHUNK)
    copy = P + (KEPT_BYTES + (KEPT_APIC if apic else 0)) * P
    return int(max(passes, copy))


def thin(cells_of, n: int, size: int, limit: int, frame: int, xp, seed: int = 0):
    """The keep mask of *n* particles whose cells ``cells_of(lo, hi)`` gives a slice at a time
    (int64, −1: a cell of its own; below *size*): one pass counts every cell, a second decides,
    ``CHUNK`` (NumPy) or ``CHUNK_GPU`` particles at a time (the same bits as all at once)."""
    chunk = CHUNK if xp is np else CHUNK_GPU
    per_cell = xp.zeros(int(size) + 1, xp.int64)
    for lo in range(0, n, chunk):
        per_cell += _totals(cells_of(lo, min(n, lo + chunk)), size, xp)
    keep = xp.empty(n, bool)
    for lo in range(0, n, chunk):
        counts = _per_particle(cells_of(lo, min(n, lo + chunk)), per_cell, size, xp)
        keep[lo:lo + chunk] = keep_mask(counts, limit, frame, xp, first=lo, seed=seed)
    return keep


def counts_of(cells, size: int, xp):
    """int64 per particle: how many particles share its cell, *cells* (int64, −1: a cell of
    its own) indices below *size*."""
    return _per_particle(cells, _totals(cells, size, xp), size, xp)


def _totals(cells, size: int, xp):
    """int64 particles a cell of *cells* (``counts_of``'s), the cell-less in one extra bin (never read)."""
    return xp.bincount(xp.where(cells >= 0, cells, int(size)), minlength=int(size) + 1)


def _per_particle(cells, totals, size: int, xp):
    """int64 per particle: its cell's total in *totals* (``_totals``'), 1 for the cell-less."""
    return xp.where(cells >= 0, totals[xp.where(cells >= 0, cells, int(size))], 1).astype(xp.int64)
