"""Every test in this folder runs real headless Blender, reset around each test."""

import pytest


@pytest.fixture(autouse=True)
def fresh_blender():
    import bpy

    bpy.ops.wm.read_homefile(use_empty=True)
    yield bpy
    bpy.ops.wm.read_homefile(use_empty=True)
