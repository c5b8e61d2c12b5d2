"""Voxelize Selected's array work on the kernel side (issue 19: the operator only reads,
runs and writes back): kernels/voxelize/{request,guard,outputs}.py run without Blender."""

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tests.meshes import box, merge
from voxfx.kernels.grid import bitgrid
from voxfx.kernels.voxelize import voxelize
from voxfx.kernels.voxelize.guard import MemoryGuard, peak_estimate
from voxfx.kernels.voxelize.outputs import DEFAULT_COLOR, compute_group, default_material_table
from voxfx.kernels.voxelize.request import Request, grid_for


def soup_of(*meshes, materials=("Red", "Blue")):
    v, t = merge(*meshes)
    per = np.concatenate([np.full(len(m[1]), i % len(materials), np.int32) for i, m in enumerate(meshes)])
    return SimpleNamespace(vertices=v, triangles=t, material_index=per, materials=list(materials),
                           object_index=np.zeros(len(t), np.int32), object_names=["A"], corner_colors=None,
                           colored_objects=None, bounds=(v.min(0), v.max(0)))


def test_the_kernel_side_modules_import_without_blender():
    root = Path(__file__).resolve().parents[2]
    code = (f"import sys; sys.path.insert(0, {str(root)!r}); from tools.package import load; load(); "
            "import voxfx.kernels.voxelize.outputs, voxfx.kernels.voxelize.guard, voxfx.kernels.snow.plan; "
            "print('bpy' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(root))
    assert r.returncode == 0 and r.stdout.strip().splitlines()[-1] == "False", r.stdout + r.stderr


def test_one_group_computes_every_output_array_before_anything_is_written():
    soup = soup_of(box((0, 0, 0), (1, 1, 1)), box((1.5, 0, 0), (2.5, 1, 1)))
    request = Request(mode="solid+surface", resolution=40, outputs={"points", "volume", "blocks"})
    spec = grid_for(*soup.bounds, request)
    table = default_material_table(soup)
    table[0] = (1, 0, 0, 1)
    out = compute_group("A", soup, None, spec, request, False, table=table)
    want = voxelize(soup.vertices, soup.triangles, spec, "solid+surface", xp=np)
    assert out.count == want.count() and np.array_equal(out.grid.bits, want.bits)
    assert np.array_equal(out.ijk, bitgrid.coordinates(want.bits, spec.shape[0]))
    left = out.ijk[:, 0] < (1.25 - spec.origin[0]) / spec.voxel_size  # the first (red) box
    assert (out.material[left] == 0).all() and (out.material[~left] == 1).all()
    assert np.allclose(out.rgba[left], (1, 0, 0, 1)) and np.allclose(out.rgba[~left], DEFAULT_COLOR)
    assert out.dense.shape == spec.array_shape and 0 < out.dense.max() <= 1
    assert ((out.coverage >= 0) & (out.coverage <= 1)).all()
    assert float(out.coverage.sum()) * spec.voxel_size ** 3 == pytest.approx(2.0, rel=0.02)  # two 1 m³ boxes
    assert len(out.blocks.quads) > 0


def test_the_guard_estimates_grow_with_the_grid_and_refuse_what_does_not_fit():
    soup = soup_of(box((0, 0, 0), (1, 1, 1)))
    request = Request(mode="solid", resolution=64, outputs={"points"})
    small, large = (grid_for(*soup.bounds, Request(mode="solid", resolution=r)) for r in (32, 128))
    guard = MemoryGuard(soup, None, request, False, *soup.bounds, usable=1 << 40)
    a = guard.estimate(small, voxels=32 ** 3)["total"]
    b = guard.estimate(large, voxels=128 ** 3)["total"]
    assert b > 20 * a  # the per-voxel stages grow with the cube's 64× more voxels
    assert b == peak_estimate(large, request, 8, 12, False, voxels=128 ** 3, items=guard.items_at(large))["total"]
    guard = MemoryGuard(soup, None, request, False, *soup.bounds, usable=a)
    best = guard.largest_resolution(128)
    assert best is not None and 16 <= best < 128
    assert guard.estimate(guard.spec_at(best), *guard._exact[best])["total"] <= a
