"""Per-brick topology margins on the device (issue 21 §6): ``mark_occupied``'s per-slot
speeds, ``slot_margins`` and ``brick_reach`` at radii up to eight bricks give the bricks,
slots and tables of the NumPy reference (``topology_keys(..., reach=)``) for random
scenes with splash outliers up to a margin of 64 cells, through the first build and
incremental substeps, without falling back to the array path; a global margin below a
brick's (the caller's bound was short) falls back and still gives the same bricks."""

import numpy as np
import pytest

from voxfx.kernels import backend
from voxfx.kernels.flip import sparse_topology_gpu
from voxfx.kernels.flip.sparse_grid import BrickReach, SparseFlipGrid, speed_squared, substep_margin
from voxfx.kernels.grid import GridSpec


def host(a):
    return backend.to_numpy(a)


def scene(rng, closed, fast, n=20000):
    """Slow liquid (≲ 1 m/s) in the lower part of a 1/64 m box, and a few splash
    particles at up to *fast* m/s above it."""
    spec = GridSpec((0.0, 0.0, 0.0), 1 / 64, (160, 128, 96))
    up = np.asarray(spec.upper)
    lo = 0.0 if closed else -0.05
    pos = (rng.uniform(lo, [0.7, 0.6, 0.4], (n, 3)) * up).astype(np.float32)
    vel = rng.normal(0.0, 0.3, (n, 3)).astype(np.float32)
    for i in range(5):
        pos[i] = rng.uniform([0.2, 0.2, 0.5], [0.8, 0.8, 0.9]) * up
        d = rng.normal(0.0, 1.0, 3)
        vel[i] = fast * (1.0 if i == 0 else rng.uniform(0.5, 1.0)) * d / np.linalg.norm(d)
    return spec, pos, vel


def counting(monkeypatch):
    """Records what incremental_keys returned (None: the array path built the bricks)."""
    results = []
    original = sparse_topology_gpu.incremental_keys

    def counted(*args, **kwargs):
        out = original(*args, **kwargs)
        results.append(out is not None)
        return out

    monkeypatch.setattr(sparse_topology_gpu, "incremental_keys", counted)
    return results


def same(cpu, gpu):
    assert np.array_equal(host(gpu.topology.keys), cpu.topology.keys)
    assert np.array_equal(host(gpu.topology.slots), cpu.topology.slots)
    assert np.array_equal(host(gpu.topology.free), cpu.topology.free)
    assert np.array_equal(host(gpu.nbr), cpu.nbr)
    for name in ("solid", "wall", *cpu.EXISTS):
        assert np.array_equal(host(gpu[name]), cpu[name]), name


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("fast", [2.0, 8.0, 27.5])  # 27.5 m/s at 1/30 s on 1/64 m cells: a margin of 64
def test_device_per_brick_topology_is_the_numpys(monkeypatch, closed, fast):
    import cupy

    monkeypatch.delenv("VOXFX_SPARSE_TOPOLOGY", raising=False)
    monkeypatch.delenv("VOXFX_SPARSE_SPEED_MAX", raising=False)  # warp-aggregated maxima
    served = counting(monkeypatch)
    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)))
    spec, pos, vel = scene(rng, closed, fast)
    dt, gravity = 1 / 30, 9.81
    cpu, gpu = SparseFlipGrid(spec, np, closed), SparseFlipGrid(spec, cupy, closed)
    margins = []
    for step in range(4):  # the first build, then substeps that move the liquid (bricks added and freed)
        if step:
            pos = (pos + vel * np.float32(dt * 0.5)).astype(np.float32)
            vel = (vel * np.float32(0.95) + rng.normal(0, 0.05, vel.shape)).astype(np.float32)
        margin = substep_margin(float(np.sqrt(speed_squared(vel, np).max())), dt, spec.voxel_size, gravity)
        margins.append(margin)
        assert margin <= sparse_topology_gpu.MAX_MARGIN
        cpu.update(pos, margin, reach=BrickReach(vel, dt, gravity, spec.voxel_size))
        gpu.update(cupy.asarray(pos), margin, reach=BrickReach(cupy.asarray(vel), dt, gravity, spec.voxel_size))
        same(cpu, gpu)
    assert all(served) and len(served) == 4  # every substep on the device: no array fall-back
    if fast == 8.0:  # the splash no longer dilates the whole liquid (wider margins: slow on the CPU)
        everywhere = SparseFlipGrid(spec, np, closed)
        everywhere.update(pos, margins[-1])
        assert cpu.brick_count() < everywhere.brick_count()
    if fast >= 27.5:
        assert margins[0] > 56  # the device served eight bricks of reach


def test_plain_atomics_give_the_warp_aggregated_maxima(monkeypatch):
    """VOXFX_SPARSE_SPEED_MAX=plain (one atomicMax a particle), warp and uniform (a warp on one
    slot without __match_any_sync): the same bricks, with the particles in seeding order (warps
    share slots) and shuffled (they do not)."""
    import cupy

    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)))
    spec, pos, vel = scene(rng, True, 20.0)
    order = np.lexsort(np.floor(pos / spec.voxel_size).T)  # by cell: a warp's lanes share bricks
    dt = 1 / 30
    margin = substep_margin(float(np.sqrt(speed_squared(vel, np).max())), dt, spec.voxel_size, 9.81)
    cpu = SparseFlipGrid(spec, np, True)
    cpu.update(pos, margin, reach=BrickReach(vel, dt, 9.81, spec.voxel_size))
    for p, v in ((pos[order], vel[order]), (pos, vel)):
        for mode in sparse_topology_gpu.SPEED_MAXIMA:  # warp (default), uniform, plain
            monkeypatch.setenv("VOXFX_SPARSE_SPEED_MAX", mode)
            gpu = SparseFlipGrid(spec, cupy, True)
            gpu.update(cupy.asarray(p), margin, reach=BrickReach(cupy.asarray(v), dt, 9.81, spec.voxel_size))
            assert np.array_equal(host(gpu.topology.keys), cpu.topology.keys), mode


def test_a_short_global_margin_falls_back_to_the_same_bricks(monkeypatch):
    import cupy

    served = counting(monkeypatch)
    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)))
    spec, pos, vel = scene(rng, True, 20.0, n=20000)
    dt = 1 / 30
    cpu, gpu = SparseFlipGrid(spec, np, True), SparseFlipGrid(spec, cupy, True)
    cpu.update(pos, 8, reach=BrickReach(vel, dt, 9.81, spec.voxel_size))
    gpu.update(cupy.asarray(pos), 8, reach=BrickReach(cupy.asarray(vel), dt, 9.81, spec.voxel_size))  # radius 1
    assert served == [False]  # the splash's bricks need more than one brick of reach: beyond
    same(cpu, gpu)


def test_global_mode_keeps_the_fastest_particles_margin_everywhere(monkeypatch):
    """VOXFX_SPARSE_MARGIN=global (the A/B baseline): a substep's bricks are those of the
    fastest particle's margin around every particle."""
    import cupy

    from tests.meshes import box
    from voxfx.kernels.flip import transfer
    from voxfx.kernels.flip.grid import FlipSettings
    from voxfx.kernels.flip.sim import FlipSimulation

    spec = GridSpec((0.0, 0.0, 0.0), 1 / 64, (64, 64, 64))
    v, t = box((0.05, 0.3, 0.3), (0.95, 0.5, 0.5))  # seven bricks long: most of them far from the fast particles
    bricks = {}
    for mode in ("global", "brick"):
        monkeypatch.setenv("VOXFX_SPARSE_MARGIN", mode)
        sim = FlipSimulation(spec, FlipSettings(gravity=(0.0, 0.0, 0.0)), v, t, xp=cupy, sparse=True)
        sim.vel[:7, 0] = cupy.float32(6.0)  # a few fast particles (seeded first: at one end)
        g, dt = sim.grid, 1 / 60
        margin = substep_margin(float(transfer.max_speed(sim.vel)), dt, spec.voxel_size, 0.0)
        reach = None if mode == "global" else BrickReach(sim.vel, dt, 0.0, spec.voxel_size)
        want = host(g.topology_keys(sim.pos, margin, reach=reach))
        sim.substep(dt)
        assert np.array_equal(host(g.topology.keys), want)
        bricks[mode] = len(want)
    assert bricks["brick"] < bricks["global"]
