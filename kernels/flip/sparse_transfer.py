"""Particle ↔ grid transfers of the sparse FLIP solver (seed 003 §4 Alg. 1, §6–7) on a
``SparseFlipGrid`` (``sparse_grid.py``): the stages of ``transfer.py`` with the same
weights, the same float32 operations and the same order, on flat brick channels.

One ``xp`` code path for NumPy and CuPy:

``particles_to_grid``  trilinear hat weights of each particle on the 8 nodes of each face
                       lattice (``transfer._p2g_component``'s weights, APIC term included);
                       the (face, w·q, w) pairs sorted by face (a unique int64 key: face,
                       then pair number, so the order is fixed on both backends), then
                       each face sums its run of pairs in that order in float64 — a
                       gather over sorted particles (§6–7): no float atomics, the same
                       bits run to run. Faces with Σw = 0 get 0 and are invalid.
``classify``           SOLID where ``solid`` (obstacles, and in a closed domain the cells
                       beyond the walls), FLUID where ≥ 1 particle, else AIR.
``enforce_boundaries`` faces touching a SOLID cell take the solid's velocity; faces that
                       do not exist (beyond a closed domain's face lattices) 0.
``extrapolate``        valid faces spread into invalid ones, ring by ring (−x, +x, −y,
                       +y, −z, +z order, float32 sums, as ``transfer._extrapolate_cpu``).
``g2p_advect``         FLIP/PIC blend or APIC, then RK2 and the push out of solids, via the
                       brick sampler (``SparseMacGrid.sample_faces``).

CuPy runs each stage as one kernel of ``kernels/cuda/flip_sparse_transfer.cu``
(``sparse_gpu.py``; classify, the boundaries and the extrapolation by ``sparse_cells_gpu.py``;
P2G's scatter in ``flip_sparse_scatter.cu``, its gathers in ``flip_sparse_gather.cu`` and
``flip_sparse_gather_staged.cu``, G2P in ``flip_sparse_g2p.cu`` by ``sparse_g2p_gpu.py``): the
same arithmetic, P2G over particles sorted by cell as 64-bit fixed-point sums (the default
scatter) or float64 sums in another fixed order (the gathers): float32 rounding apart, the same
bits every run.

In a closed domain the sampler clamps to the dense face lattices and the transfers skip
the faces outside them, so sparse and dense runs of one scene do the same arithmetic up
to the order of P2G's float64 sums.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..grid.sample import face_lattice
from ..settings import env_choice
from .grid import AIR, FLUID, SOLID
from . import pushout, sparse_cells_gpu, sparse_g2p_gpu, sparse_gpu

_F = np.float32


def _frame(grid):
    ox, oy, oz = (_F(o) for o in grid.origin)
    return ox, oy, oz, _F(grid.h), _F(1.0 / grid.h)


def _walk(grid, base, dx, dy, dz):
    """Flat index of the cell (dx, dy, dz) ∈ {0, 1}³ from flat cells *base* (−1 stays −1)."""
    xp = grid.xp
    idx = base
    for axis, d in enumerate((dx, dy, dz)):
        if d:
            idx = xp.where(idx >= 0, grid.nbr[2 * axis + 1][xp.maximum(idx, 0)].astype(xp.int64), -1)
    return idx


def segment_sums(idx, values, size, xp):
    """Per flat cell the float64 sum of *values* (list of arrays, summed alike) at *idx*,
    each cell's values added in the order they come: pairs sorted by a unique key
    (index, position), each run summed one element per pass (passes = the longest run)."""
    n = int(idx.shape[0])
    out = [xp.zeros(size, xp.float64) for _ in values]
    if n == 0:
        return out
    if size * n >= 2 ** 63:
        raise InputError(f"{n:,} particle-face pairs on {size:,} cells are too many for one transfer")
    key = idx.astype(xp.int64) * n + xp.arange(n, dtype=xp.int64)
    order = xp.argsort(key)
    sidx = idx[order]
    first = xp.ones(n, bool)
    first[1:] = sidx[1:] != sidx[:-1]
    start = xp.flatnonzero(first)
    count = xp.diff(xp.concatenate([start, xp.asarray([n], dtype=start.dtype)]))
    cells = sidx[start]
    sums = [xp.zeros(start.shape[0], xp.float64) for _ in values]
    sorted_values = [v[order].astype(xp.float64) for v in values]
    for k in range(int(count.max())):  # the one host sync: the longest run
        live = count > k
        at = xp.where(live, start + k, 0)
        for s, v in zip(sums, sorted_values):
            s += xp.where(live, v[at], 0.0)
    for o, s in zip(out, sums):
        o[cells] = s
    return out


def particles_to_grid(grid, pos, vel, c=None, ring=False):
    """Trilinear P2G onto ``grid`` u, v, w (``transfer.particles_to_grid`` on bricks);
    APIC with *c*. Stores and returns the valid masks (uint8). *ring*: the caller extrapolates
    next with ``extrapolate_and_boundaries`` (nothing between that changes the faces), so the
    GPU may run the first ring in the division's pass (``p2g_tail`` fused; the faces and masks
    are then the ring's), or (``p2g_tail`` live) flag the idle bricks for the tail."""
    xp = grid.xp
    if sparse_gpu.available(grid, pos, vel, c):
        tail = p2g_tail() if ring else None
        grid.valid = sparse_gpu.particles_to_grid(grid, pos, vel, c, ring=tail == "fused", live=tail == "live")
        return grid.valid
    h = _F(grid.h)
    cell = grid.cell_coords(pos)
    valid = []
    for comp in range(3):
        g = face_lattice(comp, *cell)
        ok = xp.isfinite(g[0]) & xp.isfinite(g[1]) & xp.isfinite(g[2])
        if grid.closed:  # dense's clamp (a no-op where any face can be touched)
            g_c = [xp.fmin(xp.fmax(a, _F(-2)), _F(n + 2)) for a, n in zip(g, grid.shape)]
        else:
            g_c = [xp.where(ok, a, _F(0)) for a in g]
        base = [xp.floor(a) for a in g_c]
        frac = [a - b for a, b in zip(g_c, base)]
        base = [b.astype(xp.int64) for b in base]
        weights = [(_F(1) - f, f) for f in frac]
        origin_cell = grid.locate(*base)
        idx, wq, ws = [], [], []
        box = grid.boxes[comp] if grid.closed else None
        for dz in (0, 1):
            for dy in (0, 1):
                for dx in (0, 1):
                    ii, jj, kk = base[0] + dx, base[1] + dy, base[2] + dz
                    flat = _walk(grid, origin_cell, dx, dy, dz)
                    m = ok & (flat >= 0)
                    if box is not None:
                        m &= (ii >= 0) & (ii < box[0]) & (jj >= 0) & (jj < box[1]) & (kk >= 0) & (kk < box[2])
                    w = weights[0][dx] * weights[1][dy] * weights[2][dz]
                    q = vel[:, comp]
                    if c is not None:  # APIC: the affine velocity at the face, C_p,a·(x_f − x_p)
                        d = [(node.astype(xp.float32) - a) * h for node, a in zip((ii, jj, kk), g)]
                        q = q + (c[:, comp, 0] * d[0] + c[:, comp, 1] * d[1] + c[:, comp, 2] * d[2])
                    idx.append(flat[m])
                    wq.append((w * q)[m])
                    ws.append(w[m])
        num, den = segment_sums(xp.concatenate(idx), [xp.concatenate(wq), xp.concatenate(ws)], grid.size, xp)
        has = den > 0
        grid[grid.FACES[comp]] = xp.where(has, num / xp.where(has, den, 1.0), 0.0).astype(xp.float32)
        valid.append(has.astype(xp.uint8))
    grid.valid = tuple(valid)
    return grid.valid


def particle_cells(grid, pos):
    """Flat cell of each particle, −1 where its brick is inactive (or, closed, outside
    the box, as the dense grid ignores it) or the position is not finite."""
    xp = grid.xp
    g = grid.cell_coords(pos)
    ok = xp.isfinite(g[0]) & xp.isfinite(g[1]) & xp.isfinite(g[2])
    f = [xp.floor(xp.where(ok, a, _F(0))).astype(xp.int64) for a in g]
    if grid.closed:
        for a, n in zip(f, grid.shape):
            ok &= (a >= 0) & (a < n)
    return xp.where(ok, grid.locate(*f), -1)


def classify(grid, pos) -> None:
    """cell ← SOLID where ``solid``, FLUID where a particle lies and no solid, else AIR."""
    xp = grid.xp
    if sparse_gpu.available(grid, pos):
        return sparse_cells_gpu.classify(grid, pos)
    solid = grid["solid"] != 0
    cell = xp.where(solid, _u8(SOLID), _u8(AIR)).astype(xp.uint8)
    at = particle_cells(grid, pos)
    at = at[at >= 0]
    cell[at[~solid[at]]] = FLUID
    grid["cell"] = cell


def _u8(v):
    return np.uint8(v)


def solid_touch(grid, comp):
    """bool per face of *comp*: a SOLID cell (``solid``) on either side, or the face does
    not exist (beyond a closed domain)."""
    solid = grid["solid"] != 0
    lo = grid.neighbour(grid["solid"], 2 * comp) != 0
    return solid | lo | (grid[grid.EXISTS[comp]] == 0)


def enforce_boundaries(grid, add=None) -> None:
    """Faces touching a SOLID cell take the solid's velocity (walls and missing faces 0);
    with *add* (per component, a body force times Δt: the sim's gravity) added to every
    face first (one kernel on the GPU)."""
    xp = grid.xp
    if sparse_gpu.available(grid):
        return sparse_cells_gpu.enforce_boundaries(grid, add)
    if add is not None:
        for name, a in zip(grid.FACES, add):
            grid[name] = grid[name] + np.float32(a)
    for comp, name in enumerate(grid.FACES):
        grid[name] = xp.where(solid_touch(grid, comp), grid["solid_" + name], grid[name])


def fluid_faces(grid):
    """(u, v, w) uint8: faces with a FLUID cell on either side."""
    if sparse_gpu.available(grid):
        return sparse_cells_gpu.fluid_faces(grid)
    fluid = grid["cell"] == FLUID
    return tuple((fluid | (grid.neighbour(fluid.astype(grid.xp.uint8), 2 * comp) != 0)).astype(grid.xp.uint8)
                 for comp in range(3))


# VOXFX_SPARSE_P2G_TAIL, the P2G stage's tail on the GPU (extrapolate_and_boundaries; helper i24a): "tail"
# (the last ring, the old faces and the boundaries with gravity in one kernel, extrapolate_boundaries_sparse),
# "fused" (that, and the first ring in the division's pass where the caller asks, particles_to_grid(ring=True):
# p2g_scatter_finish_ring) or "apart" (two rings, three copies and enforce_boundaries_sparse); the same bits.
# H100 80GB HBM3 (driver 580.159.04), 8M dam break after 4 substeps, 3,198 bricks, the P2G stage alternating
# (bench/flip_sparse_p2g_stage.py, medians of 7; apart → tail → fused): device alone 0.806 → 0.757 → 0.743 ms,
# as the row (device idle first) 0.883 → 0.822 → 0.807, the host's issue 0.398 → 0.315 → 0.282; the division
# with the ring 0.068 ms against 0.043 + 0.037 apart, the tail's kernel 0.047 against a ring, three copies and
# the boundaries' 0.031. The 8M row alternating (--ab, 4,410 bricks): P2G 1.036 → 0.925 → 0.900 ms
# (apart → tail → fused). The 8M row's pool peak with "fused" 1150 MiB against 916 (coordinator's calls 4, 6
# and 8, H100, --row 8m --steps 8 --warm 2), the same live peak (the pool's caching), "tail" 916 as "apart"
# (session 17, call 1). "tail" was the default from helper h18d to h18f: the 8M Fast frames after the splash (H100, two
# processes, frames 6–11, --stages) spent ~6.2 ms of device on apart's rings, copies and boundaries with their
# gaps against 4.21 ms on tail's (−0.33 ms a frame), user frames 6–11 185 / 186 against 189 / 190 ms.
#
# "live" (helper h18f): "tail" with the pool's idle bricks skipped — those with no particle in themselves or
# their 26 neighbours (sparse_gpu.brick_live, from the binning's counts: two launches), where no face is valid
# through P2G and 7 rings: only the live bricks' sums zeroed (p2g_zero_live_sums), the division leaves the idle
# ones unread (p2g_scatter_finish_live), the first ring does not run there (extrapolate_live_sparse), the tail
# writes their values without reading them (extrapolate_boundaries_live_sparse); after the projection, the two
# rings from the fluid faces of those cell types copy the idle bricks (extrapolate_copy_live_sparse: no masks,
# exists or neighbours read). The same bytes. After the 8M Fast splash the pool holds 12,105 bricks for ~665K
# particle cells (the per-brick margins), 49.7% of them idle; the H100 A/B (bench/flip_sparse_p2g_crowd.py,
# the ways alternating, device alone): the P2G stage 2.043 (apart) → 1.882 (tail) → 1.745 ms (live) after the
# splash, 0.786 → 0.737 → 0.765 at frame 0; the same outputs' digest; the 8M Fast frames not resolved shorter
# (bench/RESULTS.md, "h18f"); its pool in the 8M Fast frames the same as apart's within the pool's caching
# (2.00–2.18 GiB at frame 11). "live" is the default since h18f ("tail" and "apart" the A/B): the session's
# final call (H100, the 8M row, where no brick is idle yet, separate processes tail / live / tail / live) read
# the substep 7.1 / 6.1 / 5.7 / 6.1 ms, bin+gather 0.95 / 0.86 / 0.80 / 0.85, the pool peak 1056 MiB in all four:
# no cost the spread resolves before the splash (h18f: +0.03 ms device alone at frame 0), 0.14 ms less after it.
P2G_TAILS = ("live", "tail", "apart", "fused")


def p2g_tail(mode=None) -> str:
    """The P2G stage's tail (``P2G_TAILS``): *mode*, else ``VOXFX_SPARSE_P2G_TAIL``, else ``P2G_TAILS[0]``."""
    return env_choice("VOXFX_SPARSE_P2G_TAIL", P2G_TAILS, mode)


def extrapolate_and_boundaries(grid, add=None, layers: int = 2, mode=None):
    """The P2G stage's tail: ``extrapolate(grid, layers)``, a copy of the faces (the FLIP
    update's old velocity, returned), then ``enforce_boundaries(grid, add)``; on the GPU
    unless ``p2g_tail(mode)`` is apart, the last ring, the copy and the boundaries in one
    kernel, and one ring fewer where ``particles_to_grid(ring=True)`` ran the first; live, the
    idle bricks its P2G flagged skipped (the same bits)."""
    done = sparse_gpu.p2g_ring_done(grid) if grid.xp is not np else 0  # particles_to_grid(ring=True)'s ring
    live = sparse_gpu.p2g_live(grid) if grid.xp is not np else None  # particles_to_grid(ring=True)'s idle bricks
    tail = p2g_tail(mode)
    if sparse_gpu.available(grid) and int(layers) > done and tail != "apart":
        grid.valid, old = sparse_cells_gpu.extrapolate(grid, int(layers) - done, grid.valid, boundaries=True,
                                                       add=add, live=live if tail == "live" else None)
        return old
    extrapolate(grid, int(layers) - done)
    old = tuple(f.copy() for f in grid.faces())
    enforce_boundaries(grid, add=add)
    return old


def extrapolate(grid, layers: int = 2, valid=None):
    """Valid faces spread into the invalid existing ones, *layers* rings (``transfer.extrapolate``)."""
    xp = grid.xp
    valid = grid.valid if valid is None else valid
    if sparse_gpu.available(grid) and int(layers) > 0:
        live = sparse_cells_gpu.fluid_live(grid, valid)
        grid.valid = sparse_cells_gpu.extrapolate(grid, int(layers), valid, live=live)
        return grid.valid
    out = []
    for comp, name in enumerate(grid.FACES):
        a = grid[name]
        exists = grid[grid.EXISTS[comp]] != 0
        m = (valid[comp] != 0) & exists
        for _ in range(int(layers)):
            total = xp.zeros(a.shape, xp.float32)
            count = xp.zeros(a.shape, xp.int32)
            for d in range(6):
                nb = grid.nbr[d]
                have = nb >= 0
                at = xp.maximum(nb, 0)
                ok = have & m[at]
                total += xp.where(ok, a[at], _F(0))
                count += ok
            grow = ~m & exists & (count > 0)
            a = xp.where(grow, total / xp.maximum(count, 1).astype(xp.float32), a)
            m = m | grow
        grid[name] = a
        out.append(m.astype(xp.uint8))
    grid.valid = tuple(out)
    return grid.valid


def g2p_advect(grid, old, pos, vel, flip_ratio, dt, c=None, before=None, marks=None):
    """FLIP/PIC (or APIC with *c*, ratio 0) update of *vel*, then RK2 through the new faces
    and the push out of solids, in place (``transfer.grid_to_particles_and_advect``; with
    *before*, u_n's flat faces, RK2 in time too: x_m = x + ½Δt·u_n(x),
    x' = x + Δt·½(u_n + u_{n+1})(x_m)). *marks*: the GPU kernel's topology marks
    (``sparse_g2p_marks.prepare``'s; the caller makes them only where the GPU path runs)."""
    if int(pos.shape[0]) == 0:
        return pos, vel
    flip = _F(flip_ratio)
    pic = _F(1) - flip
    dt32 = _F(dt)
    half_dt = _F(0.5) * dt32
    if sparse_gpu.available(grid, pos, vel, c, *old, *(before or ())):
        sparse_g2p_gpu.g2p_advect(grid, old, pos, vel, flip, pic, dt32, half_dt, c, before=before, marks=marks)
        return pos, vel
    faces = tuple(grid[n] for n in grid.FACES)
    boxes = grid.boxes if grid.closed else None
    g = grid.cell_coords(pos)
    ox, oy, oz, _, inv_h = _frame(grid)
    update_velocity(grid, old, g, vel, flip, pic, c)
    origin = (ox, oy, oz)
    x0 = [pos[:, a].copy() for a in range(3)]
    v1 = grid.sample_faces(faces if before is None else before, *g, boxes=boxes)
    xm = [x0[a] + half_dt * v1[a] for a in range(3)]
    gm = [(xm[a] - origin[a]) * inv_h for a in range(3)]
    v2 = grid.sample_faces(faces, *gm, boxes=boxes)
    if before is not None:  # ½(u_n + u_{n+1})(x_m)
        b2 = grid.sample_faces(before, *gm, boxes=boxes)
        v2 = [_F(0.5) * (v2[a] + b2[a]) for a in range(3)]
    x1 = [x0[a] + dt32 * v2[a] for a in range(3)]
    for a, p in enumerate(push_out(grid, x1, x0)):
        pos[:, a] = p
    return pos, vel


def update_velocity(grid, old, g, vel, flip, pic, c=None) -> None:
    """``g2p_advect``'s velocity half (NumPy): *vel* ← flip·(vel + u_new − u_old) + pic·u_new
    at the points *g* (cell units), or APIC's C from u_new's gradient with *c*; in place.
    The air band prototype (``sparse_air_band``) runs it alone, before its own advection."""
    faces = tuple(grid[n] for n in grid.FACES)
    boxes = grid.boxes if grid.closed else None
    inv_h = _frame(grid)[4]
    if c is not None:
        new, grad = grid.sample_faces(faces, *g, boxes=boxes, gradient=True)
        for a in range(3):
            for b in range(3):
                c[:, a, b] = grad[a][b] * inv_h
    else:
        new = grid.sample_faces(faces, *g, boxes=boxes)
    prev = grid.sample_faces(old, *g, boxes=boxes)
    for a in range(3):
        vel[:, a] = flip * (vel[:, a] + (new[a] - prev[a])) + pic * new[a]


def push_out(grid, x, fallback):
    """``transfer.push_out`` on bricks: clamped into a closed domain (PUSH_EPSILON cells
    inside), then out of SOLID cells to the nearest free point of the 26 neighbours
    (ties to the first in z-y-x order); no free neighbour or not finite: *fallback*
    (``pushout.push_out_of``, a cell outside the bricks being free)."""
    xp = grid.xp
    solid = grid["solid"]

    def solid_at(i, j, k):
        at = grid.locate(i, j, k)
        return (at >= 0) & (solid[xp.maximum(at, 0)] != 0)

    return pushout.push_out_of(x, fallback, _frame(grid), grid.shape, grid.closed, solid_at, xp)
