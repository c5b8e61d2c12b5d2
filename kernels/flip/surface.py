"""The liquid surface from FLIP particles: a particle level set on a grid (Zhu & Bridson
2005, "Animating sand as a fluid", §4), light smoothing, and the liquid volume it holds.

For every grid node x (a voxel centre of the surfacing ``GridSpec``, usually 1–2× the
simulation resolution) and the particles p within the kernel radius R:

    s_p = |x − x_p| / R,        k(s) = max(0, (1 − s²)³)
    w_p = k(s_p) / Σ_q k(s_q)
    x̄ = Σ w_p x_p,              r̄ = Σ w_p r_p
    φ(x) = |x − x̄| − r̄          (negative inside the liquid)

A node with no particle within R gets φ = +band (outside, "far"); every φ is clamped to
[−band, +band], a narrow band as OpenVDB stores level sets (``addon.writeback.write_vdb``
keeps ±band as inactive tiles). Deep inside, φ is about −r̄, not a true distance: only
the zero crossing and its neighbourhood are meaningful, which is all meshing needs.

Choosing the radii (``surface_radii``). Just above a flat liquid surface the kernel sees
a half-ball of particles whose k-weighted mean depth is
  ½·R·∫u³(1−u²)³du / ∫u²(1−u²)³du = ½·R·(1/40)/(16/315) = 0.246·R,
so r = R/4 puts the zero crossing on the liquid's boundary — half a particle spacing
above the top layer — whatever R is (measured on jittered lattices: within 0.1 spacing).
R sets the smoothness: R = 4·d for particle spacing d (8 particles per cell of size h:
d = h/2, so R = 2h, Zhu & Bridson's own choice) and r = d. Convex regions come out a
little small, by about 0.2 voxel for a ball of 8 voxels radius (R = 4 voxels) and less
as the radius of curvature grows (≈ R²/ρ): droplets lose some volume, flat water keeps
its level.

Both backends compute node positions and particle offsets in float32 with the same
operations (the CUDA source is compiled with ``--fmad=false``), so they include exactly
the same particles in each node's sums; the sums are added in different orders (float64
on the CPU, float32 on the GPU), so φ agrees to float32 accuracy (about 1e-6·R).

* **CPU** (NumPy reference): node slabs along z; each particle scatters its weight to the
  nodes whose centre may lie within R of it (squared offsets per axis, summed over the
  reachable node offsets), summed per slab with ``bincount`` — chunked, so memory stays
  bounded.
* **GPU** (``surface_gpu.py``, ``cuda/flip_surface.cu``, ``flip_surface_lean.cu``): particles are
  binned into cells of edge max(R/2, voxel), packed as float4 (x, y, z, r) in cell order, then one fused kernel
  gathers for every node over the cells its R-sphere touches (rows of cells culled against
  the sphere) and writes φ — no atomics. ``LEVEL_SET`` "bricks" (and "lean", the default,
  the same with a branch-free gather and a leaner binning, ``surface_gpu``'s module text;
  ``VOXFX_LEVEL_SET`` picks): the walls' mirror images are made inside the binning
  kernels (no image arrays), the binning is a counting sort whose cells are then put in a
  stable sort's order, only the node tiles (``surface_gpu.TILE``, 32 × 4 × 4 nodes: a warp is a row
  of 32 along x) that some particle's sphere may reach are gathered (the rest is +band by
  construction), smoothed only there and in the tiles beside them, with the box cut
  fused into the last smoothing step; one host read (the point count) in all. "legacy":
  key per particle, ``argsort``, cell starts by ``searchsorted``, the gather over every
  node, mirror images and box cut as array code.
  All put the same particles in the same order into every cell and sum a node alike:
  the same φ to the bit.
* **Interior skip** (``surface_interior``, ``VOXFX_LEVEL_SET_INTERIOR``, on by default, "0" off; the
  *interior* argument): nodes whose neighbourhood of binning cells is full of points get
  φ = −band without a gather, alike on both backends; the signs and the nodes beside the
  zero crossing are unchanged (tests), the interior becomes −band as OpenVDB stores it.

Closed against the walls (``closed_level_set``, what a bake writes): the liquid lives in a
closed box, so its surface must be closed where it touches the walls and meet them there.
Particles within R of a wall get mirror images beyond it, φ is computed on the grid grown
by ``WALL_CELLS`` beyond every wall, and cut by the box: φ ← max(φ, d_box). Every
contouring of that grid (Grid to Mesh, OpenVDB's volumeToMesh, marching cubes) closes
against the walls, and ``liquid_volume`` of it measures the rendered volume, the half cell
along every wall included. Without it the level set ended at the outermost voxel centres:
the mesh had boundary edges along the walls, half a cell short of them, and where
OpenVDB's mesher met its +band background beyond the last voxel it raised fins up to the
band (3 cells) at the tank's corners, where the one-sided kernel left φ only weakly
negative (−0.17 cell, against −0.47 in the open).

Smoothing: ``smooth_iterations`` explicit steps of mean-curvature flow,
φ ← φ + Δτ·κ|∇φ| with κ|∇φ| = Δφ − ∇φᵀ(∇²φ)∇φ / |∇φ|² (central differences, Δτ = 1/6
voxel², edge values repeated at the grid boundary). Unlike a plain Laplacian it moves
every level set by its own curvature only: a flat surface stays exactly where it is even
though a Zhu–Bridson φ is not a distance (a Laplacian step moves it, because φ is flat
inside and steep outside), the particle-scale bumps (high curvature) melt, and a sphere
of radius ρ voxels shrinks by Δτ·2/ρ = 1/(3ρ) voxel per step (0.04 voxel for ρ = 8).
Nodes where |∇φ| vanishes (far field, deep inside) are left alone, so far nodes stay
exactly +band.
"""

from __future__ import annotations

import math

import numpy as np

from .. import backend
from ..errors import InputError
from ..grid import GridSpec
from ..progress import report

BAND_VOXELS = 3.0  # default narrow-band half-width, as OpenVDB's own level sets
SMOOTH_STEP = np.float32(1.0 / 6.0)  # Δτ of one mean-curvature step, in voxel²
FLAT_GRADIENT = 1e-4  # |∇φ| (metres per metre) below which a node is not smoothed
WALL_CELLS = 3  # closed_level_set: cells of the surface grid beyond each wall (the narrow band)
KERNEL_PER_RADIUS = 4.0  # R = 4 r: a flat surface lands on the liquid's boundary (module text)
SLAB_VOXELS = 1 << 21  # CPU: nodes accumulated at once (5 float64 sums each)
CHUNK_PAIRS = 1 << 21  # CPU: (particle, node offset) pairs tested at once
SUBDIVISIONS = 8  # liquid_volume: sub-samples per axis in a dual cell the surface crosses
CHUNK_CELLS = 1 << 14  # liquid_volume: crossed cells sub-sampled at once


# --------------------------------------------------------------------------- public API

def particle_level_set(pos, spec: GridSpec, radius, kernel_radius=None, xp=None, smooth_iterations=1,
                       band=None, progress=None, interior=None, host=None):
    """φ (nz, ny, nx) float32 on *xp* (default: the current backend) over *spec*'s voxel
    centres: the Zhu–Bridson particle level set, negative inside the liquid.

    *pos* (N, 3) particle positions in metres; *radius* the particle radius r, one number
    or (N,) per particle; *kernel_radius* R (default 4× the largest radius; see
    ``surface_radii``); *band* the narrow-band half-width in metres (default 3 voxels):
    far nodes get +band and every value is clamped to ±band. *smooth_iterations* steps of
    mean-curvature smoothing (module text). Raises ``InputError`` for non-finite
    particles or bad radii. *progress* hears per slab on the CPU (False: ``Cancelled``).
    *interior*: skip the nodes deep inside (φ = −band, no gather; ``surface_interior``),
    default ``VOXFX_LEVEL_SET_INTERIOR``. *host*: a ``surface_overlap.HostSink`` the GPU way may
    fill with φ while making it (its ``filled`` says whether it did).
    """
    from .surface_gpu import _bricks_gpu, _level_set_gpu, _mark, level_set_mode
    from .surface_interior import interior_nodes_cpu, interior_rule, interior_skip

    xp = xp or backend.xp()
    radii, r_max, scalar = _radii(radius, pos)
    R = float(KERNEL_PER_RADIUS * r_max if kernel_radius is None else kernel_radius)
    if not (math.isfinite(R) and R > 0.0):
        raise InputError(f"the surface kernel radius must be a positive number of metres, not {kernel_radius!r}")
    h = float(spec.voxel_size)
    band = BAND_VOXELS * h if band is None else float(band)
    if not (math.isfinite(band) and band > 0.0):
        raise InputError(f"the level set band must be a positive number of metres, not {band!r}")
    smooth_iterations = int(smooth_iterations)
    if smooth_iterations < 0:
        raise InputError(f"smoothing iterations must be 0 or more, not {smooth_iterations}")
    rule = interior_rule(spec, R, r_max, smooth_iterations) if interior_skip(interior) else None
    if xp is np:
        pos = _positions(backend.to_numpy(pos), np)
        if not scalar:
            radii = backend.to_numpy(radii)
        phi = _level_set_cpu(pos, radii, spec, R, band, progress)
        if rule is not None:
            phi[interior_nodes_cpu(pos, spec, R, rule)] = np.float32(-band)
        for _ in range(smooth_iterations):
            phi = _smooth_cpu(phi, spec, band)
        return phi
    if level_set_mode() != "legacy":  # bricks, lean
        return _bricks_gpu(_shape_checked(xp.asarray(pos), xp), radii if scalar else xp.asarray(radii), spec, R,
                           band, smooth_iterations, interior=rule, host=host)
    pos = _positions(xp.asarray(pos), xp)
    if not scalar:
        radii = xp.asarray(radii)
    _mark("finite check")
    return _level_set_gpu(pos, radii, spec, R, band, smooth_iterations, interior=rule)


def surface_grid(spec: GridSpec, padding: int = None) -> GridSpec:
    """The grid ``closed_level_set`` writes: the simulation grid *spec* grown by *padding*
    cells (default ``WALL_CELLS``) beyond every wall, same cell size and alignment."""
    p = WALL_CELLS if padding is None else int(padding)
    if p < 1:
        raise InputError(f"the surface grid needs at least one cell beyond the walls, not {p}")
    h = spec.voxel_size
    return GridSpec(tuple(o - p * h for o in spec.origin), h, tuple(n + 2 * p for n in spec.shape))


def closed_level_set(pos, spec: GridSpec, radius, kernel_radius=None, xp=None, smooth_iterations=1, band=None,
                     padding=None, progress=None, grid=None, interior=None, host=None):
    """φ of the liquid in the closed box *spec* (the simulation grid: its faces are the
    walls), over ``surface_grid(spec, padding)``: a level set whose zero crossing is a
    closed surface that meets the walls where the liquid touches them, as FLIP Fluids'
    and Mantaflow's meshes are.

    1. Walls as mirrors: every particle within R (+1 cell) of a wall gets its mirror
       image beyond it (axis by axis, so edges and corners get theirs too). The liquid
       then continues through the wall as a symmetric (Neumann) extension, so next to a
       wall the kernel sees a full neighbourhood: a still surface stays flat up to the
       wall (no rim or fin where the kernel would see a half or quarter of it), and φ
       inside next to a wall is the deep-liquid value −r̄, not a weak −0.2 r.
    2. The Zhu–Bridson level set of particles and images over the grown grid, smoothed
       (``particle_level_set``).
    3. Cut by the walls: φ ← max(φ, d_box), d_box the signed distance to the box
       (negative inside): a CSG intersection. Outside the box φ ≥ d_box > 0, so the
       surface is closed there, and where liquid touches a wall (φ ≈ −r̄ at the first
       node inside, d_box = +½ cell at the first outside) the crossing lies at the wall
       to within (½ − r̄/h)/(½ + r̄/h) of a cell (0.02 cell for 8 particles per cell).
       Inside, d_box ≤ −½ cell ≤ φ for r ≤ ½ cell: nothing changes there.

    Same arguments as ``particle_level_set`` (*band* also bounds d_box), *padding* cells
    beyond each wall (default ``WALL_CELLS``, the narrow band); *grid*: another grid on the
    box's lattice to evaluate φ over (a sparse liquid's region in a large box,
    ``sparse_output.liquid_region``), the walls still *spec*'s; *interior* and *host* as there (the
    images count in the cells)."""
    from .surface_gpu import _bricks_gpu, _mark, level_set_mode
    from .surface_interior import interior_rule, interior_skip

    xp = xp or backend.xp()
    grown = surface_grid(spec, padding) if grid is None else grid
    radii, r_max, scalar = _radii(radius, pos)
    R = float(KERNEL_PER_RADIUS * r_max if kernel_radius is None else kernel_radius)
    h = float(spec.voxel_size)
    band = BAND_VOXELS * h if band is None else float(band)
    if xp is not np and level_set_mode() != "legacy":  # images, level set and cut in the kernels
        if not (math.isfinite(R) and R > 0.0):
            raise InputError(f"the surface kernel radius must be a positive number of metres, not {kernel_radius!r}")
        if not (math.isfinite(band) and band > 0.0):
            raise InputError(f"the level set band must be a positive number of metres, not {band!r}")
        if int(smooth_iterations) < 0:
            raise InputError(f"smoothing iterations must be 0 or more, not {int(smooth_iterations)}")
        rule = interior_rule(grown, R, r_max, int(smooth_iterations)) if interior_skip(interior) else None
        return _bricks_gpu(_shape_checked(xp.asarray(pos), xp), radii if scalar else xp.asarray(radii), grown, R,
                           band, int(smooth_iterations), walls=spec, reach=R + h, interior=rule, host=host)
    pos = xp.asarray(pos)
    ghosts, source = mirror_at_walls(pos, spec, R + h, xp)
    if not scalar:
        radii = xp.concatenate([xp.asarray(radii), xp.asarray(radii)[source]])
    points = xp.concatenate([pos.astype(xp.float32), ghosts])
    _mark("mirror images")
    phi = particle_level_set(points, grown, radii if not scalar else radius, R, xp=xp,
                             smooth_iterations=smooth_iterations, band=band, progress=progress,
                             interior=interior_skip(interior))
    phi = xp.maximum(phi, box_distance(grown, spec, band, xp))
    _mark("box cut")
    return phi


def mirror_at_walls(pos, spec: GridSpec, reach: float, xp):
    """((G, 3) float32 mirror images across the walls of *spec*'s box of the particles
    within *reach* of a wall, (G,) index of each image's particle). Axis by axis over the
    particles and the images so far: a particle near an edge gets 3 images, near a
    corner 7. x' = 2·wall − x in float32, alike on both backends."""
    f = np.float32
    pos = xp.ascontiguousarray(pos, dtype=xp.float32)
    points, source = pos, xp.arange(len(pos))
    images, owners = [], []
    for axis in range(3):
        lo = f(spec.origin[axis])
        hi = f(spec.origin[axis] + spec.shape[axis] * spec.voxel_size)
        new, new_src = [], []
        for wall, near in ((lo, points[:, axis] < lo + f(reach)), (hi, points[:, axis] > hi - f(reach))):
            take = xp.flatnonzero(near)
            mirrored = points[take]
            mirrored[:, axis] = (f(2) * wall) - mirrored[:, axis]
            new.append(mirrored)
            new_src.append(source[take])
        images += new
        owners += new_src
        points = xp.concatenate([points] + new)
        source = xp.concatenate([source] + new_src)
    return (xp.concatenate(images) if images else xp.zeros((0, 3), xp.float32),
            xp.concatenate(owners) if owners else xp.zeros(0, xp.int64))


def box_distance(grid: GridSpec, box: GridSpec, band: float, xp):
    """Signed distance (float32, negative inside, clamped to ±band) from the voxel centres
    of *grid* to the box of *box*'s grid (its walls)."""
    f = np.float32
    nx, ny, nz = grid.shape
    outside2 = xp.zeros(grid.array_shape, xp.float32)
    inside = xp.full(grid.array_shape, -np.inf, xp.float32)
    for axis, n in enumerate((nx, ny, nz)):
        x = _node_coordinate(xp.arange(n), grid.origin[axis], grid.voxel_size, xp)
        lo = f(box.origin[axis])
        hi = f(box.origin[axis] + box.shape[axis] * box.voxel_size)
        d = xp.maximum(lo - x, x - hi)  # per axis: > 0 beyond a wall
        shape = [1, 1, 1]
        shape[2 - axis] = n
        d = d.reshape(shape)
        outside2 = outside2 + xp.maximum(d, f(0)) * xp.maximum(d, f(0))
        inside = xp.maximum(inside, d)
    dist = xp.where(outside2 > 0, xp.sqrt(outside2), xp.minimum(inside, f(0)))
    return xp.clip(dist, f(-band), f(band)).astype(xp.float32)


def surface_radii(cell_size: float, particles_per_cell: int = 8) -> tuple:
    """(radius, kernel_radius) in metres for particles seeded *particles_per_cell* to a
    simulation cell of edge *cell_size*: r = d (the particle spacing, cell/∛ppc) and
    R = 4·d, so that flat surfaces sit on the liquid's boundary (module text)."""
    cell_size = float(cell_size)
    if not (math.isfinite(cell_size) and cell_size > 0.0) or int(particles_per_cell) < 1:
        raise InputError(f"need a positive cell size and particle count, not {cell_size!r}, {particles_per_cell!r}")
    spacing = cell_size / float(particles_per_cell) ** (1.0 / 3.0)
    return spacing, KERNEL_PER_RADIUS * spacing


def liquid_volume(phi, spec: GridSpec, subdivisions: int = SUBDIVISIONS) -> float:
    """Volume (m³) where φ < 0, φ read as the trilinear interpolant of its voxel-centre
    samples — the field a mesher contours. Dual cells (the boxes between 8 neighbouring
    voxel centres) whose corners are all negative count whole; a cell whose corners
    change sign counts the fraction of *subdivisions*³ trilinear sub-samples (cell
    midpoints) that are negative. Only the region between the outermost voxel centres is
    measured, so keep liquid half a voxel clear of the grid's faces: ``closed_level_set``
    does (its grid reaches beyond the walls), and then this is the volume the rendered
    mesh encloses (within 1% of a marching-tetrahedra mesh of the same φ)."""
    xp = backend.array_module(phi)
    if tuple(phi.shape) != spec.array_shape:
        raise InputError(f"the level set has shape {tuple(phi.shape)}, but the grid needs {spec.array_shape}")
    if min(phi.shape) < 2:
        return 0.0
    corners = [phi[a:a + phi.shape[0] - 1, b:b + phi.shape[1] - 1, c:c + phi.shape[2] - 1]
               for a in (0, 1) for b in (0, 1) for c in (0, 1)]  # corner (dz, dy, dx) order
    hi = corners[0]
    lo = corners[0]
    for corner in corners[1:]:
        hi = xp.maximum(hi, corner)
        lo = xp.minimum(lo, corner)
    whole = int((hi < 0).sum())
    mixed = xp.flatnonzero(((lo < 0) & (hi >= 0)).ravel())
    partial = 0.0
    if len(mixed):
        weights = xp.asarray(_trilinear_weights(int(subdivisions)))  # (s³, 8)
        for c0 in range(0, len(mixed), CHUNK_CELLS):
            cells = mixed[c0:c0 + CHUNK_CELLS]
            values = xp.stack([corner.ravel()[cells] for corner in corners], axis=1).astype(xp.float64)
            partial += float(((values @ weights.T) < 0).sum()) / weights.shape[0]
    return (whole + partial) * spec.voxel_size ** 3


def _trilinear_weights(s: int) -> np.ndarray:
    """(s³, 8) weights of the 8 cell corners (dz, dy, dx order) at the s³ sub-cell midpoints."""
    if s < 1:
        raise InputError(f"volume subdivisions must be 1 or more, not {s}")
    t = (np.arange(s) + 0.5) / s
    z, y, x = (a.ravel() for a in np.meshgrid(t, t, t, indexing="ij"))
    return np.stack([(z if a else 1 - z) * (y if b else 1 - y) * (x if c else 1 - x)
                     for a in (0, 1) for b in (0, 1) for c in (0, 1)], axis=1)


# --------------------------------------------------------------------------- inputs

def _positions(pos, xp):
    pos = _shape_checked(pos, xp)
    bad = int((~xp.isfinite(pos).all(axis=1)).sum()) if len(pos) else 0
    if bad:
        raise _non_finite(bad)
    return pos


def _shape_checked(pos, xp):
    """*pos* as C-contiguous float32 (N, 3), finiteness left to the kernels (one host read)."""
    if pos.ndim != 2 or pos.shape[1] != 3:
        raise InputError(f"particle positions must be an (N, 3) array, not shape {tuple(pos.shape)}")
    return xp.ascontiguousarray(pos, dtype=xp.float32)


def _non_finite(bad):
    return InputError(f"{bad} particles have non-finite (NaN or infinite) positions; "
                      "the simulation diverged: reduce the time step or check the sources")


def _radii(radius, pos):
    """(float32 radius or per-particle array, largest radius, is scalar)."""
    if np.ndim(radius) == 0:
        r = float(radius)
        if not (math.isfinite(r) and r > 0.0):
            raise InputError(f"the particle radius must be a positive number of metres, not {radius!r}")
        return np.float32(r), r, True
    xp = backend.array_module(radius)
    if tuple(radius.shape) != (pos.shape[0],):
        raise InputError(f"per-particle radii must have shape ({pos.shape[0]},), not {tuple(radius.shape)}")
    radius = xp.ascontiguousarray(radius, dtype=xp.float32)
    if len(radius) == 0:
        return radius, 1.0, False
    lo, hi = float(radius.min()), float(radius.max())
    if not (math.isfinite(lo) and math.isfinite(hi) and lo > 0.0):
        raise InputError("every particle radius must be a positive finite number of metres")
    return radius, hi, False


def _node_coordinate(index, origin: float, h: float, xp):
    """float32 world coordinate of node *index* along one axis: origin + (index + ½)·h."""
    return (index.astype(xp.float32) + xp.float32(0.5)) * xp.float32(h) + xp.float32(origin)


# --------------------------------------------------------------------------- CPU reference

def _reachable_offsets(R: float, h: float):
    """Node offsets (dk, dj, di), each in −m..m+1, from the node at or below a particle
    (per axis) whose centre can lie within R of it: a particle sits u ∈ [0, 1) voxels
    above that node, so offset d is at least max(−d, d − 1, 0) voxels away along an axis.
    Returns (m, offsets (n, 3) as indices 0..2m+1 into the per-axis tables)."""
    m = int(math.ceil(R / h)) + 1
    d = np.arange(-m, m + 2)
    gap = np.maximum(np.maximum(-d, d - 1), 0).astype(np.float64) * h
    gk, gj, gi = np.meshgrid(gap, gap, gap, indexing="ij")
    slack = 0.05 * h  # float32 node positions may sit a few ulps from the float64 ones
    near = gi * gi + gj * gj + gk * gk < (R + slack) ** 2
    return m, np.argwhere(near)


def _level_set_cpu(pos, radii, spec, R, band, progress=None):
    nx, ny, nz = spec.shape
    phi = np.full(spec.array_shape, band, dtype=np.float32)
    if len(pos) == 0:
        return phi
    m, offsets = _reachable_offsets(R, spec.voxel_size)
    # The node at or below each particle, per axis (floor of the continuous node index).
    base = np.floor((pos.astype(np.float64) - np.asarray(spec.origin)) / spec.voxel_size - 0.5)
    base = np.clip(base, -2 * m - 4, np.array([nx, ny, nz]) + 2 * m + 4).astype(np.int64)
    order = np.argsort(base[:, 2], kind="stable")
    base_k = base[order, 2]
    slab = max(1, SLAB_VOXELS // (nx * ny))
    chunk = max(1, CHUNK_PAIRS // len(offsets))
    for k0 in range(0, nz, slab):
        k1 = min(nz, k0 + slab)
        # Particles whose base node lies within reach of the slab along z.
        lo, hi = np.searchsorted(base_k, [k0 - m - 1, k1 + m + 1], side="left")
        if lo == hi:
            continue
        sums = np.zeros((5, (k1 - k0) * ny * nx))  # Σk, Σk·dx, Σk·dy, Σk·dz, Σk·r
        for c0 in range(lo, hi, chunk):
            take = order[c0:min(hi, c0 + chunk)]
            r = radii if np.ndim(radii) == 0 else radii[take]
            _scatter_chunk(pos[take], r, base[take], m, offsets, spec, k0, k1, R, sums)
        phi[k0:k1] = _phi_from_sums(sums, band).reshape(k1 - k0, ny, nx)
        report(progress, k1 / nz, "liquid surface")
    return phi


def _scatter_chunk(p, r, base, m, offsets, spec, k0, k1, R, sums):
    """Add one chunk of particles' kernel weights to the sums of slab k0..k1."""
    nx, ny, _ = spec.shape
    R2 = np.float32(R) * np.float32(R)
    steps = np.arange(-m, m + 2)
    index, delta, delta2 = [], [], []
    for axis, (low, high) in enumerate(((0, nx), (0, ny), (k0, k1))):
        idx = base[:, axis, None] + steps  # (n, 2m+2) node indices along this axis
        # Offsets particle − node in float32, exactly as the CUDA kernel rounds them.
        d = p[:, axis, None] - _node_coordinate(idx, spec.origin[axis], spec.voxel_size, np)
        d2 = d * d
        d2[(idx < low) | (idx >= high)] = np.inf  # off the grid (or the slab): never within R
        index.append(idx)
        delta.append(d)
        delta2.append(d2)
    ok, oj, oi = offsets[:, 0], offsets[:, 1], offsets[:, 2]
    D2 = (delta2[0][:, oi] + delta2[1][:, oj]) + delta2[2][:, ok]  # (n, offsets), as the kernel adds
    q, o = np.nonzero(D2 < R2)
    if len(q) == 0:
        return
    t = np.float32(1.0) - D2[q, o] / R2
    w = ((t * t) * t).astype(np.float64)  # k(s) = (1 − s²)³
    i, j, k = index[0][q, oi[o]], index[1][q, oj[o]], index[2][q, ok[o]]
    lin = ((k - k0) * ny + j) * nx + i
    n = sums.shape[1]
    sums[0] += np.bincount(lin, w, n)
    for row, values in ((1, delta[0][q, oi[o]]), (2, delta[1][q, oj[o]]), (3, delta[2][q, ok[o]]),
                        (4, np.broadcast_to(r, q.shape) if np.ndim(r) == 0 else r[q])):
        sums[row] += np.bincount(lin, w * values.astype(np.float64), n)


def _phi_from_sums(sums, band):
    """φ = |x − x̄| − r̄ from the weighted sums of offsets x_p − x, clamped to ±band."""
    W = sums[0]
    phi = np.full(W.shape, band, dtype=np.float64)
    has = W > 0.0
    Wh = W[has]
    dist = np.sqrt(sums[1, has] ** 2 + sums[2, has] ** 2 + sums[3, has] ** 2) / Wh
    phi[has] = dist - sums[4, has] / Wh
    return np.clip(phi, -band, band).astype(np.float32)


def _smooth_cpu(phi, spec, band):
    """One mean-curvature step (module text), slab by slab along z; float32 with the
    operations in the order of ``smooth_level_set`` in the CUDA source."""
    nz, ny, nx = phi.shape
    out = np.empty_like(phi)
    f = np.float32
    flat = f(FLAT_GRADIENT * spec.voxel_size) ** 2
    slab = max(1, SLAB_VOXELS // (nx * ny) // 4)
    for k0 in range(0, nz, slab):
        k1 = min(nz, k0 + slab)
        rows = np.clip(np.arange(k0 - 1, k1 + 1), 0, nz - 1)  # edge values repeated
        p = np.pad(phi[rows], ((0, 0), (1, 1), (1, 1)), mode="edge")

        def at(dz, dy, dx, p=p):
            return p[1 + dz:p.shape[0] - 1 + dz, 1 + dy:p.shape[1] - 1 + dy, 1 + dx:p.shape[2] - 1 + dx]

        c = at(0, 0, 0)
        xm, xp, ym, yp, zm, zp = at(0, 0, -1), at(0, 0, 1), at(0, -1, 0), at(0, 1, 0), at(-1, 0, 0), at(1, 0, 0)
        fx, fy, fz = (xp - xm) * f(0.5), (yp - ym) * f(0.5), (zp - zm) * f(0.5)
        fxx, fyy, fzz = (xp + xm) - (c + c), (yp + ym) - (c + c), (zp + zm) - (c + c)
        fxy = ((at(0, 1, 1) - at(0, -1, 1)) - (at(0, 1, -1) - at(0, -1, -1))) * f(0.25)
        fxz = ((at(1, 0, 1) - at(-1, 0, 1)) - (at(1, 0, -1) - at(-1, 0, -1))) * f(0.25)
        fyz = ((at(1, 1, 0) - at(-1, 1, 0)) - (at(1, -1, 0) - at(-1, -1, 0))) * f(0.25)
        g2 = (fx * fx + fy * fy) + fz * fz
        num = (((fyy + fzz) * (fx * fx) + (fxx + fzz) * (fy * fy)) + (fxx + fyy) * (fz * fz)) \
            - f(2.0) * (((fx * fy) * fxy + (fx * fz) * fxz) + (fy * fz) * fyz)
        moving = g2 > flat
        step = np.where(moving, num / np.where(moving, g2, f(1.0)), f(0.0))
        out[k0:k1] = np.clip(c + SMOOTH_STEP * step, f(-band), f(band))
    return out
