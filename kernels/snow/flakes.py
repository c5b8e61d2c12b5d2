"""Falling snow flakes (seed 002 §2.4.1, §3.3.1–3.3.2): spawn, move in the wind, land on
the height field, deposit, respawn. NumPy reference here; CuPy arrays run the fused
kernel of ``kernels/cuda/snow_flakes.cu`` (one thread per flake, one launch per step, no
host sync), which mirrors this file term by term.

State layout (``domain.py``): ``pos``/``vel`` (N, 3) float32, ``phase`` (N,) float32 the
spiral angle ωt, ``spawn`` (N,) uint32 the life count. R, ω and V_max,z are re-derived each
step from the hash of (seed, flake id, spawn) (``kernels/rng.py``), never stored.

Model, per flake and step (z up, g = (0, 0, −9.81)):

    V_fluid = V_wind − V_snow                                          (Eq. 2.20)
    F_drag/m = (|V_fluid|² g / V_max,z²) · V_fluid/|V_fluid| = k·V_fluid,
               k = g |V_fluid| / V_max,z²                              (Eq. 2.21–2.22)
    a = g + k·V_fluid                                                  (Eq. 2.23)
    V_circ = |V_fluid| / |V_snow| · ωR (−sin ωt, cos ωt, 0)            (Eq. 2.24)
    p += (V_snow + V_circ) Δt + ½ a Δt²                                (Eq. 2.25)
    V_snow += a Δt                                                     (Eq. 2.26)

Stability. Explicit Eq. 2.26 linearised about terminal velocity multiplies the error by
1 − 2gΔt/V_max,z each step: it overshoots for Δt > V_max,z/2g (25 ms for wet snow) and
diverges for Δt > V_max,z/g (51 ms — two frames at 24 fps already exceed it). The drag
is therefore taken linearly implicit (one Rosenbrock–Euler step): with a from Eq. 2.23
exactly as written and its Jacobian ∂a/∂V = −k (I + ŵŵᵀ), ŵ = V_fluid/|V_fluid|,

    Δv = (I − Δt ∂a/∂V)⁻¹ a Δt = Δt (a − kΔt/(1 + 2kΔt) (ŵ·a) ŵ) / (1 + kΔt)

(Sherman–Morrison), V^{t+Δt} = V^t + Δv, and Eq. 2.25 uses a·Δt = Δv. This equals
Eq. 2.26 up to O((kΔt)²), has exactly its fixed point (a = 0: the flake falls at V_max,z
relative to the air) and, linearised there, shrinks the error by 1/(1 + 2gΔt/V_max,z)
per step: monotone and stable for every Δt (L-stable). In Eq. 2.24 |V_snow| is floored
at V_max,z: a flake momentarily slow in a strong wind (just respawned, or after a gust)
would otherwise be flung by a ratio |V_fluid|/|V_snow| without bound; at terminal
velocity in still air or horizontal wind |V_snow| ≥ V_max,z and the floor does not act. The
spiral angle is each flake's ``phase`` (advanced by ωΔt, kept in [0, 2π)) rather than a
global ωt, so flakes are not in step.

Boundaries. x and y are periodic over the wind box. A flake lifted above the top is held
at the lid (z = top, upward speed dropped). It lands when z < terrain + snow at the
nearest ground vertex (round((x − x0)/cell), clamped to the lattice; columns with
``NO_GROUND`` never collide) — at the vertex it came from when it was already below that
surface before the move (it met a wall from the side and slides to its foot) — and then
adds 16 units to ``deposit`` over the 3×3 nearest
vertices, weights 1-2-1 × 1-2-1 mirrored into the lattice at its sides (§3.3.2; integer, so
the sum is exactly 16 × landed on both backends), counts one in ``landed``, and respawns
(§3.3.1): spawn + 1, new x/y uniform over the box, z within one wind cell below the top,
velocity and parameters fresh per Table 2.2. Flakes below the box's bottom (no ground)
and flakes whose state is not finite respawn without a deposit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .. import backend
from ..backend import array_module
from ..errors import InputError
from .. import rng
from ..grid.launch import Kernels
from ..grid.sample import sample_faces
from . import rng as streams  # the flakes' stream numbers
from .domain import DEPOSIT_WEIGHTS, GRAVITY, NO_GROUND, PRESETS, SPIN_RANGE, SPIRAL_RADIUS, SnowDomain, SnowSettings

_CU = "snow_flakes.cu"
_OPTIONS = ("--fmad=false",)  # round like NumPy: init is bit-identical on both backends
_THREADS = 256  # a multiple of 32: the step kernel sums the landed count per warp

_F = np.float32
_G = _F(GRAVITY)
_TWO_PI = _F(2.0 * np.pi)


@dataclass
class Flakes:
    """Structure of arrays of N flakes on one backend (``domain.py``)."""

    pos: object  # (N, 3) float32
    vel: object  # (N, 3) float32
    phase: object  # (N,) float32, spiral angle in [0, 2π)
    spawn: object  # (N,) uint32, respawns so far

    @property
    def count(self) -> int:
        return int(self.pos.shape[0])

    @property
    def xp(self):
        return array_module(self.pos)

    def copy(self) -> "Flakes":
        return Flakes(self.pos.copy(), self.vel.copy(), self.phase.copy(), self.spawn.copy())

    def to_numpy(self) -> "Flakes":
        return Flakes(*(backend.to_numpy(a) for a in (self.pos, self.vel, self.phase, self.spawn)))


class Spawning(NamedTuple):
    """Host constants of spawning and of the per-flake parameters, in the order of the
    kernels' SPAWNING_PARAMETERS; float32 so both backends start from the same bits."""

    seed_key: np.uint32
    ox: np.float32
    oy: np.float32
    oz: np.float32
    lx: np.float32
    ly: np.float32
    top: np.float32
    drop: np.float32  # respawn band below the top: one wind cell
    vmax_lo: np.float32
    vmax_span: np.float32
    radius_lo: np.float32
    radius_span: np.float32
    radius_scale: np.float32
    omega_lo: np.float32
    omega_span: np.float32


def spawning(domain: SnowDomain, settings: SnowSettings) -> Spawning:
    if settings.preset not in PRESETS:
        raise InputError(f"Flake preset must be one of {', '.join(PRESETS)}, not {settings.preset!r}")
    if not np.isfinite(settings.spiral_scale) or settings.spiral_scale < 0:
        raise InputError(f"Spiral scale must be a finite number ≥ 0, not {settings.spiral_scale}")
    nx, ny, nz = domain.wind.shape
    h = domain.wind.voxel_size
    ox, oy, oz = domain.wind.origin
    vlo, vhi = (_F(v) for v in PRESETS[settings.preset])
    rlo, rhi = (_F(v) for v in SPIRAL_RADIUS)
    wlo, whi = (_F(v) for v in SPIN_RANGE)
    return Spawning(rng.seed_key(settings.seed), _F(ox), _F(oy), _F(oz), _F(nx * h), _F(ny * h),
                    _F(domain.top), _F(min(h, 0.5 * nz * h)), vlo, _F(vhi - vlo), rlo, _F(rhi - rlo),
                    _F(settings.spiral_scale), wlo, _F(whi - wlo))


class _Ground(NamedTuple):
    gx: np.int32
    gy: np.int32
    x0: np.float32
    y0: np.float32
    cell: np.float32


def _ground(domain: SnowDomain) -> _Ground:
    gx, gy = domain.ground_shape
    return _Ground(np.int32(gx), np.int32(gy), _F(domain.ground_origin[0]), _F(domain.ground_origin[1]),
                   _F(domain.ground_cell))


# --------------------------------------------------------------------------- per-flake draws


def flake_parameters(s: Spawning, key):
    """(V_max,z, R, ω) per flake key (Table 2.2; R scaled by spiral_scale). NumPy or CuPy."""
    xp = array_module(key)
    vmax = s.vmax_lo + rng.uniform_from_key(key, streams.STREAM_VMAX) * s.vmax_span
    radius = (s.radius_lo + rng.uniform_from_key(key, streams.STREAM_RADIUS) * s.radius_span) * s.radius_scale
    omega = s.omega_lo + rng.uniform_from_key(key, streams.STREAM_OMEGA) * s.omega_span
    omega = xp.where(rng.uniform_from_key(key, streams.STREAM_OMEGA_SIGN) < _F(0.5), -omega, omega)
    return vmax, radius, omega


def parameters_of(flakes: Flakes, settings: SnowSettings, domain: SnowDomain):
    """(V_max,z, R, ω) of every flake in its current life."""
    xp = flakes.xp
    s = spawning(domain, settings)
    key = rng.key(s.seed_key, xp.arange(flakes.count, dtype=xp.uint32), flakes.spawn)
    return flake_parameters(s, key)


def _spawn_velocity(s: Spawning, key):
    """Table 2.2: V_snow = ([-1, 1], [-1, 1], −V_max,z) (z up) and a random spiral phase."""
    vmax, _, _ = flake_parameters(s, key)
    vel = np.empty((key.shape[0], 3), np.float32)
    vel[:, 0] = _F(2) * rng.uniform_from_key(key, streams.STREAM_VX) - _F(1)
    vel[:, 1] = _F(2) * rng.uniform_from_key(key, streams.STREAM_VY) - _F(1)
    vel[:, 2] = -vmax
    phase = rng.uniform_from_key(key, streams.STREAM_PHASE) * _TWO_PI
    return vel, phase


def _nearest_vertex(x, origin, cell, n):
    q = np.rint((x - origin) / cell)  # round half to even, as rintf
    return np.fmin(np.fmax(q, _F(0)), _F(n - 1)).astype(np.int64)  # fmin/fmax: NaN → 0, as fminf/fmaxf


# --------------------------------------------------------------------------- init


def init_flakes(n: int, domain: SnowDomain, settings: SnowSettings, xp=np, terrain=None, snow=None) -> Flakes:
    """N flakes in their first life (spawn 0), uniform in the part of the domain box above
    the ground (``terrain`` + ``snow`` at the nearest vertex, when given) — the steady
    density of a snowfall, so the first seconds deposit like the later ones. Rejection
    with ``streams.INIT_ATTEMPTS`` tries; a flake whose tries all fall below the ground starts
    uniformly above the ground of its last column. Velocity and parameters per Table 2.2."""
    n = int(n)
    if n < 1:
        raise InputError(f"Flake count must be at least 1, not {n}")
    s = spawning(domain, settings)
    g = _ground(domain)
    if (terrain is None) != (snow is None):
        raise InputError("init_flakes needs both terrain and snow, or neither")
    if terrain is not None:
        terrain, snow = _ground_arrays(terrain, snow, g, xp)
    if xp is not np:
        return _init_gpu(n, s, g, terrain, snow)

    key = rng.key(s.seed_key, np.arange(n, dtype=np.uint32), np.zeros(n, np.uint32))
    pos = np.empty((n, 3), np.float32)
    todo = np.arange(n)
    for attempt in range(streams.INIT_ATTEMPTS):
        o = attempt * streams.INIT_ATTEMPT_STRIDE
        k = key[todo]
        x = s.ox + rng.uniform_from_key(k, streams.STREAM_X + o) * s.lx
        y = s.oy + rng.uniform_from_key(k, streams.STREAM_Y + o) * s.ly
        uz = rng.uniform_from_key(k, streams.STREAM_Z + o)
        z_lo = np.full(todo.size, s.oz, np.float32)
        if terrain is not None:
            c = (_nearest_vertex(y, g.y0, g.cell, g.gy), _nearest_vertex(x, g.x0, g.cell, g.gx))
            ground = terrain[c]
            has = ground != NO_GROUND
            z_lo[has] = np.fmin(np.fmax(ground[has] + snow[c][has], s.oz), s.top)
        z = s.oz + uz * (s.top - s.oz)
        ok = z >= z_lo
        if attempt == streams.INIT_ATTEMPTS - 1:
            z = np.where(ok, z, z_lo + uz * (s.top - z_lo))
            ok[:] = True
        pos[todo[ok]] = np.stack([x[ok], y[ok], z[ok]], axis=1)
        todo = todo[~ok]
        if todo.size == 0:
            break
    vel, phase = _spawn_velocity(s, key)
    return Flakes(pos, vel, phase, np.zeros(n, np.uint32))


# --------------------------------------------------------------------------- wind lookup


def sample_wind(u, v, w, domain: SnowDomain, pos):
    """Wind (N, 3) at world positions from the MAC arrays (``domain.py``): trilinear per
    component on its own faces, clamped to the domain boundary. NumPy."""
    ox, oy, oz = (_F(o) for o in domain.wind.origin)
    inv_h = _F(1.0 / domain.wind.voxel_size)
    gx = (pos[:, 0] - ox) * inv_h
    gy = (pos[:, 1] - oy) * inv_h
    gz = (pos[:, 2] - oz) * inv_h
    return np.stack(sample_faces((u, v, w), gx, gy, gz), axis=1)  # u at (i, j+½, k+½)·h, …


# --------------------------------------------------------------------------- step


def step_flakes(flakes: Flakes, u, v, w, domain: SnowDomain, terrain, snow, deposit, landed, dt, t,
                settings: SnowSettings) -> Flakes:
    """Advance every flake by *dt* seconds in place (see the module notes), add the units
    of flakes that land to *deposit* ((gy, gx) uint32) and their count to *landed*
    (1-element uint64 or uint32). *t* (the time at the start of the step) is accepted for
    a uniform stage signature; the spiral angle lives in ``flakes.phase``."""
    del t
    dt = float(dt)
    if not np.isfinite(dt) or dt <= 0:
        raise InputError(f"Time step must be a positive number of seconds, not {dt}")
    xp = flakes.xp
    s = spawning(domain, settings)
    g = _ground(domain)
    _check_state(flakes, u, v, w, domain, terrain, snow, deposit, landed, xp)
    if xp is not np:
        _step_gpu(flakes, u, v, w, domain, terrain, snow, deposit, landed, _F(dt), s, g)
        return flakes

    dt = _F(dt)
    n = flakes.count
    ids = np.arange(n, dtype=np.uint32)
    vmax, radius, omega = flake_parameters(s, rng.key(s.seed_key, ids, flakes.spawn))
    p, V = flakes.pos, flakes.vel
    W = sample_wind(u, v, w, domain, p)

    Vf = W - V  # Eq. 2.20
    fluid_speed = np.sqrt(Vf[:, 0] * Vf[:, 0] + Vf[:, 1] * Vf[:, 1] + Vf[:, 2] * Vf[:, 2])
    snow_speed = np.sqrt(V[:, 0] * V[:, 0] + V[:, 1] * V[:, 1] + V[:, 2] * V[:, 2])
    k = _G * fluid_speed / (vmax * vmax)  # Eq. 2.21–2.23: a = g + k·V_fluid
    a = k[:, None] * Vf
    a[:, 2] -= _G
    # Eq. 2.26 linearly implicit in the drag (module notes): Δv = (I − Δt ∂a/∂V)⁻¹ a Δt.
    kdt = k * dt
    with np.errstate(divide="ignore"):
        inv_speed = np.where(fluid_speed > 0, _F(1) / fluid_speed, _F(0))
    wh = Vf * inv_speed[:, None]
    along = kdt / (_F(1) + _F(2) * kdt) * (wh[:, 0] * a[:, 0] + wh[:, 1] * a[:, 1] + wh[:, 2] * a[:, 2])
    damp = _F(1) + kdt
    dv = dt * (a - along[:, None] * wh) / damp[:, None]
    Vn = V + dv
    ratio = fluid_speed / np.fmax(snow_speed, vmax)  # Eq. 2.24, |V_snow| floored at V_max,z
    circ = ratio * omega * radius
    ph = flakes.phase
    x = p[:, 0] + (V[:, 0] + (-circ * np.sin(ph))) * dt + _F(0.5) * dv[:, 0] * dt  # Eq. 2.25, a·Δt = Δv
    y = p[:, 1] + (V[:, 1] + circ * np.cos(ph)) * dt + _F(0.5) * dv[:, 1] * dt
    z = p[:, 2] + V[:, 2] * dt + _F(0.5) * dv[:, 2] * dt
    ph = ph + omega * dt
    ph = ph - _TWO_PI * np.floor(ph / _TWO_PI)

    with np.errstate(invalid="ignore"):  # NaN flakes are respawned below
        finite = np.isfinite(x) & np.isfinite(y) & np.isfinite(z) & np.isfinite(Vn).all(axis=1) & np.isfinite(ph)
        x = _wrap(x, s.ox, s.lx)
        y = _wrap(y, s.oy, s.ly)
        lifted = z > s.top
        z[lifted] = s.top
        Vn[lifted, 2] = np.minimum(Vn[lifted, 2], _F(0))

        xs, ys = np.where(finite, x, s.ox), np.where(finite, y, s.oy)
        ci = _nearest_vertex(xs, g.x0, g.cell, g.gx)
        cj = _nearest_vertex(ys, g.y0, g.cell, g.gy)
        ground = terrain[cj, ci]
        surface = ground + snow[cj, ci]
        hit = finite & (ground != NO_GROUND) & (z < surface)  # §3.3.1
        respawn = ~finite | hit | (z < s.oz)
        # Met a wall: a flake already below the surface of the column it moves into came in
        # from the side (a roof's edge, a step) and slides down to the foot, the vertex it
        # came from — it does not land on top of the wall (issue 22 §4).
        pci = _nearest_vertex(np.where(finite, p[:, 0], s.ox), g.x0, g.cell, g.gx)
        pcj = _nearest_vertex(np.where(finite, p[:, 1], s.oy), g.y0, g.cell, g.gy)
        side = hit & (p[:, 2] < surface) & (terrain[pcj, pci] != NO_GROUND)
        ci, cj = np.where(side, pci, ci), np.where(side, pcj, cj)

    count = int(np.count_nonzero(hit))
    if count:
        deposit_units(deposit, ci[hit], cj[hit], terrain)
        landed[0] += landed.dtype.type(count)

    flakes.pos[:, 0], flakes.pos[:, 1], flakes.pos[:, 2] = x, y, z
    flakes.vel[...] = Vn
    flakes.phase[...] = ph
    if np.any(respawn):
        _respawn(flakes, np.nonzero(respawn)[0], s)
    return flakes


def _wrap(x, lo, length):
    """Periodic in [lo, lo + length); same float ops as the kernel."""
    out = ~((x >= lo) & (x < lo + length))
    if np.any(out):
        d = x[out] - lo
        d = d - length * np.floor(d / length)
        x[out] = np.where((d >= _F(0)) & (d < length), lo + d, lo)
    return x


def _mirror(i, n):
    """Index -1 → 1 and n → n - 2 (snow_flakes.cu mirror_index)."""
    return np.where(i < 0, -i, np.where(i >= n, 2 * (n - 1) - i, i))


def deposit_units(deposit, ci, cj, terrain=None):
    """§3.3.2: 16 units per flake over the 3×3 vertices around (ci, cj), 1-2-1 × 1-2-1,
    a weight that would fall off the lattice mirrored onto the vertex inside it (-1 → 1:
    a side vertex stands for half a cell's area, and mirroring gives it half the units of
    an inner one, so the depth stays even to the lattice's sides; issue 18), and weights
    of neighbours with no ground (``NO_GROUND``) folded onto the impact vertex: exact
    integer conservation, and no snow where nothing receives it."""
    gy, gx = deposit.shape
    for dj in (-1, 0, 1):
        jj = _mirror(cj + dj, gy)
        for di in (-1, 0, 1):
            ii = _mirror(ci + di, gx)
            if terrain is not None:
                bare = terrain[jj, ii] == NO_GROUND
                jj, ii = np.where(bare, cj, jj), np.where(bare, ci, ii)
            np.add.at(deposit, (jj, ii), DEPOSIT_WEIGHTS[dj + 1, di + 1])


def _respawn(flakes: Flakes, idx, s: Spawning):
    """§3.3.1: a new life near the top with new x/y, velocity and parameters."""
    flakes.spawn[idx] += np.uint32(1)
    key = rng.key(s.seed_key, idx.astype(np.uint32), flakes.spawn[idx])
    flakes.pos[idx, 0] = s.ox + rng.uniform_from_key(key, streams.STREAM_X) * s.lx
    flakes.pos[idx, 1] = s.oy + rng.uniform_from_key(key, streams.STREAM_Y) * s.ly
    flakes.pos[idx, 2] = s.top - rng.uniform_from_key(key, streams.STREAM_Z) * s.drop
    flakes.vel[idx], flakes.phase[idx] = _spawn_velocity(s, key)


# --------------------------------------------------------------------------- checks


def _ground_arrays(terrain, snow, g: _Ground, xp):
    shape = (int(g.gy), int(g.gx))
    for name, a in (("terrain", terrain), ("snow", snow)):
        if tuple(a.shape) != shape:
            raise InputError(f"Snow {name} must have the ground lattice's shape {shape}, not {tuple(a.shape)}")
    return (xp.ascontiguousarray(xp.asarray(terrain), dtype=xp.float32),
            xp.ascontiguousarray(xp.asarray(snow), dtype=xp.float32))


def _check_state(flakes, u, v, w, domain, terrain, snow, deposit, landed, xp):
    nx, ny, nz = domain.wind.shape
    gx, gy = domain.ground_shape
    n = flakes.count
    want = {"flake positions": (flakes.pos, (n, 3), np.float32), "flake velocities": (flakes.vel, (n, 3), np.float32),
            "flake phases": (flakes.phase, (n,), np.float32), "flake spawn counts": (flakes.spawn, (n,), np.uint32),
            "wind u": (u, (nz, ny, nx + 1), np.float32), "wind v": (v, (nz, ny + 1, nx), np.float32),
            "wind w": (w, (nz + 1, ny, nx), np.float32), "terrain": (terrain, (gy, gx), np.float32),
            "snow depth": (snow, (gy, gx), np.float32), "deposit": (deposit, (gy, gx), np.uint32)}
    for name, (a, shape, dtype) in want.items():
        if array_module(a) is not xp:
            raise InputError(f"Snow {name} must live on the same backend as the flakes")
        if tuple(a.shape) != shape or a.dtype != dtype:
            raise InputError(f"Snow {name} must be {np.dtype(dtype).name} of shape {shape}, "
                             f"not {a.dtype} of shape {tuple(a.shape)}")
        if not a.flags.c_contiguous:
            raise InputError(f"Snow {name} must be a C-contiguous array")
    if array_module(landed) is not xp or tuple(landed.shape) != (1,) or landed.dtype not in (np.uint64, np.uint32):
        raise InputError("The landed counter must be a 1-element uint64 or uint32 array on the flakes' backend")


# --------------------------------------------------------------------------- CuPy launches of cuda/snow_flakes.cu


# Constants from one source: snow_flakes.cu gets them as -D options (unsigned streams).
DEFINES = {**{n: np.uint32(getattr(streams, n)) for n in dir(streams) if n.startswith(("STREAM_", "INIT_"))},
           "GRAVITY": float(_G), "TWO_PI": float(_TWO_PI), "NO_GROUND": float(NO_GROUND)}
_K = Kernels(_CU, _OPTIONS, _THREADS, defines=DEFINES)
_K_LANDED_32 = Kernels(_CU, _OPTIONS + ("-DLANDED_32",), _THREADS, defines=DEFINES)  # a uint32 landed counter


def _init_gpu(n, s: Spawning, g: _Ground, terrain, snow) -> Flakes:
    import cupy as cp

    flakes = Flakes(cp.empty((n, 3), cp.float32), cp.empty((n, 3), cp.float32), cp.empty(n, cp.float32),
                    cp.empty(n, cp.uint32))
    has_terrain = terrain is not None
    if not has_terrain:  # a valid pointer the kernel never reads
        terrain = snow = cp.zeros(1, cp.float32)
    _K.launch("init_flakes", n, (flakes.pos, flakes.vel, flakes.phase, flakes.spawn, np.int64(n), *s, terrain, snow,
                                 np.int32(has_terrain), *g))
    return flakes


def _step_gpu(flakes, u, v, w, domain, terrain, snow, deposit, landed, dt, s: Spawning, g: _Ground):
    nx, ny, nz = domain.wind.shape
    n = flakes.count
    (_K_LANDED_32 if landed.dtype == np.uint32 else _K).launch(
        "step_flakes", n,
        (flakes.pos, flakes.vel, flakes.phase, flakes.spawn, np.int64(n), *s, u, v, w, np.int32(nx), np.int32(ny),
         np.int32(nz), _F(1.0 / domain.wind.voxel_size), terrain, snow, deposit, *g, landed, dt))
