"""The sparse brick core on CuPy gives the CPU reference's keys, slots and data, bit for
bit (issue 11)."""

import numpy as np

from voxfx.kernels import backend
from voxfx.kernels.grid.sparse import SparseGrid, Topology, brick_keys


def test_topology_build_lookup_and_update_match_the_cpu():
    import cupy as cp

    rs = np.random.default_rng(0)
    pos = rs.uniform(-4.0, 4.0, (200_000, 3)).astype(np.float32)
    args = ((0.1, -0.3, 0.2), 0.02, 0.05)
    cpu = Topology.from_points(pos, *args)
    gpu = Topology.from_points(cp.asarray(pos), *args, xp=cp)
    assert np.array_equal(backend.to_numpy(gpu.keys), cpu.keys)
    q = brick_keys(rs.integers(-60, 60, (5000, 3)))
    assert np.array_equal(backend.to_numpy(gpu.lookup(cp.asarray(q))), cpu.lookup(q))
    moved = pos + np.float32(0.3)
    c2, ca, cf = cpu.update(Topology.from_points(moved, *args).keys)
    g2, ga, gf = gpu.update(Topology.from_points(cp.asarray(moved), *args, xp=cp).keys)
    for a, b in ((c2.keys, g2.keys), (c2.slots, g2.slots), (ca, ga), (cf, gf), (c2.free, g2.free)):
        assert np.array_equal(a, backend.to_numpy(b))
    assert c2.capacity == g2.capacity


def test_dense_round_trip_matches_the_cpu():
    import cupy as cp

    rs = np.random.default_rng(1)
    dense = (rs.random((40, 33, 57)) > 0.97).astype(np.float32) * rs.standard_normal((40, 33, 57)).astype(np.float32)
    cpu = SparseGrid.from_dense("v", dense, (-5, 3, 9))
    gpu = SparseGrid.from_dense("v", cp.asarray(dense), (-5, 3, 9))
    assert np.array_equal(backend.to_numpy(gpu.topology.keys), cpu.topology.keys)
    assert np.array_equal(backend.to_numpy(gpu.channels["v"]), cpu.channels["v"])
    assert np.array_equal(backend.to_numpy(gpu.to_dense("v", (-5, 3, 9), (57, 33, 40))), dense)


def test_neighbours_apron_laplacian_and_active_voxels_match_the_cpu():
    import cupy as cp

    from voxfx.kernels.grid import sparse_ops

    rs = np.random.default_rng(2)
    dense = np.zeros((50, 47, 63), np.float32)
    for _ in range(10):
        z, y, x = rs.integers(0, 40, 3)
        dense[z:z + 7, y:y + 5, x:x + 12] = rs.standard_normal((7, 5, 12))
    cpu = SparseGrid.from_dense("v", dense, (-7, 2, -30))
    gpu = SparseGrid.from_dense("v", cp.asarray(dense), (-7, 2, -30))
    assert np.array_equal(backend.to_numpy(sparse_ops.neighbour_table(gpu)), sparse_ops.neighbour_table(cpu))
    for w in (1, 4):
        assert np.array_equal(backend.to_numpy(sparse_ops.with_apron(gpu, "v", w)), sparse_ops.with_apron(cpu, "v", w))
    assert np.array_equal(backend.to_numpy(sparse_ops.laplacian(gpu, "v")), sparse_ops.laplacian(cpu, "v"))
    assert np.array_equal(backend.to_numpy(sparse_ops.active_voxels(gpu, "v")), sparse_ops.active_voxels(cpu, "v"))
    assert sparse_ops.count(gpu, "v") == sparse_ops.count(cpu, "v")


def test_values_at_and_set_voxels_kernels_match_the_cpu():
    import cupy as cp

    from voxfx.kernels.grid import sparse_ops

    rs = np.random.default_rng(3)
    dense = (rs.random((30, 40, 50)) > 0.9).astype(np.float32) * rs.random((30, 40, 50)).astype(np.float32)
    cpu = SparseGrid.from_dense("v", dense, (-20, 5, 3))
    gpu = SparseGrid.from_dense("v", cp.asarray(dense), (-20, 5, 3))
    ijk = rs.integers(-40, 70, (100_000, 3))
    assert np.array_equal(backend.to_numpy(sparse_ops.values_at(gpu, "v", cp.asarray(ijk))),
                          sparse_ops.values_at(cpu, "v", ijk))
    cpu.add_channel("m", np.uint8)
    gpu.add_channel("m", np.uint8)
    assert sparse_ops.set_voxels(gpu, "m", cp.asarray(ijk), 5) == sparse_ops.set_voxels(cpu, "m", ijk, 5)
    assert np.array_equal(backend.to_numpy(gpu.channels["m"]), cpu.channels["m"])
