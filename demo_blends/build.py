"""Build the three demo scenes (Voxelize, Snow, Liquid) from scratch, headless.

    python demo_blends/build.py --out DIR

Writes DIR/voxelize.blend, DIR/snow.blend and DIR/flip.blend: small scenes with a camera,
a sun, simple materials and the VoxFX settings filled in, ready to bake. The copies in
this folder were made with ``--out demo_blends`` (rerun it for a new Blender version);
``tools/demo.py`` builds fresh ones, bakes and renders them.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import bpy  # noqa: E402
import numpy as np  # noqa: E402
from mathutils import Vector  # noqa: E402

FLIP_FRAMES = 24  # frame range of flip.blend (the demo may bake fewer)
SNOW_FRAMES = 24


# ---------------------------------------------------------------- helpers

def empty_scene(name: str):
    bpy.ops.wm.read_homefile(use_empty=True)
    scene = bpy.context.scene
    scene.name = name
    scene.render.fps = 24
    scene.render.engine = "CYCLES"  # same id in every Blender (EEVEE's changed in 5.0); glass water needs it
    scene.cycles.samples = 64
    world = bpy.data.worlds.new("Sky")
    world.color = (0.45, 0.55, 0.7)
    _set_world_color(world, (0.45, 0.55, 0.7, 1.0), 0.6)
    scene.world = world
    return scene


def _set_world_color(world, rgba, strength):
    if world.node_tree is None:
        world.use_nodes = True
    bg = next((n for n in world.node_tree.nodes if n.type == "BACKGROUND"), None)
    if bg is None:
        bg = world.node_tree.nodes.new("ShaderNodeBackground")
        out = next((n for n in world.node_tree.nodes if n.type == "OUTPUT_WORLD"), None) or \
            world.node_tree.nodes.new("ShaderNodeOutputWorld")
        world.node_tree.links.new(bg.outputs["Background"], out.inputs["Surface"])
    bg.inputs["Color"].default_value = rgba
    bg.inputs["Strength"].default_value = strength


def material(name: str, rgba, roughness: float = 0.6, transmission: float = 0.0):
    """A Principled material whose viewport colour matches its render colour."""
    mat = bpy.data.materials.get(name) or bpy.data.materials.new(name)
    mat.diffuse_color = rgba
    mat.roughness = roughness
    if mat.node_tree is None:
        mat.use_nodes = True
    bsdf = next((n for n in mat.node_tree.nodes if n.type == "BSDF_PRINCIPLED"), None)
    if bsdf is not None:
        bsdf.inputs["Base Color"].default_value = rgba
        bsdf.inputs["Roughness"].default_value = roughness
        if transmission:
            bsdf.inputs["Transmission Weight"].default_value = transmission
            bsdf.inputs["IOR"].default_value = 1.33
    return mat


def assign(obj, mat):
    obj.data.materials.clear()
    obj.data.materials.append(mat)
    return obj


def camera_and_sun(location, target, lens=35.0, sun_rotation=(math.radians(50), 0, math.radians(30)),
                   sun_strength=3.0):
    cam_data = bpy.data.cameras.new("Camera")
    cam_data.lens = lens
    cam = bpy.data.objects.new("Camera", cam_data)
    bpy.context.scene.collection.objects.link(cam)
    cam.location = location
    direction = Vector(target) - Vector(location)
    cam.rotation_euler = direction.to_track_quat("-Z", "Y").to_euler()
    bpy.context.scene.camera = cam
    sun_data = bpy.data.lights.new("Sun", "SUN")
    sun_data.energy = sun_strength
    sun_data.angle = math.radians(5)
    sun = bpy.data.objects.new("Sun", sun_data)
    bpy.context.scene.collection.objects.link(sun)
    sun.rotation_euler = sun_rotation
    return cam, sun


def grid_mesh(name, size, n, height_fn):
    """An n×n-quad grid of side `size` centred on the origin, z = height_fn(x, y)."""
    t = np.linspace(-size / 2, size / 2, n + 1)
    x, y = np.meshgrid(t, t)
    z = height_fn(x, y)
    verts = np.stack([x, y, z], -1).reshape(-1, 3)
    jj, ii = np.mgrid[0:n, 0:n]
    idx = (jj * (n + 1) + ii).ravel()
    quads = np.stack([idx, idx + 1, idx + n + 2, idx + n + 1], axis=1)
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(verts.tolist(), [], quads.tolist())
    mesh.update()
    obj = bpy.data.objects.new(name, mesh)
    return obj


def add(op, **kw):
    op(**kw)
    return bpy.context.active_object


def save(path: Path):
    bpy.context.preferences.filepaths.save_version = 0  # no .blend1 backups
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


# ---------------------------------------------------------------- the scenes

def build_voxelize():
    """Suzanne, a text object and a bezier curve, selected for Voxelize."""
    empty_scene("Voxelize")
    monkey = add(bpy.ops.mesh.primitive_monkey_add, location=(0, 0, 1))
    bpy.ops.object.shade_smooth()
    assign(monkey, material("Clay", (0.8, 0.35, 0.2, 1)))
    text = add(bpy.ops.object.text_add, location=(-1.6, -1.2, 0))
    text.data.body = "VoxFX"
    text.data.extrude = 0.08
    assign(text, material("Teal", (0.1, 0.55, 0.55, 1)))
    ring = add(bpy.ops.curve.primitive_bezier_circle_add, radius=1.4, location=(0, 0, 1))
    ring.data.bevel_depth = 0.05
    assign(ring, material("Gold", (0.9, 0.7, 0.2, 1), roughness=0.4))
    floor = add(bpy.ops.mesh.primitive_plane_add, size=20, location=(0, 0, -0.1))
    floor.name = "Floor"
    assign(floor, material("Floor", (0.6, 0.6, 0.6, 1)))
    camera_and_sun((5.5, -6.5, 4.2), (0, -0.3, 0.8), lens=40)
    bpy.ops.object.select_all(action="DESELECT")
    for o in (monkey, text, ring):
        o.select_set(True)
    bpy.context.view_layer.objects.active = monkey
    return [monkey, text, ring]


def hills(x, y):
    """A few Gaussian hills on a gently tilted plane."""
    z = 0.03 * x
    for cx, cy, h, r in ((-3.0, 2.5, 1.6, 2.2), (3.5, 3.0, 1.1, 1.8), (-2.5, -3.5, 0.8, 1.5), (4.0, -3.0, 0.6, 1.3)):
        z = z + h * np.exp(-((x - cx) ** 2 + (y - cy) ** 2) / (2 * r * r))
    return z


def build_snow(frames: int = SNOW_FRAMES):
    """Hilly terrain, a house and two trees in a "Receivers" collection, with a crosswind."""
    scene = empty_scene("Snow")
    scene.frame_start, scene.frame_end = 1, frames
    coll = bpy.data.collections.new("Receivers")
    scene.collection.children.link(coll)

    def put(obj):
        for c in obj.users_collection:
            c.objects.unlink(obj)
        coll.objects.link(obj)
        return obj

    terrain = put(grid_mesh("Terrain", 14.0, 48, hills))
    assign(terrain, material("Earth", (0.25, 0.2, 0.15, 1), roughness=0.9))
    base_z = float(hills(np.array(0.5), np.array(-0.5)))
    house = put(add(bpy.ops.mesh.primitive_cube_add, size=1, location=(0.5, -0.5, base_z + 0.6)))
    house.name = "House"
    house.scale = (1.6, 1.2, 1.2)
    assign(house, material("Walls", (0.75, 0.55, 0.4, 1)))
    roof = put(add(bpy.ops.mesh.primitive_cone_add, vertices=4, radius1=1.45, depth=0.9,
                   location=(0.5, -0.5, base_z + 1.65), rotation=(0, 0, math.radians(45))))
    roof.name = "Roof"
    roof.scale = (1.25, 0.95, 1.0)
    assign(roof, material("Roof", (0.45, 0.12, 0.1, 1)))
    bark, leaves = material("Bark", (0.3, 0.18, 0.08, 1)), material("Leaves", (0.08, 0.3, 0.12, 1))
    for i, (x, y) in enumerate(((-1.8, 0.8), (2.6, 0.6))):
        z = float(hills(np.array(x), np.array(y)))
        trunk = put(add(bpy.ops.mesh.primitive_cylinder_add, vertices=12, radius=0.12, depth=0.6,
                        location=(x, y, z + 0.3)))
        trunk.name = f"Trunk {i + 1}"
        assign(trunk, bark)
        crown = put(add(bpy.ops.mesh.primitive_cone_add, vertices=16, radius1=0.7, depth=1.8,
                        location=(x, y, z + 1.4)))
        crown.name = f"Tree {i + 1}"
        assign(crown, leaves)
    camera_and_sun((9.5, -11.0, 7.0), (0, 0, 0.6), lens=32, sun_strength=2.5)
    s = scene.voxfx.snow
    s.receivers = coll
    s.sky_height = 5.0
    s.wind_speed, s.wind_direction, s.gust_strength = 4.0, math.radians(90), 0.4  # crosswind towards +Y
    s.snowfall_rate = 2000.0  # exaggerated so that a few frames show a cover
    s.wind_resolution, s.ground_resolution, s.flake_count = 24, 128, 200_000
    return coll


def build_flip(frames: int = FLIP_FRAMES):
    """A dam break: a water block in one corner of a box domain, a cube in its way."""
    scene = empty_scene("Liquid")
    scene.frame_start, scene.frame_end = 1, frames
    domain = add(bpy.ops.mesh.primitive_cube_add, size=1, location=(1.0, 0.5, 0.5))
    domain.name = "Domain"
    domain.scale = (2.0, 1.0, 1.0)  # 2 × 1 × 1 m
    domain.display_type = "WIRE"
    domain.hide_render = True
    water = add(bpy.ops.mesh.primitive_cube_add, size=1, location=(0.3, 0.5, 0.35))
    water.name = "Water"
    water.scale = (0.6, 1.0, 0.7)
    water.display_type = "WIRE"
    water.hide_render = True  # the baked surface renders instead
    rock = add(bpy.ops.mesh.primitive_cube_add, size=0.3, location=(1.2, 0.45, 0.15),
               rotation=(0, 0, math.radians(30)))
    rock.name = "Obstacle"
    assign(rock, material("Stone", (0.55, 0.32, 0.14, 1)))
    tank = add(bpy.ops.mesh.primitive_plane_add, size=1, location=(1.0, 0.5, -0.005))
    tank.name = "Tank Floor"
    tank.scale = (2.0, 1.0, 1.0)
    assign(tank, material("Tiles", (0.8, 0.8, 0.75, 1)))
    back = add(bpy.ops.mesh.primitive_plane_add, size=1, location=(1.0, 1.005, 0.5), rotation=(math.radians(90), 0, 0))
    back.name = "Tank Wall"
    back.scale = (2.0, 1.0, 1.0)
    assign(back, material("Wall", (0.35, 0.38, 0.42, 1)))
    water.voxfx_flip.role = "LIQUID"
    rock.voxfx_flip.role = "OBSTACLE"
    f = scene.voxfx.flip
    f.domain, f.resolution = domain, 40
    camera_and_sun((2.4, -2.2, 1.6), (0.95, 0.5, 0.2), lens=30, sun_strength=2.5)
    return domain, water, rock


BUILDERS = {"voxelize": build_voxelize, "snow": build_snow, "flip": build_flip}


def build(name: str, out: Path, **kw) -> Path:
    """Build one scene into out/<name>.blend (the VoxFX add-on must be registered)."""
    BUILDERS[name](**kw)
    return save(Path(out) / f"{name}.blend")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="out")  # /out/ is git-ignored
    args = ap.parse_args(argv)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    from tools.package import load

    voxfx = load()
    voxfx.register()
    try:
        for name in BUILDERS:
            print(f"build: {build(name, out)}")
    finally:
        voxfx.unregister()
    return 0


if __name__ == "__main__":
    sys.exit(main())
