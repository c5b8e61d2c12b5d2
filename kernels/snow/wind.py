"""Wind: stable fluids on the staggered grid of ``domain.py`` (seed 002 §2.3.3, §2.4.2,
§3.3.3). An inviscid fluid of density 1 (the Euler equations, Eq. 2.27) advanced by

  1. self-advection, semi-Lagrangian:  F(x) = v(x − δt·v(x))                 (Eq. 2.31–2.32)
     (+ the open sides' outflow rescaled so that the box keeps its mass)
  2. pressure Poisson equation:        Δp = ∇·F / δt                          (Eq. 2.28)
  3. projection:                       v = F − δt ∇p                          (Eq. 2.14)

on the MAC grid (u on x-faces, v on y-faces, w on z-faces; ``domain.py``). NumPy is the
reference; on CuPy the same stages run as the kernels of ``cuda/snow_wind.cu``, compiled
with ``--fmad=false`` so that both backends round alike.

Boundary conditions (§2.4.2):
  * Sides (x = 0, x = X, y = 0, y = Y) the wind blows *into*, and sides parallel to it,
    are **Dirichlet**: their faces carry the inflow's normal component, time-varying
    through the gusts (``inflow_velocity``); a backtrace that leaves the box through such
    a side samples the inflow vector (air that enters carries the inflow wind). Pressure
    sees them as walls (Neumann).
  * The other sides are **open** (outflow): their face velocities are advected
    (zero-gradient), then scaled so that what leaves equals what the Dirichlet sides bring
    in (``balance_outflow``; an even correction instead when they carry less than half of
    it). A ghost pressure p = 0 behind the open sides would be the other common choice,
    but it forbids a pressure gradient along those sides, so a gust entering a diagonal
    wind bends the flow near them by tens of per cent; balancing the flux keeps a uniform
    wind uniform through gusts.
  * Ground (z = 0): no-through, w = 0. Lid (z = Z): free-slip, w = 0, tangential
    components zero-gradient.
  * Obstacles: every face touching a solid cell has zero normal velocity. Air that no
    open side can reach (a pocket sealed by obstacles, ground, lid and inflow sides) has
    no way through and would make the Poisson problem unsolvable: it counts as solid.
  * Pressure is Neumann everywhere (§2.4.2): every boundary and obstacle face has a given
    velocity, so walls, sides and solid cells are left out of the Laplacian — a cell's
    ``diag`` counts its fluid neighbours only. p is then defined up to a constant per
    connected region (only its gradient enters the projection).

Pressure: the 7-point Laplacian (Eq. 2.16–2.17) written per fluid cell as
``diag·p_c − Σ p_n = b_c``, b = −h²(∇·F)/δt, solved by red-black SOR (Eq. 2.19); the
outflow balance makes b sum to zero over the open region, as the singular Neumann problem
needs.
``'converge'``: ω near optimal for the grid, warm-started from the previous step's
pressure, until the relative residual max|b − A p| / max(max|b|, h·U/δt) ≤
``pressure_tolerance`` (U = the wind speed); the residual is a device-side max, read
every ``check_every`` sweeps (one small host sync per check); on the GPU those sweeps and
the residual are one CUDA graph, replayed. ``'thesis'``: exactly five sweeps from p = 0
with ω = 1.7, 1.5, 1.2, 1.1, 1.1 (§3.3.3). Because the post-projection divergence of a cell
is −(δt/h²)·r_c, the relative residual bounds the divergence left:
``max|∇·v| ≤ tol · max(max|∇·F|, U/h)``.

Sampling convention (``sample``; the flakes sample the wind the same way): a world point x
maps to cell units ``c = (x − origin)·float32(1/h)`` in float32, and each component is
interpolated on its own lattice by the grid core's one sampler (``grid/sample.py``, on the
device ``sample_faces`` of ``cuda/include/voxfx_lattice.cuh``): trilinear, clamped, points
outside the grid get the nearest boundary value.

The staggered layout, solid faces, stencil and projection come from ``grid/mac.py`` (device:
``voxfx_mac.cuh``), the launches and the CUDA graph from ``grid/launch.py``.
"""

from __future__ import annotations

import math

import numpy as np

from .. import backend
from ..errors import InputError
from ..grid import components, mac
from ..grid.dense import MacGrid
from ..grid.sample import sample_face, sample_faces
from ..grid.launch import GraphLoop, Kernels
from ..progress import report

_CU = "snow_wind.cu"
_OPTIONS = ("--fmad=false",)  # round like NumPy: both backends give the same field
_THREADS = 256

THESIS_OMEGAS = (1.7, 1.5, 1.2, 1.1, 1.1)  # §3.3.3: five sweeps with falling ω
CHECK_EVERY = 10  # SOR sweeps between residual checks ('converge')
MAX_ITERATIONS = 2000  # SOR sweeps at most per step ('converge')
STALL_CHECKS = 20  # give up when this many checks in a row bring no 1 % improvement

WEST, EAST, SOUTH, NORTH = 1, 2, 4, 8  # side bits; snow_wind.cu gets them as SIDE_* -D options
_K = Kernels(_CU, _OPTIONS, _THREADS, defines={"SIDE_WEST": WEST, "SIDE_EAST": EAST, "SIDE_SOUTH": SOUTH,
                                               "SIDE_NORTH": NORTH})
_PARALLEL = 1e-6  # |direction component| below this: the side is parallel to the wind

_F32 = np.float32
_HALF = np.float32(0.5)


# --------------------------------------------------------------------------- gusts

_MASK64 = (1 << 64) - 1


def _hash_unit(seed: int, stream: int, knot: int) -> float:
    """A value in [−1, 1) from (seed, stream, knot): the splitmix64 finaliser."""
    x = (seed * 0x9E3779B97F4A7C15 + stream * 0xD1B54A32D192ED03 + knot * 0xBF58476D1CE4E5B9 + 1) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    x ^= x >> 31
    return (x >> 11) * (2.0 / (1 << 53)) - 1.0


def _value_noise(s: float, seed: int, stream: int) -> float:
    """Smooth 1D value noise: hashed values at integer knots, joined by smoothstep (C¹)."""
    k = math.floor(s)
    f = s - k
    f = f * f * (3.0 - 2.0 * f)
    a, b = _hash_unit(seed, stream, k), _hash_unit(seed, stream, k + 1)
    return a + f * (b - a)


def gust_factor(t: float, settings) -> float:
    """1 + gust_strength·g(t), g ∈ [−1, 1] a deterministic smooth noise of t/gust_period.

    The thesis interpolates linearly between preset velocities so that the field never
    settles (§2.4.2); here the presets are hashed knot values one gust period apart (plus
    an octave at 1/2.7 of the period), joined smoothly. Never below 0: the wind does not
    reverse."""
    s = float(t) / float(settings.gust_period)
    g = (_value_noise(s, settings.seed, 1) + 0.5 * _value_noise(2.7 * s + 0.37, settings.seed, 2)) / 1.5
    return max(0.0, 1.0 + float(settings.gust_strength) * g)


# --------------------------------------------------------------------------- NumPy stages

def _sealed_pockets(fluid, open_sides, xp):
    """Fluid cells no open side reaches through fluid (6-connected). Air can neither enter
    nor leave them, so a Dirichlet inflow face on one makes its Poisson problem unsolvable."""
    nz, ny, nx = fluid.shape
    seeds = xp.zeros_like(fluid)
    if open_sides & WEST:
        seeds[:, :, 0] |= fluid[:, :, 0]
    if open_sides & EAST:
        seeds[:, :, nx - 1] |= fluid[:, :, nx - 1]
    if open_sides & SOUTH:
        seeds[:, 0, :] |= fluid[:, 0, :]
    if open_sides & NORTH:
        seeds[:, ny - 1, :] |= fluid[:, ny - 1, :]
    if not bool(seeds.any()):
        return xp.zeros_like(fluid)  # every open face blocked: nothing to keep, seal nothing
    return fluid & ~components.reachable(fluid, seeds)


def _advect_numpy(old, new, closed, c, inflow, dirichlet):
    """Semi-Lagrangian self-advection with the boundary faces set (as ``advect`` in the .cu)."""
    nz, ny, nx = old[2].shape[0] - 1, old[2].shape[1], old[2].shape[2]
    for comp in range(3):
        x, y, z = mac.face_positions(comp, nx, ny, nz, np)
        vel = [old[a] if a == comp else sample_face(a, old[a], x, y, z) for a in range(3)]
        # Eq. 2.32: x − δt·v(x), in cell units (c = δt/h)
        bx, by, bz = x - c * vel[0], y - c * vel[1], z - c * vel[2]
        from_inflow = np.zeros(bx.shape, bool)
        if dirichlet & WEST:
            from_inflow |= bx < 0
        if dirichlet & EAST:
            from_inflow |= bx > _F32(nx)
        if dirichlet & SOUTH:
            from_inflow |= by < 0
        if dirichlet & NORTH:
            from_inflow |= by > _F32(ny)
        value = np.where(from_inflow, inflow[comp], sample_face(comp, old[comp], bx, by, bz))
        out = new[comp]
        out[...] = value
        if comp == 0:
            if dirichlet & WEST:
                out[:, :, 0] = inflow[0]
            if dirichlet & EAST:
                out[:, :, nx] = inflow[0]
        elif comp == 1:
            if dirichlet & SOUTH:
                out[:, 0, :] = inflow[1]
            if dirichlet & NORTH:
                out[:, ny, :] = inflow[1]
        else:
            out[0] = 0.0
            out[nz] = 0.0
        out[closed[comp]] = 0.0


# --------------------------------------------------------------------------- the field

class WindField:
    """Wind velocity on the MAC grid of ``domain.wind``, advanced by ``step``.

    Owns ``u, v, w`` (current) and their back buffers, ``p`` (pressure, ρ = 1, kept as the
    next solve's first guess), ``rhs`` (b of the last solve), ``solid`` (uint8 cells: the
    obstacles, plus sealed air pockets, see ``set_obstacles``) and
    ``diag`` (uint8: fluid neighbours per cell, 0 outside the solve). Arrays live on *xp*
    (NumPy or CuPy; default: the current backend)."""

    def __init__(self, domain, settings, xp=None, *, max_iterations: int = MAX_ITERATIONS,
                 check_every: int = CHECK_EVERY, omega: float | None = None):
        settings.check()
        self.domain, self.settings = domain, settings
        self.xp = backend.xp() if xp is None else xp
        self.gpu = self.xp is not np
        spec = domain.wind
        self.nx, self.ny, self.nz = (int(n) for n in spec.shape)
        self.h = float(spec.voxel_size)
        self.origin = tuple(float(o) for o in spec.origin)
        self.max_iterations = max(1, int(max_iterations))
        self.check_every = max(1, int(check_every))
        # SOR's optimal ω for the model problem, 2/(1 + sin(π/m)), with m twice the longest
        # side (walls and obstacles are Neumann, which doubles the effective length; this
        # measured best on 24- and 64-cell grids), kept in 1.7..1.98.
        n = max(self.nx, self.ny, self.nz)
        optimal = 2.0 / (1.0 + math.sin(math.pi / (2 * n)))
        self.omega = float(omega) if omega is not None else min(1.98, max(1.7, optimal))

        # Sides: the wind blows towards `direction`; a side it enters through, or one it
        # runs parallel to, is Dirichlet; the rest are open.
        th = float(settings.wind_direction)
        dx, dy = math.cos(th), math.sin(th)
        dx = 0.0 if abs(dx) < _PARALLEL else dx
        dy = 0.0 if abs(dy) < _PARALLEL else dy
        self.direction = (dx, dy, 0.0)
        self.dirichlet = (WEST if dx >= 0 else 0) | (EAST if dx <= 0 else 0) | \
                         (SOUTH if dy >= 0 else 0) | (NORTH if dy <= 0 else 0)
        self.open = (WEST | EAST | SOUTH | NORTH) & ~self.dirichlet

        xp_ = self.xp
        nx, ny, nz = self.nx, self.ny, self.nz
        cells = (nz, ny, nx)
        faces = mac.face_shapes(nx, ny, nz)
        # The grid core's dense MAC grid, starting from the uniform inflow wind
        # (divergence-free without obstacles).
        self.grid = MacGrid(spec, xp_, fill=self.inflow_velocity(0.0))
        self.w[0] = 0.0
        self.w[nz] = 0.0
        self._back = self.grid.face_arrays()
        self.p = self.grid.cell_array(xp_.float32)
        self.rhs = self.grid.cell_array(xp_.float32)
        self.solid = self.grid.cell_array(xp_.uint8)
        self.diag = self.grid.cell_array(xp_.uint8)
        self._stats = xp_.zeros(2, dtype=xp_.float32)  # [max|b|, max|r|] (device side)
        self._loops = {}  # pressure sweeps + residual per mode, each one CUDA graph
        if not self.gpu:
            red = mac.red_cells(cells, np)
            self._colours = (red, ~red)
            self._closed = tuple(np.zeros(s, bool) for s in faces)
        self.set_obstacles(xp_.zeros(cells, dtype=xp_.uint8))

    u = property(lambda self: self.grid.u, doc="x-velocity on the x-faces (nz, ny, nx+1), m/s")
    v = property(lambda self: self.grid.v, doc="y-velocity on the y-faces (nz, ny+1, nx), m/s")
    w = property(lambda self: self.grid.w, doc="z-velocity on the z-faces (nz+1, ny, nx), m/s")

    # ----------------------------------------------------------------------- set-up

    def set_obstacles(self, solid) -> None:
        """Obstacle cells (nz, ny, nx), nonzero = solid. Faces touching a solid cell get
        zero normal velocity now and after every step; solid cells leave the Laplacian.
        Air pockets that no open side can reach (sealed by obstacles, ground, lid and
        inflow sides) are still air with no way through: they join ``solid`` (calm)."""
        xp = self.xp
        nx, ny, nz = self.nx, self.ny, self.nz
        solid = xp.asarray(solid)
        if solid.shape != (nz, ny, nx):
            raise InputError(f"Wind obstacles must have shape {(nz, ny, nx)} (z, y, x cells), not {solid.shape}")
        fluid = solid == 0
        fluid &= ~_sealed_pockets(fluid, self.open, xp)
        self.solid[...] = ~fluid
        # diag: fluid neighbours per fluid cell (walls and obstacles are Neumann)
        d = mac.neighbour_count(fluid)
        d[~fluid] = 0
        self.diag[...] = d
        # fluid faces per side (one host sync here, none in step): the flux budget
        side_cells = {WEST: fluid[:, :, 0], EAST: fluid[:, :, nx - 1],
                      SOUTH: fluid[:, 0, :], NORTH: fluid[:, ny - 1, :]}
        self._side_faces = {side: int(cells.sum()) for side, cells in side_cells.items()}
        self.p[~fluid] = 0.0
        closed = mac.faces_touching(self.solid)
        for vel, mask in zip((self.u, self.v, self.w), closed):
            vel[mask] = 0.0
        if not self.gpu:
            self._closed = closed

    def inflow_velocity(self, t: float) -> np.ndarray:
        """The inflow wind at time t: speed·(cos θ, sin θ, 0)·gust_factor(t), float64 (3,)."""
        s = self.settings
        th = float(s.wind_direction)
        speed = float(s.wind_speed) * gust_factor(t, s)
        return np.array([speed * math.cos(th), speed * math.sin(th), 0.0])

    # ----------------------------------------------------------------------- the method

    def step(self, dt: float, t: float, progress=None) -> dict:
        """Advance the wind from time t to t + δt. Returns the pressure solve's
        ``iterations`` (SOR sweeps), ``residual`` (relative, see the module) and
        ``converged``. *progress* hears between blocks of sweeps (False: ``Cancelled``)."""
        dt = float(dt)
        if not (math.isfinite(dt) and dt > 0):
            raise InputError(f"The wind time step must be a positive number of seconds, not {dt}")
        inflow = self.inflow_velocity(float(t) + dt)  # Dirichlet values of the new field
        self.advect(dt, inflow)  # F = v(x − δt·v(x))              Eq. 2.31–2.32, boundaries set
        self.balance_outflow(inflow)  # open sides carry out what comes in
        self.build_rhs(dt)  # b = −h²∇·F/δt                          Eq. 2.28
        iterations, residual, converged = self.solve_pressure(dt, inflow, progress)  # Δp = ∇·F/δt, SOR Eq. 2.19
        self.project(dt)  # v = F − δt∇p, solid faces 0                    Eq. 2.14
        return {"iterations": iterations, "residual": residual, "converged": converged}

    # ----------------------------------------------------------------------- stages

    def advect(self, dt: float, inflow) -> None:
        c = _F32(dt / self.h)
        U = [_F32(x) for x in inflow]
        old = (self.u, self.v, self.w)
        if self.gpu:
            total = sum(int(a.size) for a in old)
            _K.launch("advect", total, (*old, self.solid, *self._back, np.int32(self.nx), np.int32(self.ny),
                                        np.int32(self.nz), c, U[0], U[1], U[2], np.int32(self.dirichlet)))
        else:
            _advect_numpy(old, self._back, self._closed, c, U, self.dirichlet)
        (self.grid.u, self.grid.v, self.grid.w), self._back = self._back, old  # swap the buffers

    def balance_outflow(self, inflow) -> None:
        """Scale the open sides' faces to the outward flux the Dirichlet sides demand."""
        if not self.open:
            return
        n = self._side_faces
        # net inward flux of the Dirichlet sides, in face units (h² dropped)
        q_in = (n[WEST] * inflow[0] if self.dirichlet & WEST else 0.0) \
            - (n[EAST] * inflow[0] if self.dirichlet & EAST else 0.0) \
            + (n[SOUTH] * inflow[1] if self.dirichlet & SOUTH else 0.0) \
            - (n[NORTH] * inflow[1] if self.dirichlet & NORTH else 0.0)
        n_open = sum(n[side] for side in (WEST, EAST, SOUTH, NORTH) if self.open & side)
        if n_open == 0:
            return  # every open face is blocked: no balance exists, the solve will stall and say so
        xp, nx, ny = self.xp, self.nx, self.ny
        slabs = {WEST: self.u[:, :, 0], EAST: self.u[:, :, nx], SOUTH: self.v[:, 0, :], NORTH: self.v[:, ny, :]}
        outward = {WEST: -1.0, EAST: 1.0, SOUTH: -1.0, NORTH: 1.0}
        flux = None  # outward flux of the open faces, float64, left on the device
        for side in (WEST, EAST, SOUTH, NORTH):
            if self.open & side:
                q = slabs[side].sum(dtype=xp.float64) * outward[side]
                flux = q if flux is None else flux + q
        if self.gpu:
            flux = xp.ascontiguousarray(flux.reshape(1))
            total = 2 * self.ny * self.nz + 2 * self.nx * self.nz
            _K.launch("balance_outflow", total, (self.u, self.v, self.solid, np.int32(self.nx), np.int32(self.ny),
                                                 np.int32(self.nz), np.int32(self.open), flux, np.float64(q_in),
                                                 np.float64(n_open)))
            return
        q = float(flux)
        if q_in > 0.0 and q > 0.5 * q_in:
            scale = _F32(q_in / q)
            for side in (WEST, EAST, SOUTH, NORTH):
                if self.open & side:
                    slabs[side][...] = slabs[side] * scale
        else:
            d = _F32((q_in - q) / n_open)
            for side in (WEST, EAST, SOUTH, NORTH):
                if self.open & side:
                    slabs[side][...] = slabs[side] + d if outward[side] > 0 else slabs[side] - d
        for side, mask in ((WEST, self._closed[0][:, :, 0]), (EAST, self._closed[0][:, :, nx]),
                           (SOUTH, self._closed[1][:, 0, :]), (NORTH, self._closed[1][:, ny, :])):
            if self.open & side:
                slabs[side][mask] = 0.0

    def build_rhs(self, dt: float) -> None:
        coef = _F32(-self.h / dt)
        if self.gpu:
            _K.launch_grid("clear_stats", (1,), (32,), (self._stats, np.int32(0), np.int32(2)))
            _K.launch("build_rhs", self.p.size, (self.u, self.v, self.w, self.diag, self.rhs, np.int32(self.nx),
                                                 np.int32(self.ny), np.int32(self.nz), coef, self._stats))
        else:
            u, v, w = self.u, self.v, self.w
            self.rhs[...] = np.where(self.diag > 0, mac.face_sum(u, v, w) * coef, _F32(0.0))
            self._stats[0] = np.abs(self.rhs).max()

    def solve_pressure(self, dt: float, inflow, progress=None) -> tuple:
        """(sweeps, relative residual, converged) of the pressure solve."""
        speed = max(float(self.settings.wind_speed), float(np.hypot(inflow[0], inflow[1])), 1e-6)
        floor = self.h * speed / dt  # h·U/δt: the right-hand side of a divergence U/h
        if self.settings.pressure_solver == "thesis":
            self.p[...] = 0.0  # §3.3.3: every frame starts from p = 0
            self._sweeps("thesis")
            b, r = self._read_stats()
            rel = r / max(b, floor)
            return len(THESIS_OMEGAS), rel, rel <= float(self.settings.pressure_tolerance)
        tol = float(self.settings.pressure_tolerance)
        iterations, best, since_best = 0, math.inf, 0
        while True:
            self._sweeps("converge")  # check_every sweeps and the residual, on the device
            iterations += self.check_every
            b, r = self._read_stats()  # the one host sync per check
            rel = r / max(b, floor)
            if not math.isfinite(rel):
                return iterations, rel, False
            if rel <= tol:
                return iterations, rel, True
            if rel < 0.99 * best:
                best, since_best = rel, 0
            else:
                since_best += 1
            if iterations >= self.max_iterations or since_best >= STALL_CHECKS:
                return iterations, rel, False
            report(progress, iterations / self.max_iterations, f"wind pressure: sweep {iterations}")  # after the sync

    def project(self, dt: float) -> None:
        c = _F32(dt / self.h)
        if self.gpu:
            total = mac.face_count(self.nx, self.ny, self.nz)
            _K.launch("project", total, (self.u, self.v, self.w, self.p, self.solid, np.int32(self.nx),
                                         np.int32(self.ny), np.int32(self.nz), c))
            return
        # v = F − δt∇p (Eq. 2.14): air (solid = 0) the unknowns, faces touching a solid 0
        mac.project(self.u, self.v, self.w, self.p, c, self.solid, 0, 1, False, masks=self._closed)

    # ----------------------------------------------------------------------- pressure sweeps

    def _sweeps(self, mode: str) -> None:
        """'converge': check_every red-black sweeps at self.omega, then the residual;
        'thesis': the five sweeps of §3.3.3, then the residual. Residual → stats[1]."""
        omegas = THESIS_OMEGAS if mode == "thesis" else (self.omega,) * self.check_every
        if not self.gpu:
            p, b = self.p, self.rhs
            d = self.diag.astype(np.float32)
            safe = np.where(self.diag > 0, d, _F32(1.0))
            for omega in omegas:
                om = _F32(omega)
                for colour in self._colours:  # red, then black with the new red values
                    cells = colour & (self.diag > 0)
                    s = mac.neighbour_sum(p)
                    new = p + om * ((b + s) / safe - p)
                    p[cells] = new[cells]
            s = mac.neighbour_sum(p)
            r = np.where(self.diag > 0, np.abs(b - (d * p - s)), _F32(0.0))
            self._stats[1] = r.max()
            return
        loop = self._loops.get(mode)
        if loop is None:
            _K.load("sor_sweep", "clear_stats", "residual")  # compile and load before capturing
            loop = self._loops[mode] = GraphLoop(self._launch_sweeps, args=(omegas,))
        loop.run()

    def _launch_sweeps(self, omegas) -> None:
        nx, ny, nz = np.int32(self.nx), np.int32(self.ny), np.int32(self.nz)
        half = ((self.nx + 1) // 2) * self.ny * self.nz
        for omega in omegas:
            for colour in (0, 1):
                _K.launch("sor_sweep", half, (self.p, self.rhs, self.diag, nx, ny, nz, np.int32(colour), _F32(omega)))
        _K.launch_grid("clear_stats", (1,), (32,), (self._stats, np.int32(1), np.int32(1)))
        _K.launch("residual", self.p.size, (self.p, self.rhs, self.diag, nx, ny, nz, self._stats))

    def _read_stats(self) -> tuple:
        b, r = (float(x) for x in backend.to_numpy(self._stats))
        return b, r

    # ----------------------------------------------------------------------- queries

    def divergence(self):
        """∇·v per cell (1/s), 0 in solid cells; an array of the field's module."""
        xp = self.xp
        total = mac.face_sum(self.u, self.v, self.w)
        return xp.where(self.solid == 0, total / _F32(self.h), _F32(0.0)).astype(xp.float32)

    def sample(self, points):
        """Wind (N, 3) float32 at world *points* (N, 3), with the module's sampling
        convention (the flakes' one); an array of the field's module."""
        xp = self.xp
        pts = xp.ascontiguousarray(xp.asarray(points, dtype=xp.float32).reshape(-1, 3))
        if self.gpu:
            o = tuple(_F32(a) for a in self.origin)
            inv_h = _F32(1.0 / self.h)
            out = xp.empty_like(pts)
            n = int(pts.shape[0])
            if n:
                _K.launch("sample_wind", n, (self.u, self.v, self.w, np.int32(self.nx), np.int32(self.ny),
                                             np.int32(self.nz), o[0], o[1], o[2], inv_h, pts, out, np.int64(n)))
            return out
        x, y, z = self.grid.cell_coords(pts)
        return np.stack(sample_faces((self.u, self.v, self.w), x, y, z), axis=1).astype(np.float32)
