"""Helpers for Blender tests: run the checkout as an enabled add-on."""

import contextlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def blender_ext_tool() -> Path:
    """Blender's own extension tool, shipped inside the bpy wheel."""
    import bpy

    return Path(bpy.utils.system_resource("SCRIPTS")) / "addons_core" / "bl_pkg" / "cli" / "blender_ext.py"


@contextlib.contextmanager
def voxfx_registered():
    """The checkout (imported as ``voxfx``) registered for the duration."""
    import voxfx

    voxfx.register()
    try:
        yield voxfx
    finally:
        voxfx.unregister()


@contextlib.contextmanager
def dam_scene(blend_path, resolution: int):
    """The liquid tests' dam break: a 1 × 0.5 × 1 m domain with a 0.3 m cube of water in its
    corner, frames 1..4, saved as *blend_path*, VoxFX registered, the Liquid panel set to
    the domain at *resolution*. Yields (scene, the Liquid settings)."""
    import bpy

    bpy.ops.mesh.primitive_cube_add(size=1, location=(0.5, 0.25, 0.5))  # domain 1 × 0.5 × 1 m
    domain = bpy.context.active_object
    domain.scale = (1.0, 0.5, 1.0)
    bpy.ops.mesh.primitive_cube_add(size=0.3, location=(0.15, 0.25, 0.15))
    water = bpy.context.active_object
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 4
    bpy.ops.wm.save_as_mainfile(filepath=str(blend_path))
    with voxfx_registered():
        water.voxfx_flip.role = "LIQUID"
        f = scene.voxfx.flip
        f.domain, f.resolution = domain, resolution
        yield scene, f


def snow_receivers(blend_path, plane_size: float, *, cube: bool = False, frames: int = 3):
    """A saved scene whose Receivers collection holds a plane of *plane_size* (and a 2 m
    cube standing on it), frames 1..*frames*: the snow tests' common set-up. Returns
    ``(scene, receivers collection)``; register VoxFX and set the snow settings after."""
    import bpy

    bpy.ops.mesh.primitive_plane_add(size=plane_size)
    names = ["Plane"]
    if cube:
        bpy.ops.mesh.primitive_cube_add(size=2, location=(0, 0, 1))
        names.append("Cube")
    coll = bpy.data.collections.new("Receivers")
    bpy.context.scene.collection.children.link(coll)
    for name in names:
        coll.objects.link(bpy.data.objects[name])
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    bpy.ops.wm.save_as_mainfile(filepath=str(blend_path))
    return scene, coll


def set_snow(s, receivers, wind: int, ground: int, flakes: int, rate: float, substeps: int, sky: float):
    """The snow tests' small, fast settings."""
    s.receivers = receivers
    s.wind_resolution, s.ground_resolution, s.flake_count = wind, ground, flakes
    s.snowfall_rate, s.substeps, s.sky_height = rate, substeps, sky
