"""Everything in VoxFX that touches ``bpy``: settings, operators, panels, scene I/O,
write-back, caches, the job runner and the command line.

Submodules are imported in ``register()`` so that importing this package has no side
effects (tests import single modules such as ``scene_io``).
"""

import importlib
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Registration order: preferences and properties before the operators and panels that
# read them; the CLI last. Unregistered in reverse.
_MODULE_NAMES = ("preferences", "properties", "frame_loader", "operators", "panels", "cli")


def _modules():
    return [importlib.import_module(f".{name}", __name__) for name in _MODULE_NAMES]


def register():
    check_blender_version()
    for module in _modules():
        module.register()


def unregister():
    for module in reversed(_modules()):
        module.unregister()


@lru_cache(maxsize=1)
def _manifest() -> dict:
    import tomllib

    with open(ROOT / "blender_manifest.toml", "rb") as f:
        return tomllib.load(f)


def addon_version() -> str:
    """The version in blender_manifest.toml (the one place it is written)."""
    return _manifest()["version"]


def blender_version_min() -> tuple:
    """The oldest Blender the manifest allows, e.g. (4, 5, 0)."""
    return tuple(int(part) for part in _manifest()["blender_version_min"].split("."))


def check_blender_version():
    """Refuse to register on a Blender older than the manifest's minimum, saying why.

    Blender checks the minimum itself when it installs the extension; this catches the
    other ways in (the command line through the bpy module, a copied source folder). The
    bake outputs are loaded by Geometry Nodes' Import PLY / Import VDB nodes and points
    become point cloud objects, which Blender only has from 4.5 on.
    """
    import bpy

    from ..kernels.errors import VoxFXError

    need = blender_version_min()
    if tuple(bpy.app.version) < need:
        raise VoxFXError(
            f"VoxFX {addon_version()} needs Blender {'.'.join(map(str, need))} or newer, not "
            f"{bpy.app.version_string}: it loads baked frames with the Import PLY and Import VDB "
            "geometry nodes and makes point cloud objects, which older versions lack"
        )


def addon_package() -> str:
    """The package Blender imported us as (``bl_ext.<repo>.voxfx`` or ``voxfx``)."""
    return __package__.rpartition(".")[0]
