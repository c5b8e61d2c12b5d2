"""Operators: each one orchestrates (settings → extract → kernels → write back)."""

from . import cache, flip, gpu, snow, system, vox_import, voxelize

_modules = (system, gpu, cache, voxelize, snow, flip, vox_import)


def register():
    for m in _modules:
        m.register()


def unregister():
    for m in reversed(_modules):
        m.unregister()
