"""Voxelize → Volume runs split into z-slabs where the whole job does not fit (issue 21
§6), through the real operator job in a fresh headless-Blender subprocess under a real
RLIMIT_AS (``bench/voxelize_split.py``): the guard reports the split instead of refusing,
and the VDB it writes, read back with the independent tinyvdb reader, holds exactly the
voxels and values of the unsplit job's VDB."""

import re
import sys

import numpy as np
import pytest

from .helpers import ROOT
from .test_writeback import tinyvdb_active_values, tinyvdb_grids

sys.path.insert(0, str(ROOT / "bench"))
import voxelize_split as bench  # noqa: E402

MiB = 1 << 20


@pytest.mark.parametrize("case", [
    {"shape": "cube", "mode": "surface", "res": 320, "headroom": 200 * MiB},
    {"shape": "suzanne", "mode": "solid+surface", "fill_holes": True, "res": 120, "headroom": 150 * MiB},
], ids=lambda c: f"{c['shape']}-{c['mode']}")
def test_split_volume_under_a_real_limit_equals_the_unsplit_volume(case):
    out = bench.run_case({**case, "unsplit": True})
    whole, split = out["unsplit"], out["limited"]
    assert whole["state"] == "FINISHED", whole["error"]
    assert split["state"] == "FINISHED", split["error"]
    note = " ".join(split["warnings"])
    assert re.search(r"Volume split into \d+ z-slabs", note), split["warnings"]
    assert split["estimate"]["whole"] > split["estimate"]["total"]  # the whole job was over the limit
    assert split["count"] == whole["count"] > 0
    a, b = tinyvdb_grids(whole["files"][0]), tinyvdb_grids(split["files"][0])
    assert set(a) == set(b) == {"density"}
    va, vb = tinyvdb_active_values(a["density"][1]), tinyvdb_active_values(b["density"][1])
    assert len(va) > 0 and va == vb


def test_a_volume_too_large_even_split_names_a_resolution_that_runs():
    base = {"shape": "cube", "mode": "surface", "headroom": 60 * MiB}
    refused = bench.run_case({**base, "res": 1500})["limited"]
    assert refused["state"] == "FAILED"
    assert "split into z-slabs" in refused["error"], refused["error"]
    best = int(re.search(r"largest resolution that fits is (\d+)", refused["error"]).group(1))
    assert 32 < best < 1500
    ok = bench.run_case({**base, "res": best})["limited"]
    assert ok["state"] == "FINISHED", ok["error"]
    assert np.isfinite(ok["measured"])


def test_split_blocks_and_vox_under_a_real_limit_equal_the_unsplit_outputs():
    """Solid+Surface Suzanne with two materials: the whole attribute stage is over the
    limit, so the Block mesh and .vox attributes run z-slab by z-slab; the block mesh
    (positions, corners, face materials) and the .vox file equal the unsplit job's."""
    out = bench.run_case({"shape": "suzanne", "mode": "solid+surface", "fill_holes": True, "res": 160,
                          "outputs": ["blocks", "vox"], "materials": 2, "unsplit": True, "headroom": 60 * MiB})
    whole, split = out["unsplit"], out["limited"]
    assert whole["state"] == "FINISHED", whole["error"]
    assert split["state"] == "FINISHED", split["error"]
    assert re.search(r"Block mesh and MagicaVoxel voxel attributes split into \d+ z-slabs",
                     " ".join(split["warnings"])), split["warnings"]
    assert split["estimate"]["whole"] > split["estimate"]["total"]
    assert split["count"] == whole["count"] > 0
    (vox_a,) = [f for f in whole["files"] if f.endswith(".vox")]
    (vox_b,) = [f for f in split["files"] if f.endswith(".vox")]
    assert open(vox_a, "rb").read() == open(vox_b, "rb").read()
    (mesh_a,) = [f for f in whole["files"] if f.endswith(".npz")]
    (mesh_b,) = [f for f in split["files"] if f.endswith(".npz")]
    a, b = np.load(mesh_a), np.load(mesh_b)
    assert len(np.unique(a["materials"])) == 2
    for name in ("co", "loops", "materials"):
        assert np.array_equal(a[name], b[name]), name


def test_bake_frames_split_under_a_real_limit_equals_the_unsplit_bake():
    """Bake Frames uses Voxelize's z-slab plan when a frame does not fit whole: every
    frame's VDB holds exactly the voxels and values of the unsplit bake's."""
    out = bench.run_case({"shape": "suzanne", "mode": "solid+surface", "res": 96, "bake": 3, "unsplit": True,
                          "headroom": 45 * MiB})
    whole, split = out["unsplit"], out["limited"]
    assert whole["state"] == "FINISHED", whole["error"]
    assert split["state"] == "FINISHED", split["error"]
    assert re.search(r"Bake Frames: Volume split into [2-9]\d* z-slabs", " ".join(split["warnings"])), split["warnings"]
    assert [f.rsplit("/", 1)[1] for f in whole["files"]] == [f.rsplit("/", 1)[1] for f in split["files"]]
    assert len(whole["files"]) == 3
    moved = []
    for fa, fb in zip(whole["files"], split["files"]):
        a, b = tinyvdb_grids(fa), tinyvdb_grids(fb)
        va, vb = tinyvdb_active_values(a["density"][1]), tinyvdb_active_values(b["density"][1])
        assert len(va) > 0 and va == vb
        moved.append(va)
    assert moved[0] != moved[2]  # the object moved between the first and last frame


def test_a_point_cloud_too_large_is_refused_in_one_line_naming_what_fits():
    """A point cloud holds every voxel in Blender at once, so it is never split: refused in
    one line naming the largest resolution that fits and the outputs that fit split."""
    base = {"shape": "suzanne", "mode": "solid+surface", "fill_holes": True, "outputs": ["points"],
            "headroom": 150 * MiB}
    refused = bench.run_case({**base, "res": 200})["limited"]
    assert refused["state"] == "FAILED"
    error = refused["error"]
    assert "\n" not in error and "Traceback" not in error
    # Block mesh is named where the refusal came after counting (the exact voxels known);
    # before voxelizing (the dense and the sparse guards both refusing) only the Volume is
    assert re.search(r"at resolution 200 a point cloud cannot fit .* (Volume|Block mesh)( and Block mesh)? "
                     r"outputs? fits? split into z-slabs", error), error
    best = int(re.search(r"largest resolution that fits is (\d+)", error).group(1))
    ok = bench.run_case({**base, "res": best})["limited"]
    assert ok["state"] == "FINISHED", ok["error"]


def test_a_mixed_volume_blocks_and_vox_job_under_a_real_limit_equals_the_unsplit_outputs():
    """Volume together with Block mesh and .vox, over the limit whole: the bit grid is kept
    once, the Volume goes slab by slab into the VDB and then the Blocks/.vox attributes
    slab by slab; the VDB, the block mesh and the .vox file equal the unsplit job's."""
    out = bench.run_case({"shape": "suzanne", "mode": "solid+surface", "fill_holes": True, "res": 160,
                          "outputs": ["volume", "blocks", "vox"], "materials": 2, "unsplit": True,
                          "headroom": 100 * MiB})
    whole, split = out["unsplit"], out["limited"]
    assert whole["state"] == "FINISHED", whole["error"]
    assert split["state"] == "FINISHED", split["error"]
    assert re.search(r"Volume split into \d+ z-slabs of \d+ rows, then Block mesh and MagicaVoxel voxel attributes "
                     r"into \d+ of \d+", " ".join(split["warnings"])), split["warnings"]
    assert split["estimate"]["whole"] > split["estimate"]["total"]  # the whole job was over the limit
    assert split["count"] == whole["count"] > 0

    def file(result, suffix):
        (path,) = [f for f in result["files"] if f.endswith(suffix)]
        return path

    a, b = tinyvdb_grids(file(whole, ".vdb")), tinyvdb_grids(file(split, ".vdb"))
    va, vb = tinyvdb_active_values(a["density"][1]), tinyvdb_active_values(b["density"][1])
    assert len(va) > 0 and va == vb
    assert open(file(whole, ".vox"), "rb").read() == open(file(split, ".vox"), "rb").read()
    ma, mb = np.load(file(whole, ".npz")), np.load(file(split, ".npz"))
    assert len(np.unique(ma["materials"])) == 2
    for name in ("co", "loops", "materials"):
        assert np.array_equal(ma[name], mb[name]), name


def calibrated(case, usable_mib):
    """*case* with the headroom at which the guard sees about *usable_mib* MiB usable: the
    process grows between setting the limit and the guard reading it, by an amount that
    depends on the Blender and Python build, so it is read off a first run's report."""
    first = bench.run_case(case)["limited"]
    seen = float(re.search(r"([\d.]+) MiB is usable", first["error"] or " ".join(first["warnings"])).group(1))
    return {**case, "headroom": case["headroom"] + int((usable_mib - seen) / 0.9 * MiB)}


@pytest.mark.parametrize("case", [
    # refused before voxelizing: the whole voxelization (318 MiB) is over the limit
    {"shape": "cube", "mode": "solid+surface", "res": 256, "outputs": ["blocks"], "headroom": 150 * MiB},
    # refused after voxelizing (107 MiB): the Volume + Blocks split does not fit even with one
    # row per slab (123 MiB)
    {"shape": "suzanne", "mode": "solid+surface", "fill_holes": True, "res": 256, "outputs": ["volume", "blocks"],
     "headroom": 160 * MiB, "usable": 115},
], ids=lambda c: "+".join(c["outputs"]))
def test_a_refused_blocks_job_names_the_largest_resolution_that_runs_split(case):
    """The refusal of a job that can run split names the largest resolution at which it
    runs, whole or split (searched with the split plan's own estimate and exact counts),
    not the largest whose whole job fits; that resolution then runs under the same limit."""
    if "usable" in case:
        case = calibrated(case, case["usable"])
    refused = bench.run_case(case)["limited"]
    assert refused["state"] == "FAILED"
    error = refused["error"]
    assert "\n" not in error and "Traceback" not in error
    best = int(re.search(r"largest resolution that fits, whole or split into z-slabs, is (\d+)", error).group(1))
    assert 64 < best < case["res"]
    ok = bench.run_case({**case, "res": best})["limited"]
    assert ok["state"] == "FINISHED", ok["error"]
    assert re.search(r"split into \d+ z-slabs", " ".join(ok["warnings"])), ok["warnings"]  # it needed the split


def test_split_blocks_with_voxel_art_under_a_real_limit_run_where_the_old_plan_died():
    """Merge Block Faces and texture colours (an image on Suzanne's UVs) on a Block mesh
    over the limit whole: the split plan counts the voxel art's bytes (the texture
    lookup's candidate triangles, the merged faces' runs, the face colours), so it picks
    thin enough slabs and the job runs, its merged mesh equal to the unsplit job's. Planned
    without them (as before), the same job ran out of memory, or (where it squeezes under
    the limit) grew past its plan."""
    case = {"shape": "suzanne", "mode": "solid+surface", "fill_holes": True, "res": 160, "outputs": ["blocks"],
            "texture": True, "greedy": True, "headroom": 200 * MiB}
    out = bench.run_case({**case, "unsplit": True})
    whole, split = out["unsplit"], out["limited"]
    assert whole["state"] == "FINISHED", whole["error"]
    assert split["state"] == "FINISHED", split["error"]
    note = " ".join(split["warnings"])
    assert re.search(r"Block mesh voxel attributes split into \d+ z-slabs", note), split["warnings"]
    assert re.search(r"Block mesh: [\d,]+ faces \([\d,]+ before merging\)", note), split["warnings"]
    assert split["estimate"]["whole"] > split["estimate"]["total"]
    (mesh_a,) = [f for f in whole["files"] if f.endswith(".npz")]
    (mesh_b,) = [f for f in split["files"] if f.endswith(".npz")]
    a, b = np.load(mesh_a), np.load(mesh_b)
    for name in ("co", "loops", "materials"):
        assert np.array_equal(a[name], b[name]), name
    old = bench.run_case({**case, "old_plan": True})["limited"]
    if old["state"] == "FAILED":
        assert old["error"].startswith("Out of memory"), old["error"]
    else:  # with the texture lookup's smaller blocks it may squeeze under the limit on some
        # builds, but its plan still under-counted what the job grew by
        planned = old["estimate"].get("whole", old["estimate"].get("total", 0))
        assert old["measured"] > planned, (old["measured"], old["estimate"])


@pytest.mark.parametrize("texture, outputs",
                         [(True, ["blocks"]), ("random", ["blocks"]), ("random", ["blocks", "vox"])], ids=[
                             "one-image", "two-images-and-plain-at-random", "two-images-at-random-blocks-and-vox"])
def test_split_voxel_art_estimate_holds_the_jobs_growth(texture, outputs):
    """Texture colours (an image on Suzanne's UVs; or two images and a plain material face
    by face at random, where the lookup's image filter drops about half the candidates)
    and merged faces on a split Block mesh (and .vox): the plan's estimate (the lookup's
    candidates and those the filter keeps, counted per triangle before planning, in the
    slab that looks up the most; the .vox palette's distinct colours estimated from a
    sample of the grid's rows, 128,371 in 458,254 voxels here, where one a voxel made the
    plan 2.1x the growth) is within 1-1.5x of what the job grew by (RSS high-water mark),
    so the slabs it picks are as thick as the limit allows and no thicker."""
    case = {"shape": "suzanne", "mode": "solid+surface", "fill_holes": True, "res": 160, "outputs": outputs,
            "texture": texture, "greedy": True, "headroom": 200 * MiB}
    split = bench.run_case(case)["limited"]
    assert split["state"] == "FINISHED", split["error"]
    assert re.search(r"split into \d+ z-slabs", " ".join(split["warnings"])), split["warnings"]
    estimate = split["estimate"]["total"]
    assert split["measured"] <= estimate <= 1.5 * split["measured"], (split["measured"] / MiB, estimate / MiB)
