"""The margin on the device (``VOXFX_SPARSE_DEVICE_MARGIN``, issue 24): a substep that does not
know its fastest particle's speed passes margin None and the topology learns it with its one
host read (``sparse_topology_gpu.incremental_keys``). The same particles, bricks and slots as
the host's read, bit for bit, over the dam break's substeps, with one speed read in all (the
first build's) instead of one a substep; a radius guessed too small (a fast splash after a slow
substep) runs the pipeline again with the learned one, a guess too large gives the same
bricks, and neither falls back to the array path."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_margins_gpu import counting
from voxfx.kernels import backend
from voxfx.kernels.flip import sparse_topology_gpu, transfer
from voxfx.kernels.flip.sparse_grid import BrickReach, SparseFlipGrid, speed_squared, substep_margin
from voxfx.kernels.grid import GridSpec

cp = pytest.importorskip("cupy")


def host(a):
    return backend.to_numpy(a)


def test_device_margin_gives_the_read_margins_substeps(monkeypatch):
    from tests.meshes import box
    from voxfx.kernels.flip.grid import FlipSettings
    from voxfx.kernels.flip.sim import FlipSimulation

    spec = GridSpec((0.0, 0.0, 0.0), 1 / 48, (48, 32, 24))
    v, t = box((0.0, 0.0, 0.0), (0.35, 0.45, 0.45))
    reads = {"1": 0, "0": 0}
    way = ["1"]
    original = transfer.max_speed

    def counted(vel):
        reads[way[0]] += 1
        return original(vel)

    monkeypatch.setattr(transfer, "max_speed", counted)
    builds = {"1": 0, "0": 0}  # full_keys: a first build, or a particle outside the bricks
    full_keys = sparse_topology_gpu.full_keys

    def counted_builds(*args, **kwargs):
        builds[way[0]] += 1
        return full_keys(*args, **kwargs)

    monkeypatch.setattr(sparse_topology_gpu, "full_keys", counted_builds)
    sims = {}
    for mode in ("1", "0"):
        way[0] = mode
        sims[mode] = FlipSimulation(spec, FlipSettings(seed=3), v, t, xp=cp, sparse=True)
    reads.update({"1": 0, "0": 0})
    builds.update({"1": 0, "0": 0})
    for _ in range(10):
        for mode, sim in sims.items():
            way[0] = mode
            monkeypatch.setenv("VOXFX_SPARSE_DEVICE_MARGIN", mode)
            sim.substep(1 / 60)
        a, b = sims["1"], sims["0"]
        for x, y in ((a.pos, b.pos), (a.vel, b.vel), (a.grid.topology.keys, b.grid.topology.keys),
                     (a.grid.topology.slots, b.grid.topology.slots)):
            assert host(x).tobytes() == host(y).tobytes()
        assert a.grid.capacity == b.grid.capacity
    # one read a substep, against one a full build (the first substep's, a particle outside the bricks)
    assert reads["0"] == 10 and reads["1"] == builds["1"] == builds["0"] <= 3
    assert sims["1"].grid.last_margin > 4  # learned (the liquid moves)


@pytest.mark.parametrize("reach_way", ["classes", "masks"])
@pytest.mark.parametrize("guess", [4, 60], ids=["short", "long"])
def test_a_guessed_radius_gives_the_bricks_of_the_true_margin(monkeypatch, guess, reach_way):
    """The masks' radius comes from the guess: a short one reads as beyond and the pipeline runs
    again with the learned one; the classes (``sparse_reach``) have no global radius: one run."""
    monkeypatch.setenv("VOXFX_SPARSE_REACH", reach_way)
    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)))
    spec = GridSpec((0.0, 0.0, 0.0), 1 / 64, (160, 128, 96))
    up = np.asarray(spec.upper)
    pos = (rng.uniform(0.0, [0.7, 0.6, 0.4], (20000, 3)) * up).astype(np.float32)
    vel = rng.normal(0.0, 0.3, (20000, 3)).astype(np.float32)
    dt = 1 / 30
    gpu, cpu = SparseFlipGrid(spec, cp), SparseFlipGrid(spec, np)
    margin = substep_margin(float(np.sqrt(speed_squared(vel, np).max())), dt, spec.voxel_size)
    for g, xp in ((gpu, cp), (cpu, np)):
        g.update(xp.asarray(pos), margin, reach=BrickReach(xp.asarray(vel), dt, 9.81, spec.voxel_size))
    vel[:3] = np.float32(9.0)  # a splash: margins of two to three bricks
    pos = pos + (vel * np.float32(0.002)).astype(np.float32)
    calls = counting(monkeypatch)  # what each incremental_keys returned (None: the array path)
    gpu.last_margin = guess
    reach = BrickReach(cp.asarray(vel), dt, 9.81, spec.voxel_size)
    gpu.update(cp.asarray(pos), None, reach=reach)
    true = substep_margin(float(np.sqrt(speed_squared(vel, np).max())), dt, spec.voxel_size)
    cpu.update(pos, true, reach=BrickReach(vel, dt, 9.81, spec.voxel_size))
    assert sparse_topology_gpu.reach_radius(true) >= 2 and gpu.last_margin == true
    assert calls == ([True, True] if guess == 4 and reach_way == "masks" else [True])  # masks, short: once more
    assert np.array_equal(host(gpu.topology.keys), cpu.topology.keys)
    assert np.array_equal(host(gpu.topology.slots), cpu.topology.slots)
    assert np.array_equal(host(gpu.nbr), cpu.nbr)
