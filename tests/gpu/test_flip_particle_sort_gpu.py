"""The sparse solver's particle sort (``particle_sort``, VOXFX_SPARSE_PARTICLE_SORT) on the GPU:
the same permutation as the NumPy reference's, the same motion as a set with the sort on or
off, and a resumed bake with the sort the uninterrupted one, bit for bit."""

import numpy as np
import pytest

from tests.meshes import box
from voxfx.kernels import backend
from voxfx.kernels.flip import particle_sort
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec

pytestmark = pytest.mark.usefixtures("fresh_sparse_solvers")


def rows(a):
    """*a*'s rows (N, k) sorted, as bytes: the particles as a set, bit for bit."""
    a = np.ascontiguousarray(backend.to_numpy(a)).reshape(len(a), -1)
    v = a.view(np.uint32)
    return v[np.lexsort(v.T[::-1])]


@pytest.mark.parametrize("closed,shape", [(True, (60, 33, 47)), (False, (60, 33, 47)), (False, (9000, 8000, 7000))],
                         ids=["closed", "open", "int64 keys"])
def test_gpu_keys_permutation_and_disorder_are_the_cpus(closed, shape):
    """``particle_brick_keys`` / ``key_jumps`` (int32 keys) or the array code (int64), then
    CuPy's argsort: the NumPy reference's keys, permutation (stable: ties by index) and disorder."""
    import cupy

    spec = GridSpec((0.5, -1.0, 0.0), 0.1, shape)
    rng = np.random.default_rng()
    up = np.asarray((60, 33, 47)) * 0.1
    pos = (np.asarray(spec.origin) + rng.uniform(-0.2, 1.2, (200_000, 3)) * up).astype(np.float32)
    pos[rng.integers(0, len(pos), 50_000)] = pos[rng.integers(0, len(pos), 50_000)]  # ties: the stable order
    pos[rng.integers(0, len(pos), 10)] = np.inf
    pos[100_000:] = pos[100_000:][particle_sort.brick_order(pos[100_000:], spec, closed, 0.3, np)]  # half sorted
    keys = [particle_sort.brick_keys(p, spec, closed, 0.3, xp) for p, xp in ((pos, np), (cupy.asarray(pos), cupy))]
    assert keys[0].dtype == (np.int64 if shape[0] > 1000 else np.int32)
    assert np.array_equal(keys[0], cupy.asnumpy(keys[1]))
    cpu = particle_sort.brick_order(pos, spec, closed, 0.3, np)
    gpu = particle_sort.brick_order(cupy.asarray(pos), spec, closed, 0.3, cupy)
    assert np.array_equal(cpu, cupy.asnumpy(gpu))
    jumps = [particle_sort.disorder(k, spec, closed, 0.3, xp) for k, xp in zip(keys, (np, cupy))]
    assert jumps[0] == jumps[1] and 0.2 < jumps[0] < 0.8


def dam(boundary="closed"):
    spec = GridSpec((0.0, 0.0, 0.0), 0.025, (40, 24, 32))
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.6, 0.5))
    return spec, v, t, FlipSettings(boundary=boundary, apic=False)


@pytest.mark.parametrize("apic", [False, True])
@pytest.mark.parametrize("way", particle_sort.PATHS)
def test_gpu_reorder_paths_move_the_arrays_as_numpy_indexing(way, apic):
    """``reorder`` by each path (argsort + fancy indexing, argsort + ``gather_particles``): pos,
    vel and C are the NumPy reference's
    x[stable order], bit for bit, twice in a row (the second into the first's kept arrays,
    which are then the state's: no array shared between the state and the spare)."""
    import cupy

    spec, v, t, settings = dam()
    settings = FlipSettings(boundary="closed", apic=apic)
    sim = FlipSimulation(spec, settings, v, t, xp=cupy, sparse=True)
    rng = np.random.default_rng(8)
    n = len(sim.pos)
    sim.pos = cupy.asarray(sim.pos[cupy.asarray(rng.permutation(n))])
    sim.vel = cupy.asarray(rng.standard_normal((n, 3)).astype(np.float32))
    if apic:
        sim.c = cupy.asarray(rng.standard_normal((n, 3, 3)).astype(np.float32))
    for _ in range(2):
        host = [backend.to_numpy(a) for a in (sim.pos, sim.vel, sim.c) if a is not None]
        key = particle_sort.brick_keys(sim.pos, spec, True, 0.0, cupy)
        order = particle_sort.order_of(backend.to_numpy(key), np)
        # The state's arrays held here while it reorders: argsort's path frees each old array as
        # its new one is assigned, and CuPy's pool may hand that memory to the next array's
        # result (call 4 of the fifteenth session: vel's new array on pos's old block), which
        # shares nothing; held, a new array on an old one's memory would be a real alias.
        held = [a for a in (sim.pos, sim.vel, sim.c) if a is not None]
        before = [a.data.ptr for a in held]
        particle_sort.reorder(sim, key, way)
        after = [a.data.ptr for a in (sim.pos, sim.vel, sim.c) if a is not None]
        assert not set(before) & set(after)
        del held
        for got, want in zip([a for a in (sim.pos, sim.vel, sim.c) if a is not None], host):
            assert np.array_equal(backend.to_numpy(got).view(np.uint32), want[order].view(np.uint32))
        if way != "argsort":
            assert [a.data.ptr for a in sim.sort_spare if a is not None] == before
        # the spare the memory estimate counts (sparse_memory.memory_at): its arrays' bytes, none on argsort's path
        spare = getattr(sim, "sort_spare", None)
        assert (0 if spare is None else sum(a.nbytes for a in spare if a is not None)) == particle_sort.spare_bytes(
            n, apic, "1", way)
        sim.pos = cupy.asarray(sim.pos[cupy.asarray(rng.permutation(n))])  # in place of a frame's motion


@pytest.mark.parametrize("way", particle_sort.PATHS)
@pytest.mark.parametrize("boundary", ["closed", "open"])
def test_gpu_sort_keeps_the_motion_the_same_as_a_set(monkeypatch, boundary, way):
    """P2G's sums are integers and G2P is per particle: sorted every frame or never (by each
    path), the particles after six frames are the same set, bit for bit (a random start order)."""
    import cupy

    monkeypatch.setenv(particle_sort.PATH_SWITCH, way)
    spec, v, t, settings = dam(boundary)
    sims = [FlipSimulation(spec, settings, v, t, xp=cupy, sparse=True) for _ in range(2)]
    shuffle = cupy.asarray(np.random.default_rng(4).permutation(len(sims[0].pos)))
    for sim in sims:
        particle_sort.permute(sim, shuffle)
    for _ in range(6):
        for sim, way in zip(sims, ("1", "off")):
            monkeypatch.setenv(particle_sort.SWITCH, way)
            assert sim.step(1 / 24)["sorted"] == (way == "1")
    sorting, plain = sims
    assert not np.array_equal(backend.to_numpy(sorting.pos), backend.to_numpy(plain.pos))
    both = [np.concatenate([backend.to_numpy(s.pos), backend.to_numpy(s.vel)], axis=1) for s in sims]
    assert np.array_equal(rows(both[0]), rows(both[1]))


def test_gpu_resumed_bake_with_the_sort_follows_the_uninterrupted_one(monkeypatch):
    """A GPU resume is within float32 rounding, not bit for bit (tests/gpu/test_flip_sim_gpu.py;
    the CPU's is: tests/unit/test_flip_particle_sort.py), so a particle within rounding of a
    cell's border may sort the other way: the resumed particles match the uninterrupted ones
    index by index (all but a few) and as a set (each axis's sorted values)."""
    import cupy

    monkeypatch.setenv(particle_sort.SWITCH, "2")
    spec, v, t, settings = dam()
    a = FlipSimulation(spec, settings, v, t, xp=cupy, sparse=True)
    particle_sort.permute(a, cupy.asarray(np.random.default_rng(6).permutation(len(a.pos))))
    for _ in range(3):
        a.step(1 / 24)
    saved = {k: np.array(x) for k, x in a.checkpoint().items()}  # as written to and read from disk
    b = FlipSimulation(spec, settings, v, t, xp=cupy, sparse=True)
    b.restore(saved)
    sorts = [(a.step(1 / 24)["sorted"], b.step(1 / 24)["sorted"]) for _ in range(3)]
    assert sorts == [(True, True), (False, False), (True, True)]  # frames 4 and 6
    pa, pb = a.particles_host()["position"], b.particles_host()["position"]
    assert pa.shape == pb.shape
    same = (np.abs(pa - pb).max(axis=1) <= 1e-5).mean()
    assert same >= 0.999, same
    assert np.abs(np.sort(pa, axis=0) - np.sort(pb, axis=0)).max() <= 1e-5
