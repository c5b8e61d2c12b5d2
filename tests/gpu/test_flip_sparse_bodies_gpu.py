"""Sparse FLIP's bodies as bricks (issue 12) on the GPU against the CPU reference: the
same voxels (bit-identical bricks), the same inflow/outflow cells, whole runs alike."""

import numpy as np
import pytest

from tests.meshes import box
from voxfx.kernels import backend
from voxfx.kernels.flip import bodies, sparse_bodies
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec


def body(lo, hi, matrix=None):
    v, t = box(lo, hi)
    return bodies.Body(np.asarray(v, np.float32), np.asarray(t, np.int32),
                       np.eye(4) if matrix is None else np.asarray(matrix, np.float64))


def test_gpu_body_bricks_are_the_cpus():
    import cupy

    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    b = body((-0.53, 0.12, -0.31), (0.97, 0.47, 0.04))
    cpu = sparse_bodies.voxel_bricks(b, spec, np)
    gpu = sparse_bodies.voxel_bricks(b, spec, cupy)
    assert np.array_equal(backend.to_numpy(gpu.keys), cpu.keys)
    assert np.array_equal(backend.to_numpy(gpu.rows), cpu.rows)
    probe = np.vstack([sparse_bodies.cells(cpu, np), [[3, 9, 3], [-70, 0, 0]]])
    assert np.array_equal(backend.to_numpy(sparse_bodies.contains(gpu, cupy.asarray(probe), cupy)),
                          sparse_bodies.contains(cpu, probe, np))


def test_gpu_open_domain_blob_lands_on_an_obstacle_below_the_box_as_on_the_cpu():
    import cupy

    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    water = box((0.3, 0.3, 0.2), (0.6, 0.6, 0.5))
    floor = box((-0.5, -0.5, -0.9), (1.3, 1.3, -0.5))
    sims = [FlipSimulation(spec, FlipSettings(), *water, *floor, xp=xp, sparse=True, boundary="open",
                           kill_distance=2.0) for xp in (np, cupy)]
    for _ in range(45):
        for sim in sims:
            sim.step(1 / 60)
    cpu, gpu = sims
    z = gpu.particles_host()["position"][:, 2]
    assert len(gpu.pos) == len(cpu.pos) and gpu.killed == 0
    assert z.max() < 0.0 and z.min() > -0.6
    assert gpu.centre_of_mass() == pytest.approx(cpu.centre_of_mass(), abs=0.01)


def test_gpu_inflow_and_outflow_outside_the_box_match_cpu():
    import cupy

    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    water = box((0.3, 0.3, 0.3), (0.5, 0.5, 0.5))
    sims = [FlipSimulation(spec, FlipSettings(), *water, xp=xp, sparse=True, boundary="open", kill_distance=5.0)
            for xp in (np, cupy)]
    for sim in sims:
        nozzle = sim.body_cells(body((1.02, 0.31, 0.21), (1.18, 0.49, 0.39)))
        assert len(nozzle) == 8
        assert sim.emit(nozzle, (1.0, 0.0, 0.0)) == 64
    cpu, gpu = sims
    assert np.array_equal(gpu.particles_host()["position"], cpu.particles_host()["position"])
    for sim in sims:
        sim.step(1 / 60)
        assert sim.drain(sim.body_cells(body((0.9, -1.0, -2.0), (3.0, 2.0, 2.0)))) == 64


def test_gpu_moving_obstacle_bodies_match_cpu():
    import cupy

    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (12, 6, 12))
    water = box((0.0, 0.0, 0.0), (0.6, 0.3, 0.2))
    sims = [FlipSimulation(spec, FlipSettings(seed=3), *water, xp=xp, sparse=True) for xp in (np, cupy)]
    for f in range(8):
        x = 0.4 - 0.02 * f
        now = body((x, -0.1, -0.1), (x + 0.06, 0.4, 0.3))
        nxt = np.eye(4)
        nxt[0, 3] = -0.02
        for sim in sims:
            sim.set_obstacle_bodies([now], [nxt], 60.0)
            sim.step(1 / 60)
    cpu, gpu = sims
    assert len(gpu.pos) == len(cpu.pos)
    assert gpu.centre_of_mass() == pytest.approx(cpu.centre_of_mass(), abs=0.01)
    assert np.abs(gpu.cell_velocity() - cpu.cell_velocity()).max() < 0.05
