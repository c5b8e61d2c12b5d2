"""Shared test set-up: the checkout is importable as ``voxfx``; markers ``gpu`` and
``blender`` skip where the real thing is missing (no mocks)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# Blender's user folders (extensions, preferences) go to a throw-away place so tests
# never touch the developer's own Blender set-up. Must happen before bpy is imported.
os.environ.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp(prefix="voxfx-blender-user-"))

from tools.package import load  # noqa: E402

load()


def _has_bpy() -> bool:
    try:
        import bpy  # noqa: F401
    except Exception:  # noqa: BLE001
        return False
    return True


def _blender_too_old():
    """Why the installed bpy is below the manifest's blender_version_min, or None."""
    import bpy

    from voxfx.addon import blender_version_min

    need = blender_version_min()
    if tuple(bpy.app.version) >= need:
        return None
    return (f"VoxFX needs Blender {'.'.join(map(str, need))}+ (blender_manifest.toml), "
            f"this bpy is {bpy.app.version_string}")


def _gpu_reason():
    from voxfx.kernels import backend

    cp, why_not = backend.probe_cuda()
    return None if cp is not None else why_not


def pytest_collection_modifyitems(config, items):
    for item in items:  # folder decides the marker: tests/blender/ and tests/gpu/
        path = str(item.fspath).replace("\\", "/")
        if "/tests/blender/" in path:
            item.add_marker(pytest.mark.blender)
        if "/tests/gpu/" in path:
            item.add_marker(pytest.mark.gpu)
    need_bpy = any(item.get_closest_marker("blender") for item in items)
    need_gpu = any(item.get_closest_marker("gpu") for item in items)
    bpy_ok = _has_bpy() if need_bpy else True
    too_old = _blender_too_old() if need_bpy and bpy_ok else None
    gpu_why = _gpu_reason() if need_gpu else None
    for item in items:
        if item.get_closest_marker("blender") and not bpy_ok:
            item.add_marker(pytest.mark.skip(reason="bpy (Blender as a Python module) is not installed"))
        elif item.get_closest_marker("blender") and too_old:
            item.add_marker(pytest.mark.skip(reason=too_old))
        if item.get_closest_marker("gpu") and gpu_why:
            item.add_marker(pytest.mark.skip(reason=f"no working CUDA device: {gpu_why}"))


@pytest.fixture(scope="session", autouse=True)
def frozen_start_heap():
    """Move the objects alive when the session starts (modules, bpy's types, the collected
    tests) out of the garbage collector's generations (``gc.freeze``): every job's
    ``release_memory`` runs ``gc.collect``, which otherwise walked all of them (~0.06 s a
    call with bpy imported). Objects made by the tests are collected as before."""
    import gc

    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


@pytest.fixture
def mg_dense_sweeps(monkeypatch):
    """The sparse multigrid's coarsest level by sweeps (``sparse_multigrid.MG_DENSE`` 0) while
    the test runs, whatever the default or the environment: for tests whose subject needs the
    level the default ("2") drops — a level count, the dense solver's V-cycle followed step for
    step, every level's tables against the reference. Used with ``pytest.mark.usefixtures``."""
    from voxfx.kernels.flip import sparse_multigrid

    monkeypatch.setattr(sparse_multigrid, "MG_DENSE", 0)
