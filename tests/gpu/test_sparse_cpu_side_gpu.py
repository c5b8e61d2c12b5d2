"""The sparse voxelizer's runs, lines and coverage on the GPU (issue 11) equal the CPU
reference: runs found while walking (the vote's tile path on CuPy), segments OR-ed into
device bricks, and the Volume density of a device result (its fine pass on the device)."""

from pathlib import Path

import numpy as np
import pytest

from voxfx.kernels.grid import GridSpec
from voxfx.kernels.voxelize import voxelize
from voxfx.kernels.voxelize.sparse import CHANNEL, voxelize_sparse

PRIMS = np.load(Path(__file__).resolve().parents[1] / "data" / "blender_primitives.npz")


def mesh(name, res):
    v, t = PRIMS[name + "_vertices"], PRIMS[name + "_triangles"]
    lo, hi = v.min(0), v.max(0)
    return v, t, GridSpec.around(lo, hi, float((hi - lo).max()) / res)


@pytest.mark.parametrize("name,res", [("uv_sphere", 120), ("monkey", 90)])
def test_gpu_vote_walk_keeps_the_cpu_runs(name, res):
    """The vote walks tiles on CuPy too: partial bricks stored, full ones as runs, as on the CPU."""
    import cupy

    v, t, spec = mesh(name, res)
    cpu = voxelize_sparse(v, t, spec, "solid", vote=True, tile=64, xp=np, tiles=True)
    gpu = voxelize_sparse(v, t, spec, "solid", vote=True, tile=64, xp=cupy, tiles=True)
    assert cpu.tiles[CHANNEL].bricks > 0
    assert np.array_equal(cupy.asnumpy(gpu.topology.keys), cpu.topology.keys)
    assert np.array_equal(cupy.asnumpy(gpu.channels[CHANNEL]), cpu.channels[CHANNEL])
    assert np.array_equal(cupy.asnumpy(gpu.tiles[CHANNEL].runs), cpu.tiles[CHANNEL].runs)


@pytest.mark.parametrize("mode", ["surface", "solid"])
def test_gpu_segments_in_device_bricks_equal_the_cpu(mode):
    import cupy

    from voxfx.kernels.voxelize.sparse_lines import add_segments

    v, t, spec = mesh("torus", 80)
    rng = np.random.default_rng(7)
    lo, hi = np.asarray(spec.origin), np.asarray(spec.origin) + np.asarray(spec.shape) * spec.voxel_size
    a = lo + rng.random((50, 3)) * (hi - lo)
    b = a + rng.normal(0, 0.3, (50, 3)) * (hi - lo)
    cpu = add_segments(voxelize(v, t, spec, mode, xp=np, sparse=True), a, b)
    gpu = add_segments(voxelize(v, t, spec, mode, xp=cupy, sparse=True, keep_on_device=True), a, b)
    assert isinstance(gpu.grid.topology.keys, cupy.ndarray)
    assert np.array_equal(cupy.asnumpy(gpu.to_dense().bits), cpu.to_dense().bits)
    assert gpu.count() == cpu.count() > 0


@pytest.mark.parametrize("name,res", [("uv_sphere", 100), ("monkey", 70)])
@pytest.mark.parametrize("mode,vote", [("solid", False), ("solid+surface", True)])
def test_gpu_coverage_grid_equals_the_cpu(name, res, mode, vote):
    import cupy

    from voxfx.kernels.voxelize.sparse_coverage import coverage_at, coverage_grid

    v, t, spec = mesh(name, res)
    cpu_r = voxelize(v, t, spec, mode, vote=vote, xp=np, sparse=True)
    gpu_r = voxelize(v, t, spec, mode, vote=vote, xp=cupy, sparse=True, keep_on_device=True)
    cpu, gpu = coverage_grid(v, t, cpu_r, vote=vote), coverage_grid(v, t, gpu_r, vote=vote)
    assert isinstance(gpu.topology.keys, cupy.ndarray)
    # The same value at every voxel. The split into stored bricks and runs of 1.0 follows
    # each device's solid walk (the device kernels and the CPU walk may cut runs
    # differently), so the fields are compared, not the bricks.
    d_cpu = cpu.to_dense("density", (0, 0, 0), spec.shape)
    assert np.array_equal(cupy.asnumpy(gpu.to_dense("density", (0, 0, 0), spec.shape)), d_cpu)
    assert d_cpu.any()
    # "uncovered" is a bit channel: compared through coverage_at (0 at uncovered voxels)
    every = np.stack(np.meshgrid(*(np.arange(n) for n in spec.shape), indexing="ij"), -1).reshape(-1, 3)
    assert np.array_equal(cupy.asnumpy(coverage_at(gpu, cupy.asarray(every))), coverage_at(cpu, every))
    ijk = cpu_r.coordinates()
    assert np.array_equal(coverage_at(gpu, cupy.asarray(ijk)), coverage_at(cpu, ijk))
