"""Voxelize Selected on the sparse path (issue 11): Points, Blocks and Volume built from the
bricks equal the dense path's where both fit (same voxels, attributes, welded vertices
and faces, VDB values; the order of points and faces is the bricks'), a job whose dense
grid is refused under a real RLIMIT_AS runs sparse, and the CLI takes ``--sparse``."""

import subprocess
import sys

import bpy
import numpy as np
import pytest

from .helpers import ROOT, voxfx_registered
from .test_writeback import tinyvdb_active_values, tinyvdb_grids

sys.path.insert(0, str(ROOT / "bench"))
import memory as bench  # noqa: E402

MiB = 1 << 20
CPU = {"VOXFX_BACKEND": "cpu", "PATH": ""}


@pytest.fixture
def scene(tmp_path):
    bpy.ops.mesh.primitive_monkey_add(location=(0, 0, 0))
    monkey = bpy.context.active_object
    red = bpy.data.materials.new("Red")
    red.diffuse_color = (1, 0, 0, 1)
    monkey.data.materials.append(red)
    bpy.ops.mesh.primitive_torus_add(location=(2.2, 0, 0.3))
    torus = bpy.context.active_object
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "shot.blend"))
    for o in (monkey, torus):
        o.select_set(True)
    with voxfx_registered():
        s = bpy.context.scene.voxfx.voxelize
        s.resolution = 48
        s.output_points = s.output_volume = s.output_blocks = True
        yield s, monkey


def _attribute(data, name, kind, width):
    a = data.attributes[name]
    out = np.empty(len(a.data) * width, np.float32 if kind != "value" or a.data_type == "FLOAT" else np.int32)
    a.data.foreach_get(kind, out)
    return out.reshape(-1, width) if width > 1 else out


def _outputs(base):
    """Host copies of what one run left in the scene: points (sorted), block faces (sorted
    rows of corner positions and material), the mesh's vertices, the VDB's active values."""
    pc = bpy.data.objects[f"{base}_voxels"].data
    pos = _attribute(pc, "position", "vector", 3)
    mat = _attribute(pc, "material_index", "value", 1).astype(np.float32)
    col = _attribute(pc, "color", "color", 4)
    points = np.concatenate([pos, mat[:, None], col], axis=1)
    _outputs.unsorted = pos  # the order the path wrote them in
    points = points[np.lexsort(points.T[::-1])]
    me = bpy.data.objects[f"{base}_blocks"].data
    verts = np.empty(len(me.vertices) * 3, np.float32)
    me.vertices.foreach_get("co", verts)
    verts = verts.reshape(-1, 3)
    loops = np.empty(len(me.loops), np.int32)
    me.loops.foreach_get("vertex_index", loops)
    fmat = np.empty(len(me.polygons), np.int32)
    me.polygons.foreach_get("material_index", fmat)
    faces = np.concatenate([verts[loops.reshape(-1, 4)].reshape(-1, 12), fmat[:, None]], axis=1)
    faces = faces[np.lexsort(faces.T[::-1])]
    vol = bpy.data.objects[f"{base}_volume"].data
    grids = tinyvdb_grids(bpy.path.abspath(vol.filepath))
    return points, verts, faces, tinyvdb_active_values(grids["density"][1])


@pytest.mark.parametrize("mode", ["SURFACE", "THIN"])
def test_sparse_points_blocks_and_volume_equal_the_dense_ones(scene, mode):
    settings, monkey = scene
    settings.mode = mode
    base = f"{monkey.name}+1"
    settings.sparse = "NEVER"
    assert bpy.ops.voxfx.voxelize() == {"FINISHED"}
    dense = _outputs(base)
    dense_order = _outputs.unsorted
    settings.sparse = "ALWAYS"
    assert bpy.ops.voxfx.voxelize() == {"FINISHED"}
    sparse = _outputs(base)
    assert not np.array_equal(_outputs.unsorted, dense_order)  # brick order: the sparse path ran
    assert len(dense[0]) > 1000 and len(dense[2]) > 1000 and len(dense[3]) == len(dense[0])
    assert set(np.unique(dense[0][:, 3]).tolist()) >= {0.0, 1.0}  # two sources: both materials show
    np.testing.assert_array_equal(sparse[0], dense[0])  # positions, material, colour
    np.testing.assert_array_equal(sparse[1], dense[1])  # welded vertices, same order
    np.testing.assert_array_equal(sparse[2], dense[2])  # faces and their materials
    assert sparse[3] == dense[3]  # the VDB: same active voxels and values


def _coverage(base):
    """The points' coverage, in the order of their sorted (position) rows."""
    pc = bpy.data.objects[f"{base}_voxels"].data
    pos = _attribute(pc, "position", "vector", 3)
    cov = _attribute(pc, "coverage", "value", 1)
    return cov[np.lexsort(pos.T[::-1])]


def test_solid_sparse_outputs_equal_dense_ones_coverage_included(scene):
    """Solid modes: the same voxels, block faces, points' coverage and Volume density (the
    4×4×4 supersampled coverage, from a sparse fine solid: ``sparse_coverage``)."""
    settings, monkey = scene
    settings.mode = "SOLID_SURFACE"
    base = f"{monkey.name}+1"
    settings.sparse = "NEVER"
    assert bpy.ops.voxfx.voxelize() == {"FINISHED"}
    dense, dense_cov = _outputs(base), _coverage(base)
    settings.sparse = "ALWAYS"
    assert bpy.ops.voxfx.voxelize() == {"FINISHED"}
    sparse, sparse_cov = _outputs(base), _coverage(base)
    np.testing.assert_array_equal(sparse[0], dense[0])
    np.testing.assert_array_equal(sparse[2], dense[2])
    np.testing.assert_array_equal(sparse_cov, dense_cov)
    assert 0 < (dense_cov < 1).sum() < len(dense_cov)  # smooth at the surface, 1 inside
    assert sparse[3] == dense[3] and len(set(dense[3].values())) > 10  # the VDB: same voxels, same densities


def test_loose_edges_join_a_sparse_voxelization(tmp_path):
    """A mesh with loose edges (Include Edges): Always voxelizes both into the bricks, with
    the dense path's points and Volume (set voxels that cover nothing at 0.5)."""
    bpy.ops.mesh.primitive_uv_sphere_add(radius=1.0)
    sphere = bpy.context.active_object
    me = bpy.data.meshes.new("wire")
    me.from_pydata([(-1.5, -1.2, -0.3), (1.5, 1.1, 0.4), (0.0, -1.5, 1.4), (0.2, 1.5, -1.3)], [(0, 1), (2, 3)], [])
    wire = bpy.data.objects.new("wire", me)
    bpy.context.collection.objects.link(wire)
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "wire.blend"))
    for o in (sphere, wire):
        o.select_set(True)
    with voxfx_registered():
        s = bpy.context.scene.voxfx.voxelize
        s.resolution, s.mode, s.include_edges, s.combine = 40, "SOLID", True, True
        s.output_points = s.output_volume = True
        base = f"{sphere.name}+1"
        got = {}
        for how in ("NEVER", "ALWAYS"):
            s.sparse = how
            assert bpy.ops.voxfx.voxelize() == {"FINISHED"}
            pc = bpy.data.objects[f"{base}_voxels"].data
            pos = _attribute(pc, "position", "vector", 3)
            vol = bpy.data.objects[f"{base}_volume"].data
            got[how] = (pos[np.lexsort(pos.T[::-1])], _coverage(base),
                        tinyvdb_active_values(tinyvdb_grids(bpy.path.abspath(vol.filepath))["density"][1]))
    np.testing.assert_array_equal(got["ALWAYS"][0], got["NEVER"][0])
    np.testing.assert_array_equal(got["ALWAYS"][1], got["NEVER"][1])
    assert got["ALWAYS"][2] == got["NEVER"][2] and 0.5 in set(got["NEVER"][2].values())


def test_a_job_the_dense_guard_refuses_under_rlimit_as_runs_sparse():
    """Suzanne solid+surface at 200 under 300 MiB of address space: the dense job is
    refused (its own guard, as in test_memory_guard); auto runs it sparse, with the
    same voxel count as the dense job without a limit."""
    case = {"shape": "suzanne", "outputs": ["points", "blocks"], "mode": "solid+surface", "res": 200}
    refused = bench.run_case({**case, "headroom": 300 * MiB, "sparse": "never"})
    assert refused["state"] == "FAILED" and "largest resolution that fits is" in refused["error"], refused
    sparse = bench.run_case({**case, "headroom": 300 * MiB, "sparse": "auto"})
    assert sparse["state"] == "FINISHED", sparse["error"]
    assert any("voxelized sparse" in w for w in sparse["warnings"]), sparse["warnings"]
    dense = bench.run_case({**case, "sparse": "never"})
    assert dense["state"] == "FINISHED" and sparse["count"] == dense["count"] > 100000


def test_cli_voxelize_sparse_writes_the_dense_volume(tmp_path):
    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.ops.mesh.primitive_torus_add()
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "t.blend"))
    out = {}
    for how in ("always", "never"):
        path = tmp_path / f"{how}.vdb"
        r = subprocess.run([sys.executable, "-m", "tools.cli", "--blend", str(tmp_path / "t.blend"), "voxelize",
                            "--resolution", "40", "--mode", "surface", "--sparse", how, "--out", str(path)],
                           cwd=ROOT, capture_output=True, text=True, timeout=600, env=CPU)
        assert r.returncode == 0, r.stderr
        out[how] = tinyvdb_active_values(tinyvdb_grids(path)["density"][1])
    assert len(out["always"]) > 1000 and out["always"] == out["never"]
    bad = subprocess.run([sys.executable, "-m", "tools.cli", "--blend", str(tmp_path / "t.blend"), "voxelize",
                          "--sparse", "maybe", "--out", str(tmp_path / "x.vdb")], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, env=CPU)
    assert bad.returncode != 0 and "--sparse" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.parametrize("case", [
    {"shape": "suzanne", "outputs": ["points", "blocks"], "mode": "solid+surface", "res": 200},
    {"shape": "suzanne", "outputs": ["points"], "mode": "surface", "res": 400},
    {"shape": "cube", "outputs": ["blocks"], "mode": "surface", "res": 300},
], ids=lambda c: f"{c['shape']}-{'+'.join(c['outputs'])}-{c['mode']}")
def test_sparse_job_estimate_is_within_one_and_a_half_of_the_measured_peak(case):
    """The sparse guard's estimate of the whole job (coarse bricks → voxels, faces, the
    owners' pass, outputs) against the RSS high-water mark of a fresh process."""
    r = bench.run_case({**case, "sparse": "always"})
    assert r["state"] == "FINISHED", r["error"]
    assert r["parts"].get("sparse") is True, r["parts"]
    assert bench.LOW <= r["estimate"] / r["measured"] <= bench.HIGH, r
