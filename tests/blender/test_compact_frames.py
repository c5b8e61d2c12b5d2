"""Compact particle frames (.vxp) in Blender (issue 17): the frame loader shows them as
the PLY path does (positions within 1/1000 of a cell, velocity as one vector attribute);
a frame that passes its manifest but does not decode is named once and never shown; a
v0.1 cache (PLY, and a .blend whose loader source names no extension) still loads."""

import bpy
import numpy as np

from voxfx.addon import compact_points, frame_loader, ply
from voxfx.addon.cache import BakeCache

from .helpers import voxfx_registered

CELL = 0.02


def _frames(n_of_frame, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for frame, n in n_of_frame.items():
        out[frame] = (rng.uniform(-0.3, 0.9, (n, 3)), rng.normal(0, 2, (n, 3)).astype(np.float32))
    return out


def _attach(folder, name, ext=None):
    from voxfx.addon.operators import flip

    obj = flip._empty_mesh_object("Liquid Particles")
    source = {"kind": "points", "prefix": str(folder / f"{name}_")}
    if ext is not None:
        source["ext"] = ext
    obj.data[frame_loader.SOURCE] = source
    return obj


def _shown(obj, scene, frame):
    scene.frame_set(frame)
    frame_loader.update(scene)
    mesh = obj.data
    pos = np.empty(3 * len(mesh.vertices), np.float32)
    mesh.attributes["position"].data.foreach_get("vector", pos)
    vel = None
    if "velocity" in mesh.attributes:
        vel = np.empty(3 * len(mesh.vertices), np.float32)
        mesh.attributes["velocity"].data.foreach_get("vector", vel)
        vel = vel.reshape(-1, 3)
    return pos.reshape(-1, 3), vel


def test_compact_frames_show_like_their_particles(tmp_path):
    frames = _frames({1: 400, 2: 650})
    cache = BakeCache(tmp_path / "liquid", "liquid", kind="flip")
    cache.begin({"fake": 1}, 1, 2)
    for frame, (pos, vel) in frames.items():
        ids = np.arange(len(pos), dtype=np.int32)  # the particles come back sorted by cell: find each one
        cache.write_frame(frame, {".vxp": lambda p, pos=pos, vel=vel, ids=ids: compact_points.write_points(
            p, pos, {"velocity": vel, "id": ids}, cell=CELL)})
    with voxfx_registered():
        obj = _attach(tmp_path / "liquid", "liquid", ".vxp")
        scene = bpy.context.scene
        for frame, (pos, vel) in frames.items():
            shown, velocity = _shown(obj, scene, frame)
            assert len(shown) == len(pos) and velocity is not None
            ids = np.empty(len(shown), np.int32)
            obj.data.attributes["id"].data.foreach_get("value", ids)
            assert np.array_equal(np.sort(ids), np.arange(len(pos)))
            error = np.linalg.norm(pos[ids] - shown.astype(np.float64), axis=1).max()
            assert error <= CELL / 1000  # each particle within 1/1000 of a cell
            assert np.allclose(velocity, vel[ids], rtol=2 ** -8, atol=1e-4)


def test_a_compact_frame_that_does_not_decode_is_named_once_and_never_shown(tmp_path, capfd):
    frames = _frames({1: 300, 2: 300})
    cache = BakeCache(tmp_path / "liquid", "liquid", kind="flip")
    cache.begin({"fake": 1}, 1, 2)
    pos, vel = frames[1]
    cache.write_frame(1, {".vxp": lambda p: compact_points.write_points(p, pos, {"velocity": vel}, cell=CELL)})
    good = compact_points.encode(frames[2][0], {"velocity": frames[2][1]}, cell=CELL)
    truncated = good[:-40]  # the manifest vouches for it (written through the cache), the format does not

    def write(p):
        with open(p, "xb") as f:
            f.write(truncated)

    cache.write_frame(2, {".vxp": write})
    with voxfx_registered():
        obj = _attach(tmp_path / "liquid", "liquid", ".vxp")
        scene = bpy.context.scene
        assert len(_shown(obj, scene, 1)[0]) == 300
        for _ in range(3):
            assert len(_shown(obj, scene, 2)[0]) == 0  # nothing, not garbage
            assert len(_shown(obj, scene, 1)[0]) == 300
    out = capfd.readouterr().out
    assert out.count("liquid_0002.vxp") == 1 and "not a readable VoxFX particle frame" in out


def test_a_v0_1_ply_cache_still_loads(tmp_path):
    """Written the old way (PLY through the cache, the loader's source without "ext")."""
    frames = _frames({1: 200, 2: 250})
    cache = BakeCache(tmp_path / "liquid", "liquid", kind="flip")
    cache.begin({"fake": 1}, 1, 2)
    for frame, (pos, vel) in frames.items():
        cache.write_frame(frame, {".ply": lambda p, pos=pos, vel=vel: ply.write_points(p, pos, {"velocity": vel})})
    with voxfx_registered():
        obj = _attach(tmp_path / "liquid", "liquid")
        scene = bpy.context.scene
        for frame, (pos, vel) in frames.items():
            shown, velocity = _shown(obj, scene, frame)
            assert np.array_equal(shown, pos.astype(np.float32)) and np.array_equal(velocity, vel)


def test_half_float_vdb_grids_are_smaller_and_within_half_precision(tmp_path):
    from voxfx.addon import writeback
    from voxfx.kernels.grid import GridSpec

    res, h = 40, 1.0 / 40
    spec = GridSpec((0.0, 0.0, 0.0), h, (res,) * 3)
    k, j, i = np.meshgrid(*(np.arange(res) + 0.5,) * 3, indexing="ij")
    phi = (np.sqrt((i * h - 0.5) ** 2 + (j * h - 0.5) ** 2 + (k * h - 0.45) ** 2) - 0.3).astype(np.float32)
    velocity = np.random.default_rng(0).normal(0, 2, (res,) * 3 + (3,)).astype(np.float32) * (phi < 0)[..., None]
    grids = {"surface": np.clip(phi, -3 * h, 3 * h), "velocity": velocity}
    kw = dict(grid_class={"surface": "LEVEL_SET", "velocity": "FOG_VOLUME"},
              background={"surface": 3 * h, "velocity": 0.0})
    full = writeback.write_vdb(tmp_path / "full.vdb", grids, spec, **kw)
    half = writeback.write_vdb(tmp_path / "half.vdb", grids, spec, half=True, **kw)
    assert half.stat().st_size < 0.7 * full.stat().st_size
    vdb = writeback.openvdb_module()
    for name, ref in (("surface", phi), ("velocity", velocity)):
        shape = (res,) * 3 + ((3,) if ref.ndim == 4 else ())
        a, b = np.zeros(shape, np.float32), np.zeros(shape, np.float32)
        vdb.read(str(full), name).copyToArray(a)
        vdb.read(str(half), name).copyToArray(b)
        assert np.abs(a).max() > 0 and not np.array_equal(a, b)  # stored as halves, not as floats
        assert np.allclose(b, a, rtol=2.0 ** -11, atol=0)
