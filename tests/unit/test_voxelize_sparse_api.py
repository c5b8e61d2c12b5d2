"""``voxelize(..., sparse=True|"auto")`` (issue 11): the result object, the auto choice and
the sparse guard, each against the dense voxelizer as the oracle."""

from pathlib import Path

import numpy as np
import pytest

from voxfx.kernels.errors import InputError
from voxfx.kernels.grid import GridSpec, bitgrid
from voxfx.kernels.voxelize import VoxelGrid, voxelize
from voxfx.kernels.voxelize.sparse_guard import brick_counts, check_sparse
from voxfx.kernels.voxelize.sparse_result import AUTO_CPU_VOXELS, SparseVoxels, choose_sparse

PRIMS = np.load(Path(__file__).resolve().parents[1] / "data" / "blender_primitives.npz")


def mesh(name, res):
    v, t = PRIMS[name + "_vertices"], PRIMS[name + "_triangles"]
    lo, hi = v.min(0), v.max(0)
    return v, t, GridSpec.around(lo, hi, float((hi - lo).max()) / res)


def dense_bricks(bits, shape):
    """Bricks holding a set voxel, counted on the dense grid (the lattice of 8³ from 0)."""
    nx, ny, nz = shape
    d = bitgrid.unpack(bits, nx)
    pad = np.zeros((-(-nz // 8) * 8, -(-ny // 8) * 8, -(-nx // 8) * 8), bool)
    pad[:nz, :ny, :nx] = d
    z, y, x = (n // 8 for n in pad.shape)
    return int(pad.reshape(z, 8, y, 8, x, 8).any(axis=(1, 3, 5)).sum())


@pytest.mark.parametrize("name,res", [("monkey", 53), ("torus", 70), ("cone", 41)])
@pytest.mark.parametrize("mode,vote", [("surface", False), ("thin", False), ("solid", False), ("solid", True),
                                       ("solid+surface", False)])
def test_sparse_result_answers_as_the_dense_grid(name, res, mode, vote):
    """Suzanne is open: its solid rows run to the grid's end; the sparse grid is cut there."""
    v, t, spec = mesh(name, res)
    dense = voxelize(v, t, spec, mode, vote=vote, xp=np)
    got = voxelize(v, t, spec, mode, vote=vote, xp=np, sparse=True)
    assert isinstance(got, SparseVoxels)
    assert np.array_equal(got.to_dense().bits, dense.bits)
    assert got.count() == dense.count()
    assert got.active_bricks == dense_bricks(dense.bits, spec.shape)
    ijk = got.coordinates()
    assert len(ijk) == dense.count() and (ijk < np.asarray(spec.shape)).all()
    want = dense.coordinates()
    key = lambda a: np.sort((a[:, 2].astype(np.int64) * spec.shape[1] + a[:, 1]) * spec.shape[0] + a[:, 0])  # noqa
    assert np.array_equal(key(ijk), key(want))
    # bit rows and keys of the stored bricks at least, 32 B a run of full bricks
    assert got.nbytes >= got.stored_bricks * (64 + 8) + 32 * len(got.runs)
    assert got.active_bricks == got.stored_bricks + got.full_bricks


def test_sparse_grid_of_nothing_is_empty():
    v, t, spec = mesh("torus", 40)
    far = GridSpec((100.0, 100.0, 100.0), spec.voxel_size, (64, 64, 64))
    got = voxelize(v, t, far, "solid+surface", xp=np, sparse=True)
    assert got.count() == 0 and got.active_bricks == 0 and len(got.coordinates()) == 0
    assert got.to_dense().count() == 0


def test_auto_takes_dense_for_small_grids_and_sparse_when_dense_does_not_fit():
    v, t, spec = mesh("torus", 40)
    assert isinstance(voxelize(v, t, spec, "surface", xp=np, sparse="auto"), VoxelGrid)
    assert not choose_sparse("auto", spec, 1 << 20, 1 << 30, np)
    assert choose_sparse("auto", spec, 1 << 31, 1 << 30, np)  # dense would not fit
    big = GridSpec(spec.origin, spec.voxel_size, (1025, 1024, 1024))
    assert big.voxel_count > AUTO_CPU_VOXELS and choose_sparse("auto", big, 1, 1 << 40, np)
    assert choose_sparse(True, spec, 1, 1 << 40, np) and not choose_sparse(False, spec, 1 << 41, 1, np)
    with pytest.raises(InputError, match="sparse must be"):
        choose_sparse("yes", spec, 1, 1, np)


@pytest.mark.parametrize("name,mode", [("monkey", "surface"), ("ico_sphere", "solid"), ("torus", "solid+surface")])
def test_coarse_pass_bounds_the_bricks_from_above(name, mode):
    v, t, spec = mesh(name, 90)
    surface, inside = brick_counts(v, t, spec, mode)
    real = voxelize(v, t, spec, mode, xp=np, sparse=True).active_bricks
    assert real <= surface + inside <= 1.5 * real


def test_sparse_guard_refuses_naming_a_size_that_fits():
    v, t, spec = mesh("ico_sphere", 300)
    need = check_sparse(v, t, spec, "solid", False, np, usable=1 << 40)
    with pytest.raises(InputError, match="largest size that fits is") as e:
        check_sparse(v, t, spec, "solid", False, np, usable=need - 1)
    best = int(str(e.value).split("fits is ")[1].split()[0])
    assert 2 <= best < max(spec.shape)
    size = spec.voxel_size * max(spec.shape) / best
    lo, hi = v.min(0), v.max(0)
    smaller = GridSpec.around(lo, hi, size)
    assert check_sparse(v, t, smaller, "solid", False, np, usable=need - 1) <= need - 1


def test_outputs_are_counted_and_refused_with_the_exact_count():
    """Points and blocks cost per voxel and face: the estimate grows with them, and the
    exact-count check refuses before any per-voxel array, naming a smaller size."""
    from voxfx.kernels.voxelize.sparse_guard import check_outputs

    v, t, spec = mesh("ico_sphere", 120)
    bare = check_sparse(v, t, spec, "solid", False, np, usable=1 << 40)
    with_points = check_sparse(v, t, spec, "solid", False, np, usable=1 << 40, outputs={"points", "blocks"})
    result = voxelize(v, t, spec, "solid", xp=np, sparse=True)
    assert with_points > bare and with_points > 60 * result.count()
    check_outputs(result, spec, {"points"}, usable=1 << 40)
    with pytest.raises(InputError, match=r"largest size that fits is about (\d+)") as e:
        check_outputs(result, spec, {"points"}, usable=100 << 20)
    assert int(str(e.value).split("about ")[-1].split()[0]) < max(spec.shape)
