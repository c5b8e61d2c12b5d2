"""Sparse G2P + advection on the GPU (kernels/cuda/flip_sparse_g2p.cu, issue 24): every
kernel (``sparse_g2p_gpu.G2P_KERNELS``; the block kernel with each of its corners,
``G2P_CORNERS``: with pairs, in the bins' order its warps take the corner pairs, in the
particles' own order mostly not; with the table, samples beyond the particle's table take
the slow path) in both particle orders give the NumPy reference's positions, velocities and
APIC matrices bit for bit, on whole topologies and on a
checkerboard of bricks (corners in missing bricks, and corners whose walk passes a missing
brick), with samples that leave the home brick's 27 (fast faces) and particles inside an
obstacle (the push-out)."""

import numpy as np
import pytest

from voxfx.kernels import backend
from voxfx.kernels.flip import sparse_g2p_gpu, sparse_gpu, sparse_transfer
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.grid.sparse import brick_coords


def host(a):
    return backend.to_numpy(a)


def scene(closed, holes, apic, seed):
    """(cpu grid, gpu grid, pos, vel, c, old faces per grid): the same bricks, random faces
    (a fast band along x), an obstacle block, particles in and around the liquid."""
    import cupy

    rng = np.random.default_rng(seed)
    spec = GridSpec((0.1, -0.2, 0.05), 0.05, (40, 30, 24))
    up = np.asarray(spec.upper) - np.asarray(spec.origin)
    lo = 0.0 if closed else -0.1
    pos = (np.asarray(spec.origin) + rng.uniform(lo, 0.8, (6000, 3)) * up).astype(np.float32)
    obstacle = np.array([(i, j, k) for i in (12, 13) for j in range(5, 9) for k in range(4, 7)])
    inside = (obstacle + rng.uniform(0.1, 0.9, obstacle.shape)) * spec.voxel_size
    pos[:len(obstacle)] = (np.asarray(spec.origin) + inside).astype(np.float32)
    grids = []
    for xp in (np, cupy):
        g = SparseFlipGrid(spec, xp, closed=closed)
        g.update(xp.asarray(pos), 4, obstacle)
        if holes:
            keys = g.topology.keys
            g.retopologize(keys[brick_coords(keys).sum(axis=1) % 2 == 0])
        grids.append(g)
    cpu, gpu = grids
    assert np.array_equal(host(gpu.topology.slots), cpu.topology.slots)
    size = cpu.size
    fast = (np.arange(size) % 7 == 0).astype(np.float32) * 12.0  # some faces move a particle ~10 cells
    faces = [(rng.normal(0, 1, size) * (1 + fast)).astype(np.float32) for _ in range(3)]
    old = tuple(rng.normal(0, 1, size).astype(np.float32) for _ in range(3))
    for name, f in zip(cpu.FACES, faces):
        cpu[name] = f.copy()
        gpu[name] = cupy.asarray(f)
    gpu["solid"] = cupy.asarray(cpu["solid"])
    vel = rng.normal(0, 1, pos.shape).astype(np.float32)
    c = rng.normal(0, 1, (len(pos), 3, 3)).astype(np.float32) if apic else None
    return spec, cpu, gpu, pos, vel, c, (old, tuple(cupy.asarray(a) for a in old))


@pytest.mark.parametrize("holes", [False, True], ids=["bricks", "holes"])
@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_both_g2p_kernels_in_both_orders_give_the_reference_bits(monkeypatch, closed, apic, holes):
    import cupy

    seed = int(np.random.default_rng().integers(1 << 30))
    spec, cpu, gpu, pos, vel, c, (old_cpu, old_gpu) = scene(closed, holes, apic, seed)
    ratio, dt = (0.0 if apic else 0.95), 0.05
    want = [pos.copy(), vel.copy()] + ([c.copy()] if apic else [])
    sparse_transfer.g2p_advect(cpu, old_cpu, *want[:2], ratio, dt, want[2] if apic else None)
    assert np.abs(want[0] - pos).max() > 5 * spec.voxel_size  # samples beyond the home brick's 27 too
    assert not np.array_equal(want[1], vel)
    faces = [gpu[n].copy() for n in gpu.FACES]
    ways = [(k, None) for k in sparse_g2p_gpu.G2P_KERNELS if k != "block"] + [
        ("block", corners) for corners in sparse_g2p_gpu.G2P_CORNERS]  # the block kernel's every corners
    for kernel, corners in ways:
        if corners:
            monkeypatch.setenv("VOXFX_SPARSE_G2P_CORNERS", corners)
        for order in sparse_g2p_gpu.G2P_ORDERS:
            dev = [cupy.asarray(a) for a in (pos, vel)] + ([cupy.asarray(c)] if apic else [])
            if order == "cell":  # P2G's bins of these positions (its faces replaced by the scene's)
                sparse_gpu.particles_to_grid(gpu, dev[0], dev[1], dev[2] if apic else None)
                assert gpu.bins is not None and gpu.bins[0] is dev[0]
                for name, f in zip(gpu.FACES, faces):
                    gpu[name] = f.copy()
            f32 = np.float32
            sparse_g2p_gpu.g2p_advect(gpu, old_gpu, dev[0], dev[1], f32(ratio), f32(1) - f32(ratio), f32(dt),
                                  f32(0.5) * f32(dt), dev[2] if apic else None, order=order, kernel=kernel)
            assert gpu.bins is None
            for got, ref in zip(dev, want):
                assert np.array_equal(host(got).view(np.uint32), ref.view(np.uint32)), (kernel, corners, order)


def test_g2p_kernel_names_are_checked(monkeypatch):
    monkeypatch.setenv("VOXFX_SPARSE_G2P_KERNEL", "walk")
    assert sparse_g2p_gpu.g2p_kernel() == "walk"
    assert sparse_g2p_gpu.g2p_kernel("bricks") == "bricks"
    monkeypatch.setenv("VOXFX_SPARSE_G2P_KERNEL", "fast")
    with pytest.raises(ValueError, match="VOXFX_SPARSE_G2P_KERNEL"):
        sparse_g2p_gpu.g2p_kernel()
