"""The wind field (kernels/snow/wind.py, NumPy reference) against independent oracles:
divergence recomputed from the face arrays, a dense solve of the discrete Poisson problem,
a cell-by-cell red-black SOR loop, analytic linear fields for the sampler, mirror symmetry
and the physics of a wall's lee."""

from __future__ import annotations

import math

import numpy as np
import pytest

from voxfx.kernels.errors import InputError
from voxfx.kernels.grid import components
from voxfx.kernels.snow.domain import SnowDomain, SnowSettings
from voxfx.kernels.snow.wind import THESIS_OMEGAS, WindField, gust_factor

SPEED = 2.0
DT = 0.1
NEIGHBOURS = ((0, 0, -1), (0, 0, 1), (0, -1, 0), (0, 1, 0), (-1, 0, 0), (1, 0, 0))


def make_domain(size=(12.0, 8.0, 6.0), cells=24):
    """24×16×12 cells of 0.5 m by default."""
    return SnowDomain.from_box((0.0, 0.0, 0.0), size, cells, 16)


def make_wind(domain, **settings):
    settings.setdefault("wind_speed", SPEED)
    return WindField(domain, SnowSettings(**settings), np)


def wall_and_box(shape):
    """A wall across most of the width (x = 4..4.5 m, 3 m high) and a small box."""
    nz, ny, nx = shape
    solid = np.zeros(shape, np.uint8)
    solid[: nz // 2, 2 : ny - 2, 8] = 1
    solid[:3, 3:6, 15:18] = 1
    return solid


def divergence_of(u, v, w, h):
    """∇·v per cell from the MAC faces (the test's own stencil)."""
    u, v, w = (np.asarray(a, np.float64) for a in (u, v, w))
    return (np.diff(u, axis=2) + np.diff(v, axis=1) + np.diff(w, axis=0)) / h


def faces_touching(solid):
    """Masks of u, v, w faces with a solid cell on either side (brute force)."""
    nz, ny, nx = solid.shape
    su = np.zeros((nz, ny, nx + 1), bool)
    sv = np.zeros((nz, ny + 1, nx), bool)
    sw = np.zeros((nz + 1, ny, nx), bool)
    for k, j, i in zip(*np.nonzero(solid)):
        su[k, j, i] = su[k, j, i + 1] = True
        sv[k, j, i] = sv[k, j + 1, i] = True
        sw[k, j, i] = sw[k + 1, j, i] = True
    return su, sv, sw


def laplacian_matrix(solid):
    """Dense A of diag·p_c − Σ p_n over fluid cells, Neumann at walls and obstacles."""
    fluid = solid == 0
    index = -np.ones(solid.shape, int)
    index[fluid] = np.arange(int(fluid.sum()))
    A = np.zeros((int(fluid.sum()),) * 2)
    for k, j, i in zip(*np.nonzero(fluid)):
        c = index[k, j, i]
        for dk, dj, di in NEIGHBOURS:
            kk, jj, ii = k + dk, j + dj, i + di
            if all(0 <= a < n for a, n in zip((kk, jj, ii), solid.shape)) and fluid[kk, jj, ii]:
                A[c, c] += 1.0
                A[c, index[kk, jj, ii]] -= 1.0
    return A, fluid


# --------------------------------------------------------------------------- projection

def test_projection_leaves_divergence_below_the_solver_tolerance():
    domain = make_domain()
    wind = make_wind(domain, wind_direction=math.radians(35.0), gust_strength=0.5, gust_period=1.0,
                     pressure_tolerance=1e-4)
    solid = wall_and_box(wind.solid.shape)
    wind.set_obstacles(solid)
    fluid = solid == 0
    h, t = wind.h, 0.0
    for _ in range(8):  # stage by stage, to know the divergence before the projection
        inflow = wind.inflow_velocity(t + DT)
        wind.advect(DT, inflow)
        wind.balance_outflow(inflow)
        before = np.abs(divergence_of(wind.u, wind.v, wind.w, h)[fluid]).max()
        wind.build_rhs(DT)
        iterations, residual, converged = wind.solve_pressure(DT, inflow)
        wind.project(DT)
        after = np.abs(divergence_of(wind.u, wind.v, wind.w, h)[fluid]).max()
        assert converged and residual <= 1e-4
        # the module's promise: max|∇·v| ≤ tol · max(max|∇·F|, U/h) (+ float32 rounding)
        scale = max(before, SPEED / h)
        assert after <= 1.05e-4 * scale + 1e-6 * SPEED / h, (after, before)
        assert before > 0.01 * SPEED / h  # there was something to project
        t += DT


def test_steps_keep_divergence_small_relative_to_wind_speed_over_cell_size():
    domain = make_domain()
    wind = make_wind(domain, wind_direction=math.radians(200.0), gust_strength=0.3)
    solid = wall_and_box(wind.solid.shape)
    wind.set_obstacles(solid)
    t = 0.0
    for _ in range(10):
        wind.step(DT, t)
        t += DT
        div = divergence_of(wind.u, wind.v, wind.w, wind.h)[solid == 0]
        assert np.abs(div).max() <= 1e-3 * SPEED / wind.h  # stated tolerance: 1e-3 U/h
    assert np.allclose(wind.divergence()[solid == 0], div, atol=1e-6 * SPEED / wind.h)
    assert np.all(wind.divergence()[solid == 1] == 0)


def test_no_velocity_through_solid_faces():
    domain = make_domain()
    wind = make_wind(domain, wind_direction=math.radians(60.0))
    rng = np.random.default_rng(7)
    solid = (rng.random(wind.solid.shape) < 0.08).astype(np.uint8)
    solid[:2] = 1  # a ground slab too
    wind.set_obstacles(solid)
    closed = faces_touching(solid)
    for vel, mask in zip((wind.u, wind.v, wind.w), closed):
        assert np.all(vel[mask] == 0.0)
    t = 0.0
    for _ in range(4):
        wind.step(DT, t)
        t += DT
        for vel, mask in zip((wind.u, wind.v, wind.w), closed):
            assert np.all(vel[mask] == 0.0)
            assert np.abs(vel[~mask]).max() > 0.1 * SPEED
    assert np.all(wind.w[0] == 0) and np.all(wind.w[-1] == 0)  # ground and lid


@pytest.mark.parametrize("direction", [0.0, 30.0, 90.0, 200.0, 315.0])
def test_uniform_wind_without_obstacles_stays_the_inflow(direction):
    domain = make_domain()
    wind = make_wind(domain, wind_direction=math.radians(direction), gust_strength=0.5, gust_period=1.0)
    t, changes = 0.0, []
    for _ in range(12):
        wind.step(DT, t)
        t += DT
        U = wind.inflow_velocity(t)
        changes.append(np.hypot(U[0], U[1]))
        tol = 1e-3 * SPEED
        assert np.abs(wind.u - U[0]).max() <= tol
        assert np.abs(wind.v - U[1]).max() <= tol
        assert np.abs(wind.w).max() <= tol
    assert np.ptp(changes) > 0.05 * SPEED  # the gusts did change the inflow meanwhile


def _mean_wind(wind, x0, x1, y0, y1, z0, z1):
    g = np.stack(np.meshgrid(np.linspace(x0, x1, 6), np.linspace(y0, y1, 6), np.linspace(z0, z1, 6),
                             indexing="ij"), -1).reshape(-1, 3)
    s = wind.sample(g)
    return float(np.hypot(s[:, 0], s[:, 1]).mean()), float((s @ np.asarray(wind.direction)).mean())


@pytest.mark.parametrize("solver", ["converge", "thesis"])
def test_wall_across_the_wind_makes_a_lee(solver):
    domain = make_domain()
    wind = make_wind(domain, wind_direction=math.radians(10.0), gust_strength=0.3, pressure_solver=solver)
    nz, ny, nx = wind.solid.shape
    solid = np.zeros((nz, ny, nx), np.uint8)
    solid[:6, 2:14, 8] = 1  # 3 m high, 6 m wide wall at x = 4..4.5 m
    wind.set_obstacles(solid)
    t = 0.0
    for _ in range(40):
        wind.step(DT, t)
        t += DT
    up_speed, up_downwind = _mean_wind(wind, 0.5, 1.5, 3.0, 5.0, 0.25, 1.25)
    lee_speed, lee_downwind = _mean_wind(wind, 4.75, 6.0, 3.0, 5.0, 0.25, 1.25)
    aside_speed, _ = _mean_wind(wind, 4.75, 6.0, 0.1, 0.6, 0.25, 1.25)  # past the wall's end
    assert up_speed > 0.5 * SPEED
    assert lee_speed < 0.5 * up_speed, (lee_speed, up_speed)
    assert lee_downwind < 0.25 * up_downwind  # sheltered (reverse eddy allowed)
    assert aside_speed > 0.5 * up_speed  # the air goes around the wall


def test_mirrored_scene_gives_the_mirrored_wind():
    domain = make_domain()
    a = make_wind(domain, wind_direction=math.radians(0.0))
    b = make_wind(domain, wind_direction=math.radians(180.0))
    solid = wall_and_box(a.solid.shape)
    a.set_obstacles(solid)
    b.set_obstacles(solid[:, :, ::-1])
    t = 0.0
    for _ in range(10):
        a.step(DT, t)
        b.step(DT, t)
        t += DT
    tol = 1e-4 * SPEED
    assert np.abs(a.u - (-b.u[:, :, ::-1])).max() <= tol
    assert np.abs(a.v - b.v[:, :, ::-1]).max() <= tol
    assert np.abs(a.w - b.w[:, :, ::-1]).max() <= tol
    assert np.abs(a.u).max() > 0.5 * SPEED


def sealed_bay(shape):
    """Walls from ground to lid close a bay open only to the inflow side x = 0."""
    nz, ny, nx = shape
    solid = np.zeros((nz, ny, nx), np.uint8)
    solid[:, 3, :7] = solid[:, 11, :7] = 1
    solid[:, 3:12, 6] = 1
    return solid


@pytest.mark.parametrize("labelling", ["ndimage if installed", "without ndimage"])
def test_sealed_pocket_at_the_inflow_is_calm_and_the_solve_still_converges(labelling, monkeypatch):
    if labelling == "without ndimage":  # the grid core's own labelling (grid/components.py)
        monkeypatch.setattr(components, "_ndimage_labels", lambda mask, xp: None)
    domain = make_domain()
    wind = make_wind(domain, wind_direction=math.radians(0.0))  # inflow through x = 0
    solid = sealed_bay(wind.solid.shape)  # air could come in but never leave
    wind.set_obstacles(solid)
    pocket = np.zeros_like(solid, bool)
    pocket[:, 4:11, :6] = True
    assert np.all(wind.solid[pocket] == 1) and np.all(wind.solid[solid == 1] == 1)
    assert wind.solid.sum() == solid.sum() + pocket.sum()
    t = 0.0
    for _ in range(3):
        r = wind.step(DT, t)
        t += DT
        assert r["converged"], r
    assert np.all(wind.u[:, 4:11, :7] == 0)
    assert np.abs(wind.u[:, 13, :]).max() > 0.5 * SPEED  # beside it the wind blows


# --------------------------------------------------------------------------- pressure

def test_converge_solver_matches_a_direct_solve_of_the_same_poisson_problem():
    domain = make_domain((6.0, 4.0, 3.0), 12)  # 12×8×6 cells
    wind = make_wind(domain, wind_direction=math.radians(35.0), gust_strength=0.3, pressure_tolerance=1e-5)
    solid = np.zeros(wind.solid.shape, np.uint8)
    solid[:3, 2:6, 4:6] = 1
    wind.set_obstacles(solid)
    inflow = wind.inflow_velocity(DT)
    wind.advect(DT, inflow)
    wind.balance_outflow(inflow)
    wind.build_rhs(DT)
    # the test's own right-hand side: b = −h²(∇·F)/δt
    b = -wind.h**2 * divergence_of(wind.u, wind.v, wind.w, wind.h) / DT
    A, fluid = laplacian_matrix(solid)
    b = b[fluid]
    assert np.allclose(wind.rhs[fluid], b, rtol=1e-5, atol=1e-5 * np.abs(b).max())
    assert abs(b.sum()) <= 1e-5 * np.abs(b).sum()  # outflow balanced: the Neumann problem is solvable
    iterations, residual, converged = wind.solve_pressure(DT, inflow)
    assert converged and residual <= 1e-5
    assert iterations % wind.check_every == 0
    # the reported residual is the real one (max-norm, relative to max(max|b|, hU/δt))
    p = wind.p[fluid].astype(np.float64)
    real = np.abs(b - A @ p).max() / max(np.abs(b).max(), wind.h * SPEED / DT)
    assert real <= 1.5e-5
    # A is singular (constants per region): compare with the least-squares solution, up to a constant
    exact = np.linalg.lstsq(A, b, rcond=None)[0]
    err = np.abs((p - p.mean()) - (exact - exact.mean())).max()
    assert err <= 1e-4 * np.abs(exact - exact.mean()).max()


def _red_black_sor_loop(p, b, solid, omegas):
    """Cell by cell, red (i+j+k even) then black, p̄ = (b + Σ fluid neighbours)/count."""
    nz, ny, nx = solid.shape
    p = p.astype(np.float64).copy()
    for omega in omegas:
        for colour in (0, 1):
            for k in range(nz):
                for j in range(ny):
                    for i in range(nx):
                        if (i + j + k) % 2 != colour or solid[k, j, i]:
                            continue
                        total, count = 0.0, 0
                        for dk, dj, di in NEIGHBOURS:
                            kk, jj, ii = k + dk, j + dj, i + di
                            if 0 <= kk < nz and 0 <= jj < ny and 0 <= ii < nx and not solid[kk, jj, ii]:
                                total += p[kk, jj, ii]
                                count += 1
                        if count:
                            p[k, j, i] += omega * ((b[k, j, i] + total) / count - p[k, j, i])
    return p


def test_thesis_preset_does_exactly_five_sweeps():
    domain = make_domain((4.0, 3.0, 2.0), 8)  # 8×6×4 cells
    wind = make_wind(domain, wind_direction=math.radians(20.0), pressure_solver="thesis")
    solid = np.zeros(wind.solid.shape, np.uint8)
    solid[:2, 2:4, 3] = 1
    wind.set_obstacles(solid)
    wind.p[...] = 123.0  # the thesis starts every frame from p = 0 (§3.3.3)
    result = wind.step(DT, 0.0)
    assert result["iterations"] == 5 == len(THESIS_OMEGAS)
    assert THESIS_OMEGAS == (1.7, 1.5, 1.2, 1.1, 1.1)
    assert math.isfinite(result["residual"]) and result["residual"] > 0
    b = wind.rhs.astype(np.float64)
    zero = np.zeros_like(b)
    five = _red_black_sor_loop(zero, b, solid, THESIS_OMEGAS)
    scale = np.abs(five).max()
    assert np.abs(wind.p - five).max() <= 1e-5 * scale
    for wrong in (THESIS_OMEGAS[:4], THESIS_OMEGAS + (1.1,)):  # four or six sweeps differ
        assert np.abs(wind.p - _red_black_sor_loop(zero, b, solid, wrong)).max() > 1e-3 * scale


def test_converge_solver_is_warm_started_and_reports_failure_honestly():
    domain = make_domain()
    wind = make_wind(domain, wind_direction=math.radians(35.0), gust_strength=0.0)
    wind.set_obstacles(wall_and_box(wind.solid.shape))
    first = wind.step(DT, 0.0)
    later = [wind.step(DT, DT * (n + 1)) for n in range(5)]
    assert all(r["converged"] for r in [first] + later)
    assert later[-1]["iterations"] < first["iterations"]  # steady wind: the old pressure is a good guess
    capped = make_wind(domain, wind_direction=math.radians(35.0), pressure_tolerance=1e-9, )
    capped.max_iterations = 30
    capped.set_obstacles(wall_and_box(capped.solid.shape))
    r = capped.step(DT, 0.0)
    assert not r["converged"] and r["iterations"] == 30 and r["residual"] > 1e-9


# --------------------------------------------------------------------------- inflow and gusts

def test_gusts_vary_in_time_and_are_deterministic():
    domain = make_domain()
    settings = dict(wind_direction=math.radians(30.0), gust_strength=0.4, gust_period=2.0, seed=3)
    a, b = make_wind(domain, **settings), make_wind(domain, **settings)
    times = np.linspace(0.0, 40.0, 801)
    va = np.array([a.inflow_velocity(t) for t in times])
    vb = np.array([b.inflow_velocity(t) for t in times])
    assert np.array_equal(va, vb)
    speed = np.hypot(va[:, 0], va[:, 1])
    assert np.allclose(va[:, 1] / va[:, 0], math.tan(math.radians(30.0)))  # direction fixed
    assert np.all(va[:, 2] == 0)
    assert speed.min() >= SPEED * (1 - 0.4) - 1e-9 and speed.max() <= SPEED * (1 + 0.4) + 1e-9
    assert speed.std() > 0.05 * SPEED and np.ptp(speed) > 0.3 * SPEED  # it never settles
    assert np.abs(np.diff(speed)).max() < 0.05 * SPEED  # smooth at a 0.05 s spacing
    other = make_wind(domain, **{**settings, "seed": 4})
    assert not np.allclose([other.inflow_velocity(t) for t in times], va)
    calm = make_wind(domain, **{**settings, "gust_strength": 0.0})
    assert np.allclose([np.hypot(*calm.inflow_velocity(t)[:2]) for t in times], SPEED)
    strong = SnowSettings(gust_strength=3.0)
    assert min(gust_factor(t, strong) for t in times) >= 0.0  # never reverses


# --------------------------------------------------------------------------- sampling

def test_sample_reproduces_linear_fields_and_clamps_outside():
    domain = SnowDomain.from_box((-3.0, 2.0, 1.0), (3.0, 6.0, 4.0), 12, 8)
    wind = make_wind(domain)
    h, (ox, oy, oz) = wind.h, wind.origin
    nx, ny, nz = wind.nx, wind.ny, wind.nz

    def linear(x, y, z, a):
        return a[0] + a[1] * x + a[2] * y + a[3] * z

    coeffs = ([0.5, 0.3, -0.2, 0.1], [-1.0, 0.05, 0.4, -0.3], [0.2, -0.1, 0.15, 0.25])
    lattices = ((0, wind.u, (nz, ny, nx + 1)), (1, wind.v, (nz, ny + 1, nx)), (2, wind.w, (nz + 1, ny, nx)))
    for comp, vel, shape in lattices:
        k, j, i = np.indices(shape, dtype=np.float64)
        fx = ox + h * (i + (comp != 0) * 0.5)
        fy = oy + h * (j + (comp != 1) * 0.5)
        fz = oz + h * (k + (comp != 2) * 0.5)
        vel[...] = linear(fx, fy, fz, coeffs[comp])
    rng = np.random.default_rng(1)
    # inside the region every lattice covers: trilinear = the linear field itself
    lo = np.array([ox + h, oy + h, oz + h])
    hi = np.array(domain.wind.upper) - h
    pts = lo + rng.random((500, 3)) * (hi - lo)
    got = wind.sample(pts)
    assert got.dtype == np.float32 and got.shape == (500, 3)
    for comp in range(3):
        want = linear(pts[:, 0], pts[:, 1], pts[:, 2], coeffs[comp])
        assert np.abs(got[:, comp] - want).max() <= 2e-5
    # at a face position the sample is that face's value
    assert wind.sample([[ox + 3 * h, oy + 2.5 * h, oz + 1.5 * h]])[0, 0] == wind.u[1, 2, 3]
    # outside: the clamped (nearest boundary) value
    far = np.array([[ox - 10.0, oy + 2.5 * h, oz + 1.5 * h]])
    assert wind.sample(far)[0, 0] == wind.u[1, 2, 0]
    above = np.array([[ox + 3 * h, oy + 2.5 * h, oz + 100.0]])
    assert wind.sample(above)[0, 0] == pytest.approx(wind.u[nz - 1, 2, 3], abs=1e-6)


# --------------------------------------------------------------------------- errors

def test_bad_inputs_are_refused():
    wind = make_wind(make_domain())
    with pytest.raises(InputError):
        wind.set_obstacles(np.zeros((3, 3, 3), np.uint8))
    with pytest.raises(InputError):
        wind.step(0.0, 0.0)
    with pytest.raises(InputError):
        wind.step(float("nan"), 0.0)
    with pytest.raises(InputError):
        make_wind(make_domain(), pressure_solver="multigrid")
