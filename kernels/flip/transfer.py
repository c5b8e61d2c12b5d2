"""Particle ↔ grid transfers of the FLIP solver (seed 003 §4 Alg. 1, §6–7), on the dense
MAC grid of ``grid.py``. NumPy reference here; CuPy arrays run the kernels of
``kernels/cuda/flip_transfer.cu`` (one ``extern "C"`` per stage), which mirror this file
term by term and agree with it to float32 rounding.

Grid coordinates. A world point x has continuous cell coordinates g = (x − origin)/h. The
u-faces sit at integer g_x and half-integer g_y, g_z, so u's own node coordinates are
(g_x, g_y − ½, g_z − ½); v's (g_x − ½, g_y, g_z − ½); w's (g_x − ½, g_y − ½, g_z).

Stages, in the order of a FLIP step:

  ``classify``         cell = SOLID where ``grid.solid``, FLUID where ≥ 1 particle, else AIR.
  ``particles_to_grid`` u_f = Σ_p w_fp q_p / Σ_p w_fp per face (w the trilinear hat of the
                        face's component, q_p = v_p,a, APIC: v_p,a + C_p,a·(x_f − x_p)); faces
                        with Σw = 0 get 0 and are invalid. GPU: gather (seed 003 §6–7, below).
  ``enforce_boundaries`` faces touching a SOLID cell get the solid's velocity, wall faces 0.
  (save old faces, pressure projection: ``pressure.py``)
  ``extrapolate``      valid faces spread into invalid neighbours, layer by layer.
  ``grid_to_particles`` v_p ← r·(v_p + (u_new − u_old)(x_p)) + (1 − r)·u_new(x_p), r the FLIP
                        ratio; APIC: C_p,a = ∇(u_new,a)(x_p) (the gradient of the weights).
  ``advect``           RK2 (midpoint) through u_new, then out of SOLID cells and walls.
  ``grid_to_particles_and_advect`` the two above fused (one GPU kernel); with *before*
                        (``start_velocity``, ``FlipSettings.time_centred_advection``) RK2 in
                        time too: x_m = x + ½Δt·u_n(x), x' = x + Δt·½(u_n + u_new)(x_m).
  ``max_speed``        max |v_p| on the device (CFL substeps).

Particle-to-grid on the GPU (seed 003 §6–7). The paper rasterises by *gather*: scatter
needs atomics, whose write conflicts serialise, and float atomics sum in a run-dependent
order. Here particles are binned by cell with a counting sort (integer atomic counters, a
scan, placement, then each cell's few indices sorted so the order is reproducible), their
position/velocity/C copied into sorted order (the per-subcell copies of §6 with a subcell of
one cell), and one thread per face index (i, j, k) sums the particles of the 3×3×3 cells
around it for its u, v and w faces at once. No float atomics, no host sync; the summation
order is fixed (cells z-y-x, then particle index), so the result is bit-reproducible run to
run. ``method="atomic"`` is the alternative kept for measurement: the same binning, then
one thread per particle adding w·q and w into its 24 faces with float atomics, then a
division (last bits vary run to run). Measured on an H200 (CuPy 14, 256³ grid): with 8.4M
particles binning takes 0.6 ms, gather P2G 3.3 ms in all (APIC 4.4), sorted atomics 3.2
(3.6); with 33.6M, binning 1.5 ms, gather 10.3 ms (APIC 14.3), sorted atomics 10.7 (12.4).
Unsorted atomics run 2.6 / 9.1 ms on particles still in seeding order but 5.5 / 61 ms once
they are shuffled, as they become during a simulation; the gather on shuffled input 3.9 /
14.2 ms.

"""

from __future__ import annotations

import numpy as np

from ..backend import array_module
from ..errors import InputError
from ..grid import mac
from ..grid.sample import face_lattice, sample_faces
from ..settings import env_choice
from .grid import AIR, FLUID, SOLID, DenseGrid
from .particles import KERNELS, PUSH_EPSILON  # noqa: F401  (tests read it from here)
from .pushout import nearest_free_point, push_out  # noqa: F401  (callers import them from here)

_F = np.float32
P2G_METHODS = ("gather", "atomic")


# --------------------------------------------------------------------------- shared helpers


def _frame(grid: DenseGrid):
    """(ox, oy, oz, h, 1/h) as float32: the same bits on both backends."""
    ox, oy, oz = (_F(o) for o in grid.spec.origin)
    return ox, oy, oz, _F(grid.h), _F(1.0 / grid.h)


def _check_particles(grid: DenseGrid, pos, vel=None, c=None):
    xp = grid.xp
    n = int(pos.shape[0]) if pos.ndim == 2 else -1
    want = {"particle positions": (pos, (n, 3)), "particle velocities": (vel, (n, 3)),
            "APIC matrices": (c, (n, 3, 3))}
    for name, (a, shape) in want.items():
        if a is None:
            continue
        if array_module(a) is not xp:
            raise InputError(f"FLIP {name} must live on the same backend as the grid")
        if tuple(a.shape) != shape or a.dtype != np.float32 or not a.flags.c_contiguous:
            raise InputError(f"FLIP {name} must be a C-contiguous float32 array of shape {shape}, "
                             f"not {a.dtype} of shape {tuple(a.shape)}")
    if n >= 2**31:
        raise InputError(f"{n} particles are too many for one transfer (at most 2³¹ − 1)")
    nx, ny, nz = grid.shape
    if (nx + 1) * (ny + 1) * (nz + 1) >= 2**31:
        raise InputError(f"The FLIP grid {nx}×{ny}×{nz} is too large for the transfers (under 2³¹ faces)")
    return n


def _check_faces(grid: DenseGrid, faces, what: str):
    for name, a, ref in zip("uvw", faces, grid.faces()):
        if array_module(a) is not grid.xp or tuple(a.shape) != tuple(ref.shape) or a.dtype != np.float32:
            raise InputError(f"{what} {name} must be float32 of shape {tuple(ref.shape)} on the grid's backend")


def estimate_bytes(spec, n_particles: int, apic: bool = False) -> int:
    """Device memory the GPU transfers allocate beyond the grid and the particles: cell,
    rank and order per particle, sorted copies of pos/vel(/C), per-cell count and start,
    valid masks, and the atomic method's weight sums."""
    nx, ny, nz = spec.shape
    cells = nx * ny * nz
    faces = (nx + 1) * ny * nz + nx * (ny + 1) * nz + nx * ny * (nz + 1)
    per_particle = 3 * 4 + 4 * (6 + (9 if apic else 0))
    return int(n_particles) * per_particle + cells * 2 * 4 + faces * (1 + 4)


# --------------------------------------------------------------------------- classify


def classify(grid: DenseGrid, pos) -> None:
    """``grid.cell`` ← SOLID where ``grid.solid``, FLUID where a particle lies and no solid,
    else AIR. Particles outside the grid (or not finite) mark nothing."""
    _check_particles(grid, pos)
    nx, ny, nz = grid.shape
    if grid.xp is not np:
        KERNELS.launch("cells_from_solid", grid.cell.size, (grid.solid, grid.cell, np.int64(grid.cell.size)))
        n = pos.shape[0]
        if n:
            KERNELS.launch("mark_fluid_cells", n, (pos, np.int64(n), np.int32(nx), np.int32(ny), np.int32(nz),
                                                   *_frame(grid), grid.solid, grid.cell))
        return
    gx, gy, gz = grid.cell_coords(pos)
    with np.errstate(invalid="ignore"):
        fx, fy, fz = np.floor(gx), np.floor(gy), np.floor(gz)
        inside = ((fx >= 0) & (fx < nx) & (fy >= 0) & (fy < ny) & (fz >= 0) & (fz < nz))
    lin = ((fz[inside].astype(np.int64) * ny + fy[inside].astype(np.int64)) * nx + fx[inside].astype(np.int64))
    fluid = np.zeros(grid.cell.size, bool)
    fluid[lin] = True
    solid = grid.solid.reshape(-1) != 0
    grid.cell.reshape(-1)[...] = np.where(solid, SOLID, np.where(fluid, FLUID, AIR)).astype(np.uint8)


# --------------------------------------------------------------------------- particles → grid


def particles_to_grid(grid: DenseGrid, pos, vel, c=None, method: str = "gather"):
    """Trilinear P2G onto ``grid.u/v/w`` (module notes); APIC when *c* (N, 3, 3) is given,
    c[p, a, :] the gradient of component a. Returns ``(valid_u, valid_v, valid_w)`` (uint8,
    1 where Σw > 0), also stored as ``grid.valid_u/v/w``. *method*: GPU only, "gather"
    (default, deterministic) or "atomic" (module notes)."""
    n = _check_particles(grid, pos, vel, c)
    if method not in P2G_METHODS:
        raise InputError(f"P2G method must be one of {', '.join(P2G_METHODS)}, not {method!r}")
    if grid.xp is not np:
        valid = _p2g_gpu(grid, pos, vel, c, n, method)
    else:
        valid = tuple(_p2g_component(grid, comp, pos, vel, c) for comp in range(3))
    grid.valid_u, grid.valid_v, grid.valid_w = valid
    return valid


def _p2g_component(grid: DenseGrid, comp: int, pos, vel, c):
    face = grid.faces()[comp]
    sz, sy, sx = face.shape
    h = _F(grid.h)
    g = face_lattice(comp, *grid.cell_coords(pos))
    ok = np.isfinite(g[0]) & np.isfinite(g[1]) & np.isfinite(g[2])
    # Clamped where no face can be touched any more (no-op inside): integer-safe floors.
    gc = [np.fmin(np.fmax(a, _F(-2)), _F(n + 2)) for a, n in zip(g, grid.shape)]
    base = [np.floor(a) for a in gc]
    frac = [a - b for a, b in zip(gc, base)]
    base = [b.astype(np.int64) for b in base]
    weights = [(_F(1) - f, f) for f in frac]  # hat weights of the two nodes along each axis
    num = np.zeros(face.size, np.float64)  # float64 sums: the reference rounds once, at the end
    den = np.zeros(face.size, np.float64)
    for dz in (0, 1):
        for dy in (0, 1):
            for dx in (0, 1):
                ii, jj, kk = base[0] + dx, base[1] + dy, base[2] + dz
                m = ok & (ii >= 0) & (ii < sx) & (jj >= 0) & (jj < sy) & (kk >= 0) & (kk < sz)
                w = weights[0][dx] * weights[1][dy] * weights[2][dz]
                q = vel[:, comp]
                if c is not None:  # APIC: the particle's affine velocity at the face (x_f − x_p)
                    d = [(node.astype(np.float32) - a) * h for node, a in zip((ii, jj, kk), g)]
                    q = q + (c[:, comp, 0] * d[0] + c[:, comp, 1] * d[1] + c[:, comp, 2] * d[2])
                lin = ((kk * sy + jj) * sx + ii)[m]
                num += np.bincount(lin, weights=(w * q)[m], minlength=face.size)
                den += np.bincount(lin, weights=w[m], minlength=face.size)
    has = den > 0
    face.reshape(-1)[...] = np.where(has, num / np.where(has, den, 1.0), 0.0).astype(np.float32)
    return has.reshape(face.shape).astype(np.uint8)


def _p2g_gpu(grid: DenseGrid, pos, vel, c, n, method):
    import cupy as cp

    nx, ny, nz = grid.shape
    frame = _frame(grid)
    dims = (np.int32(nx), np.int32(ny), np.int32(nz))
    apic = c is not None
    valid = tuple(cp.empty(f.shape, cp.uint8) for f in grid.faces())
    if n == 0:
        for f, m in zip(grid.faces(), valid):
            f.fill(0)
            m.fill(0)
        return valid
    spos, svel, sc, start, count = bin_particles(grid, pos, vel, c)
    if method == "gather":
        box = (nx + 1) * (ny + 1) * (nz + 1)
        KERNELS.launch("particles_to_grid_gather", box,
                       (spos, svel, sc, np.int32(apic), start, count, *dims, *frame, grid.u, grid.v, grid.w, *valid))
        return valid
    weight = tuple(cp.zeros(f.shape, cp.float32) for f in grid.faces())
    for f in grid.faces():
        f.fill(0)
    KERNELS.launch("particles_to_grid_scatter", n, (spos, svel, sc, np.int32(apic), np.int64(n), *dims, *frame,
                                                    grid.u, grid.v, grid.w, *weight))
    for f, wsum, m in zip(grid.faces(), weight, valid):
        KERNELS.launch("divide_by_weight", f.size, (f, wsum, m, np.int64(f.size)))
    return valid


def bin_particles(grid: DenseGrid, pos, vel, c=None):
    """GPU: particles sorted by cell (seed 003 §6 with one-cell subcells) by a counting sort:
    count per cell (atomic counters), exclusive scan, place, then each cell's few indices
    sorted so the order is the same on every run. Returns sorted copies of pos, vel and C
    (a 1-element dummy without C) and per-cell ``start``/``count`` (int32). Cells are clamped
    into the grid, so a particle just outside lands in the boundary cell whose faces it
    touches. No host sync."""
    import cupy as cp

    nx, ny, nz = grid.shape
    n = int(pos.shape[0])
    cells = grid.cell.size
    count = cp.zeros(cells, cp.int32)
    cell_of = cp.empty(n, cp.int32)
    rank = cp.empty(n, cp.int32)
    KERNELS.launch("count_particles_per_cell", n,
                   (pos, np.int64(n), np.int32(nx), np.int32(ny), np.int32(nz), *_frame(grid), count, cell_of, rank))
    start = cp.cumsum(count, dtype=cp.int32)
    start -= count  # exclusive scan
    order = cp.empty(n, cp.int32)
    KERNELS.launch("place_particles", n, (cell_of, rank, start, np.int64(n), order))
    KERNELS.launch("sort_cell_segments", cells, (order, start, count, np.int64(cells)))
    spos = cp.empty_like(pos)
    svel = cp.empty_like(vel)
    apic = c is not None
    sc = cp.empty_like(c) if apic else cp.zeros(1, cp.float32)
    KERNELS.launch("copy_sorted_particles", n,
                   (order, np.int64(n), pos, vel, c if apic else sc, np.int32(apic), spos, svel, sc))
    return spos, svel, sc, start, count


# --------------------------------------------------------------------------- boundaries, extrapolation


def enforce_boundaries(grid: DenseGrid) -> None:
    """Faces between a SOLID cell and any cell get the solid's velocity (``grid.solid_u/v/w``);
    faces on the domain walls get 0 (the walls are static solids)."""
    nx, ny, nz = grid.shape
    if grid.xp is not np:
        for axis, (f, sf) in enumerate(zip(grid.faces(), (grid.solid_u, grid.solid_v, grid.solid_w))):
            KERNELS.launch("enforce_boundaries", f.size, (f, sf, grid.solid, np.int32(nx), np.int32(ny), np.int32(nz),
                                                          np.int32(axis)))
        return
    touching = mac.faces_touching(grid.solid != 0)
    walls = mac.faces_touching(np.zeros(grid.cell.shape, bool), outside=True)
    for f, sf, solid, wall in zip(grid.faces(), (grid.solid_u, grid.solid_v, grid.solid_w), touching, walls):
        f[...] = np.where(wall, _F(0), np.where(solid, sf, f))


def fluid_faces(grid: DenseGrid):
    """(valid_u, valid_v, valid_w) uint8: faces with a FLUID cell on either side."""
    xp = grid.xp
    return mac.faces_touching(grid.cell == FLUID, dtype=xp.uint8)


def extrapolate(grid: DenseGrid, layers: int = 2, valid=None):
    """Spread valid face velocities into invalid faces, *layers* rings deep: each ring, an
    invalid face with valid neighbours (same component, 6-neighbourhood, valid in the
    previous ring) takes their mean (summed in the order −x, +x, −y, +y, −z, +z) and becomes
    valid. *valid*: (valid_u, valid_v, valid_w); default ``grid.valid_u/v/w`` from
    ``particles_to_grid``. The extended masks are stored back on the grid and returned."""
    layers = int(layers)
    if layers < 0:
        raise InputError(f"Extrapolation layers must be ≥ 0, not {layers}")
    if valid is None:
        valid = tuple(getattr(grid, f"valid_{a}", None) for a in "uvw")
        if any(m is None for m in valid):
            raise InputError("extrapolate needs valid-face masks: run particles_to_grid first or pass valid=")
    xp = grid.xp
    out = []
    for f, m in zip(grid.faces(), valid):
        if array_module(m) is not xp or tuple(m.shape) != tuple(f.shape):
            raise InputError(f"Valid-face masks must match the faces' shapes {tuple(f.shape)} and backend")
        m = xp.ascontiguousarray(m, dtype=xp.uint8)
        if xp is not np:
            m = _extrapolate_gpu(f, m, layers)
        else:
            m = _extrapolate_cpu(f, m.astype(bool), layers).astype(np.uint8)
        out.append(m)
    grid.valid_u, grid.valid_v, grid.valid_w = out
    return tuple(out)


def _extrapolate_cpu(a, valid, layers):
    for _ in range(layers):
        total = np.zeros(a.shape, np.float32)
        count = np.zeros(a.shape, np.int32)
        for ax in (2, 1, 0):  # x, y, z
            for step in (-1, 1):  # the neighbour at index − 1, then + 1
                val = np.zeros(a.shape, np.float32)
                ok = np.zeros(a.shape, bool)
                dst = [slice(None)] * 3
                src = [slice(None)] * 3
                if step < 0:
                    dst[ax], src[ax] = slice(1, None), slice(0, -1)
                else:
                    dst[ax], src[ax] = slice(0, -1), slice(1, None)
                val[tuple(dst)] = a[tuple(src)]
                ok[tuple(dst)] = valid[tuple(src)]
                total += np.where(ok, val, _F(0))
                count += ok
        grow = ~valid & (count > 0)
        a[grow] = total[grow] / count[grow].astype(np.float32)
        valid = valid | grow
    return valid


def _extrapolate_gpu(a, valid, layers):
    import cupy as cp

    sz, sy, sx = a.shape
    values = (a, cp.empty_like(a))  # double buffers: ring l reads [l % 2], writes [(l + 1) % 2]
    masks = (valid.copy(), cp.empty_like(valid))
    for ring in range(layers):
        src, dst = ring % 2, (ring + 1) % 2
        KERNELS.launch("extrapolate_faces", a.size, (values[src], masks[src], values[dst], masks[dst], np.int32(sx),
                                                     np.int32(sy), np.int32(sz)))
    if layers % 2:
        a[...] = values[1]
    return masks[layers % 2]


# --------------------------------------------------------------------------- grid → particles, advection


def grid_to_particles(grid: DenseGrid, old_u, old_v, old_w, pos, vel, flip_ratio, c=None):
    """FLIP/PIC update of *vel* in place (seed 003 Alg. 1):
    v_p ← r·(v_p + (u − u_old)(x_p)) + (1 − r)·u(x_p), r = *flip_ratio*, u the grid's
    faces. With *c* (APIC; use r = 0 for pure APIC), also C_p,a ← ∇u_a(x_p) in place.
    Returns *vel*."""
    _g2p_advect(grid, (old_u, old_v, old_w), pos, vel, flip_ratio, None, c)
    return vel


def advect(grid: DenseGrid, pos, dt):
    """Move *pos* in place by RK2 (midpoint) through the grid's velocity for *dt* seconds,
    then out of solids (``push_out``). Returns *pos*."""
    _g2p_advect(grid, None, pos, None, None, dt, None)
    return pos


def grid_to_particles_and_advect(grid: DenseGrid, old_u, old_v, old_w, pos, vel, flip_ratio, dt, c=None,
                                 before=None):
    """``grid_to_particles`` then ``advect``, fused into one pass (one GPU kernel).
    *before*: the faces of u_n, the velocity at the substep's start (``start_velocity``):
    the particles then move through the velocity linear in time from u_n to the grid's
    u_{n+1}, RK2 in time and space, x_m = x + ½Δt·u_n(x), x' = x + Δt·½(u_n + u_{n+1})(x_m),
    instead of through u_{n+1} for the whole Δt (x + Δt·(v + aΔt) where the liquid
    accelerates, aΔt²/2 ahead each substep: ``bench/flip_advection.py``)."""
    if before is not None:
        _check_faces(grid, before, "Substep start velocity")
    _g2p_advect(grid, (old_u, old_v, old_w), pos, vel, flip_ratio, dt, c, before)
    return pos, vel


def start_velocity(faces, fluid, kept):
    """u_n for the time-centred advection (``grid_to_particles_and_advect``'s *before*),
    dense or sparse faces alike: *kept* = (faces, fluid-face masks) of the last substep's
    projected, extrapolated velocity where a face touched FLUID then and touches it now
    (*fluid*: this substep's masks), the new *faces* (u_{n+1}) elsewhere — in the air
    band and where the liquid arrived or left u_n is an extrapolation of another liquid's
    shape, not divergence-free here (``bench/flip_advection.py``'s ``prev`` lost 6.5% of
    the dam break's volume at CFL 4). None when nothing was kept: today's advection."""
    if kept is None:
        return None
    xp = array_module(faces[0])
    prev, was = kept
    if xp is not np:  # one select a component (_kept_select) where the dtypes are the kernel's
        return tuple(_kept_select(xp)(p, a, b, f) if _selectable(p, a, b, f) else xp.where((a != 0) & (b != 0), p, f)
                     for p, a, b, f in zip(prev, was, fluid, faces))
    return tuple(xp.where((a != 0) & (b != 0), p, f) for p, a, b, f in zip(prev, was, fluid, faces))


_SELECT: dict = {}


def _kept_select(cp):
    """CuPy: ``start_velocity``'s select, ``where((was != 0) & (now != 0), kept, face)``, as one
    elementwise kernel a component: the same values, bit for bit (a select copies one input), in
    one pass instead of four (two compares, an and, the where) and their three temporaries. The
    8M Fast frames after the splash spent ~0.33 ms a substep of device time between the
    extrapolation and G2P on the four passes over the pool's ~5M faces a component and the fluid
    faces (H100, helper h17b: ``--stages``' device between the stages, "before g2p")."""
    if "k" not in _SELECT:
        _SELECT["k"] = cp.ElementwiseKernel("float32 kept, uint8 was, uint8 now, float32 face", "float32 out",
                                            "out = (was != 0 && now != 0) ? kept : face", "voxfx_start_velocity")
    return _SELECT["k"]


def _selectable(p, a, b, f) -> bool:
    """Whether ``_kept_select`` takes these arrays as they are (float32 faces, uint8 masks, one shape)."""
    return (p.dtype == np.float32 and f.dtype == np.float32 and a.dtype == np.uint8 and b.dtype == np.uint8
            and p.shape == a.shape == b.shape == f.shape)


def _g2p_advect(grid: DenseGrid, old, pos, vel, flip_ratio, dt, c, before=None):
    do_g2p, do_advect = old is not None, dt is not None
    n = _check_particles(grid, pos, vel if do_g2p else None, c if do_g2p else None)
    if do_g2p:
        _check_faces(grid, old, "Old grid velocity")
        flip_ratio = float(flip_ratio)
        if not (0.0 <= flip_ratio <= 1.0):
            raise InputError(f"FLIP ratio must lie in [0, 1], not {flip_ratio}")
    if do_advect:
        dt = float(dt)
        if not np.isfinite(dt) or dt < 0:
            raise InputError(f"Time step must be a finite number of seconds ≥ 0, not {dt}")
    flip = _F(flip_ratio if do_g2p else 0.0)
    pic = _F(1) - flip
    dt32 = _F(dt if do_advect else 0.0)
    half_dt = _F(0.5) * dt32
    if grid.xp is not np:
        if n == 0:
            return
        import cupy as cp

        dummy = cp.zeros(1, cp.float32)
        nx, ny, nz = grid.shape
        old = old if do_g2p else (dummy, dummy, dummy)
        centred = do_advect and before is not None
        KERNELS.launch("g2p_advect", n,
                       (pos, vel if do_g2p else dummy, c if (do_g2p and c is not None) else dummy,
                        np.int64(n), np.int32(do_g2p), np.int32(do_g2p and c is not None),
                        np.int32(do_advect), grid.u, grid.v, grid.w, *old, grid.solid,
                        np.int32(nx), np.int32(ny), np.int32(nz), *_frame(grid), flip, pic, dt32, half_dt,
                        np.int32(centred), *(before if centred else (dummy, dummy, dummy))))
        return
    faces = grid.faces()
    g = grid.cell_coords(pos)
    if do_g2p:
        inv_h = _frame(grid)[4]
        if c is not None:
            new, grad = sample_faces(faces, *g, gradient=True)
            for a in range(3):
                for b in range(3):
                    c[:, a, b] = grad[a][b] * inv_h
        else:
            new = sample_faces(faces, *g)
        prev = sample_faces(old, *g)
        for a in range(3):
            vel[:, a] = flip * (vel[:, a] + (new[a] - prev[a])) + pic * new[a]
    if do_advect:
        ox, oy, oz, _, inv_h = _frame(grid)
        origin = (ox, oy, oz)
        x0 = [pos[:, a].copy() for a in range(3)]
        v1 = sample_faces(faces if before is None else before, *g)  # u_n(x) (centred)
        xm = [x0[a] + half_dt * v1[a] for a in range(3)]
        gm = [(xm[a] - origin[a]) * inv_h for a in range(3)]
        v2 = sample_faces(faces, *gm)
        if before is not None:  # ½(u_n + u_{n+1})(x_m): the velocity at the substep's middle
            b2 = sample_faces(before, *gm)
            v2 = [_F(0.5) * (v2[a] + b2[a]) for a in range(3)]
        x1 = [x0[a] + dt32 * v2[a] for a in range(3)]
        for a, p in enumerate(push_out(grid, x1, x0)):
            pos[:, a] = p


SPEED_ITEMS = 8  # particles a thread of max_speed_squared_blocks
SPEED_MAXIMA = ("blocks", "warps")  # VOXFX_MAX_SPEED: one atomicMax a block (default) or a warp (the A/B baseline)


def speed_max_mode() -> str:
    """``VOXFX_MAX_SPEED``: how ``max_speed`` reduces on the device (``SPEED_MAXIMA``; the same
    bits either way)."""
    return env_choice("VOXFX_MAX_SPEED", SPEED_MAXIMA)


def max_speed(vel):
    """max_p |v_p| as a 0-d float32 array on *vel*'s device (0 for no particles): the
    caller's ``float()`` is the one host sync of a CFL substep count."""
    xp = array_module(vel)
    n = int(vel.shape[0])
    if xp is not np:
        bits = xp.zeros(1, xp.uint32)
        if n and speed_max_mode() == "blocks":  # a block's max first: one atomic a block (the same bits)
            blocks = min(-(-n // (SPEED_ITEMS * KERNELS.threads)), 1 << 20)
            KERNELS.launch_grid("max_speed_squared_blocks", (blocks,), (KERNELS.threads,), (vel, np.int64(n), bits))
        elif n:
            KERNELS.launch("max_speed_squared", n, (vel, np.int64(n), bits))
        return xp.sqrt(bits.view(xp.float32)[0])
    if n == 0:
        return np.sqrt(np.zeros((), np.float32))
    s = vel[:, 0] * vel[:, 0] + vel[:, 1] * vel[:, 1] + vel[:, 2] * vel[:, 2]
    return np.asarray(np.sqrt(np.max(s)), np.float32)
