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
