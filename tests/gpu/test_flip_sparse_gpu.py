"""Sparse FLIP (issue 12) on the GPU against the sparse CPU reference: the same xp code on
CuPy. Integer work (topology, neighbour index) is bit-identical; float stages agree to
float32 rounding (reductions sum in another order); whole runs statistically."""

import numpy as np
import pytest

from tests.meshes import box
from voxfx.kernels import backend
from voxfx.kernels.flip import sparse_pressure, sparse_transfer
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid
from voxfx.kernels.grid import GridSpec


def grids(spec, pos, closed=True, margin=3):
    import cupy

    out = []
    for xp in (np, cupy):
        g = SparseFlipGrid(spec, xp, closed=closed)
        g.update(xp.asarray(pos), margin)
        out.append(g)
    return out


def host(a):
    return backend.to_numpy(a)


def random_particles(spec, n, rng, lo=0.0, hi=1.0):
    up = np.asarray(spec.upper)
    return (rng.uniform(lo, hi, (n, 3)) * up).astype(np.float32), rng.normal(0, 1, (n, 3)).astype(np.float32)


@pytest.mark.parametrize("closed", [True, False])
def test_gpu_topology_and_neighbours_are_the_cpus(closed):
    rng = np.random.default_rng()
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (40, 30, 20))
    pos, _ = random_particles(spec, 5000, rng, -0.2 if not closed else 0.0, 1.0)
    cpu, gpu = grids(spec, pos, closed)
    assert np.array_equal(host(gpu.topology.keys), cpu.topology.keys)
    assert np.array_equal(host(gpu.topology.slots), cpu.topology.slots)
    assert np.array_equal(host(gpu.nbr), cpu.nbr)
    for name in ("solid", "wall", *cpu.EXISTS):
        assert np.array_equal(host(gpu[name]), cpu[name])
    more, _ = random_particles(spec, 3000, rng, 0.3, 0.9)  # incremental update
    for g, xp in ((cpu, np), (gpu, gpu.xp)):
        g.update(xp.asarray(more), 3)
    assert np.array_equal(host(gpu.topology.slots), cpu.topology.slots)
    assert np.array_equal(host(gpu.topology.free), cpu.topology.free)


@pytest.mark.parametrize("apic", [False, True])
def test_gpu_gather_p2g_classify_extrapolate_match_cpu(apic):
    import cupy

    rng = np.random.default_rng()
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (24, 20, 16))
    pos, vel = random_particles(spec, 20000, rng, 0.0, 0.6)
    c = rng.normal(0, 1, (len(pos), 3, 3)).astype(np.float32) if apic else None
    cpu, gpu = grids(spec, pos)
    sparse_transfer.particles_to_grid(cpu, pos, vel, c)
    sparse_transfer.particles_to_grid(gpu, cupy.asarray(pos), cupy.asarray(vel), None if c is None else cupy.asarray(c))
    for name in cpu.FACES:
        assert np.abs(host(gpu[name]) - cpu[name]).max() <= 1e-6 * max(1.0, np.abs(cpu[name]).max())
    for a, b in zip(gpu.valid, cpu.valid):
        assert np.array_equal(host(a), b)
    sparse_transfer.classify(cpu, pos)
    sparse_transfer.classify(gpu, cupy.asarray(pos))
    assert np.array_equal(host(gpu["cell"]), cpu["cell"])
    sparse_transfer.extrapolate(cpu)
    sparse_transfer.extrapolate(gpu)
    for name in cpu.FACES:
        assert np.abs(host(gpu[name]) - cpu[name]).max() <= 1e-5 * max(1.0, np.abs(cpu[name]).max())


def test_gpu_sparse_pressure_matches_cpu():
    import cupy

    rng = np.random.default_rng()
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (24, 20, 16))
    pos, vel = random_particles(spec, 30000, rng, 0.0, 0.5)
    cpu, gpu = grids(spec, pos)
    out = []
    for g, xp in ((cpu, np), (gpu, cupy)):
        p_, v_ = xp.asarray(pos), xp.asarray(vel)
        sparse_transfer.particles_to_grid(g, p_, v_)
        sparse_transfer.classify(g, p_)
        sparse_transfer.extrapolate(g)
        sparse_transfer.enforce_boundaries(g)
        p, stats = sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5)
        sparse_pressure.project(g, p, 0.01)
        out.append((host(p), stats, host(sparse_pressure.divergence(g))))
    (pc, sc, dc), (pg, sg, dg) = out
    assert sc["converged"] and sg["converged"]
    assert abs(sg["iterations"] - sc["iterations"]) <= 2
    assert np.abs(pg - pc).max() <= 1e-3 * np.abs(pc).max()
    assert np.abs(dg).max() * spec.voxel_size <= 1e-3 * max(1.0, float(np.abs(vel).max()))


def test_gpu_brick_multigrid_matches_cpu():
    import cupy

    from voxfx.kernels.flip.sparse_multigrid import VCycle

    rng = np.random.default_rng()
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (32, 20, 24))
    pos, _ = random_particles(spec, 40000, rng, 0.0, 0.5)
    out = []
    for g, xp in zip(grids(spec, pos), (np, cupy)):
        sparse_transfer.classify(g, xp.asarray(pos))
        kind, _, _ = sparse_pressure.solver_cells(g)
        level = sparse_pressure.Unknowns(g, kind)
        M = VCycle(g, kind, level)
        r = xp.asarray(np.append(np.random.default_rng(1).normal(0, 1, level.m), 0).astype(np.float32))
        out.append((len(M.levels), host(level.cells), host(M(r))))
    (nc, cc, zc), (ng, cg, zg) = out
    assert ng == nc and np.array_equal(cg, cc)
    assert np.abs(zg - zc).max() <= 1e-4 * np.abs(zc).max()


def test_gpu_sampler_matches_cpu():
    import cupy

    rng = np.random.default_rng()
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (24, 20, 16))
    pos, vel = random_particles(spec, 20000, rng, 0.0, 0.8)
    cpu, gpu = grids(spec, pos)
    for name in cpu.FACES:
        cpu[name] = rng.normal(0, 1, cpu.size).astype(np.float32)
        gpu[name] = cupy.asarray(cpu[name])
    q = pos + rng.normal(0, 0.02, pos.shape).astype(np.float32)
    for boxes in (cpu.boxes, None):
        want, want_grad = cpu.sample_faces(cpu.faces(), *cpu.cell_coords(q), boxes=boxes, gradient=True)
        got, got_grad = gpu.sample_faces(gpu.faces(), *gpu.cell_coords(cupy.asarray(q)), boxes=boxes, gradient=True)
        for a in range(3):
            assert np.abs(host(got[a]) - want[a]).max() <= 1e-5
            for b in range(3):
                assert np.abs(host(got_grad[a][b]) - want_grad[a][b]).max() <= 1e-4


def test_gpu_sparse_dam_break_matches_cpu_statistically():
    import cupy

    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (24, 10, 16))
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.5, 0.5))
    settings = FlipSettings(seed=int(np.random.default_rng().integers(1000)))
    cpu = FlipSimulation(spec, settings, v, t, xp=np, sparse=True)
    gpu = FlipSimulation(spec, settings, v, t, xp=cupy, sparse=True)
    assert np.array_equal(cpu.particles_host()["position"], gpu.particles_host()["position"])
    for _ in range(30):
        cpu.step(1 / 60)
        gpu.step(1 / 60)
    assert len(gpu.pos) == len(cpu.pos)
    assert gpu.centre_of_mass() == pytest.approx(cpu.centre_of_mass(), abs=0.02)  # metres
    assert gpu.kinetic_energy() == pytest.approx(cpu.kinetic_energy(), rel=0.1)


def test_gpu_sparse_open_domain_blob_falls_out_and_is_deleted():
    import cupy

    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    v, t = box((0.3, 0.3, 0.3), (0.6, 0.6, 0.6))
    sim = FlipSimulation(spec, FlipSettings(), v, t, xp=cupy, sparse=True, boundary="open", kill_distance=0.5)
    n0 = len(sim.pos)
    lowest = []
    for _ in range(40):
        sim.step(1 / 60)
        if len(sim.pos):
            lowest.append(float(sim.particles_host()["position"][:, 2].min()))
    assert min(lowest) < -0.3
    assert sim.killed == n0 and len(sim.pos) == 0


def test_gpu_sparse_travelling_blob_keeps_its_bricks_slots():
    import cupy

    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    v, t = box((0.2, 0.2, 0.2), (0.5, 0.5, 0.5))
    sims = [FlipSimulation(spec, FlipSettings(gravity=(0.0, 0.0, 0.0)), v, t, xp=xp, sparse=True, boundary="open",
                           kill_distance=100.0, initial_velocity=(12.0, 0.0, 0.0)) for xp in (np, cupy)]
    previous = None
    for _ in range(60):
        for sim in sims:
            sim.substep(1 / 120)
        cpu, gpu = (s.grid for s in sims)
        now = dict(zip(host(gpu.topology.keys).tolist(), host(gpu.topology.slots).tolist()))
        if previous is not None:
            kept = set(previous) & set(now)
            assert kept and all(previous[key] == now[key] for key in kept)
        previous = now
        assert bool((sparse_transfer.particle_cells(gpu, sims[1].pos) >= 0).all())
    assert sims[1].centre_of_mass() == pytest.approx(sims[0].centre_of_mass(), abs=0.01)


def test_gpu_sparse_emit_drain_and_moving_obstacles_match_cpu():
    import cupy

    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (12, 6, 12))
    v, t = box((0.0, 0.0, 0.0), (0.6, 0.3, 0.2))
    sims = [FlipSimulation(spec, FlipSettings(seed=3), v, t, xp=xp, sparse=True) for xp in (np, cupy)]
    paddle = np.array([(i, j, k) for i in (7,) for j in range(6) for k in range(6)])
    cell_velocity = np.zeros((12, 6, 12, 3), np.float32)
    cell_velocity[..., 0] = -0.5
    nozzle = np.array([(i, j, 10) for i in (2, 3) for j in (2, 3)])
    drain = np.array([(i, j, 0) for i in (0, 1) for j in range(6)])
    for sim in sims:
        sim.set_obstacles(paddle, cell_velocity)
        assert sim.emit(nozzle, (0.0, 0.0, -1.0)) == 32
        assert sim.drain(drain) == 2 * 6 * 8
    cpu, gpu = sims
    assert np.array_equal(gpu.particles_host()["position"], cpu.particles_host()["position"])
    for _ in range(10):
        for sim in sims:
            sim.step(1 / 60)
    assert len(gpu.pos) == len(cpu.pos)
    assert gpu.centre_of_mass() == pytest.approx(cpu.centre_of_mass(), abs=0.01)


# ---------------------------------------------------------------------- the kernels (sparse_gpu.py)


def moved_scene(closed, apic, seed):
    """CPU and GPU grids on the same particles, an obstacle block with moving solid faces,
    the CPU's P2G faces copied to both (so later stages start from the same bits)."""
    import cupy

    rng = np.random.default_rng(seed)
    spec = GridSpec((0.1, -0.2, 0.05), 0.05, (24, 20, 16))
    lo = 0.0 if closed else -0.2
    size = np.asarray(spec.shape) * spec.voxel_size
    pos = (np.asarray(spec.origin) + rng.uniform(lo, 0.6, (30000, 3)) * size).astype(np.float32)
    vel = rng.normal(0, 1, pos.shape).astype(np.float32)
    obstacle = np.array([(i, j, k) for i in (7, 8) for j in range(3, 7) for k in range(2, 5)])
    pos[:len(obstacle)] = (np.asarray(spec.origin) + (obstacle + 0.5) * spec.voxel_size).astype(np.float32)
    c = rng.normal(0, 1, (len(pos), 3, 3)).astype(np.float32) if apic else None
    out = []
    for xp in (np, cupy):
        g = SparseFlipGrid(spec, xp, closed=closed)
        g.update(xp.asarray(pos), 4, obstacle)
        out.append(g)
    cpu, gpu = out
    for name in ("solid_u", "solid_v", "solid_w"):
        cpu[name] = np.where(cpu["solid"] != 0, rng.normal(0, 1, cpu.size), 0).astype(np.float32)
        gpu[name] = cupy.asarray(cpu[name])
    return spec, cpu, gpu, pos, vel, c


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_gpu_kernels_give_the_cpu_stages_bit_for_bit(closed, apic):
    """From the same faces, classify (from the bins and from the particles), extrapolation,
    boundaries with gravity, fluid faces and the fused G2P + RK2 + push-out are the NumPy
    reference's bits; P2G within float32 rounding, the brick gather the cell gather's bits."""
    import cupy

    from voxfx.kernels.flip import sparse_gpu

    spec, cpu, gpu, pos, vel, c = moved_scene(closed, apic, int(np.random.default_rng().integers(1 << 30)))
    assert gpu.brick_nbr is not None  # the kernels run, not the array path
    dev = [cupy.asarray(a) if a is not None else None for a in (pos, vel, c)]
    want = sparse_transfer.particles_to_grid(cpu, pos, vel, c)
    sparse_gpu.particles_to_grid(gpu, *dev, gather="cell")
    by_cell = [host(gpu[n]) for n in gpu.FACES]
    got = gpu.valid = sparse_gpu.particles_to_grid(gpu, *dev, gather="brick")
    for name, cell_faces in zip(cpu.FACES, by_cell):
        assert np.array_equal(host(gpu[name]).view(np.uint32), cell_faces.view(np.uint32))
        assert np.abs(host(gpu[name]) - cpu[name]).max() <= 1e-6 * max(1.0, np.abs(cpu[name]).max())
        gpu[name] = cupy.asarray(cpu[name])
    for a, b in zip(got, want):
        assert np.array_equal(host(a), b)
    sparse_transfer.classify(gpu, dev[0].copy())  # another array: from the particles
    by_particles = host(gpu["cell"])
    assert gpu.bins is not None and gpu.bins[0] is dev[0]
    for g, p in ((cpu, pos), (gpu, dev[0])):
        sparse_transfer.classify(g, p)  # the GPU's from the bins' counts
        sparse_transfer.extrapolate(g)
    assert np.array_equal(host(gpu["cell"]), cpu["cell"])
    assert np.array_equal(by_particles, cpu["cell"])
    for name in cpu.FACES:
        assert np.array_equal(host(gpu[name]), cpu[name])
    olds = []
    gravity = [np.float32(a * 0.01) for a in (0.0, -9.81, 0.5)]
    for g in (cpu, gpu):
        olds.append(tuple(f.copy() for f in g.faces()))
        sparse_transfer.enforce_boundaries(g, add=gravity)
    for name in cpu.FACES:
        assert np.array_equal(host(gpu[name]), cpu[name])
    for a, b in zip(sparse_transfer.fluid_faces(gpu), sparse_transfer.fluid_faces(cpu)):
        assert np.array_equal(host(a), b)
    ratio = 0.0 if apic else 0.95
    sparse_transfer.g2p_advect(cpu, olds[0], pos, vel, ratio, 0.01, c)
    sparse_transfer.g2p_advect(gpu, olds[1], *dev[:2], ratio, 0.01, dev[2])
    assert np.array_equal(host(dev[0]), pos)
    assert np.array_equal(host(dev[1]), vel)
    assert gpu.bins is None  # the particles moved: classify no longer trusts the bins
    if apic:
        assert np.array_equal(host(dev[2]), c)


@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_gpu_g2p_in_the_bins_order_gives_the_same_bits(monkeypatch, apic):
    """G2P + advection over the particles in P2G's sorted order (the default) and in their
    own order: the same positions, velocities (and C), bit for bit."""
    import cupy

    spec, cpu, gpu, pos, vel, c = moved_scene(True, apic, int(np.random.default_rng().integers(1 << 30)))
    results = []
    for mode in ("cell", "input"):
        monkeypatch.setenv("VOXFX_SPARSE_G2P", mode)
        dev = [cupy.asarray(a) if a is not None else None for a in (pos, vel, c)]
        sparse_transfer.particles_to_grid(gpu, *dev)
        assert gpu.bins is not None and gpu.bins[0] is dev[0]
        sparse_transfer.classify(gpu, dev[0])
        sparse_transfer.extrapolate(gpu)
        old = tuple(f.copy() for f in gpu.faces())
        sparse_transfer.enforce_boundaries(gpu, add=[np.float32(0), np.float32(-0.1), np.float32(0)])
        sparse_transfer.g2p_advect(gpu, old, dev[0], dev[1], 0.0 if apic else 0.95, 0.01, dev[2])
        results.append([host(a) for a in dev if a is not None])
    for a, b in zip(*results):
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    assert not np.array_equal(results[0][0], pos)


@pytest.mark.parametrize("gather", ["brick", "cell"])
def test_gpu_p2g_gives_the_same_bits_every_run_and_any_particle_order(gather):
    import cupy

    from voxfx.kernels.flip import sparse_gpu

    rng = np.random.default_rng()
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (24, 20, 16))
    pos, vel = random_particles(spec, 40000, rng, 0.0, 0.7)
    _, gpu = grids(spec, pos)
    runs = []
    for order in (np.arange(len(pos)), np.arange(len(pos)), rng.permutation(len(pos))):
        sparse_gpu.particles_to_grid(gpu, cupy.asarray(pos[order]), cupy.asarray(vel[order]), None, gather=gather)
        runs.append([host(gpu[n]) for n in gpu.FACES])
    for a, b in zip(runs[0], runs[1]):
        assert np.array_equal(a, b)
    for a, b in zip(runs[0], runs[2]):
        assert np.abs(a - b).max() <= 1e-6 * max(1.0, np.abs(a).max())


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
def test_gpu_incremental_topology_is_the_array_paths(closed):
    """Particles that moved within the topology: the kernels' bricks (no particle sort) are
    topology_keys', and the update keeps the CPU's slots; with a particle outside the
    topology they are built from the particles' bricks, still topology_keys'."""
    import cupy

    from voxfx.kernels.flip import sparse_topology_gpu

    rng = np.random.default_rng()
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (40, 30, 20))
    pos, _ = random_particles(spec, 20000, rng, 0.0 if closed else -0.1, 0.7)
    cpu, gpu = grids(spec, pos, closed, margin=5)
    assert sparse_topology_gpu.incremental_keys(gpu, cupy.asarray(pos), 5) == (None, True)  # the same bricks
    moved = pos + rng.normal(0, 0.02, pos.shape).astype(np.float32)
    for margin in (1, 3, 5, 8, 9, 12, 16, 17, 24, 33):  # one brick of reach, two (125 offsets), … five
        found = sparse_topology_gpu.incremental_keys(gpu, cupy.asarray(moved), margin)
        assert found is not None
        keys, same = found
        want = cpu.topology_keys(moved, margin)
        assert np.array_equal(host(gpu.topology.keys) if same else np.unique(host(keys)), want)
        assert same == np.array_equal(want, cpu.topology.keys)
    for g, xp in ((cpu, np), (gpu, cupy)):
        g.update(xp.asarray(moved), 5)
    assert np.array_equal(host(gpu.topology.keys), cpu.topology.keys)
    assert np.array_equal(host(gpu.topology.slots), cpu.topology.slots)
    assert np.array_equal(host(gpu.nbr), cpu.nbr)
    for name in ("solid", "wall", *cpu.EXISTS):
        assert np.array_equal(host(gpu[name]), cpu[name])
    if not closed:  # (closed, the margin covers the whole box: no particle can be outside)
        far = moved.copy()
        far[0] = (2.0, 2.0, 0.5)  # outside the topology
        keys, same = sparse_topology_gpu.incremental_keys(gpu, cupy.asarray(far), 5)  # built from the particles' bricks
        assert not same and np.array_equal(np.unique(host(keys)), cpu.topology_keys(far, 5))
    assert sparse_topology_gpu.incremental_keys(gpu, cupy.asarray(moved), 65) is None  # past eight bricks: array path


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("margin", [4, 12, 20])
def test_gpu_first_build_and_wide_margins_are_the_array_paths(monkeypatch, closed, margin):
    """The first substep's topology (no brick yet) is built on the device from the
    particles' bricks, also with margins of two and three bricks' reach: the CPU's keys, slots and
    tables; VOXFX_SPARSE_TOPOLOGY=legacy (the earlier limits) gives the same bricks."""
    import cupy

    from voxfx.kernels.flip import sparse_topology_gpu

    rng = np.random.default_rng()
    spec = GridSpec((0.0, 0.0, 0.0), 0.025, (80, 60, 40))
    pos, _ = random_particles(spec, 30000, rng, 0.0 if closed else -0.1, 0.5)
    fresh = SparseFlipGrid(spec, cupy, closed=closed)
    assert sparse_topology_gpu.full_keys(fresh, cupy.asarray(pos), margin) is not None
    cpu, gpu = grids(spec, pos, closed, margin=margin)
    assert np.array_equal(host(gpu.topology.keys), cpu.topology.keys)
    assert np.array_equal(host(gpu.topology.slots), cpu.topology.slots)
    assert np.array_equal(host(gpu.nbr), cpu.nbr)
    moved = pos + rng.normal(0, 0.03, pos.shape).astype(np.float32)
    for g, xp in ((cpu, np), (gpu, cupy)):
        g.update(xp.asarray(moved), margin)
    assert np.array_equal(host(gpu.topology.keys), cpu.topology.keys)
    assert np.array_equal(host(gpu.topology.slots), cpu.topology.slots)
    monkeypatch.setenv("VOXFX_SPARSE_TOPOLOGY", "legacy")
    legacy = SparseFlipGrid(spec, cupy, closed=closed)
    legacy.update(cupy.asarray(pos), margin)
    assert np.array_equal(host(legacy.topology.keys), grids(spec, pos, closed, margin=margin)[0].topology.keys)
    assert (sparse_topology_gpu.incremental_keys(legacy, cupy.asarray(moved), margin) is None) == (margin > 8)


@pytest.mark.parametrize("boundary", ["closed", "open"])
def test_gpu_fast_liquid_substeps_keep_the_array_paths_bricks(boundary):
    """A blob thrown at 5 m/s on a 1/64 m grid with 1/60 s substeps needs a margin of two
    bricks' reach (> 8 cells): every substep's device topology (the first build included)
    is the bricks of topology_keys on the same positions and velocities (per-brick margins)."""
    import cupy

    from voxfx.kernels.flip import sparse_topology_gpu, transfer
    from voxfx.kernels.flip.sparse_grid import BrickReach, substep_margin

    spec = GridSpec((0.0, 0.0, 0.0), 1 / 64, (64, 64, 64))
    v, t = box((0.2, 0.3, 0.3), (0.4, 0.5, 0.5))
    sim = FlipSimulation(spec, FlipSettings(gravity=(0.0, 0.0, 0.0), boundary=boundary), v, t, xp=cupy, sparse=True)
    sim.vel[:, 0] = cupy.float32(5.0)
    g, dt = sim.grid, 1 / 60
    for _ in range(3):
        margin = substep_margin(float(transfer.max_speed(sim.vel)), dt, spec.voxel_size, 0.0)
        assert 8 < margin <= sparse_topology_gpu.MAX_MARGIN and sparse_topology_gpu.can_build(g, sim.pos)
        want = host(g.topology_keys(sim.pos, margin, reach=BrickReach(sim.vel, dt, 0.0, spec.voxel_size)))
        sim.substep(dt)
        assert np.array_equal(host(g.topology.keys), want)
