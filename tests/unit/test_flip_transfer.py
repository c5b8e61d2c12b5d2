"""FLIP particles and transfers on the CPU (seed 003 §4 Alg. 1, §6–7) against independent
oracles: brute-force hat-weighted averages written here, analytic linear fields (trilinear
exactness), momentum conservation laws of APIC (Jiang et al. 2015, with the staggered D
matrices written out here), the analytic midpoint rule, brute-force nearest free cells and
brute-force cell / face classifications."""

import numpy as np
import pytest

from voxfx.kernels.errors import InputError
from voxfx.kernels.flip import particles as fp
from voxfx.kernels.flip import transfer as ft
from voxfx.kernels.flip.grid import AIR, FLUID, SOLID, DenseGrid
from voxfx.kernels.grid import GridSpec

# Component a's node offsets from the cell corner, in cells (u: (0, ½, ½), ...).
NODE_OFFSET = np.array([[0.0, 0.5, 0.5], [0.5, 0.0, 0.5], [0.5, 0.5, 0.0]])


def make_grid(shape=(8, 7, 6), h=0.25, origin=(-1.0, 0.5, 2.0)):
    return DenseGrid(GridSpec(origin, h, shape))


def face_positions(grid, comp):
    """World positions (n_faces, 3) of component comp's faces, in the array's flat order."""
    f = grid.faces()[comp]
    k, j, i = np.indices(f.shape)
    idx = np.stack([i.ravel(), j.ravel(), k.ravel()], axis=1).astype(np.float64)
    return np.asarray(grid.spec.origin) + (idx + NODE_OFFSET[comp]) * grid.h


def brute_force_p2g(grid, pos, vel, c=None):
    """u_f = Σ w q / Σ w with w = Π_axes max(0, 1 − |x_f − x_p|/h), float64, face by face."""
    out = []
    pos = pos.astype(np.float64)
    for comp in range(3):
        xf = face_positions(grid, comp)
        val = np.zeros(len(xf))
        has = np.zeros(len(xf), bool)
        for f, x in enumerate(xf):
            d = x - pos
            w = np.prod(np.maximum(0.0, 1.0 - np.abs(d) / grid.h), axis=1)
            q = vel[:, comp].astype(np.float64)
            if c is not None:
                q = q + np.einsum("pb,pb->p", c[:, comp, :].astype(np.float64), d)
            if w.sum() > 0:
                val[f] = (w * q).sum() / w.sum()
                has[f] = True
        out.append((val.reshape(grid.faces()[comp].shape), has.reshape(grid.faces()[comp].shape)))
    return out


def random_interior_particles(rs, grid, n, margin=1.0):
    """n positions at least *margin* cells inside the grid (float32)."""
    lo = np.asarray(grid.spec.origin) + margin * grid.h
    hi = np.asarray(grid.spec.upper) - margin * grid.h
    return rs.uniform(lo, hi, (n, 3)).astype(np.float32)


def set_linear_field(grid, A, b):
    """Faces ← (A x + b)_a at their own positions."""
    for comp, f in enumerate(grid.faces()):
        f[...] = (face_positions(grid, comp) @ A[comp] + b[comp]).reshape(f.shape).astype(np.float32)


# --------------------------------------------------------------------------- seeding


@pytest.mark.parametrize("per_cell", [8, 16])
def test_seeding_puts_per_cell_particles_in_each_cell_one_share_per_subcell(per_cell):
    spec = GridSpec((-0.3, 1.1, 0.7), 0.1, (9, 8, 7))
    rs = np.random.default_rng(1)
    lin = rs.choice(spec.voxel_count, 40, replace=False)
    k, r = np.divmod(lin, 9 * 8)
    j, i = np.divmod(r, 9)
    cells = np.stack([i, j, k], axis=1).astype(np.int32)
    pos, vel = fp.seed_particles(cells, spec, per_cell=per_cell, seed=7)
    assert pos.shape == (40 * per_cell, 3) and pos.dtype == np.float32
    assert np.all(vel == 0)
    local = (pos.astype(np.float64) - np.asarray(spec.origin)) / spec.voxel_size
    owner = np.repeat(cells, per_cell, axis=0)
    assert np.array_equal(np.floor(local).astype(np.int64), owner), "a particle left its source cell"
    frac = local - owner
    assert frac.min() > 0.001 and frac.max() < 0.999  # strictly inside, off the faces
    sub = (frac >= 0.5).astype(int) @ np.array([1, 2, 4])
    for m in range(len(cells)):
        counts = np.bincount(sub[m * per_cell:(m + 1) * per_cell], minlength=8)
        assert np.all(counts == per_cell // 8), f"cell {m} is not stratified: {counts}"


def test_seeding_four_per_cell_spreads_as_a_tetrahedron_and_one_per_cell_is_inside():
    spec = GridSpec((0, 0, 0), 1.0, (5, 5, 5))
    cells = np.argwhere(np.ones((5, 5, 5)))[:, ::-1].astype(np.int32)
    pos, _ = fp.seed_particles(cells, spec, per_cell=4, seed=3)
    sub = ((pos - np.repeat(cells, 4, axis=0)) >= 0.5).astype(int)
    for m in range(len(cells)):
        s = sub[4 * m: 4 * m + 4]
        assert len({tuple(r) for r in s}) == 4
        assert len(set(s.sum(axis=1) % 2)) == 1  # all even or all odd corners: a tetrahedron
    one, _ = fp.seed_particles(cells, spec, per_cell=1, seed=3)
    assert np.array_equal(np.floor(one).astype(np.int32), cells)
    corners = ((one - cells) >= 0.5).astype(int) @ np.array([1, 2, 4])
    assert len(np.unique(corners)) == 8  # the mask spreads single particles over all sub-cells


def test_seeding_is_a_function_of_seed_and_cell_only():
    spec = GridSpec((0, 0, 0), 0.5, (6, 6, 6))
    cells = np.array([[0, 0, 0], [3, 2, 1], [5, 5, 5]], np.int32)
    a, _ = fp.seed_particles(cells, spec, 8, seed=11)
    b, _ = fp.seed_particles(cells[1:], spec, 8, seed=11)
    c, _ = fp.seed_particles(cells, spec, 8, seed=12)
    assert np.array_equal(a[8:], b)  # other sources do not matter
    assert not np.allclose(a, c)
    _, vel = fp.seed_particles(cells, spec, 8, velocity=(1.0, -2.0, 0.5))
    assert np.all(vel == np.float32([1.0, -2.0, 0.5]))


def test_seeding_rejects_cells_outside_the_grid_and_bad_counts():
    spec = GridSpec((0, 0, 0), 1.0, (4, 4, 4))
    with pytest.raises(InputError, match="inside"):
        fp.seed_particles(np.array([[4, 0, 0]]), spec)
    with pytest.raises(InputError, match="at least 1"):
        fp.seed_particles(np.array([[0, 0, 0]]), spec, per_cell=0)


# --------------------------------------------------------------------------- particles → grid


def test_p2g_uniform_velocity_lands_on_every_face_with_weight_and_nowhere_else():
    grid = make_grid()
    rs = np.random.default_rng(2)
    pos = random_interior_particles(rs, grid, 60, margin=-0.4)  # some just outside the walls too
    vel = np.tile(np.float32([1.5, -0.25, 3.0]), (60, 1))
    valid = ft.particles_to_grid(grid, pos, vel)
    oracle = brute_force_p2g(grid, pos, vel)
    for comp, (f, m) in enumerate(zip(grid.faces(), valid)):
        assert np.array_equal(m.astype(bool), oracle[comp][1]), f"valid faces of component {comp}"
        assert m.any() and not m.all()
        np.testing.assert_allclose(f[m == 1], vel[0, comp], rtol=2e-7)
        assert np.all(f[m == 0] == 0)
    assert grid.valid_u is valid[0]


def test_p2g_is_the_hat_weighted_average_per_staggered_component():
    grid = make_grid(shape=(5, 6, 4), h=0.3)
    rs = np.random.default_rng(3)
    pos = random_interior_particles(rs, grid, 120, margin=0.0)
    vel = rs.normal(size=(120, 3)).astype(np.float32)
    ft.particles_to_grid(grid, pos, vel)
    for comp, (val, _has) in enumerate(brute_force_p2g(grid, pos, vel)):
        np.testing.assert_allclose(grid.faces()[comp], val, rtol=1e-5, atol=1e-6)


def test_p2g_apic_adds_the_affine_velocity_at_each_face():
    grid = make_grid(shape=(5, 4, 6), h=0.2)
    rs = np.random.default_rng(4)
    pos = random_interior_particles(rs, grid, 80, margin=0.0)
    vel = rs.normal(size=(80, 3)).astype(np.float32)
    c = rs.normal(size=(80, 3, 3)).astype(np.float32)
    ft.particles_to_grid(grid, pos, vel, c)
    for comp, (val, _has) in enumerate(brute_force_p2g(grid, pos, vel, c)):
        np.testing.assert_allclose(grid.faces()[comp], val, rtol=1e-5, atol=1e-5)
    plain = make_grid(shape=(5, 4, 6), h=0.2)
    ft.particles_to_grid(plain, pos, vel)
    assert not np.allclose(plain.u, grid.u)


def test_p2g_apic_reproduces_an_affine_velocity_field_exactly():
    grid = make_grid(shape=(6, 6, 6), h=0.2)
    rs = np.random.default_rng(5)
    A, b = rs.normal(size=(3, 3)), rs.normal(size=3)
    pos = random_interior_particles(rs, grid, 300, margin=-0.3)
    vel = (pos.astype(np.float64) @ A.T + b).astype(np.float32)
    c = np.broadcast_to(A.astype(np.float32), (300, 3, 3)).copy()
    valid = ft.particles_to_grid(grid, pos, vel, c)
    for comp, (f, m) in enumerate(zip(grid.faces(), valid)):
        exact = (face_positions(grid, comp) @ A[comp] + b[comp]).reshape(f.shape)
        np.testing.assert_allclose(f[m == 1], exact[m == 1], atol=2e-5 * (1 + np.abs(exact).max()))


# --------------------------------------------------------------------------- classify, boundaries, extrapolation


def test_classify_marks_fluid_air_and_solid_cells():
    grid = make_grid(shape=(6, 5, 4), h=0.5)
    rs = np.random.default_rng(6)
    grid.solid[1:3, 2:4, 1:3] = 1
    pos = random_interior_particles(rs, grid, 25, margin=-0.5)  # some outside: they mark nothing
    ft.classify(grid, pos)
    expect = np.full((4, 5, 6), AIR, np.uint8)
    for p in pos.astype(np.float64):
        i, j, k = np.floor((p - np.asarray(grid.spec.origin)) / grid.h).astype(int)
        if 0 <= i < 6 and 0 <= j < 5 and 0 <= k < 4:
            expect[k, j, i] = FLUID
    expect[grid.solid == 1] = SOLID
    assert np.array_equal(grid.cell, expect)
    assert (grid.cell == FLUID).any() and (grid.cell == AIR).any()


def test_enforce_boundaries_gives_solid_faces_the_solid_velocity_and_walls_zero():
    grid = make_grid(shape=(5, 4, 3))
    rs = np.random.default_rng(7)
    grid.solid[...] = rs.random(grid.solid.shape) < 0.3
    for f, s in zip(grid.faces(), (grid.solid_u, grid.solid_v, grid.solid_w)):
        f[...] = rs.normal(size=f.shape)
        s[...] = rs.normal(size=s.shape)
    before = [f.copy() for f in grid.faces()]
    ft.enforce_boundaries(grid)
    nx, ny, nz = grid.shape
    for comp, (f, s, f0) in enumerate(zip(grid.faces(), (grid.solid_u, grid.solid_v, grid.solid_w), before)):
        for k, j, i in np.ndindex(f.shape):
            idx = [i, j, k]
            n = (nx, ny, nz)[comp]
            if idx[comp] == 0 or idx[comp] == n:
                assert f[k, j, i] == 0
                continue
            lo = list(idx)
            lo[comp] -= 1
            touching = grid.solid[idx[2], idx[1], idx[0]] or grid.solid[lo[2], lo[1], lo[0]]
            assert f[k, j, i] == (s[k, j, i] if touching else f0[k, j, i])


def test_extrapolate_spreads_valid_faces_ring_by_ring_as_neighbour_means():
    grid = make_grid(shape=(7, 6, 5))
    rs = np.random.default_rng(8)
    masks = []
    for f in grid.faces():
        f[...] = rs.normal(size=f.shape)
        m = (rs.random(f.shape) < 0.08).astype(np.uint8)
        f[m == 0] = 0
        masks.append(m)
    expect = []
    for f, m in zip(grid.faces(), masks):  # brute force: two rings, face by face
        a, ok = f.astype(np.float64), m.astype(bool)
        for _ in range(2):
            a2, ok2 = a.copy(), ok.copy()
            for k, j, i in zip(*np.nonzero(~ok)):
                vals = [a[kk, jj, ii] for kk, jj, ii in ((k, j, i - 1), (k, j, i + 1), (k, j - 1, i), (k, j + 1, i),
                                                          (k - 1, j, i), (k + 1, j, i))
                        if 0 <= ii < f.shape[2] and 0 <= jj < f.shape[1] and 0 <= kk < f.shape[0] and ok[kk, jj, ii]]
                if vals:
                    a2[k, j, i], ok2[k, j, i] = np.mean(vals), True
            a, ok = a2, ok2
        expect.append((a, ok))
    out = ft.extrapolate(grid, layers=2, valid=tuple(masks))
    for f, m, (a, ok) in zip(grid.faces(), out, expect):
        assert np.array_equal(m.astype(bool), ok)
        np.testing.assert_allclose(f, a, rtol=1e-6, atol=1e-6)
    assert grid.valid_w is out[2]


def test_extrapolate_uses_the_masks_of_p2g_by_default():
    grid = make_grid()
    pos = np.asarray([[0.0, 1.4, 2.7]], np.float32)
    valid = ft.particles_to_grid(grid, pos, np.ones((1, 3), np.float32))
    grown = ft.extrapolate(grid, layers=1)
    for m0, m1, f in zip(valid, grown, grid.faces()):
        assert m1.sum() > m0.sum() and np.all(m1[m0 == 1] == 1)
        np.testing.assert_array_equal(f[m1 == 1], 1.0)
    with pytest.raises(InputError, match="particles_to_grid"):
        ft.extrapolate(make_grid())


def test_fluid_faces_are_the_faces_next_to_a_fluid_cell():
    grid = make_grid(shape=(4, 3, 3))
    grid.cell[1, 1, 2] = FLUID
    mu, mv, mw = ft.fluid_faces(grid)
    assert mu.sum() == 2 and mu[1, 1, 2] and mu[1, 1, 3]
    assert mv.sum() == 2 and mv[1, 1, 2] and mv[1, 2, 2]
    assert mw.sum() == 2 and mw[1, 1, 2] and mw[2, 1, 2]


# --------------------------------------------------------------------------- grid → particles


def test_g2p_reproduces_a_linear_field_exactly_and_apic_its_gradient():
    grid = make_grid(shape=(7, 6, 8), h=0.15)
    rs = np.random.default_rng(9)
    A, b = rs.normal(size=(3, 3)), rs.normal(size=3)
    set_linear_field(grid, A, b)
    pos = random_interior_particles(rs, grid, 400, margin=0.5)  # off the clamped half cells
    vel = rs.normal(size=(400, 3)).astype(np.float32)
    old = [np.zeros_like(f) for f in grid.faces()]
    c = np.zeros((400, 3, 3), np.float32)
    ft.grid_to_particles(grid, *old, pos, vel, 0.0, c)
    exact = pos.astype(np.float64) @ A.T + b
    np.testing.assert_allclose(vel, exact, atol=1e-5 * (1 + np.abs(exact).max()))
    np.testing.assert_allclose(c, np.broadcast_to(A, c.shape), atol=1e-3 * (1 + np.abs(A).max()))


def test_flip_with_an_unchanged_grid_leaves_velocities_unchanged():
    grid = make_grid()
    rs = np.random.default_rng(10)
    for f in grid.faces():
        f[...] = rs.normal(size=f.shape)
    pos = random_interior_particles(rs, grid, 200, margin=-0.2)
    vel = rs.normal(size=(200, 3)).astype(np.float32)
    v0 = vel.copy()
    ft.grid_to_particles(grid, *[f.copy() for f in grid.faces()], pos, vel, 1.0)
    assert np.array_equal(vel, v0)
    # ... and adds exactly the grid's change when the change is uniform
    old = [f - np.float32(d) for f, d in zip(grid.faces(), (0.5, -1.0, 2.0))]
    ft.grid_to_particles(grid, *old, pos, vel, 1.0)
    np.testing.assert_allclose(vel, v0 + np.float32([0.5, -1.0, 2.0]), atol=1e-5)
    # the PIC part pulls towards the grid
    ft.grid_to_particles(grid, *old, pos, vel, 0.5)
    pic = v0.copy()
    ft.grid_to_particles(grid, *old, pos, pic, 0.0)
    assert not np.allclose(vel, v0 + np.float32([0.5, -1.0, 2.0]))


def test_pic_round_trip_on_a_smooth_field_is_close_and_second_order():
    errors = []
    for n in (8, 16):
        spec = GridSpec((0, 0, 0), 1.0 / n, (n, n, n))
        grid = DenseGrid(spec)
        cells = np.argwhere(np.ones((n, n, n)))[:, ::-1].astype(np.int32)
        pos, vel = fp.seed_particles(cells, spec, 8, seed=1)
        x = pos.astype(np.float64) * 2 * np.pi
        field = np.stack([np.sin(x[:, 1]) * np.cos(x[:, 2]), np.sin(x[:, 2] + 0.3), np.cos(x[:, 0]) * 0.5], axis=1)
        vel[...] = field
        ft.particles_to_grid(grid, pos, vel)
        ft.grid_to_particles(grid, *[np.zeros_like(f) for f in grid.faces()], pos, vel, 0.0)
        inner = np.all((pos > 0.125) & (pos < 0.875), axis=1)  # away from the walls' one-sided stencils
        errors.append(np.abs(vel[inner] - field[inner]).max())
    assert errors[1] < 0.08, errors  # amplitude 1, 16 cells per wavelength
    assert errors[0] / errors[1] > 3.0, errors  # two trilinear smoothings: O(h²)


def _angular_momentum(grid, pos, vel, c=None):
    """Σ x_p × v_p, plus with APIC the affine part Σ_a (D_a C_a) × e_a where D_a is the
    diagonal Σ_f w (x_f − x_p)(x_f − x_p)ᵀ of component a's trilinear stencil: h² f(1 − f)
    per axis (Jiang et al. 2015, staggered)."""
    x = pos.astype(np.float64)
    L = np.cross(x, vel.astype(np.float64)).sum(axis=0)
    if c is None:
        return L
    g = (x - np.asarray(grid.spec.origin)) / grid.h
    for a in range(3):
        f = (g - NODE_OFFSET[a]) % 1.0
        d = f * (1 - f) * grid.h ** 2 * c[:, a, :].astype(np.float64)
        L += np.cross(d, np.eye(3)[a]).sum(axis=0)
    return L


def test_apic_round_trip_conserves_linear_and_angular_momentum():
    grid = make_grid(shape=(10, 10, 10), h=0.1, origin=(0.3, -0.2, 0.1))
    rs = np.random.default_rng(11)
    pos = random_interior_particles(rs, grid, 400, margin=1.5)
    vel = rs.normal(size=(400, 3)).astype(np.float32)
    c = rs.normal(scale=3.0, size=(400, 3, 3)).astype(np.float32)
    P0, L0 = vel.astype(np.float64).sum(axis=0), _angular_momentum(grid, pos, vel, c)
    ft.particles_to_grid(grid, pos, vel, c)
    ft.grid_to_particles(grid, *[np.zeros_like(f) for f in grid.faces()], pos, vel, 0.0, c)
    P1, L1 = vel.astype(np.float64).sum(axis=0), _angular_momentum(grid, pos, vel, c)
    np.testing.assert_allclose(P1, P0, atol=1e-3 * np.abs(P0).max())
    np.testing.assert_allclose(L1, L0, atol=1e-3 * np.abs(L0).max())


def test_pic_loses_the_angular_momentum_that_apic_keeps():
    grid = make_grid(shape=(10, 10, 10), h=0.1, origin=(0, 0, 0))
    rs = np.random.default_rng(12)
    pos = random_interior_particles(rs, grid, 300, margin=2)
    omega = np.array([0.3, -0.5, 2.0])
    vel = np.cross(omega, pos.astype(np.float64) - 0.5).astype(np.float32)  # rigid rotation
    c = np.broadcast_to(np.cross(omega, -np.eye(3)).T.astype(np.float32), (300, 3, 3)).copy()  # ∇v
    for use_c in (None, c):
        v = vel.copy()
        L0 = _angular_momentum(grid, pos, v, use_c)
        ft.particles_to_grid(grid, pos, v, use_c)
        ft.grid_to_particles(grid, *[np.zeros_like(f) for f in grid.faces()], pos, v, 0.0, use_c)
        loss = 1 - np.linalg.norm(_angular_momentum(grid, pos, v, use_c)) / np.linalg.norm(L0)
        if use_c is None:
            assert loss > 0.02, loss  # PIC smooths the rotation away
        else:
            assert abs(loss) < 1e-4, loss


# --------------------------------------------------------------------------- advection


def test_advect_in_a_uniform_velocity_moves_by_v_dt_exactly():
    grid = make_grid()
    velocity = np.float32([0.7, -0.4, 1.3])
    for f, v in zip(grid.faces(), velocity):
        f[...] = v
    rs = np.random.default_rng(13)
    pos = random_interior_particles(rs, grid, 300, margin=1.0)
    start = pos.copy()
    dt = 0.05
    ft.advect(grid, pos, dt)
    assert np.array_equal(pos, start + np.float32(dt) * velocity)


def test_advect_takes_the_rk2_midpoint_step():
    grid = make_grid(shape=(12, 12, 12), h=0.1, origin=(0, 0, 0))
    A = np.array([[0.0, -2.0, 0.3], [2.0, 0.0, 0.0], [0.1, 0.4, -0.5]])
    b = np.array([0.1, 0.0, 0.05])
    set_linear_field(grid, A, b)
    rs = np.random.default_rng(14)
    pos = random_interior_particles(rs, grid, 200, margin=3)
    x0 = pos.astype(np.float64)
    dt = 0.1
    ft.advect(grid, pos, dt)
    mid = x0 + 0.5 * dt * (x0 @ A.T + b)
    np.testing.assert_allclose(pos, x0 + dt * (mid @ A.T + b), atol=2e-6)
    euler = x0 + dt * (x0 @ A.T + b)
    assert np.abs(pos - euler).max() > 1e-3  # the test tells midpoint from Euler


def test_particles_inside_a_solid_block_are_pushed_to_the_nearest_free_cell():
    grid = make_grid(shape=(10, 9, 8), h=0.2, origin=(0, 0, 0))
    grid.solid[2:6, 3:7, 3:8] = 1  # block: cells i 3..7, j 3..6, k 2..5
    rs = np.random.default_rng(15)
    near = rs.uniform([3.0, 3.0, 2.0], [8.0, 7.0, 6.0], (400, 3))
    depth = np.minimum.reduce([near[:, 0] - 3, 8 - near[:, 0], near[:, 1] - 3, 7 - near[:, 1],
                               near[:, 2] - 2, 6 - near[:, 2]])
    pts = near[depth < 0.9]  # their nearest free cell is a neighbour of their cell
    pos = (pts * grid.h).astype(np.float32)
    ft.advect(grid, pos, 0.0)
    g = pos.astype(np.float64) / grid.h
    cell = np.floor(g).astype(int)
    assert not grid.solid[cell[:, 2], cell[:, 1], cell[:, 0]].any(), "a particle stayed inside the solid"
    free = np.argwhere(grid.solid == 0)[:, ::-1]  # brute force: distance to every free cell box
    d = np.linalg.norm(np.maximum(0, np.maximum(free[None] - pts[:, None], pts[:, None] - free[None] - 1)), axis=2)
    moved = np.linalg.norm(g - pts, axis=1)
    assert np.all(moved <= d.min(axis=1) + 3e-3), "pushed further than the nearest free cell"
    assert np.all(moved >= d.min(axis=1)), "not pushed far enough"
    # deep inside with no free neighbour: back to where the step started
    deep = make_grid(shape=(6, 6, 6), h=0.2, origin=(0, 0, 0))
    deep.solid[...] = 1
    deep.solid[0, 0, 0] = 0
    p = np.float32([[0.6, 0.6, 0.6]])
    for f in deep.faces():
        f[...] = 1.0
    ft.advect(deep, p, 0.01)
    np.testing.assert_array_equal(p, np.float32([[0.6, 0.6, 0.6]]))


def test_advect_keeps_particles_inside_the_domain_walls():
    grid = make_grid(shape=(6, 5, 4), h=0.5, origin=(1, 2, 3))
    for f, v in zip(grid.faces(), (40.0, -40.0, 40.0)):
        f[...] = v
    rs = np.random.default_rng(16)
    pos = random_interior_particles(rs, grid, 100, margin=0.5)
    ft.advect(grid, pos, 1.0)
    g = (pos.astype(np.float64) - np.asarray(grid.spec.origin)) / grid.h
    eps = ft.PUSH_EPSILON
    np.testing.assert_allclose(g[:, 0], 6 - eps, atol=1e-5)
    np.testing.assert_allclose(g[:, 1], eps, atol=1e-5)
    np.testing.assert_allclose(g[:, 2], 4 - eps, atol=1e-5)


def test_fused_g2p_and_advect_equals_the_two_stages():
    grid = make_grid()
    rs = np.random.default_rng(17)
    grid.solid[2:4, 2:4, 2:5] = 1
    for f in grid.faces():
        f[...] = rs.normal(size=f.shape)
    old = [f + np.float32(rs.normal(scale=0.1)) for f in grid.faces()]
    pos = random_interior_particles(rs, grid, 300, margin=-0.2)
    vel = rs.normal(size=(300, 3)).astype(np.float32)
    c = rs.normal(size=(300, 3, 3)).astype(np.float32)
    p1, v1, c1 = pos.copy(), vel.copy(), c.copy()
    ft.grid_to_particles(grid, *old, p1, v1, 0.9, c1)
    ft.advect(grid, p1, 0.03)
    ft.grid_to_particles_and_advect(grid, *old, pos, vel, 0.9, 0.03, c)
    assert np.array_equal(pos, p1) and np.array_equal(vel, v1) and np.array_equal(c, c1)


def test_max_speed_is_the_largest_particle_speed():
    rs = np.random.default_rng(18)
    vel = rs.normal(size=(500, 3)).astype(np.float32)
    s = ft.max_speed(vel)
    assert s.dtype == np.float32
    np.testing.assert_allclose(float(s), np.linalg.norm(vel.astype(np.float64), axis=1).max(), rtol=1e-6)
    assert float(ft.max_speed(np.zeros((0, 3), np.float32))) == 0.0


def test_transfers_reject_arrays_of_the_wrong_kind():
    grid = make_grid()
    with pytest.raises(InputError, match="float32"):
        ft.particles_to_grid(grid, np.zeros((4, 3)), np.zeros((4, 3), np.float32))
    with pytest.raises(InputError, match="shape"):
        ft.particles_to_grid(grid, np.zeros((4, 3), np.float32), np.zeros((5, 3), np.float32))
    with pytest.raises(InputError, match="FLIP ratio"):
        ft.grid_to_particles(grid, *grid.faces(), np.zeros((1, 3), np.float32), np.zeros((1, 3), np.float32), 1.5)
    with pytest.raises(InputError, match="method"):
        ft.particles_to_grid(grid, np.zeros((1, 3), np.float32), np.zeros((1, 3), np.float32), method="splat")


def test_cuda_constants_match_the_python_reference():
    """The constants reach flip_transfer.cu only as -D options built from the Python ones."""
    from voxfx.kernels import backend

    src = backend.cuda_source("flip_transfer.cu")
    defines = dict(o[2:].split("=", 1) for o in fp.KERNELS.options if o.startswith("-D"))

    def define(name):
        assert f"#define {name}" not in src  # one source: Python
        text = defines[name]
        return float.fromhex(text[:-1]) if text.startswith("0x") else int(text.rstrip("u"))

    packed = define("SUBCELL_ORDER_PACKED")
    assert tuple((packed >> (3 * i)) & 7 for i in range(8)) == fp.SUBCELL_ORDER
    assert [define(f"STREAM_{a}") for a in ("X", "Y", "Z", "MASK")] == [
        fp.STREAM_X, fp.STREAM_Y, fp.STREAM_Z, fp.STREAM_MASK]
    assert define("SEED_MARGIN") == fp.MARGIN
    assert define("SEED_SPAN") == 1 - 2 * fp.MARGIN
    assert np.float32(define("PUSH_EPSILON")) == np.float32(ft.PUSH_EPSILON)
    assert [define(n) for n in ("AIR", "FLUID", "SOLID")] == [AIR, FLUID, SOLID]
