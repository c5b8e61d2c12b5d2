"""GPU voxelizer == CPU reference, bit for bit, on fresh random inputs and real meshes."""

import numpy as np
import pytest

from tests.meshes import bunny, rotation, torus, uv_sphere
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.voxelize import MODES, voxelize


def both(v, t, spec, mode, **kw):
    import cupy

    cpu = voxelize(v, t, spec, mode, xp=np, **kw).bits
    gpu = voxelize(v, t, spec, mode, xp=cupy, **kw).bits
    return cpu, gpu


@pytest.mark.parametrize("mode", MODES)
def test_random_soup_matches_cpu(mode):
    rng = np.random.default_rng()
    n = int(rng.integers(50, 400))
    v = rng.uniform(-3, 40, size=(3 * n, 3)).astype(np.float32)
    t = np.arange(3 * n).reshape(n, 3)
    spec = GridSpec((0.0, 0.0, 0.0), float(rng.uniform(0.5, 1.5)), (37, 33, 29))
    cpu, gpu = both(v, t, spec, mode)
    assert np.array_equal(cpu, gpu) and cpu.any()


@pytest.mark.parametrize("mode", MODES)
def test_grid_aligned_soup_matches_cpu(mode):
    """Exact ties everywhere: vertices on voxel boundaries and column centres."""
    rng = np.random.default_rng()
    n = 300
    v = np.round(rng.uniform(-1, 33, size=(3 * n, 3)) * 2) / 2
    v[: 3 * n // 2, 2] = np.repeat(v[: 3 * n // 2:3, 2], 3)
    t = np.arange(3 * n).reshape(n, 3)
    cpu, gpu = both(v, t, GridSpec((0.0, 0.0, 0.0), 1.0, (32, 32, 32)), mode)
    assert np.array_equal(cpu, gpu)


def test_closed_meshes_solid_and_vote_match_cpu():
    rng = np.random.default_rng()
    v, t = torus(20.0, 7.0, 64, 32)
    v = v @ rotation(*rng.uniform(0, 3, 3)).T + 32.0 + rng.uniform(0, 1, 3)
    spec = GridSpec((0.0, 0.0, 0.0), 1.0, (65, 66, 67))
    for kw in ({}, {"vote": True}):
        cpu, gpu = both(v, t, spec, "solid", **kw)
        assert np.array_equal(cpu, gpu) and cpu.any()


@pytest.mark.parametrize("mode", MODES)
def test_bunny_matches_cpu(mode):
    mesh, why = bunny()
    if mesh is None:
        pytest.skip(why)
    v, t = mesh
    spec = GridSpec.around(v.min(axis=0), v.max(axis=0), voxel_size=50.0 / 96)
    cpu, gpu = both(v, t, spec, mode)
    assert np.array_equal(cpu, gpu) and cpu.any()


def test_sphere_solid_plus_surface_matches_cpu():
    v, t = uv_sphere(1.0, 64, 32)
    spec = GridSpec.around((-1, -1, -1), (1, 1, 1), voxel_size=2.0 / 90)
    cpu, gpu = both(v, t, spec, "solid+surface")
    assert np.array_equal(cpu, gpu)


def test_device_side_checks_reject_bad_input_like_the_cpu():
    import cupy

    from voxfx.kernels.errors import InputError

    spec = GridSpec((0.0, 0.0, 0.0), 1.0, (8, 8, 8))
    v = np.array([[1, 1, 1], [5, 1, 1], [1, 5, np.nan]], dtype=np.float32)
    t = np.array([[0, 1, 2]])
    for xp in (np, cupy):
        with pytest.raises(InputError, match="1 vertices have non-finite"):
            voxelize(v, t, spec, "solid+surface", xp=xp)
        with pytest.raises(InputError, match="outside the vertex array"):
            voxelize(np.nan_to_num(v), np.array([[0, 1, 3]]), spec, "surface", xp=xp)


def test_float64_and_float32_vertices_give_the_same_voxels_as_the_cpu():
    import cupy

    rng = np.random.default_rng()
    v = rng.uniform(0, 30, size=(600, 3))
    t = rng.integers(0, 600, size=(200, 3))
    spec = GridSpec((0.0, 0.0, 0.0), 1.0, (30, 30, 30))
    for dtype in (np.float32, np.float64):
        cpu = voxelize(v.astype(dtype), t, spec, "solid+surface", xp=np).bits
        gpu = voxelize(cupy.asarray(v.astype(dtype)), cupy.asarray(t), spec, "solid+surface", xp=cupy).bits
        assert np.array_equal(cpu, gpu)


def test_solid_of_blender_primitives_is_bit_identical_to_the_cpu():
    """Canonical edge endpoints in the solid fill (issue 22 §2) on both backends."""
    from pathlib import Path

    import cupy as cp

    from voxfx.kernels.grid import GridSpec
    from voxfx.kernels.voxelize import voxelize

    data = np.load(Path(__file__).resolve().parents[1] / "data" / "blender_primitives.npz")
    for name in ("uv_sphere", "ico_sphere", "cylinder", "cone", "torus", "monkey", "cube"):
        v, t = data[f"{name}_vertices"], data[f"{name}_triangles"]
        lo, hi = v.min(axis=0).astype(np.float64), v.max(axis=0).astype(np.float64)
        for res in (25, 29, 43, 64, 96):
            spec = GridSpec.around(lo, hi, float(np.max(hi - lo)) / res)
            for mode in ("solid", "solid+surface"):
                cpu = voxelize(v, t, spec, mode, xp=np).bits
                gpu = voxelize(v, t, spec, mode, xp=cp).bits
                assert np.array_equal(np.asarray(gpu), cpu), (name, res, mode)


@pytest.mark.parametrize("mode", MODES)
def test_tie_and_sliver_soups_are_bit_identical_to_the_cpu_and_exact(mode):
    """Issue 22 §1: slivers collinear in float, degenerate, face-plane, lattice, decimal and
    axis-parallel triangles (tests/exact_soups.py) on the unit grid and on a scaled one
    where every tie is a near-tie; the surface is the exact closed-box SAT, thin ⊂ it."""
    import cupy

    from tests import exact_soups as soups
    from tests.unit import exact_oracle as oracle
    from voxfx.kernels.grid import bitgrid

    for seed in range(3):
        for scaled in (False, True):
            v, t = soups.soup(seed, per_kind=8)
            spec = soups.UNIT
            if scaled:
                v, spec = soups.scaled(v), soups.SCALED
            cpu, gpu = both(v, t, spec, mode)
            assert np.array_equal(cpu, gpu), (seed, scaled)
            if mode == "surface":
                want = oracle.surface_voxels(oracle.voxel_units(v, spec.origin, spec.voxel_size), t, spec.shape)
                assert np.array_equal(bitgrid.unpack(gpu, spec.shape[0]).astype(bool), want), (seed, scaled)
            if mode == "thin":
                surface = voxelize(v, t, spec, "surface", xp=cupy).bits
                assert not (np.asarray(gpu) & ~surface).any()



def test_attribute_owners_of_tie_soups_match_the_cpu():
    """The owner pass (per-voxel attributes) runs the same exact test as the voxel pass."""
    import cupy

    from tests import exact_soups as soups
    from voxfx.kernels.voxelize.attributes import owner_triangles

    for scaled in (False, True):
        v, t = soups.soup(7, per_kind=8)
        spec = soups.UNIT
        if scaled:
            v, spec = soups.scaled(v), soups.SCALED
        bits = voxelize(v, t, spec, "surface", xp=np).bits
        cpu = owner_triangles(v, t, spec, bits, xp=np)
        assert np.array_equal(cpu, owner_triangles(v, t, spec, bits, xp=cupy)) and (cpu >= 0).all()
