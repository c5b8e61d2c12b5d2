"""Wind drift of fallen snow (beyond the thesis: seed 002 §3.3.2 names it as the possible
improvement; §2.4.2 gives the wind it is carried by).

Snow the wind lifts is carried *in the air* of the wind grid, so it follows the flow over
a wall and settles where the flow slows behind it, as in Feldman & O'Brien 2002
(*Modeling the accumulation of wind-driven snow*, SIGGRAPH technical sketch: snow carried
by the 3D wind field, settling and deposited on the surface). Per step:

  1. air cells   the lowest air cell above every ground vertex's snow surface
  2. exchange    bed ↔ that cell, towards the load a saturated saltation layer carries:
                   u*    = κ|u| / ln(z_r/z0)                     log law, z_r = h/2
                   q_sat = 0.68 (ρ_a/g)(u*_t/u*)(u*² − u*_t²)     Pomeroy & Gray 1990, Eq. 13
                                                                 (kg m⁻¹ s⁻¹; ÷ ρ_snow → m²/s)
                   c_sat = q_sat / (|u| h)                       that flux carried through the cell
                   δ     = w_s dt (c − c_sat)                    settling − entrainment, m of snow
                 δ > 0 deposits (calm air: c_sat = 0; slowing air: c > c_sat), δ < 0 erodes,
                 at most the snow there. The entrainment w_s·c_sat is the reference-
                 concentration boundary condition of suspended-sediment transport
                 (entrainment balances settling at saturation).
  3. transport   the airborne snow volume V per cell moves with the wind, falling at w_s
                 relative to it: donor-cell finite volumes on the MAC faces (upwind), in
                 sub-steps of Courant number ≤ ½ at the expected wind speed, with a
                 per-cell limiter (outflow ≤ content) for faster spots — conservative and
                 never negative.

Mass: bed + air is conserved exactly up to float32 rounding except at the domain's open
sides, where airborne snow that the wind carries out *leaves* (as it would in the open;
``transport`` returns that volume). Inflow sides bring clean air; the ground, lid, solid
cells and sides parallel to the wind are closed.

u*_t is the user's threshold speed at the same reference height, κ·u_t/ln(z_r/z0), so snow
erodes exactly where the near-surface wind exceeds ``drift_threshold`` (m/s).

NumPy is the reference; ``cuda/snow_drift.cu`` mirrors it term by term (``--fmad=false``).
The exchange's gather into the air cells adds in the same vertex order on both backends.
"""

from __future__ import annotations

import math

import numpy as np

from .. import backend
from ..grid import mac
from ..grid.launch import Kernels
from .domain import NO_GROUND, GRAVITY, SnowDomain, SnowSettings

_CU = "snow_drift.cu"
_OPTIONS = ("--fmad=false",)
_THREADS = 256

KARMAN = 0.41  # von Kármán's constant
AIR_DENSITY = 1.2  # kg/m³ at the ground (the wind solve itself uses ρ = 1, Eq. 2.27)
POMEROY_GRAY = 0.68  # coefficient of the saltation transport rate (Pomeroy & Gray 1990)
COURANT = 0.5  # target face Courant number of a transport sub-step
GUST_MARGIN = 1.5  # expected top speed = inflow·(1 + gusts)·this (obstacles speed the flow up)


_K = Kernels(_CU, _OPTIONS, _THREADS, defines={"NO_GROUND": float(NO_GROUND)})


def log_law_factor(settings: SnowSettings, h: float) -> np.float32:
    """κ / ln(z_r/z0): u* per m/s of wind at the reference height z_r = h/2."""
    z_r = 0.5 * float(h)
    return np.float32(KARMAN / math.log(max(z_r / float(settings.drift_roughness), 1.0 + 1e-6)))


def vertex_columns(domain: SnowDomain):
    """Wind-grid column (i, j) above every ground vertex, (gy, gx) int32 each (NumPy)."""
    spec = domain.wind
    nx, ny, _ = spec.shape
    gx, gy = (int(n) for n in domain.ground_shape)
    x = float(domain.ground_origin[0]) + np.arange(gx, dtype=np.float64) * float(domain.ground_cell)
    y = float(domain.ground_origin[1]) + np.arange(gy, dtype=np.float64) * float(domain.ground_cell)
    h = float(spec.voxel_size)
    i = np.clip(np.floor((x - spec.origin[0]) / h), 0, nx - 1).astype(np.int32)
    j = np.clip(np.floor((y - spec.origin[1]) / h), 0, ny - 1).astype(np.int32)
    jj, ii = np.meshgrid(j, i, indexing="ij")
    return np.ascontiguousarray(ii), np.ascontiguousarray(jj)


def air_cells(terrain, snow, solid, columns, domain: SnowDomain):
    """k of the lowest air cell whose centre is at or above terrain + snow, per ground
    vertex ((gy, gx) int32): cells marked solid (objects, or a neighbour's higher surface)
    are stepped over; the top layer if all are solid. NO_GROUND: the lowest air cell."""
    spec = domain.wind
    nx, ny, nz = spec.shape
    oz, h = float(spec.origin[2]), float(spec.voxel_size)
    ci, cj = columns
    if backend.array_module(snow) is not np:
        import cupy as cp

        k = cp.empty(snow.shape, dtype=cp.int32)
        n = int(snow.size)
        _K.launch("air_cells", n, (terrain, snow, solid, ci, cj, k, np.int32(nx), np.int32(ny),
                                   np.int32(nz), np.float64(oz), np.float64(h), np.int64(n)))
        return k
    top = np.where(terrain == NO_GROUND, np.float32(oz), terrain + snow).astype(np.float64)
    k = np.clip(np.ceil((top - oz) / h - 0.5), 0, nz - 1).astype(np.int32)
    for _ in range(nz):
        blocked = (solid[k, cj, ci] != 0) & (k < nz - 1)
        if not blocked.any():
            break
        k = k + blocked.astype(np.int32)
    return k


def surface_points(k, domain: SnowDomain, xy):
    """World points (N, 3) float32 at the vertices' xy and their air cells' centre height."""
    xp = backend.array_module(k)
    spec = domain.wind
    z = float(spec.origin[2]) + (k.astype(xp.float64) + 0.5) * float(spec.voxel_size)
    x, y = xy
    return xp.stack([x.ravel(), y.ravel(), z.ravel().astype(xp.float32)], axis=1).astype(xp.float32)


def _constants(settings: SnowSettings, domain: SnowDomain, dt: float):
    h, cell = float(domain.wind.voxel_size), float(domain.ground_cell)
    factor = log_law_factor(settings, h)
    ustar_t = np.float32(float(settings.drift_threshold) * float(factor))
    flux = np.float32(POMEROY_GRAY * AIR_DENSITY / GRAVITY / float(settings.snow_density))  # m²/s per (m/s)³
    # δ = rate·(c − c_sat): settling over dt, capped so that the vertices under one cell
    # (at most (⌊h/cell⌋ + 1)² of area cell²) never take more than its whole content.
    most = (math.floor(h / cell) + 1) ** 2 * cell * cell
    rate = np.float32(min(float(settings.drift_settling_speed) * float(dt), h ** 3 / most))
    return factor, ustar_t, flux, rate, np.float32(h), np.float32(cell * cell)


def _side_weights(shape) -> np.ndarray:
    """float32 (gy, gx): ½ on each lattice side a vertex lies on (snow_drift.cu does the same)."""
    gy, gx = shape
    wx = np.ones(gx, np.float32)
    wy = np.ones(gy, np.float32)
    wx[0] = wx[-1] = wy[0] = wy[-1] = np.float32(0.5)
    return wy[:, None] * wx[None, :]


def exchange(terrain, snow, load, wind_xy, k, columns, dt: float, settings: SnowSettings, domain: SnowDomain):
    """Step 2 of the module notes, in place on *snow* (depth, (gy, gx)) and *load* (airborne
    snow volume per wind cell, m³, (nz, ny, nx)); *wind_xy* (gy, gx, 2) is the wind in each
    vertex's air cell *k*. Returns *snow*."""
    factor, ustar_t, flux, rate, h, cell2 = _constants(settings, domain, dt)
    nx, ny, nz = domain.wind.shape
    ci, cj = columns
    if backend.array_module(snow) is not np:
        import cupy as cp

        gy, gx = snow.shape
        n = gy * gx
        old = load.copy()
        delta = cp.empty_like(snow)
        _K.launch("drift_exchange_ground", n, (
            terrain, snow, old, cp.ascontiguousarray(wind_xy, dtype=cp.float32), k, ci, cj, delta, np.int32(nx),
            np.int32(ny), factor, ustar_t, flux, rate, h, np.int64(n)))
        _K.launch("drift_exchange_air", nx * ny, (
            delta, k, ci, cj, load, np.int32(nx), np.int32(ny), np.int32(nz), np.int32(gx), np.int32(gy),
            np.float64(domain.wind.origin[0]), np.float64(domain.wind.origin[1]), np.float64(domain.wind.voxel_size),
            np.float64(domain.ground_origin[0]), np.float64(domain.ground_origin[1]),
            np.float64(domain.ground_cell), cell2))
        return snow
    zero = np.float32(0)
    ux, uy = wind_xy[..., 0], wind_xy[..., 1]
    speed = np.sqrt(ux * ux + uy * uy)
    ustar = speed * factor
    lifting = ustar > ustar_t
    safe = np.where(lifting, ustar, np.float32(1))
    q_sat = np.where(lifting, ((flux * (ustar_t / safe)) * (ustar * ustar - ustar_t * ustar_t)), zero)
    c_sat = np.where(lifting, q_sat / (np.where(lifting, speed, np.float32(1)) * h), zero)
    c = load[k, cj, ci] / (h * h * h)
    delta = rate * (c - c_sat)
    delta = np.maximum(delta, -snow)  # erosion: at most the snow there
    delta = np.where(terrain != NO_GROUND, delta, zero)
    snow[...] = snow + delta
    flat = load.reshape(-1)
    # Each vertex stands for its own area (ground.vertex_areas): snow volume is conserved
    # in the measure the snowfall and snow_volume() use.
    area = cell2 * _side_weights(snow.shape)
    np.add.at(flat, ((k.astype(np.int64) * ny + cj) * nx + ci).ravel(), (-(delta * area)).ravel())
    np.maximum(flat, zero, out=flat)  # rounding only: deposits never exceed the content
    return snow


def substeps(settings: SnowSettings, domain: SnowDomain, dt: float) -> int:
    """Transport sub-steps for Courant ≤ COURANT at the expected top speed (host-known: no sync)."""
    top = float(settings.wind_speed) * (1.0 + float(settings.gust_strength)) * GUST_MARGIN
    top += float(settings.drift_settling_speed)
    return max(1, math.ceil(top * float(dt) / (COURANT * float(domain.wind.voxel_size))))


def transport(load, u, v, w, solid, dt: float, settings: SnowSettings, domain: SnowDomain):
    """Step 3: carry the airborne snow *load* (nz, ny, nx) m³ with the wind's MAC faces
    (u, v, w), falling at w_s, in place. Returns the volume carried out of the domain
    (a 0-d float64 array of the load's module; no host sync)."""
    xp = backend.array_module(load)
    n = substeps(settings, domain, dt)
    c = np.float32(float(dt) / n / float(domain.wind.voxel_size))
    ws = np.float32(settings.drift_settling_speed)
    before = load.sum(dtype=xp.float64)
    if xp is not np:
        nz, ny, nx = load.shape
        cells = nx * ny * nz
        scale = xp.empty_like(load)
        buffers = (load, xp.empty_like(load))
        for _ in range(n):
            current, following = buffers
            _K.launch("drift_limit", cells, (u, v, w, solid, scale, np.int32(nx), np.int32(ny),
                                             np.int32(nz), c, ws))
            _K.launch("drift_advect", cells, (u, v, w, solid, current, scale, following,
                                              np.int32(nx), np.int32(ny), np.int32(nz), c, ws))
            buffers = (following, current)
        if buffers[0] is not load:
            load[...] = buffers[0]
    else:
        cx, cy, cz = _courant(u, v, w, solid, c, ws)
        for _ in range(n):
            load[...] = _advect_cpu(load, cx, cy, cz)
    return before - load.sum(dtype=xp.float64)


def _courant(u, v, w, solid, c, ws):
    """Face Courant numbers of the airborne snow: wind (w − w_s on z faces) × dt/h; 0 on
    faces touching a solid cell and on the ground and lid (cuda: face_courant)."""
    su, sv, sw = mac.faces_touching(solid)
    cx = u * c
    cx[su] = 0
    cy = v * c
    cy[sv] = 0
    cz = (w - ws) * c
    cz[sw] = 0
    cz[0] = 0
    cz[-1] = 0
    return cx.astype(np.float32), cy.astype(np.float32), cz.astype(np.float32)


def _advect_cpu(V, cx, cy, cz):
    """One donor-cell step (cuda: drift_limit + drift_advect)."""
    zero = np.float32(0)
    out_sum = ((((np.maximum(cx[:, :, 1:], zero) + np.maximum(-cx[:, :, :-1], zero))
                 + np.maximum(cy[:, 1:, :], zero)) + np.maximum(-cy[:, :-1, :], zero))
               + np.maximum(cz[1:], zero)) + np.maximum(-cz[:-1], zero)
    scale = np.where(out_sum > np.float32(1), np.float32(1) / np.where(out_sum > 1, out_sum, np.float32(1)),
                     np.float32(1))
    sV = V * scale

    def face_flux(cf, axis):
        lo = [slice(None)] * 3
        hi = [slice(None)] * 3
        lo[axis], hi[axis] = slice(0, -1), slice(1, None)
        pad = [(0, 0)] * 3
        pad[axis] = (1, 1)
        padded = np.pad(sV, pad)  # clean air beyond the sides
        return np.where(cf > zero, cf * padded[tuple(lo)], cf * padded[tuple(hi)])

    fx, fy, fz = face_flux(cx, 2), face_flux(cy, 1), face_flux(cz, 0)
    net = (((fx[:, :, :-1] - fx[:, :, 1:]) + (fy[:, :-1, :] - fy[:, 1:, :])) + (fz[:-1] - fz[1:]))
    return np.maximum(V + net, zero)
