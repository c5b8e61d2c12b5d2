"""The ground side of the snow simulation (seed 002 §2.4.3, §3.3.1–3.3.2): what snow lands
on, how landed flakes become depth, how snow slides, and which wind cells it fills.
Arrays follow ``domain.py``: a vertex lattice (gy, gx) of float32 ``terrain`` (world z of
the highest receiver surface, ``NO_GROUND`` where none) and ``snow`` (depth, ≥ 0).

Every stage has a NumPy reference and a CuPy kernel in ``cuda/snow_ground.cu`` written
term by term alike and compiled with ``--fmad=false``: terrain and solid are bit-identical
on both backends, and the float32 stages round alike too. The per-step stages
(``apply_deposit``, ``redistribute``) take and return arrays of either module, stay on
the device and never synchronise with the host.

Choices beyond the thesis, in one place:

* **Terrain from triangles.** The thesis reads its terrain from a height map (§2.4.3);
  here it is the highest triangle above each lattice vertex, so snow lands on a roof and
  not under it. Triangles seen edge-on from above (walls) cover no vertex.
* **Redistribution** (§3.3.2) uses the 8-neighbourhood; t = tan(repose angle)·distance
  (cell along the axes, √2·cell on the diagonals). What moves is a share of the excess
  over t, q = min(snow, (Δh − t)/2), not of the whole difference Δh as the thesis writes
  it (which overshoots below the angle: a cone set to 38° settled at 33.7°, issue 22).
  A giver with several lower neighbours moves k·max(q) in total, shared in proportion to
  each q, so no pair is pushed past the angle. A drop of the terrain itself (a roof edge)
  is a ledge: snow there is measured against the lip, so a flat roof keeps its snow to
  the edge until the snow at the lip stands more than t high. Transfers are whole
  multiples of two ulps of the larger depth (``_quantise``): mass is conserved exactly.
* **Drift** of fallen snow lives in ``drift.py``: it moves snow through the wind grid's air.
"""

from __future__ import annotations

import math

import numpy as np

from .. import backend
from ..errors import InputError
from ..grid import GridSpec
from ..grid.launch import Kernels
from ..progress import report
from .domain import NO_GROUND, SnowDomain, SnowSettings

_CU = "snow_ground.cu"
_OPTIONS = ("--fmad=false",)  # round like NumPy
_THREADS = 256
CHUNK_ITEMS = 1 << 21  # (triangle, vertex) pairs per NumPy batch: bounds the CPU path's memory

# 8-neighbourhood in the kernels' order: axis neighbours first, then the diagonals.
NEIGHBOURS_8 = ((0, 1), (0, -1), (1, 0), (-1, 0), (1, 1), (1, -1), (-1, 1), (-1, -1))  # (dy, dx)


_K = Kernels(_CU, _OPTIONS, _THREADS, defines={"NO_GROUND": float(NO_GROUND)})


def _on_gpu(a) -> bool:
    return backend.array_module(a) is not np


def _shift(a, dy, dx, fill):
    """b[j, i] = a[j + dy, i + dx], *fill* where that falls off the lattice."""
    gy, gx = a.shape
    b = np.full_like(a, fill)
    b[max(0, -dy):gy - max(0, dy), max(0, -dx):gx - max(0, dx)] = \
        a[max(0, dy):gy - max(0, -dy), max(0, dx):gx - max(0, -dx)]
    return b


def repose_thresholds(settings: SnowSettings, cell: float):
    """t of §3.3.2 as float32: tan(repose angle)·distance to an axis and a diagonal neighbour."""
    slope = math.tan(settings.repose_angle)
    return np.float32(slope * cell), np.float32(slope * math.sqrt(2.0) * cell)


def _check_lattice(terrain, snow, *others):
    """float32 (gy, gx) arrays of one module, C-contiguous (the kernels index them flat)."""
    for name, a in (("terrain", terrain), ("snow", snow)) + others:
        if a.ndim != 2 or a.shape != snow.shape or a.dtype != np.float32 or not a.flags.c_contiguous:
            raise InputError(f"{name} must be a C-contiguous float32 lattice of shape {snow.shape}, "
                             f"not {a.dtype} {a.shape}")


def _check_redistribution(settings: SnowSettings):
    k, m = settings.redistribute_fraction, settings.redistribute_min_depth
    if not (np.isfinite(k) and 0.0 <= k <= 1.0):
        raise InputError(f"Redistribution fraction must be between 0 and 1, not {k}")
    if not (np.isfinite(m) and m >= 0.0):
        raise InputError(f"Redistribution minimum depth must be ≥ 0 m, not {m}")
    if not 0 < settings.repose_angle < math.pi / 2:
        raise InputError(f"Angle of repose must be between 0° and 90°, not {math.degrees(settings.repose_angle):g}°")


# --------------------------------------------------------------------------- terrain (§2.4.3)

def terrain_from_triangles(vertices, triangles, domain: SnowDomain, xp=None, progress=None):
    """Height of the highest receiver surface above every lattice vertex, (gy, gx) float32
    on *xp* (default: the current backend); ``NO_GROUND`` where no triangle's xy projection
    contains the vertex. Projections are closed, and an edge shared by two triangles is
    tested with one product, so vertices on shared edges and corners are always covered.
    *progress* hears per batch on the CPU (the GPU's one pass is short); False cancels.
    """
    from ..mesh import check_inputs, check_shapes

    xp = xp or backend.xp()
    gx, gy = (int(n) for n in domain.ground_shape)
    ox, oy = (float(o) for o in domain.ground_origin)
    cell = float(domain.ground_cell)
    if xp is np:
        vertices, triangles = backend.to_numpy(vertices), backend.to_numpy(triangles)
        check_inputs(vertices, triangles)
        return _terrain_cpu(vertices, triangles, ox, oy, cell, gx, gy, progress)
    check_shapes(vertices, triangles)
    return _terrain_gpu(vertices, triangles, ox, oy, cell, gx, gy)


def _lattice_units(v, ox, oy, cell, xp):
    """float64 X, Y in lattice units and Z in metres (CuPy's elementwise ops round as NumPy's)."""
    v = v.astype(xp.float64)
    return (v[:, 0] - ox) / cell, (v[:, 1] - oy) / cell, xp.ascontiguousarray(v[:, 2])


def _triangle_boxes(X, Y, tris, gx, gy):
    """Signed doubled xy area and the clipped lattice range [ilo, ihi]×[jlo, jhi] per triangle."""
    x, y = X[tris], Y[tris]
    area = (x[:, 1] - x[:, 0]) * (y[:, 2] - y[:, 0]) - (y[:, 1] - y[:, 0]) * (x[:, 2] - x[:, 0])
    ilo = np.clip(np.ceil(x.min(axis=1)), 0.0, gx).astype(np.int64)  # empty when off the lattice
    ihi = np.clip(np.floor(x.max(axis=1)), -1.0, gx - 1).astype(np.int64)
    jlo = np.clip(np.ceil(y.min(axis=1)), 0.0, gy).astype(np.int64)
    jhi = np.clip(np.floor(y.max(axis=1)), -1.0, gy - 1).astype(np.int64)
    return area, ilo, ihi, jlo, jhi


def _edge_function(x, y, k, qx, qy, sg):
    """Edge k (corner k → k+1), positive inside; corners taken in lexicographic order so a
    shared edge gives both triangles the same product (cuda: edge_function)."""
    a, b = x[:, k], x[:, (k + 1) % 3]
    ay, by = y[:, k], y[:, (k + 1) % 3]
    swap = (b < a) | ((b == a) & (by < ay))
    ax_, ay_ = np.where(swap, b, a), np.where(swap, by, ay)
    bx_, by_ = np.where(swap, a, b), np.where(swap, ay, by)
    f = (bx_ - ax_) * (qy - ay_) - (by_ - ay_) * (qx - ax_)
    return (f * np.where(swap, -1.0, 1.0)) * sg


def _terrain_cpu(vertices, triangles, ox, oy, cell, gx, gy, progress=None):
    terrain = np.full(gy * gx, NO_GROUND, dtype=np.float32)
    if not len(triangles):
        return terrain.reshape(gy, gx)
    X, Y, Z = _lattice_units(vertices, ox, oy, cell, np)
    tris = np.asarray(triangles, dtype=np.int64)
    area, ilo, ihi, jlo, jhi = _triangle_boxes(X, Y, tris, gx, gy)
    wi, wj = ihi - ilo + 1, jhi - jlo + 1
    counts = np.where((area != 0) & (wi > 0) & (wj > 0), wi * wj, 0)
    ends = np.cumsum(counts)
    total = int(ends[-1])
    for start in range(0, total, CHUNK_ITEMS):  # by items, not triangles: a ground plane is 2 triangles
        item = np.arange(start, min(start + CHUNK_ITEMS, total), dtype=np.int64)
        t = np.searchsorted(ends, item, side="right")
        local = item - (ends[t] - counts[t])
        i = ilo[t] + local % wi[t]
        j = jlo[t] + local // wi[t]
        x, y, z = X[tris[t]], Y[tris[t]], Z[tris[t]]
        sg = np.where(area[t] > 0, 1.0, -1.0)
        qx, qy = i.astype(np.float64), j.astype(np.float64)
        E0, E1, E2 = (_edge_function(x, y, k, qx, qy, sg) for k in range(3))
        inside = (E0 >= 0) & (E1 >= 0) & (E2 >= 0)
        # Barycentric height as z0 + Δ (a flat roof gets exactly its height), clamped to
        # the triangle's z range so a sliver's rounding cannot lift a vertex.
        h = z[:, 0] + (E2 * (z[:, 1] - z[:, 0]) + E0 * (z[:, 2] - z[:, 0])) / np.abs(area[t])
        h = np.minimum(np.maximum(h, z.min(axis=1)), z.max(axis=1))
        h = h[inside].astype(np.float32) + np.float32(0.0)  # +0: no −0
        np.maximum.at(terrain, (j * gx + i)[inside], h)
        report(progress, min(start + CHUNK_ITEMS, total) / total, "terrain")
    return terrain.reshape(gy, gx)


def _terrain_gpu(vertices, triangles, ox, oy, cell, gx, gy):
    import cupy as cp

    terrain = cp.empty(gy * gx, dtype=cp.float32)
    keys = terrain.view(cp.uint32)
    no_ground_key = np.uint32(np.float32(NO_GROUND).view(np.uint32) ^ np.uint32(0xFFFFFFFF))  # negative: ~bits
    keys.fill(no_ground_key)
    v = cp.asarray(vertices)
    if v.dtype not in (cp.float32, cp.float64):
        v = v.astype(cp.float64)
    tris = cp.ascontiguousarray(cp.asarray(triangles), dtype=cp.int32)
    T, V = int(tris.shape[0]), int(v.shape[0])
    if T == 0:
        return _keys_to_heights(keys, terrain).reshape(gy, gx)
    X, Y, Z = _lattice_units(v, ox, oy, cell, cp)
    X, Y = cp.ascontiguousarray(X), cp.ascontiguousarray(Y)
    flags = cp.zeros(1, dtype=cp.uint64)
    counts = cp.empty(T, dtype=cp.int64)
    _K.launch("terrain_counts", T, (X, Y, Z, tris, np.int64(T), np.int64(V), np.int32(gx),
                                    np.int32(gy), counts, flags))
    ends = cp.cumsum(counts)
    bad = (~cp.isfinite(v)).any(axis=1).sum().astype(cp.int64) if V else cp.zeros((), cp.int64)
    host = cp.concatenate([bad.reshape(1), flags.view(cp.int64), ends[-1:]]).get()  # the one sync
    if host[0]:
        raise InputError(f"{int(host[0])} vertices have non-finite coordinates (NaN/inf)")
    if host[1]:
        raise InputError("triangle indices point outside the vertex array")
    total = int(host[2])
    if total:
        _K.launch("terrain_items", total, (X, Y, Z, tris, ends, counts, np.int64(T),
                                           np.int64(total), np.int32(gx), np.int32(gy), keys))
    return _keys_to_heights(keys, terrain).reshape(gy, gx)


def _keys_to_heights(keys, terrain):
    n = int(keys.size)
    _K.launch("keys_to_heights", n, (keys, np.int64(n)))
    return terrain


# --------------------------------------------------------------------------- deposit (§3.3.2)

def vertex_areas(shape, cell: float, xp=np):
    """Horizontal area (m²) each ground vertex stands for: a cell² in the lattice, half of
    it on the lattice's sides, a quarter at its corners (the trapezoid rule), so the
    areas of a lattice that spans a plane add up to the plane's area (issue 18)."""
    gy, gx = shape
    wx = xp.ones(gx, dtype=xp.float64)
    wy = xp.ones(gy, dtype=xp.float64)
    wx[0] = wx[-1] = 0.5
    wy[0] = wy[-1] = 0.5
    return (float(cell) * float(cell)) * wy[:, None] * wx[None, :]


def receiving_area(terrain, cell: float) -> float:
    """Horizontal area (m²) of the receivers' top surfaces on the lattice: the areas of
    the vertices that have ground (snowfall lands there and nowhere else)."""
    xp = np if not _on_gpu(terrain) else __import__("cupy")
    return float((vertex_areas(terrain.shape, cell, xp) * (terrain != NO_GROUND)).sum())


def apply_deposit(snow, deposit, landed_units, volume: float, cell: float):
    """snow += deposit · (volume / units) / area(vertex) in place, then deposit = 0
    (domain.py); area(vertex) from ``vertex_areas``: a side vertex catches flakes from
    half a cell's area, and gets the same depth as an inner one from them.

    *volume* is the snowfall volume of the step (rate·area·dt), *landed_units* the units
    landed this step (a 0-d or 1-element integer array on the arrays' device, or None to
    sum *deposit*); with no units landed nothing changes. No host sync on the GPU.
    """
    if deposit.shape != snow.shape or deposit.dtype != np.uint32:
        raise InputError(f"deposit must be uint32 of shape {snow.shape}, not {deposit.dtype} {deposit.shape}")
    cell2 = float(cell) * float(cell)
    gy, gx = snow.shape
    if _on_gpu(snow):
        import cupy as cp

        units = deposit.sum(dtype=cp.uint64) if landed_units is None else landed_units
        units = cp.asarray(units).reshape(-1)[:1].astype(cp.uint64)
        n = int(snow.size)
        _K.launch("apply_deposit", n, (snow, deposit, units, np.float64(volume),
                                       np.float64(cell2), np.int64(gx), np.int64(gy)))
        return snow
    units = int(deposit.sum(dtype=np.uint64) if landed_units is None else np.asarray(landed_units).reshape(-1)[0])
    if units:
        per_unit = np.float64(volume) / np.float64(units)
        landed = deposit != 0
        area = vertex_areas(snow.shape, cell)[landed]
        snow[landed] = snow[landed] + (deposit[landed].astype(np.float64) * per_unit / area).astype(np.float32)
    deposit[...] = 0
    return snow


# --------------------------------------------------------------------------- redistribution (§3.3.2)

def redistribute(terrain, snow, settings: SnowSettings, cell: float, iterations: int = 1):
    """§3.3.2 snow redistribution towards the angle of repose, *iterations* times, in place
    on *snow*; returns *snow*.

    Snow moves from a vertex to a lower neighbour when their surfaces (terrain + snow)
    differ by more than t = tan(repose)·distance and the giver holds more than m. What
    moves is a share of the *excess* over the threshold, q = min(snow, (Δh − t)/2) — the
    amount that would leave the pair exactly at the angle of repose — not of the whole
    difference as the thesis writes it: a share of Δh keeps moving snow after the slope
    has reached t and leaves the pile several degrees flatter than set (issue 22 §4).
    This is thermal erosion (Musgrave, Kolb & Mace 1989, *The synthesis and rendering of
    eroded fractal terrains*, §3.2): a giver moves k·max(q) in total, shared over its
    lower neighbours in proportion to q, so no pair is pushed past the angle.

    A drop of the terrain itself (a roof edge, a wall top: terrain steeper than t towards
    the receiver while not steeper than t from behind) is a ledge, not a snow slope: the
    snow's surface is measured against the ledge, Δh = min(Δh, snow), so snow leaves a
    flat roof only where it stands more than t above the roof at its edge. On a steep
    slope (higher terrain behind as well) snow slides as on any slope.

    Per-edge transfers are computed in one pass and gathered in another: no atomics,
    deterministic, mass conserving. NO_GROUND vertices neither give nor receive.
    """
    _check_lattice(terrain, snow)
    _check_redistribution(settings)
    t_axis, t_diag = repose_thresholds(settings, cell)
    m, k = np.float32(settings.redistribute_min_depth), np.float32(settings.redistribute_fraction)
    if _on_gpu(snow):
        return _redistribute_gpu(terrain, snow, t_axis, t_diag, m, k, int(iterations))
    for _ in range(int(iterations)):
        snow[...] = _redistribute_step_cpu(terrain, snow, t_axis, t_diag, m, k)
    return snow


def _transfer_demand_cpu(terrain, snow, ground, height, dy, dx, t, m):
    """q of the module notes for every giver towards its neighbour (dy, dx) (cuda: transfer_demand)."""
    zero = np.float32(0)
    below = _shift(terrain, dy, dx, NO_GROUND)
    behind = _shift(terrain, -dy, -dx, NO_GROUND)  # off the lattice or NO_GROUND: never higher
    ledge = ((terrain - below) > t) & ~((behind - terrain) > t)
    level = _shift(height, dy, dx, zero)
    level = np.where(ledge, np.maximum(level, terrain), level)  # the ledge's lip, if snow is below it
    excess = (height - level) - t
    active = ground & _shift(ground, dy, dx, False) & (snow > m) & (excess > zero)
    return np.where(active, np.minimum(snow, excess * np.float32(0.5)), zero)


def _quantise(transfer, giver, receiver):
    """*transfer* rounded down to a multiple of U = 2·ulp(max(giver, receiver)) (cuda: quantise).

    Then the giver's and the receiver's sums, and their new depths, are exact in float32
    (short of a receiver crossing into the next power of two): mass is conserved to the
    bit instead of drifting by the sub-ulp net changes of vertices that pass a steady
    trickle on (the creeping tail of a relaxing pile). Transfers below U stop.
    """
    _, e = np.frexp(np.maximum(giver, receiver))  # max = m·2^e, m in [½, 1): ulp = 2^(e − 24)
    unit = np.ldexp(np.float32(1), np.maximum(e, -100) - 23).astype(np.float32)  # no 0 for subnormal depths
    return np.floor(transfer / unit) * unit


def _redistribute_step_cpu(terrain, snow, t_axis, t_diag, m, k):
    ground = terrain != NO_GROUND
    height = terrain + snow
    # Pass 1: q of every (giver, direction), then the giver's scale k·max(q)/Σq.
    q = []
    total = np.zeros_like(snow)
    qmax = np.zeros_like(snow)
    for d, (dy, dx) in enumerate(NEIGHBOURS_8):
        q_d = _transfer_demand_cpu(terrain, snow, ground, height, dy, dx, t_axis if d < 4 else t_diag, m)
        q.append(q_d)
        total = total + q_d
        qmax = np.maximum(qmax, q_d)
    scale = np.where(total > 0, (k * qmax) / np.where(total > 0, total, np.float32(1)), np.float32(0))
    # Pass 2 (gather): what leaves along d, and what arrives from the giver at −d.
    given = np.zeros_like(snow)
    taken = np.zeros_like(snow)
    for d, (dy, dx) in enumerate(NEIGHBOURS_8):
        transfer = _quantise(q[d] * scale, snow, _shift(snow, dy, dx, np.float32(0)))
        given = given + transfer
        taken = taken + _shift(transfer, -dy, -dx, np.float32(0))
    return np.where(ground, np.maximum(snow + (taken - given), np.float32(0)), snow)  # one rounding of snow


def _redistribute_gpu(terrain, snow, t_axis, t_diag, m, k, iterations):
    import cupy as cp

    gy, gx = snow.shape
    n = gy * gx
    scale = cp.empty_like(snow)
    buffers = (snow, cp.empty_like(snow))
    for _ in range(iterations):
        current, following = buffers
        _K.launch("redistribute_scale", n, (terrain, current, scale, np.int32(gx), np.int32(gy), t_axis,
                                            t_diag, m, k))
        _K.launch("redistribute_gather", n, (terrain, current, scale, following, np.int32(gx), np.int32(gy),
                                             t_axis, t_diag, m))
        buffers = (following, current)
    if buffers[0] is not snow:
        snow[...] = buffers[0]
    return snow


# --------------------------------------------------------------------------- obstacles (§3.3.1)

def solid_from_ground(terrain, snow, domain: SnowDomain, out=None):
    """Wind cells (nz, ny, nx) uint8 whose centre lies below terrain + snow at the lattice
    vertex nearest to the centre's xy (the flakes' collision rule, §3.3.1); NO_GROUND is
    never solid. With *out* (objects' solid cells), the ground is OR-ed into it."""
    _check_lattice(terrain, snow)
    spec: GridSpec = domain.wind
    nx, ny, nz = spec.shape
    gx, gy = (int(n) for n in domain.ground_shape)
    gox, goy = (float(o) for o in domain.ground_origin)
    gcell, h = float(domain.ground_cell), float(spec.voxel_size)
    ox, oy, oz = spec.origin
    if snow.shape != (gy, gx):
        raise InputError(f"terrain and snow must have the domain's lattice shape {(gy, gx)}, not {snow.shape}")
    if out is not None and (tuple(out.shape) != (nz, ny, nx) or out.dtype != np.uint8):
        raise InputError(f"out must be uint8 of shape {(nz, ny, nx)}, not {out.dtype} {tuple(out.shape)}")
    if _on_gpu(snow):
        import cupy as cp

        solid = cp.zeros((nz, ny, nx), dtype=cp.uint8) if out is None else out
        n = nx * ny * nz
        _K.launch("solid_from_ground", n, (
            terrain, snow, solid, np.int32(nx), np.int32(ny), np.int32(nz), np.float64(ox), np.float64(oy),
            np.float64(oz), np.float64(h), np.float64(gox), np.float64(goy), np.float64(gcell), np.int32(gx),
            np.int32(gy), np.int32(0 if out is None else 1)))
        return solid
    cx = ox + (np.arange(nx, dtype=np.float64) + 0.5) * h
    cy = oy + (np.arange(ny, dtype=np.float64) + 0.5) * h
    cz = oz + (np.arange(nz, dtype=np.float64) + 0.5) * h
    vi = np.clip(np.floor((cx - gox) / gcell + 0.5), 0, gx - 1).astype(np.int64)
    vj = np.clip(np.floor((cy - goy) / gcell + 0.5), 0, gy - 1).astype(np.int64)
    t = terrain[vj[:, None], vi[None, :]]
    top = np.where(t != NO_GROUND, t + snow[vj[:, None], vi[None, :]], NO_GROUND).astype(np.float64)
    below = (cz[:, None, None] < top[None]) & (t != NO_GROUND)[None]
    if out is None:
        return below.astype(np.uint8)
    out |= below.astype(np.uint8)
    return out


def terrain_items(vertices, triangles, domain: SnowDomain) -> int:
    """(triangle, lattice vertex) pairs ``terrain_from_triangles`` tests on the CPU: what
    its batches hold, for the memory guard (``SnowDomain.nbytes``). NumPy, O(triangles)."""
    vertices, triangles = np.asarray(backend.to_numpy(vertices)), np.asarray(backend.to_numpy(triangles), np.int64)
    if not len(triangles):
        return 0
    gx, gy = (int(n) for n in domain.ground_shape)
    ox, oy = (float(o) for o in domain.ground_origin)
    X, Y, _ = _lattice_units(vertices, ox, oy, float(domain.ground_cell), np)
    area, ilo, ihi, jlo, jhi = _triangle_boxes(X, Y, triangles, gx, gy)
    wi, wj = ihi - ilo + 1, jhi - jlo + 1
    return int(np.where((area != 0) & (wi > 0) & (wj > 0), wi * wj, 0).sum())
