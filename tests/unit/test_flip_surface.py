"""The liquid surface from particles (kernels/flip/surface.py), NumPy reference: checked
against seeded shapes whose boundary is known (a ball, a flat pool), the closed form of a
lone particle, and an analytic sphere's volume."""

import math

import numpy as np
import pytest

from voxfx.kernels.errors import InputError
from voxfx.kernels.flip import surface
from voxfx.kernels.flip.surface import liquid_volume, particle_level_set, surface_radii
from voxfx.kernels.grid import GridSpec

SIM_CELL = 1.0 / 16  # simulation cell; the surface grid is at 2× its resolution
VOXEL = SIM_CELL / 2


def seeded_ball(centre, radius, spacing, rng, jitter=0.3):
    """Particles on a jittered lattice of *spacing* (one per lattice cell), kept where the
    lattice point lies in the ball: the liquid a FLIP source of that ball would seed."""
    n = int(math.ceil(radius / spacing)) + 1
    g = (np.arange(-n, n) + 0.5) * spacing
    lattice = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)
    lattice = lattice[np.linalg.norm(lattice, axis=1) < radius]
    return (lattice + rng.uniform(-jitter, jitter, lattice.shape) * spacing + centre).astype(np.float32)


def seeded_pool(size, depth, level, spacing, rng, jitter=0.3):
    """A flat pool: lattice cells filling 0 ≤ x, y < size, level − depth ≤ z < level."""
    g = (np.arange(int(round(size / spacing))) + 0.5) * spacing
    gz = level - (np.arange(int(round(depth / spacing))) + 0.5) * spacing
    lattice = np.stack(np.meshgrid(g, g, gz, indexing="ij"), -1).reshape(-1, 3)
    return (lattice + rng.uniform(-jitter, jitter, lattice.shape) * spacing).astype(np.float32)


def trilinear(phi, spec, points):
    """φ at world *points* from its voxel-centre samples (the field a mesher contours)."""
    u = (points - np.asarray(spec.origin)) / spec.voxel_size - 0.5
    i0 = np.floor(u).astype(int)
    t = u - i0
    value = 0.0
    for a in (0, 1):
        for b in (0, 1):
            for c in (0, 1):
                w = (t[:, 2] if a else 1 - t[:, 2]) * (t[:, 1] if b else 1 - t[:, 1]) * (t[:, 0] if c else 1 - t[:, 0])
                value = value + w * phi[i0[:, 2] + a, i0[:, 1] + b, i0[:, 0] + c]
    return value


def outermost_crossing(phi, spec, start, direction, length):
    """Distance from *start* along *direction* to the last − → + crossing of φ."""
    s = np.linspace(0.0, length, 4001)
    v = trilinear(phi, spec, start + s[:, None] * direction)
    i = np.nonzero((v[:-1] < 0) & (v[1:] >= 0))[0]
    assert len(i), "the ray never leaves the liquid"
    i = i[-1]
    return s[i] + (s[i + 1] - s[i]) * (-v[i]) / (v[i + 1] - v[i])


def ray_directions(rng, n_random=14):
    axes = np.vstack([np.eye(3), -np.eye(3)])
    diagonals = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) / math.sqrt(3)
    random = rng.normal(size=(n_random, 3))
    return np.vstack([axes, diagonals, random / np.linalg.norm(random, axis=1)[:, None]])


@pytest.fixture(scope="module")
def ball_case():
    """A ball of 12 voxels radius seeded 8 particles per simulation cell."""
    rng = np.random.default_rng(7)
    centre = np.array([0.31, -0.27, 0.52])
    radius = 12 * VOXEL
    spacing = SIM_CELL / 2  # 8 per cell
    pos = seeded_ball(centre, radius, spacing, rng)
    spec = GridSpec.around(centre - radius, centre + radius, VOXEL, padding=6)
    r, R = surface_radii(SIM_CELL, 8)
    phi = particle_level_set(pos, spec, r, R, xp=np)
    return centre, radius, spec, phi, rng


def test_surface_radii_follow_the_particle_spacing():
    r, R = surface_radii(SIM_CELL, 8)
    assert r == pytest.approx(SIM_CELL / 2) and R == pytest.approx(4 * r)
    assert surface_radii(1.0, 27)[0] == pytest.approx(1.0 / 3)


def test_ball_zero_crossing_lies_at_the_seeded_radius_along_rays(ball_case):
    centre, radius, spec, phi, rng = ball_case
    assert phi.dtype == np.float32 and phi.shape == spec.array_shape
    found = np.array([outermost_crossing(phi, spec, centre, d, radius + 4 * VOXEL) for d in ray_directions(rng)])
    error = (found - radius) / VOXEL
    assert np.abs(error).max() < 0.5, error
    assert abs(error.mean()) < 0.25, error.mean()


def test_ball_liquid_volume_within_a_few_percent(ball_case):
    centre, radius, spec, phi, _ = ball_case
    volume = liquid_volume(phi, spec)
    assert volume == pytest.approx(4.0 / 3.0 * math.pi * radius ** 3, rel=0.05)


def test_ball_is_negative_inside_and_background_far_outside(ball_case):
    centre, radius, spec, phi, _ = ball_case
    band = 3 * VOXEL
    nodes = spec.centers(np.argwhere(np.ones(spec.shape, bool)))  # (i, j, k) order, x fastest last
    dist = np.linalg.norm(nodes - centre, axis=1).reshape(spec.shape).transpose(2, 1, 0)
    assert (phi[dist < radius - 2 * VOXEL] < 0).all()
    # Beyond the kernel radius of every particle (plus one voxel for the smoothing step).
    far = dist > radius + surface_radii(SIM_CELL, 8)[1] + VOXEL
    assert far.any() and (phi[far] == np.float32(band)).all()
    assert phi.min() >= -band and phi.max() <= band


@pytest.mark.parametrize("spacing", [VOXEL, VOXEL / 2], ids=["2x-grid", "1x-grid"])
def test_flat_pool_surface_sits_on_the_liquid_boundary(spacing):
    """r = R/4 puts a flat surface half a spacing above the top particle layer (the
    module's half-ball calculation), whatever the ratio of spacing to voxel."""
    rng = np.random.default_rng(11)
    level = 0.37 * VOXEL
    pos = seeded_pool(24 * VOXEL, 8 * VOXEL, level, spacing, rng)
    spec = GridSpec((0.0, 0.0, -6 * VOXEL), VOXEL, (24, 24, 12))
    phi = particle_level_set(pos, spec, spacing, xp=np, smooth_iterations=0)
    z = spec.origin[2] + (np.arange(12) + 0.5) * VOXEL
    columns = phi[:, 8:16, 8:16].reshape(12, -1).T  # away from the pool's sides
    heights = []
    for col in columns:
        k = np.nonzero((col[:-1] < 0) & (col[1:] >= 0))[0][-1]
        heights.append(z[k] + VOXEL * (-col[k]) / (col[k + 1] - col[k]))
    assert abs(np.mean(heights) - level) < 0.15 * spacing


def test_smoothing_keeps_a_flat_surface_in_place_and_melts_its_bumps():
    rng = np.random.default_rng(5)
    pos = seeded_pool(24 * VOXEL, 8 * VOXEL, 0.0, VOXEL, rng, jitter=0.45)
    spec = GridSpec((0.0, 0.0, -6 * VOXEL), VOXEL, (24, 24, 12))
    z = spec.origin[2] + (np.arange(12) + 0.5) * VOXEL

    def heights(phi):
        out = []
        for col in phi[:, 6:18, 6:18].reshape(12, -1).T:
            k = np.nonzero((col[:-1] < 0) & (col[1:] >= 0))[0][-1]
            out.append(z[k] + VOXEL * (-col[k]) / (col[k + 1] - col[k]))
        return np.array(out)

    raw = heights(particle_level_set(pos, spec, VOXEL, xp=np, smooth_iterations=0))
    smooth = heights(particle_level_set(pos, spec, VOXEL, xp=np, smooth_iterations=4))
    assert abs(smooth.mean() - raw.mean()) < 0.02 * VOXEL
    assert smooth.std() < 0.8 * raw.std()  # 4 steps of Δτ = 1/6 damp bumps of ~8 voxels by about ⅓


def test_smoothing_shrinks_a_sphere_by_its_curvature_only():
    """One step moves a sphere's zero crossing inwards by Δτ·2/ρ = 1/(3ρ) voxel (exact
    signed distance in, so only the flow acts)."""
    rho = 8.0
    spec = GridSpec((0.0, 0.0, 0.0), 1.0, (24, 24, 24))
    centre = np.array([12.1, 11.8, 12.3])
    nodes = spec.centers(np.argwhere(np.ones(spec.shape, bool)))
    phi = (np.linalg.norm(nodes - centre, axis=1) - rho).reshape(spec.shape).transpose(2, 1, 0)
    phi = np.clip(phi, -3, 3).astype(np.float32)
    once = surface._smooth_cpu(phi, spec, 3.0)
    rays = ray_directions(np.random.default_rng(0))
    before = np.array([outermost_crossing(phi, spec, centre, d, rho + 2) for d in rays])
    after = np.array([outermost_crossing(once, spec, centre, d, rho + 2) for d in rays])
    assert np.mean(before - after) == pytest.approx(1.0 / (3.0 * rho), rel=0.25)


@pytest.mark.parametrize("smooth_iterations", [0, 1])
def test_single_particle_is_a_sphere_of_its_radius(smooth_iterations):
    """One particle: x̄ = x_p and r̄ = r, so φ = |x − x_p| − r within R and +band beyond."""
    spec = GridSpec((-1.0, -1.0, -1.0), 0.125, (16, 16, 16))
    p = spec.centers([[5, 9, 7]])[0]  # on a node: the minimum is exactly −r there
    r, R, band = 0.2, 0.8, 0.375
    phi = particle_level_set(p[None], spec, r, R, xp=np, smooth_iterations=smooth_iterations)
    assert phi[7, 9, 5] == pytest.approx(-r, abs=1e-6)
    assert phi.min() == phi[7, 9, 5]
    nodes = spec.centers(np.argwhere(np.ones(spec.shape, bool)))
    dist = np.linalg.norm(nodes - p, axis=1).reshape(spec.shape).transpose(2, 1, 0)
    if smooth_iterations == 0:
        near = dist < R - 1e-4
        np.testing.assert_allclose(phi[near], np.minimum(dist[near] - r, band), atol=2e-6)
        assert (phi[dist > R + 1e-4] == np.float32(band)).all()
    else:  # a sphere: the surface shrinks by 1/(3ρ) voxel, the far field stays background
        assert (phi[dist > R + 2 * spec.voxel_size] == np.float32(band)).all()


def test_particle_off_the_grid_still_shapes_the_nodes_it_reaches():
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    p = np.array([[-0.12, 0.43, 0.37]], np.float32)  # 1.2 voxels beyond the x = 0 face
    phi = particle_level_set(p, spec, 0.1, 0.4, xp=np, smooth_iterations=0)
    assert phi[3, 4, 0] == pytest.approx(np.linalg.norm(spec.centers([[0, 4, 3]])[0] - p[0]) - 0.1, abs=1e-6)


def test_empty_particle_set_gives_all_background():
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (7, 5, 6))
    for smooth in (0, 2):
        phi = particle_level_set(np.zeros((0, 3), np.float32), spec, 0.05, xp=np, smooth_iterations=smooth)
        assert phi.shape == (6, 5, 7) and phi.dtype == np.float32
        assert (phi == np.float32(0.15)).all()
    assert liquid_volume(phi, spec) == 0.0


def test_per_particle_radii_give_the_weighted_mean_radius():
    rng = np.random.default_rng(3)
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (12, 12, 12))
    pos = rng.uniform(0.3, 0.9, (200, 3)).astype(np.float32)
    same = particle_level_set(pos, spec, 0.07, 0.3, xp=np)
    np.testing.assert_array_equal(particle_level_set(pos, spec, np.full(200, 0.07, np.float32), 0.3, xp=np), same)
    # Two coincident particles of radii a and b weigh alike: r̄ = (a + b)/2.
    two = np.repeat(spec.centers([[6, 6, 6]]), 2, axis=0)
    phi = particle_level_set(two, spec, np.array([0.1, 0.2]), 0.5, xp=np, smooth_iterations=0)
    assert phi[6, 6, 6] == pytest.approx(-0.15, abs=1e-6)


def test_far_from_the_origin_the_surface_keeps_its_shape():
    """Offsets are summed relative to each node, so a scene 1 km away meshes the same."""
    rng = np.random.default_rng(9)
    centre = np.array([0.5, 0.5, 0.5])
    pos = seeded_ball(centre, 6 * VOXEL, VOXEL, rng)
    spec = GridSpec.around(centre - 6 * VOXEL, centre + 6 * VOXEL, VOXEL, padding=5)
    shift = np.array([1024.0, -512.0, 2048.0])
    far_spec = GridSpec(tuple(np.asarray(spec.origin) + shift), VOXEL, spec.shape)
    near = particle_level_set(pos, spec, VOXEL, xp=np)
    far = particle_level_set((pos + shift).astype(np.float32), far_spec, VOXEL, xp=np)
    # float32 positions 2 km out are only good to 2.4e-4 m (0.008 voxel)
    np.testing.assert_allclose(far, near, atol=0.03 * VOXEL)


def test_liquid_volume_of_an_analytic_sphere_and_slab():
    spec = GridSpec((0.0, 0.0, 0.0), 0.5, (30, 30, 30))
    nodes = spec.centers(np.argwhere(np.ones(spec.shape, bool)))
    centre, rho = np.array([7.3, 7.6, 7.1]), 4.9
    sphere = (np.linalg.norm(nodes - centre, axis=1) - rho).reshape(spec.shape).transpose(2, 1, 0)
    assert liquid_volume(sphere.astype(np.float32), spec) == pytest.approx(4 / 3 * math.pi * rho ** 3, rel=0.01)
    # Any field with the same zero set gives the same volume (only the crossing counts).
    assert liquid_volume(np.tanh(sphere).astype(np.float32), spec) == pytest.approx(
        4 / 3 * math.pi * rho ** 3, rel=0.01)
    # A tilted water level: φ = n·x − c, volume below it inside the nodes' box.
    n = np.array([0.1, -0.2, 1.0]) / np.linalg.norm([0.1, -0.2, 1.0])
    level = (nodes @ n - 6.0).reshape(spec.shape).transpose(2, 1, 0)
    lo, hi = 0.25, 14.75  # first and last voxel centres
    u = np.linspace(lo, hi, 801)
    x, y = np.meshgrid(u, u, indexing="ij")
    height = np.clip((6.0 - n[0] * x - n[1] * y) / n[2], lo, hi) - lo
    exact = height.mean() * (hi - lo) ** 2
    assert liquid_volume(level.astype(np.float32), spec) == pytest.approx(exact, rel=0.002)


def test_bad_inputs_are_refused_with_a_message():
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (4, 4, 4))
    pos = np.zeros((5, 3), np.float32)
    bad = pos.copy()
    bad[[1, 3], 2] = np.nan
    with pytest.raises(InputError, match="2 particles have non-finite"):
        particle_level_set(bad, spec, 0.1, xp=np)
    with pytest.raises(InputError, match="particle radius"):
        particle_level_set(pos, spec, 0.0, xp=np)
    with pytest.raises(InputError, match="per-particle radii"):
        particle_level_set(pos, spec, np.ones(4), xp=np)
    with pytest.raises(InputError, match="every particle radius"):
        particle_level_set(pos, spec, np.array([0.1, 0.1, -1, 0.1, 0.1]), xp=np)
    with pytest.raises(InputError, match="kernel radius"):
        particle_level_set(pos, spec, 0.1, kernel_radius=float("nan"), xp=np)
    with pytest.raises(InputError, match=r"\(N, 3\)"):
        particle_level_set(np.zeros((5, 2)), spec, 0.1, xp=np)
    with pytest.raises(InputError, match="shape"):
        liquid_volume(np.zeros((4, 4, 5), np.float32), spec)


# --------------------------------------------------------------------------- closed against the walls (issue 22 §3)

TANK_H = 0.5 / 24  # the tank: 0.5 m, resolution 24, water 0.25 m deep


@pytest.fixture(scope="module")
def still_tank():
    """The tank at rest, frame 12 at 24 fps, and its closed level set."""
    from tests.meshes import box
    from voxfx.kernels.flip.grid import FlipSettings
    from voxfx.kernels.flip.sim import FlipSimulation

    spec = GridSpec((0.0, 0.0, 0.0), TANK_H, (24, 24, 24))
    sim = FlipSimulation(spec, FlipSettings(), *box((0, 0, 0), (0.5, 0.5, 0.25)), xp=np)
    for _ in range(12):
        sim.step(1 / 24)
    return sim, sim.level_set()


def test_closed_level_set_grows_the_grid_beyond_every_wall(still_tank):
    sim, phi = still_tank
    grown = sim.surface_spec
    assert grown.shape == (30, 30, 30) and np.allclose(grown.origin, -3 * TANK_H)
    assert phi.shape == grown.array_shape and phi.dtype == np.float32
    border = np.ones(phi.shape, bool)
    border[1:-1, 1:-1, 1:-1] = False
    assert (phi[border] > 0).all()  # nothing reaches the grid's edge: every contour is closed


def test_still_tank_surface_is_a_closed_manifold_of_the_water_volume(still_tank):
    """Marching tetrahedra of φ (tests/isosurface.py): 0 boundary and 0 non-manifold edges
    (was 126 boundary edges in Blender's mesh of the old, open level set), enclosing the
    water's volume within 3% (24 × 24 × 12 cells)."""
    from tests.isosurface import marching_tets, mesh_volume, open_and_nonmanifold_edges, triangle_edges

    sim, phi = still_tank
    vertices, triangles = marching_tets(phi, sim.surface_spec.origin, TANK_H)
    assert open_and_nonmanifold_edges(triangle_edges(triangles)) == (0, 0)
    water = 0.5 * 0.5 * 0.25
    volume = mesh_volume(vertices, triangles)
    print(f"\nstill tank: meshed volume {volume / water - 1:+.2%}, "
          f"liquid_volume {liquid_volume(phi, sim.surface_spec) / water - 1:+.2%} of the water's")
    assert volume == pytest.approx(water, rel=0.03)
    assert liquid_volume(phi, sim.surface_spec) == pytest.approx(volume, rel=0.01)  # it measures the mesh
    lo, hi = -0.5 * TANK_H, 0.5 + 0.5 * TANK_H
    assert (vertices >= lo).all() and (vertices[:, :2] <= hi).all()  # never half a cell through a wall


def crossing_along(phi, spec, starts, direction, length):
    """Distance from each start along *direction* to the first + crossing of φ (trilinear)."""
    return np.array([first_crossing(phi, spec, s, direction, length) for s in starts])


def first_crossing(phi, spec, start, direction, length):
    s = np.linspace(0.0, length, 2001)
    v = trilinear(phi, spec, start + s[:, None] * direction)
    assert v[0] < 0, "the ray starts outside the liquid"
    i = np.nonzero(v >= 0)[0][0]
    return s[i - 1] + (s[i] - s[i - 1]) * (-v[i - 1]) / (v[i] - v[i - 1])


def test_still_tank_surface_meets_every_wet_wall_within_a_quarter_cell(still_tank):
    """Rays from inside the water towards each wall and the floor, on a lattice over the
    wet part of the wall from a quarter cell off its edges (the other walls, the water
    line): the surface is within a quarter cell of the wall. The one exception is where
    three faces of the liquid meet at right angles (a bottom corner of the tank, a corner
    at the water line): a quarter cell from two edges the contour of sampled values is
    rounded by up to half a cell there, which is all it may be."""
    sim, phi = still_tank
    grown = sim.surface_spec
    h = TANK_H
    u = np.concatenate([[0.25 * h, 0.75 * h], np.linspace(2 * h, 0.5 - 2 * h, 9), [0.5 - 0.75 * h, 0.5 - 0.25 * h]])
    w = np.concatenate([[0.25 * h, 0.75 * h], np.linspace(2 * h, 0.25 - 2 * h, 5), [0.25 - 0.75 * h]])
    worst = {"wall": 0.0, "corner": 0.0}
    for axis in range(3):
        for side in (0.0, 0.5):
            if axis == 2 and side == 0.5:
                continue  # the lid is dry
            a, b = ((1, 2), (0, 2), (0, 1))[axis]
            grid_a, grid_b = np.meshgrid(u, w if b == 2 else u, indexing="ij")
            starts = np.zeros((grid_a.size, 3))
            starts[:, a], starts[:, b] = grid_a.ravel(), grid_b.ravel()
            starts[:, axis] = 0.1 if side == 0.0 else 0.4  # inside the water, 0.1 m from the wall
            direction = np.zeros(3)
            direction[axis] = -1.0 if side == 0.0 else 1.0
            gap = 0.1 - crossing_along(phi, grown, starts, direction, 0.1 + 2 * h)
            top = 0.25 if b == 2 else 0.5
            near_a = np.minimum(starts[:, a], 0.5 - starts[:, a]) < 0.5 * h
            near_b = np.minimum(starts[:, b], top - starts[:, b]) < (1.0 if b == 2 else 0.5) * h
            corner = near_a & near_b
            assert (gap[~corner] < 0.25 * h).all(), (axis, side, gap[~corner] / h)
            assert (gap[corner] < 0.5 * h).all(), (axis, side, gap[corner] / h)
            assert (gap > -0.5 * h).all()  # never through the wall
            worst["wall"] = max(worst["wall"], np.abs(gap[~corner]).max() / h)
            worst["corner"] = max(worst["corner"], np.abs(gap[corner]).max() / h)
    print(f"\nstill tank: surface within {worst['wall']:.3f} cells of every wet wall "
          f"({worst['corner']:.3f} a quarter cell from a three-face corner)")


def test_still_water_is_flat_up_to_the_walls_and_corners(still_tank):
    """The water level, corners included (was: fins 3 cells high there), within half a
    cell of the still level 0.25 m: on a lattice from half a cell off the walls (the first
    voxel centres), and a quarter cell off one wall, where the contour rounds the right
    angle between the water and the wall."""
    sim, phi = still_tank
    h = TANK_H
    u = np.concatenate([[0.25 * h, 0.5 * h, 0.75 * h], np.linspace(2 * h, 0.5 - 2 * h, 9),
                        [0.5 - 0.75 * h, 0.5 - 0.5 * h, 0.5 - 0.25 * h]])
    gx, gy = np.meshgrid(u, u, indexing="ij")
    starts = np.stack([gx.ravel(), gy.ravel(), np.full(gx.size, 0.15)], axis=1)
    level = 0.15 + crossing_along(phi, sim.surface_spec, starts, np.array([0.0, 0.0, 1.0]), 0.2)
    error = (level - 0.25) / h
    off_x = np.minimum(starts[:, 0], 0.5 - starts[:, 0])
    off_y = np.minimum(starts[:, 1], 0.5 - starts[:, 1])
    off = np.minimum(off_x, off_y)
    two_walls = (off_x < 0.5 * h) & (off_y < 0.5 * h)  # the vertical edges of the water: rounded
    print(f"\nstill tank: water level {error[off >= 0.5 * h].min():+.3f} … {error.max():+.3f} cells from 0.25 m "
          f"half a cell off the walls, {error[~two_walls].min():+.3f} a quarter cell off one")
    assert np.abs(error[~two_walls]).max() < 0.5, error.reshape(gx.shape)


def test_closed_level_set_changes_nothing_away_from_the_walls():
    """A ball more than R + 1 cell from every wall: no mirror images, φ ≤ 0 nowhere near
    the walls, so the closed level set equals the plain one on the grown grid."""
    from voxfx.kernels.flip.surface import closed_level_set, surface_grid

    rng = np.random.default_rng(3)
    spec = GridSpec((0.0, 0.0, 0.0), SIM_CELL, (20, 20, 20))
    pos = seeded_ball(np.array([0.62, 0.6, 0.64]), 5 * SIM_CELL, SIM_CELL / 2, rng)
    r, R = surface_radii(SIM_CELL, 8)
    plain = particle_level_set(pos, surface_grid(spec), r, R, xp=np)
    closed = closed_level_set(pos, spec, r, R, xp=np)
    inside = np.zeros(plain.shape, bool)
    inside[4:-4, 4:-4, 4:-4] = True  # more than half a cell inside the walls
    np.testing.assert_array_equal(closed[inside], plain[inside])
    assert (closed[~inside] >= 0.5 * SIM_CELL - 1e-7).all()


def test_mirror_images_cover_faces_edges_and_corners():
    from voxfx.kernels.flip.surface import mirror_at_walls

    spec = GridSpec((0.0, 0.0, 0.0), 1.0, (10, 10, 10))
    pos = np.array([[0.5, 5.0, 5.0], [0.5, 0.5, 5.0], [0.5, 0.5, 9.5], [5.0, 5.0, 5.0]], np.float32)
    images, source = mirror_at_walls(pos, spec, 1.0, np)
    assert np.bincount(source, minlength=4).tolist() == [1, 3, 7, 0]
    assert [-0.5, -0.5, 10.5] in images.tolist() and [-0.5, 5.0, 5.0] in images.tolist()
