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
_MODULE_NAMES = ("preferences", "properties", "operators", "panels", "cli")


def _modules():
    return [importlib.import_module(f".{name}", __name__) for name in _MODULE_NAMES]


def register():
    for module in _modules():
        module.register()


def unregister():
    for module in reversed(_modules()):
        module.unregister()


@lru_cache(maxsize=1)
def addon_version() -> str:
    """The version in blender_manifest.toml (the one place it is written)."""
    import tomllib

    with open(ROOT / "blender_manifest.toml", "rb") as f:
        return tomllib.load(f)["version"]


def addon_package() -> str:
    """The package Blender imported us as (``bl_ext.<repo>.voxfx`` or ``voxfx``)."""
    return __package__.rpartition(".")[0]
