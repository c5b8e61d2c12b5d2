"""The committed demo scenes open in this Blender, are what demo_blends/build.py builds
(so they are regenerated when the script changes), and are ready to bake."""

import bpy
import pytest

from .helpers import ROOT, voxfx_registered

NAMES = ("voxelize", "snow", "flip")


def _value(v):
    if isinstance(v, bpy.types.ID):
        return v.name
    if hasattr(v, "__len__") and not isinstance(v, str):
        return tuple(round(x, 5) if isinstance(x, float) else x for x in v)
    return round(v, 5) if isinstance(v, float) else v


def _settings(group):
    out = {}
    for p in group.bl_rna.properties:
        if p.identifier in ("rna_type", "name"):
            continue
        v = getattr(group, p.identifier)
        out[p.identifier] = _settings(v) if isinstance(v, bpy.types.PropertyGroup) else _value(v)
    return out


def summary():
    """What a scene is made of, as plain values (no file paths, no Blender-version data)."""
    scene = bpy.context.scene
    objects = {}
    for o in bpy.data.objects:
        objects[o.name] = (
            o.type, o.hide_render, o.display_type, tuple(round(x, 4) for x in o.location),
            tuple(round(x, 4) for x in o.scale), tuple(s.material.name if s.material else None
                                                      for s in o.material_slots),
            o.voxfx_flip.role, tuple(round(x, 4) for x in o.voxfx_flip.initial_velocity),
            o.select_get(),
        )
    return dict(
        scene=scene.name, frames=(scene.frame_start, scene.frame_end), fps=scene.render.fps,
        engine=scene.render.engine, camera=scene.camera.name if scene.camera else None,
        world=scene.world.name if scene.world else None,
        collections=sorted((c.name, tuple(sorted(o.name for o in c.objects))) for c in bpy.data.collections),
        objects=objects, voxfx=_settings(scene.voxfx),
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Each scene as the build script makes it now."""
    from demo_blends import build

    out = tmp_path_factory.mktemp("demo_blends")
    made = {}
    with voxfx_registered():
        for name in NAMES:
            build.build(name, out)
            made[name] = summary()
    bpy.ops.wm.read_homefile(use_empty=True)
    return made


@pytest.mark.parametrize("name", NAMES)
def test_committed_demo_scene_is_what_the_build_script_makes(name, built):
    path = ROOT / "demo_blends" / f"{name}.blend"
    with voxfx_registered():
        assert bpy.ops.wm.open_mainfile(filepath=str(path)) == {"FINISHED"}
        committed = summary()
        assert committed == built[name], (
            f"demo_blends/{name}.blend differs from what build.py makes: "
            "run `.venv/bin/python demo_blends/build.py --out demo_blends`")
        scene = bpy.context.scene
        assert scene.camera is not None and any(o.type == "LIGHT" for o in scene.objects)
        if name == "voxelize":
            assert bpy.ops.voxfx.voxelize.poll()  # sources selected, ready to press the button
        elif name == "snow":
            assert bpy.ops.voxfx.snow_bake.poll() and len(scene.voxfx.snow.receivers.objects) >= 4
        else:
            roles = {o.voxfx_flip.role for o in scene.objects}
            assert scene.voxfx.flip.domain is not None and {"LIQUID", "OBSTACLE"} <= roles
            assert bpy.ops.voxfx.flip_bake.poll()
