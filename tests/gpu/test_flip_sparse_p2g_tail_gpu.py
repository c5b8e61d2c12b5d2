"""The P2G stage's tail on the GPU (``sparse_transfer.extrapolate_and_boundaries``, helper
i24a): tail (the last extrapolation ring, the old faces and the boundaries with gravity in
one kernel) and apart give the NumPy reference's old faces, faces and masks bit for bit; fused
(the first ring in the division's pass too, ``particles_to_grid(ring=True)``) gives apart's
bits from the GPU's own P2G, and so does live (the idle bricks skipped, helper h18f) on a scene
with idle bricks (tests/unit/test_cuda_sparse_idle_bricks_host.py's); whole sparse runs are the
same bits every way."""

import numpy as np
import pytest

from tests.gpu.sparse_runs import assert_runs_agree
from tests.gpu.test_flip_sparse_gpu import host, moved_scene
from tests.unit.test_cuda_sparse_idle_bricks_host import idle_scene
from voxfx.kernels.flip import sparse_gpu, sparse_transfer


def bits(a):
    return host(a).view(np.uint32) if host(a).dtype == np.float32 else host(a)


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("mode", ["tail", "apart"])
def test_gpu_p2g_tail_is_the_cpus_bit_for_bit(closed, mode):
    import cupy

    spec, cpu, gpu, pos, vel, c = moved_scene(closed, False, int(np.random.default_rng().integers(1 << 30)))
    assert sparse_gpu.available(gpu)
    cpu.valid = sparse_transfer.particles_to_grid(cpu, pos, vel, c)
    for name in cpu.FACES:  # the same faces and masks on both
        gpu[name] = cupy.asarray(cpu[name])
    gpu.valid = tuple(cupy.asarray(m) for m in cpu.valid)
    gravity = [np.float32(a * 0.01) for a in (0.0, -9.81, 0.5)]
    want = sparse_transfer.extrapolate_and_boundaries(cpu, add=gravity)
    got = sparse_transfer.extrapolate_and_boundaries(gpu, add=gravity, mode=mode)
    for a, b in zip(got, want):
        assert np.array_equal(bits(a), bits(b))
    for name in cpu.FACES:
        assert np.array_equal(bits(gpu[name]), bits(cpu[name])), name
        assert not np.array_equal(bits(gpu[name]), bits(got[cpu.FACES.index(name)]))  # boundaries, gravity
    for a, b in zip(gpu.valid, cpu.valid):
        assert np.array_equal(host(a), host(b))
    assert sum(int(host(m).sum()) for m in cpu.valid) > 0


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_gpu_p2g_ring_in_the_division_gives_the_rings_bits(monkeypatch, closed, apic):
    import cupy

    spec, cpu, gpu, pos, vel, c = moved_scene(closed, apic, int(np.random.default_rng().integers(1 << 30)))
    dev = [cupy.asarray(a) if a is not None else None for a in (pos, vel, c)]
    gravity = [np.float32(a * 0.01) for a in (0.0, -9.81, 0.5)]
    out = {}
    for mode in ("fused", "apart"):
        monkeypatch.setenv("VOXFX_SPARSE_P2G_TAIL", mode)
        raw = [host(m) for m in sparse_transfer.particles_to_grid(gpu, *dev, ring=True)]
        assert (gpu._p2g_ring is not None) == (mode == "fused")  # the ring ran in the division
        sparse_transfer.classify(gpu, dev[0])
        old = sparse_transfer.extrapolate_and_boundaries(gpu, add=gravity)
        assert gpu._p2g_ring is None  # read once, the faces let go
        out[mode] = (raw, [bits(a) for a in (*old, *gpu.faces(), *gpu.valid, gpu["cell"])])
    for a, b in zip(out["fused"][1], out["apart"][1]):
        assert np.array_equal(a, b)
    grew = sum(int(m.sum()) for m in out["fused"][0]) - sum(int(m.sum()) for m in out["apart"][0])
    assert grew > 0  # the fused P2G's masks are the first ring's


@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_gpu_sparse_runs_are_the_same_bits_either_tail(monkeypatch, apic):
    assert_runs_agree(monkeypatch, apic, "VOXFX_SPARSE_P2G_TAIL", sparse_transfer.P2G_TAILS)


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_gpu_live_tail_skips_idle_bricks_with_aparts_bits(monkeypatch, closed, apic):
    """live (the idle bricks flagged from the binning's counts, their sums, first ring and tail
    work skipped) gives apart's P2G masks, old faces, faces, masks and cell types bit for bit, and
    then the fluid faces' two rings (the idle bricks copied) apart's faces and masks, on a scene
    whose pool has idle bricks, moving solid faces and gravity."""
    import cupy

    grid, pos, vel, c, _, _ = idle_scene(closed, apic, int(np.random.default_rng().integers(1 << 30)), cupy)
    rng = np.random.default_rng(1)
    solid = host(grid["solid"]) != 0
    for name in ("solid_u", "solid_v", "solid_w"):
        grid[name] = cupy.asarray(np.where(solid, rng.normal(0, 1, grid.size), 0).astype(np.float32))
    dev = [cupy.asarray(a) if a is not None else None for a in (pos, vel, c)]
    gravity = [np.float32(a * 0.01) for a in (0.0, -9.81, 0.5)]
    out = {}
    for mode in ("apart", "live"):
        monkeypatch.setenv("VOXFX_SPARSE_P2G_TAIL", mode)
        raw = [host(m) for m in sparse_transfer.particles_to_grid(grid, *dev, ring=True)]
        kept = grid._p2g_live
        assert (kept is not None) == (mode == "live")
        if kept is not None:
            flags = host(kept[1])
            used = host(grid.brick_slot).astype(bool)
            assert int((used & (flags == 0)).sum()) >= 4  # idle bricks
            assert int(flags[~used].sum()) == 0  # free slots idle
        sparse_transfer.classify(grid, dev[0])
        old = sparse_transfer.extrapolate_and_boundaries(grid, add=gravity)
        assert grid._p2g_live is None  # read once
        tail = [bits(a) for a in (*old, *grid.faces(), *grid.valid, grid["cell"])]
        fluid = sparse_transfer.fluid_faces(grid)  # as after the projection: the rings G2P needs
        assert (grid._fluid_live is not None) == (mode == "live")
        sparse_transfer.extrapolate(grid, valid=fluid)
        assert grid._fluid_live is None  # read once
        out[mode] = (raw, tail + [bits(a) for a in (*grid.faces(), *grid.valid)])
    for a, b in zip(out["live"][0], out["apart"][0]):
        assert np.array_equal(a, b)
    for a, b in zip(out["live"][1], out["apart"][1]):
        assert np.array_equal(a, b)
    assert sum(int(m.sum()) for m in out["apart"][1][6:9]) > 1000
