"""Coverage of a sparse voxelization (issue 11; seed 004 §5.5): the Volume density and
the points' coverage from the sparse path equal the dense path's (``coverage.coverage``,
``coverage.density``) at every voxel, with the interior as runs of 1.0."""

from pathlib import Path

import numpy as np
import pytest

from tests.meshes import uv_sphere
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.voxelize import voxelize
from voxfx.kernels.voxelize.coverage import coverage, density
from voxfx.kernels.voxelize.lines import voxelize_segments
from voxfx.kernels.voxelize.sparse_coverage import coverage_at, coverage_grid
from voxfx.kernels.voxelize.sparse_lines import add_segments

PRIMS = np.load(Path(__file__).resolve().parents[1] / "data" / "blender_primitives.npz")


def mesh(name, res):
    if name == "sphere":
        v, t = uv_sphere(1.0, 48, 24)
    else:
        v, t = PRIMS[name + "_vertices"], PRIMS[name + "_triangles"]
    lo, hi = v.min(0), v.max(0)
    return v, t, GridSpec.around(lo, hi, float((hi - lo).max()) / res)


def dense_of(grid, spec):
    return grid.to_dense("density", (0, 0, 0), spec.shape)


@pytest.mark.parametrize("name,res", [("sphere", 70), ("monkey", 45), ("torus", 60)])
@pytest.mark.parametrize("mode,vote", [("solid", False), ("solid+surface", False), ("solid+surface", True)])
def test_density_and_coverage_equal_the_dense_ones(name, res, mode, vote):
    v, t, spec = mesh(name, res)
    dense = voxelize(v, t, spec, mode, vote=vote, xp=np)
    cover = coverage(v, t, spec, vote=vote, xp=np)
    want = density(dense.bits, spec, cover.copy())
    got = voxelize(v, t, spec, mode, vote=vote, xp=np, sparse=True)
    grid = coverage_grid(v, t, got, vote=vote)
    assert np.array_equal(dense_of(grid, spec), want)
    ijk = dense.coordinates()
    assert np.array_equal(coverage_at(grid, ijk), cover[ijk[:, 2], ijk[:, 1], ijk[:, 0]])
    if name == "sphere":  # a closed solid: its inside is runs of 1.0, not bricks
        assert grid.tiles["density"].bricks > 0 and grid.topology.count < got.active_bricks


def test_set_voxels_that_cover_nothing_show_at_half_density():
    """Loose edges (and thin sheets) are set but hold no sample inside the solid: 0.5,
    as ``coverage.density`` gives them, and coverage 0 for their points."""
    v, t, spec = mesh("sphere", 40)
    a = np.array([[-1.0, -1.0, -0.9], [0.0, 0.0, 0.0]])
    b = np.array([[1.0, -0.9, -0.95], [0.9, 0.95, 0.99]])  # one outside the sphere, one through it
    bits = voxelize_segments(a, b, spec, xp=np, words=voxelize(v, t, spec, "solid", xp=np).bits.copy())
    cover = coverage(v, t, spec, xp=np)
    want = density(bits, spec, cover.copy())
    assert (want == 0.5).any()
    got = add_segments(voxelize(v, t, spec, "solid", xp=np, sparse=True), a, b)
    grid = coverage_grid(v, t, got)
    assert np.array_equal(dense_of(grid, spec), want)
    k, j, i = np.nonzero(want == 0.5)
    ijk = np.stack([i, j, k], axis=1)
    assert np.array_equal(coverage_at(grid, ijk), cover[k, j, i])


def test_coverage_chunks_give_the_same_grid():
    v, t, spec = mesh("torus", 50)
    got = voxelize(v, t, spec, "solid", xp=np, sparse=True)
    a, b = coverage_grid(v, t, got), coverage_grid(v, t, got, chunk=7)
    assert np.array_equal(a.topology.keys, b.topology.keys)
    assert np.array_equal(a.channels["density"], b.channels["density"])


def test_a_fine_pass_that_does_not_fit_leaves_density_one_and_says_so():
    """Under a real RLIMIT_AS (VmSize + 250 MiB) a solid box at 640 voxels fits sparse
    (about 150 MiB) but its 2560³ sampling pass does not (about 500 MiB on the host,
    ``sparse_guard.coverage_bytes``): the job still gives its voxels and Volume, with
    density 1 at set voxels and one warning naming the sampling."""
    import subprocess
    import sys
    import textwrap

    root = str(Path(__file__).resolve().parents[2])
    code = textwrap.dedent(f"""
        import resource, sys
        sys.path.insert(0, {root!r})
        from tools.package import load
        load()
        from types import SimpleNamespace
        import numpy as np
        from tests.meshes import box
        from voxfx.kernels import memory
        from voxfx.kernels.grid import GridSpec
        from voxfx.kernels.voxelize.request import Request
        from voxfx.kernels.voxelize.sparse_outputs import compute_group_sparse

        v, t = box((0.013, 0.021, 0.017), (0.987, 0.979, 0.991))
        spec = GridSpec.around(v.min(0), v.max(0), 0.974 / 640)
        soup = SimpleNamespace(vertices=v, triangles=t, material_index=np.zeros(len(t), np.int32),
                               corner_colors=None, colored_objects=None, object_index=np.zeros(len(t), np.int32),
                               materials=[])
        vm = memory._status_bytes("VmSize")
        resource.setrlimit(resource.RLIMIT_AS, (vm + 250 * 2**20, resource.RLIM_INFINITY))
        out = compute_group_sparse("box", soup, spec, Request(mode="solid", outputs={{"volume"}}), False)
        from voxfx.kernels.voxelize.sparse_coverage import fine_spec
        print(out.count, out.density is None, out.result.count(), "×".join(map(str, fine_spec(spec).shape)))
        print("|".join(out.warnings))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=root)
    assert r.returncode == 0, r.stderr[-2000:]
    first, warnings = r.stdout.strip().splitlines()[-2:]
    count, no_density, n, fine = first.split()
    assert int(count) == int(n) > 640 ** 3 // 2 and no_density == "True"
    assert "samples every voxel 4×4×4 times" in warnings and fine in warnings
    assert "Traceback" not in r.stderr
