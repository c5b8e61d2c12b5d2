"""Snow flakes on the CPU (seed 002 §2.4.1, §3.3.1–3.3.2) against independent oracles:
statistics of the counter-based RNG, the analytic terminal velocity, the explicit form of
Eq. 2.20–2.26 written out here, exact integer conservation of the deposit, and a brute-force
3×3 deposit written here."""

import re
import warnings

import numpy as np
import pytest

from voxfx.kernels import backend
from voxfx.kernels.errors import InputError
from voxfx.kernels.snow import flakes as fl
from voxfx.kernels import rng
from voxfx.kernels.snow import rng as streams
from voxfx.kernels.snow.domain import NO_GROUND, PRESETS, SPIN_RANGE, SnowDomain, SnowSettings

G = 9.81


class World:
    """Wind, ground and counters for one domain: uniform wind, flat ground (or none)."""

    def __init__(self, lo=(0, 0, 0), hi=(10, 8, 6), wind_cells=20, ground_vertices=41, wind=(0, 0, 0),
                 ground=0.0, landed_dtype=np.uint64):
        self.domain = SnowDomain.from_box(lo, hi, wind_cells, ground_vertices)
        nx, ny, nz = self.domain.wind.shape
        self.u = np.full((nz, ny, nx + 1), wind[0], np.float32)
        self.v = np.full((nz, ny + 1, nx), wind[1], np.float32)
        self.w = np.full((nz + 1, ny, nx), wind[2], np.float32)
        gx, gy = self.domain.ground_shape
        self.terrain = np.full((gy, gx), ground, np.float32)
        self.snow = np.zeros((gy, gx), np.float32)
        self.deposit = np.zeros((gy, gx), np.uint32)
        self.landed = np.zeros(1, landed_dtype)

    def step(self, flakes, settings, dt, steps=1):
        for i in range(steps):
            fl.step_flakes(flakes, self.u, self.v, self.w, self.domain, self.terrain, self.snow, self.deposit,
                           self.landed, dt, i * dt, settings)
        return flakes

    def vertex(self, i, j):
        x0, y0 = self.domain.ground_origin
        return x0 + i * self.domain.ground_cell, y0 + j * self.domain.ground_cell


def flakes_at(pos, vel=None):
    pos = np.ascontiguousarray(pos, np.float32)
    n = len(pos)
    vel = np.zeros((n, 3), np.float32) if vel is None else np.ascontiguousarray(np.broadcast_to(vel, (n, 3)),
                                                                                 np.float32)
    return fl.Flakes(pos, vel, np.zeros(n, np.float32), np.zeros(n, np.uint32))


# --------------------------------------------------------------------------- RNG


def test_rng_streams_reach_the_cuda_source_as_compile_options():
    """Constants from one source (issue 19): snow_flakes.cu defines none of them itself and
    is compiled with every stream of rng.py as an unsigned -D option."""
    source = backend.cuda_source("snow_flakes.cu")
    assert not re.findall(r"#define (?:STREAM|INIT)_\w+", source)
    options = dict(o[2:].split("=") for o in fl._K.options if o.startswith("-D"))
    ours = {name: getattr(streams, name) for name in dir(streams) if name.startswith(("STREAM_", "INIT_"))}
    assert len(ours) == 12 and {k: options[k] for k in ours} == {k: f"{v}u" for k, v in ours.items()}
    assert float.fromhex(options["GRAVITY"][:-1]) == float(np.float32(9.81))


def test_mix32_is_a_bijection_and_stays_uint32():
    x = np.arange(1 << 20, dtype=np.uint32) * np.uint32(4093)
    h = rng.mix32(x)
    assert h.dtype == np.uint32 and h.shape == x.shape
    assert np.unique(h).size == x.size
    assert rng.mix32(np.uint32(7)).dtype == np.uint32  # 0-d input


def test_mix32_avalanches():
    """Flipping any input bit flips every output bit with probability ½: neighbouring flake
    ids (which differ in a few low bits) get unrelated numbers."""
    x = np.random.default_rng(0).integers(0, 2**32, 1 << 16, dtype=np.uint64).astype(np.uint32)
    h = rng.mix32(x)
    shifts = np.arange(32, dtype=np.uint32)
    for bit in range(32):
        flipped = h ^ rng.mix32(x ^ np.uint32(1 << bit))
        p = ((flipped[:, None] >> shifts) & np.uint32(1)).mean(axis=0)
        assert np.abs(p - 0.5).max() < 0.02, (bit, p)


@pytest.mark.parametrize("seed", [0, 1, -1, 2**40 + 17, 2**70])
def test_uniform_has_no_warnings_or_promotion(seed):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an overflowing scalar multiply would warn
        a = rng.uniform(seed, np.arange(1000, dtype=np.uint32), 4_000_000_000, 9)
        b = rng.uniform(seed, np.uint32(3), np.uint32(0), 0)
        c = rng.uniform(seed, np.arange(5, dtype=np.int64), np.arange(5, dtype=np.int64), 2)
    assert a.dtype == b.dtype == c.dtype == np.float32
    assert np.all((a >= 0) & (a < 1))


def chi_square(counts):
    expected = counts.sum() / counts.size
    return float(((counts - expected) ** 2 / expected).sum())


@pytest.mark.parametrize("seed,stream,spawn", [(0, 0, 0), (12345, 5, 3), (2**33 + 5, 9, 1_000_000)])
def test_uniform_is_uniform(seed, stream, spawn):
    n = 1 << 20
    u = rng.uniform(seed, np.arange(n, dtype=np.uint32), np.full(n, spawn, np.uint32), stream)
    assert u.dtype == np.float32 and u.min() >= 0 and u.max() < 1
    bins = 256  # χ² with 255 degrees of freedom: mean 255, sd 22.6 — accept ±6 sd
    chi2 = chi_square(np.bincount((u * bins).astype(np.int64), minlength=bins))
    assert abs(chi2 - (bins - 1)) < 6 * np.sqrt(2 * (bins - 1)), chi2
    s = np.sort(u.astype(np.float64))  # Kolmogorov–Smirnov, p ≈ 1e-6 bound
    d = max(np.max(np.arange(1, n + 1) / n - s), np.max(s - np.arange(n) / n))
    assert d < 2.7 / np.sqrt(n), d
    assert abs(u.mean() - 0.5) < 6 * np.sqrt(1 / 12 / n)


def pair_chi_square(a, b, bins=32):
    cells = (a * bins).astype(np.int64) * bins + (b * bins).astype(np.int64)
    return chi_square(np.bincount(cells, minlength=bins * bins)), bins * bins - 1


@pytest.mark.parametrize("pair", ["streams", "neighbour ids", "spawns", "seeds"])
def test_uniform_is_independent_across_ids_streams_spawns_and_seeds(pair):
    n = 1 << 20
    ids = np.arange(n, dtype=np.uint32)
    zero = np.zeros(n, np.uint32)
    a = rng.uniform(7, ids, zero, 0)
    b = {"streams": lambda: rng.uniform(7, ids, zero, 1),
         "neighbour ids": lambda: rng.uniform(7, ids + np.uint32(1), zero, 0),
         "spawns": lambda: rng.uniform(7, ids, zero + np.uint32(1), 0),
         "seeds": lambda: rng.uniform(8, ids, zero, 0)}[pair]()
    chi2, dof = pair_chi_square(a, b)
    assert abs(chi2 - dof) < 6 * np.sqrt(2 * dof), chi2
    r = np.corrcoef(a, b)[0, 1]
    assert abs(r) < 6 / np.sqrt(n), r
    assert not np.array_equal(a, b)


# --------------------------------------------------------------------------- init


@pytest.mark.parametrize("preset", ["wet", "dry"])
def test_init_follows_table_2_2(preset):
    world = World()
    settings = SnowSettings(preset=preset, seed=5, spiral_scale=0.05)
    flakes = fl.init_flakes(20000, world.domain, settings)
    lo, hi = np.array(world.domain.wind.origin), np.array(world.domain.wind.upper)
    assert np.all(flakes.pos >= lo) and np.all(flakes.pos <= hi)
    assert flakes.pos.dtype == flakes.vel.dtype == flakes.phase.dtype == np.float32
    assert flakes.spawn.dtype == np.uint32 and not flakes.spawn.any()
    vmax, radius, omega = fl.parameters_of(flakes, settings, world.domain)
    v_lo, v_hi = PRESETS[preset]
    assert np.all((vmax >= v_lo) & (vmax <= v_hi)) and vmax.max() - vmax.min() > 0.9 * (v_hi - v_lo)
    assert np.array_equal(flakes.vel[:, 2], -vmax)  # z up: falling
    assert np.all(np.abs(flakes.vel[:, :2]) <= 1) and np.abs(flakes.vel[:, :2]).max() > 0.99
    assert np.all((radius >= 0) & (radius < 2 * 0.05))
    w = np.abs(omega)
    assert np.all((w >= np.float32(SPIN_RANGE[0])) & (w <= np.float32(SPIN_RANGE[1])))
    assert 0.45 < np.mean(omega > 0) < 0.55
    assert np.all((flakes.phase >= 0) & (flakes.phase < 2 * np.pi))
    for axis in range(3):  # uniform over the box
        counts = np.histogram(flakes.pos[:, axis], bins=10, range=(lo[axis], hi[axis]))[0]
        assert counts.min() > 0.85 * 2000


def test_init_starts_flakes_above_the_ground_of_their_column():
    world = World()
    world.terrain[10:20, 5:30] = 4.0  # a block
    world.terrain[:, 35:] = NO_GROUND  # a hole: flakes may start down to the box's bottom
    world.snow[10:20, 5:30] = 0.5
    flakes = fl.init_flakes(20000, world.domain, SnowSettings(), terrain=world.terrain, snow=world.snow)
    d = world.domain
    i = np.clip(np.rint((flakes.pos[:, 0] - d.ground_origin[0]) / d.ground_cell), 0, d.ground_shape[0] - 1)
    j = np.clip(np.rint((flakes.pos[:, 1] - d.ground_origin[1]) / d.ground_cell), 0, d.ground_shape[1] - 1)
    i, j = i.astype(int), j.astype(int)
    ground = world.terrain[j, i]
    surface = np.where(ground == NO_GROUND, d.wind.origin[2], ground + world.snow[j, i])
    assert np.all(flakes.pos[:, 2] >= surface) and np.all(flakes.pos[:, 2] <= d.top)
    on_block = world.terrain[j, i] == 4.0
    assert on_block.sum() > 300 and flakes.pos[on_block, 2].min() < 4.6
    assert flakes.pos[ground == NO_GROUND, 2].min() < 0.5
    # Uniform in volume above the ground: as many flakes per m³ over the block as elsewhere.
    area = d.ground_cell**2
    block_volume = (world.terrain == 4.0).sum() * area * (d.top - 4.5)
    open_volume = (world.terrain == 0.0).sum() * area * d.top
    on_open = world.terrain[j, i] == 0.0
    assert abs((on_block.sum() / block_volume) / (on_open.sum() / open_volume) - 1) < 0.15
    # Nothing lands in the first step of still air except what starts within one step of the ground.
    world.step(flakes, SnowSettings(), 1e-3)
    assert world.landed[0] < 0.01 * 20000


def test_same_seed_gives_identical_state():
    def run(seed):
        world = World(wind=(1.5, -0.5, 0.2))
        world.terrain[5:15, 5:15] = 2.0
        settings = SnowSettings(seed=seed)
        flakes = fl.init_flakes(3000, world.domain, settings)
        world.step(flakes, settings, 1 / 24, steps=60)
        return flakes, world

    a, wa = run(11)
    b, wb = run(11)
    c, _ = run(12)
    for x, y in zip((a.pos, a.vel, a.phase, a.spawn, wa.deposit, wa.landed),
                    (b.pos, b.vel, b.phase, b.spawn, wb.deposit, wb.landed)):
        assert np.array_equal(x, y)
    assert wa.landed[0] > 100
    assert not np.array_equal(a.pos, c.pos)


# --------------------------------------------------------------------------- motion


def high_flakes(world, settings, n, z):
    """Flakes of the first life, moved to height z (no ground contact for a while)."""
    flakes = fl.init_flakes(n, world.domain, settings)
    flakes.pos[:, 2] = z
    return flakes


@pytest.mark.parametrize("preset,dt", [("wet", 1 / 24), ("dry", 1 / 24), ("wet", 0.2), ("dry", 1.0)])
def test_still_air_reaches_terminal_velocity(preset, dt):
    """Explicit Euler diverges for Δt > V_max,z/g (51 ms wet); the implicit drag must not."""
    world = World(hi=(10, 8, 400), ground=NO_GROUND)
    settings = SnowSettings(preset=preset, seed=3)
    flakes = high_flakes(world, settings, 4000, 390.0)
    world.step(flakes, settings, dt, steps=int(np.ceil(4.0 / dt)))
    assert not flakes.spawn.any()
    vmax, _, _ = fl.parameters_of(flakes, settings, world.domain)
    assert np.all(np.abs(flakes.vel[:, 2] / -vmax - 1) < 0.01)
    assert np.abs(flakes.vel[:, :2]).max() < 0.01 and np.abs(flakes.vel[:, :2].mean(0)).max() < 1e-3


def test_uniform_wind_carries_flakes_at_the_wind_speed():
    wind = (3.0, -1.0, 0.0)
    world = World(hi=(10, 8, 400), ground=NO_GROUND, wind=wind)
    settings = SnowSettings(preset="wet", seed=9)
    flakes = high_flakes(world, settings, 4000, 390.0)
    world.step(flakes, settings, 1 / 24, steps=96)
    assert not flakes.spawn.any() and world.landed[0] == 0
    mean = flakes.vel.mean(0)
    assert abs(mean[0] - 3.0) < 0.03 * 3.0 and abs(mean[1] + 1.0) < 0.03 * 1.0
    vmax, _, _ = fl.parameters_of(flakes, settings, world.domain)
    assert np.all(np.abs(flakes.vel[:, 2] / -vmax - 1) < 0.01)  # relative to the air: V_max,z


def test_small_step_follows_equations_2_20_to_2_26():
    """One tiny step against the explicit equations written out here."""
    wind = np.array([1.2, -0.7, 0.4])
    world = World(lo=(-2, -2, -2), hi=(2, 2, 2), wind=wind, ground=NO_GROUND)
    settings = SnowSettings(preset="dry", seed=21, spiral_scale=1.0)
    rs = np.random.default_rng(4)
    n = 5000
    flakes = flakes_at(rs.uniform(-1.5, 1.5, (n, 3)), rs.uniform(-3, 3, (n, 3)))
    flakes.phase[:] = rs.uniform(0, 2 * np.pi, n)
    p, V, phase = (flakes.pos.astype(float), flakes.vel.astype(float), flakes.phase.astype(float))
    vmax, radius, omega = (a.astype(float) for a in fl.parameters_of(flakes, settings, world.domain))
    dt = 2e-5  # the implicit drag differs from Eq. 2.26 by O(kΔt) ≤ 0.3 % here

    Vf = wind - V  # Eq. 2.20
    speed = np.linalg.norm(Vf, axis=1)
    drag = (speed**2 * G / vmax**2)[:, None] * Vf / speed[:, None]  # Eq. 2.21–2.22 (m = 1)
    a = np.array([0, 0, -G]) + drag  # Eq. 2.23
    ratio = speed / np.linalg.norm(V, axis=1)
    circ = (ratio * omega * radius)[:, None] * np.stack([-np.sin(phase), np.cos(phase), 0 * phase], axis=1)  # 2.24
    p_next = p + (V + circ) * dt + 0.5 * a * dt**2  # Eq. 2.25
    V_next = V + a * dt  # Eq. 2.26
    world.step(flakes, settings, dt)

    keep = np.linalg.norm(V, axis=1) > vmax  # the |V_snow| floor is not at work
    assert keep.mean() > 0.8
    dv, dv_want = flakes.vel - V, V_next - V
    assert np.allclose(dv[keep], dv_want[keep], rtol=0.01, atol=2e-7)
    assert np.allclose(flakes.pos[keep], p_next[keep], rtol=0, atol=1e-6)
    assert np.abs(circ * dt).max() > 20e-6  # the spiral term is resolved by that tolerance
    assert np.allclose(flakes.phase, np.mod(phase + omega * dt, 2 * np.pi), atol=1e-6)


def test_flake_at_rest_in_still_air_or_strong_wind_stays_finite():
    world = World(ground=NO_GROUND)
    settings = SnowSettings(spiral_scale=1.0)
    flakes = flakes_at(np.tile([5.0, 4.0, 3.0], (2, 1)))  # V_snow = 0
    world.step(flakes, settings, 1 / 24)
    assert np.all(np.isfinite(flakes.pos)) and np.all(np.isfinite(flakes.vel))
    world.u[...] = 20.0  # |V_fluid| = 20 with |V_snow| = 0: the floor bounds Eq. 2.24 ...
    flakes = flakes_at(np.tile([5.0, 4.0, 3.0], (200, 1)))
    vmax, radius, omega = fl.parameters_of(flakes, settings, world.domain)
    world.step(flakes, settings, 1 / 24)
    moved = np.linalg.norm(flakes.pos - [5, 4, 3], axis=1)
    bound = (20.0 + 20.0 / vmax * np.abs(omega) * radius) / 24  # ... at |V_fluid|/V_max,z
    assert np.all(np.isfinite(flakes.pos)) and np.all(moved <= bound)


def test_non_finite_flakes_respawn_without_deposit():
    world = World()
    flakes = flakes_at([[np.nan, 1, 1], [1, np.inf, 0.01], [2, 2, 2]], [[0, 0, 0], [0, 0, -1], [0, 0, np.nan]])
    world.step(flakes, SnowSettings(), 0.1)
    assert np.array_equal(flakes.spawn, [1, 1, 1]) and world.landed[0] == 0 and not world.deposit.any()
    assert np.all(np.isfinite(flakes.pos)) and np.all(np.isfinite(flakes.vel))


def test_wind_sampling_is_exact_for_linear_fields_and_clamps_outside():
    world = World(lo=(-1, 2, 0.5), hi=(5, 6, 4), wind_cells=12)
    d = world.domain
    h = d.wind.voxel_size
    ox, oy, oz = d.wind.origin
    nx, ny, nz = d.wind.shape

    def field(x, y, z, c):
        return c[0] + c[1] * x + c[2] * y + c[3] * z

    coef = [(0.5, 1.0, -2.0, 0.25), (-1.0, 0.3, 0.7, 1.5), (2.0, -0.4, 0.1, -0.9)]
    offsets = [(0, .5, .5), (.5, 0, .5), (.5, .5, 0)]  # u, v, w faces in cells (domain.py)
    for arr, c, off in zip((world.u, world.v, world.w), coef, offsets):
        k, j, i = np.indices(arr.shape)
        arr[...] = field(ox + (i + off[0]) * h, oy + (j + off[1]) * h, oz + (k + off[2]) * h, c)
    rs = np.random.default_rng(0)
    inner_lo = np.array([ox, oy, oz]) + h / 2
    inner_hi = np.array([ox + nx * h, oy + ny * h, oz + nz * h]) - h / 2
    pos = rs.uniform(inner_lo, inner_hi, (2000, 3)).astype(np.float32)
    got = fl.sample_wind(world.u, world.v, world.w, d, pos)
    want = np.stack([field(*pos.T.astype(float), c) for c in coef], axis=1)
    assert np.allclose(got, want, atol=2e-5)
    above = np.array([[1.0, 4.0, 100.0]], np.float32)  # clamped to the top row of u faces
    top_u = field(1.0, 4.0, oz + (nz - 0.5) * h, coef[0])
    assert np.isclose(fl.sample_wind(world.u, world.v, world.w, d, above)[0, 0], top_u, atol=2e-5)


# --------------------------------------------------------------------------- boundaries


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_flakes_wrap_around_sideways_without_deposit(sign):
    world = World(wind=(4.0 * sign, -4.0 * sign, 0.0))
    d = world.domain
    x1, y1 = d.wind.upper[0], d.wind.upper[1]
    start = [x1 - 0.01, 0.01] if sign > 0 else [0.01, y1 - 0.01]
    flakes = flakes_at([[*start, 3.0]], [4.0 * sign, -4.0 * sign, 0.0])
    world.step(flakes, SnowSettings(spiral_scale=0.0), 0.05)  # moves 0.2 m in x and y
    assert flakes.spawn[0] == 0 and world.landed[0] == 0 and not world.deposit.any()
    want = [0.19, y1 - 0.19] if sign > 0 else [x1 - 0.19, 0.19]
    assert np.allclose(flakes.pos[0, :2], want, atol=1e-3)
    assert np.all(flakes.pos[:, :2] >= 0) and np.all(flakes.pos[:, :2] < [x1, y1])


def test_flakes_fall_out_of_the_bottom_without_ground_and_respawn():
    world = World(ground=NO_GROUND)
    settings = SnowSettings(seed=2)
    flakes = flakes_at(np.tile([4.0, 4.0, 0.01], (50, 1)), [0, 0, -2.0])
    world.step(flakes, settings, 0.05)
    assert np.all(flakes.spawn == 1) and world.landed[0] == 0 and not world.deposit.any()
    check_respawned(flakes, world, settings)


def check_respawned(flakes, world, settings):
    """§3.3.1 respawn near the top with Table 2.2's velocity of the new life."""
    d = world.domain
    assert np.all(flakes.pos[:, 2] <= d.top) and np.all(flakes.pos[:, 2] >= d.top - d.wind.voxel_size)
    assert np.all(flakes.pos[:, :2] >= d.wind.origin[:2]) and np.all(flakes.pos[:, :2] <= d.wind.upper[:2])
    vmax, _, _ = fl.parameters_of(flakes, settings, d)
    assert np.array_equal(flakes.vel[:, 2], -vmax) and np.all(np.abs(flakes.vel[:, :2]) <= 1)
    assert np.unique(flakes.pos[:, 0]).size == len(flakes.pos)  # fresh x per flake


def test_updraft_holds_flakes_at_the_lid():
    world = World(wind=(0, 0, 8.0))
    flakes = flakes_at(np.tile([4.0, 4.0, 5.9], (10, 1)), [0, 0, 3.0])
    world.step(flakes, SnowSettings(), 0.1, steps=5)
    assert np.all(flakes.pos[:, 2] <= world.domain.top) and np.all(flakes.vel[:, 2] <= 0)
    assert not flakes.spawn.any()


# --------------------------------------------------------------------------- collision and deposit


def deposit_oracle(shape, vertices):
    """The 1-2-1 × 1-2-1 stencil, a weight off the lattice mirrored onto the vertex just
    inside (-1 → 1, n → n - 2): a side vertex stands for half a cell (issue 18)."""
    gy, gx = shape

    def mirror(k, n):
        return -k if k < 0 else (2 * (n - 1) - k if k >= n else k)

    out = np.zeros(shape, np.int64)
    for i, j in vertices:
        for dj, wj in ((-1, 1), (0, 2), (1, 1)):
            for di, wi in ((-1, 1), (0, 2), (1, 1)):
                out[mirror(j + dj, gy), mirror(i + di, gx)] += wi * wj
    return out


@pytest.mark.parametrize("landed_dtype", [np.uint64, np.uint32])
def test_deposit_is_conserved_on_edges_and_corners(landed_dtype):
    world = World(landed_dtype=landed_dtype)
    gx, gy = world.domain.ground_shape
    cell = world.domain.ground_cell
    corners = [(0, 0), (gx - 1, 0), (0, gy - 1), (gx - 1, gy - 1)]
    edges = [(0, 7), (gx - 1, 9), (13, 0), (21, gy - 1), (1, 1), (gx - 2, gy - 2)]
    rs = np.random.default_rng(1)
    inner = [tuple(v) for v in zip(rs.integers(0, gx, 500), rs.integers(0, gy, 500))]
    vertices = corners + edges + inner + corners  # repeats: atomics must add up
    pos = [(*world.vertex(i, j), -0.01) for i, j in vertices]
    jitter = rs.uniform(-0.4, 0.4, (len(pos), 2)) * cell  # still nearest to the same vertex
    pos = np.array(pos, np.float32)
    pos[:, :2] = np.clip(pos[:, :2] + jitter, 0, np.array(world.domain.wind.upper[:2]) - 1e-3)
    flakes = flakes_at(pos)
    world.step(flakes, SnowSettings(), 1e-6)  # V = W = 0: flakes stay put, then land
    assert world.landed[0] == len(vertices) and world.landed.dtype == landed_dtype
    assert int(world.deposit.sum(dtype=np.int64)) == 16 * int(world.landed[0])
    assert np.array_equal(world.deposit, deposit_oracle((gy, gx), vertices))
    assert np.all(flakes.spawn == 1)


def test_a_flake_that_meets_a_wall_from_the_side_lands_at_its_foot():
    """Flakes 1 m up beside a 3 m block, blown into its columns, meet its wall: they land
    at the vertex they came from (the wall's foot), never on the block's top; a flake
    above the top lands on it (issue 22 §4: a roof's lip got 6–15 % extra snow)."""
    world = World()
    gx, gy = world.domain.ground_shape
    cell = world.domain.ground_cell
    world.terrain[:, 20:] = 3.0  # a block from vertex column 20 on
    y = np.arange(3, gy - 3) * cell
    side = np.stack([np.full(y.size, 19.45 * cell), y, np.full(y.size, 1.0)], axis=1)  # 1 m up, beside
    top = np.stack([np.full(y.size, 19.45 * cell), y, np.full(y.size, 3.02)], axis=1)  # just above the top
    flakes = flakes_at(np.concatenate([side, top]), [4.0 * cell, 0, -1.0])  # 0.2 cell on in 0.05 s
    world.step(flakes, SnowSettings(spiral_scale=0.0), 0.05)
    assert world.landed[0] == 2 * y.size
    rows = list(range(3, gy - 3))
    want = deposit_oracle((gy, gx), [(19, j) for j in rows] + [(20, j) for j in rows])
    assert np.array_equal(world.deposit, want)


def test_deposit_is_conserved_over_a_long_windy_run():
    world = World(wind=(2.0, 1.0, 0.0))
    world.terrain[...] = np.linspace(0, 1.5, world.terrain.shape[1], dtype=np.float32)  # a slope to the walls
    world.terrain[:, -4:] = NO_GROUND
    settings = SnowSettings(seed=4)
    flakes = fl.init_flakes(5000, world.domain, settings)
    world.step(flakes, settings, 1 / 24, steps=120)
    assert world.landed[0] > 2000
    assert int(world.deposit.sum(dtype=np.int64)) == 16 * int(world.landed[0])
    assert int(flakes.spawn.sum(dtype=np.int64)) >= int(world.landed[0])  # hole: respawns without landing


def test_roof_receives_snow_only_where_flakes_fall_on_it():
    world = World()
    gx, gy = world.domain.ground_shape
    roof = np.zeros((gy, gx), bool)
    roof[8:20, 6:31] = True  # asymmetric: a swapped x/y lookup would miss it
    world.terrain[roof] = 3.0
    cell = world.domain.ground_cell
    # A layer of flakes 1 cm above the roof height, on a lattice offset from the vertices.
    xs = np.arange(0.3, gx - 1, 1.0) * cell
    ys = np.arange(0.3, gy - 1, 1.0) * cell
    X, Y = np.meshgrid(xs, ys)
    pos = np.stack([X.ravel(), Y.ravel(), np.full(X.size, 3.01)], axis=1)
    flakes = flakes_at(pos, [0, 0, -1.0])
    world.step(flakes, SnowSettings(spiral_scale=0.0), 0.05)  # falls 5 cm
    near = (np.rint(pos[:, 1] / cell).astype(int), np.rint(pos[:, 0] / cell).astype(int))
    on_roof = roof[near]
    assert world.landed[0] == on_roof.sum() > 100
    assert np.array_equal(flakes.spawn, on_roof.astype(np.uint32))
    want = deposit_oracle((gy, gx), [(i, j) for j, i in zip(*near) if roof[j, i]])
    assert np.array_equal(world.deposit, want)
    ring = np.zeros_like(roof)  # roof plus the 3×3 spill at its rim
    ring[7:21, 5:32] = True
    assert not world.deposit[~ring].any()


def test_roof_and_open_ground_get_the_same_snowfall_in_still_air():
    world = World(wind_cells=16, ground_vertices=17)
    roof = np.zeros(world.terrain.shape, bool)
    roof[4:9, 3:10] = True
    world.terrain[roof] = 3.0
    settings = SnowSettings(seed=6)
    flakes = fl.init_flakes(20000, world.domain, settings, terrain=world.terrain, snow=world.snow)
    world.step(flakes, settings, 0.1, steps=60)
    assert world.landed[0] > 20000
    rim = np.zeros_like(roof)  # vertices next to the roof's edge get spill from both sides
    rim[3:10, 2:11] = True
    rim[5:8, 4:9] = False
    inner_roof = np.zeros_like(roof)
    inner_roof[5:8, 4:9] = True
    open_ground = ~rim & ~roof
    open_ground[[0, -1], :] = open_ground[:, [0, -1]] = False  # edges collect folded weights
    per_vertex_roof = world.deposit[inner_roof].mean()
    per_vertex_ground = world.deposit[open_ground].mean()
    assert abs(per_vertex_roof / per_vertex_ground - 1) < 0.15, (per_vertex_roof, per_vertex_ground)


# --------------------------------------------------------------------------- inputs


def test_step_rejects_mismatched_arrays_and_bad_time_steps():
    world = World()
    settings = SnowSettings()
    flakes = fl.init_flakes(10, world.domain, settings)
    with pytest.raises(InputError, match="Time step"):
        world.step(flakes, settings, 0.0)
    with pytest.raises(InputError, match="wind u"):
        fl.step_flakes(flakes, world.u[:, :, :-1].copy(), world.v, world.w, world.domain, world.terrain, world.snow,
                       world.deposit, world.landed, 0.1, 0.0, settings)
    with pytest.raises(InputError, match="deposit"):
        fl.step_flakes(flakes, world.u, world.v, world.w, world.domain, world.terrain, world.snow,
                       world.deposit.astype(np.int64), world.landed, 0.1, 0.0, settings)
    with pytest.raises(InputError, match="landed"):
        fl.step_flakes(flakes, world.u, world.v, world.w, world.domain, world.terrain, world.snow,
                       world.deposit, np.zeros(1, np.float32), 0.1, 0.0, settings)
    with pytest.raises(InputError, match="preset"):
        fl.init_flakes(10, world.domain, SnowSettings(preset="slush"))
    with pytest.raises(InputError, match="at least 1"):
        fl.init_flakes(0, world.domain, settings)
