"""Time-Centred Advection on the Liquid panel (issue 24; experimental, off by default): it
reaches the kernels and the memory estimate, and off it leaves the bake's recorded
settings (and so their hash) as older bakes have them, so they still resume."""

import json

import bpy
import numpy as np
import pytest

from voxfx.addon.cache import MANIFEST
from voxfx.addon.jobs import JobRunner

from .helpers import dam_scene


@pytest.fixture
def dam(tmp_path):
    with dam_scene(tmp_path / "dam.blend", 12) as (scene, f):
        scene.voxfx.cache_directory = str(tmp_path / "cache") + "/"
        yield scene, f, tmp_path / "cache" / "liquid"


def recorded(folder):
    return json.loads((folder / MANIFEST).read_text())


@pytest.mark.parametrize("solver", ["DENSE", "SPARSE"])
def test_the_setting_reaches_the_bake_and_its_memory_estimate(dam, solver):
    from voxfx.addon.flip_sparse import memory_need
    from voxfx.addon.operators.flip import domain_spec, flip_job, kernel_settings

    scene, f, folder = dam
    f.solver = solver
    assert f.time_centred_advection is False  # off by default
    spec = domain_spec(f.domain, f.resolution)
    off = memory_need(spec, 8 * 4 ** 3, f, xp=np)
    f.time_centred_advection = True
    assert kernel_settings(f, scene, solver == "SPARSE").time_centred_advection is True
    assert memory_need(spec, 8 * 4 ** 3, f, xp=np) > off
    runner = JobRunner(flip_job(bpy.context, f, scene.voxfx.cache_directory, 1, 2, resume=False))
    assert runner.run() == "FINISHED", runner.error
    assert recorded(folder)["settings"]["settings"]["time_centred_advection"] is True


def test_off_the_bake_records_the_settings_older_bakes_have(dam):
    from voxfx.addon.operators.flip import flip_job

    scene, f, folder = dam
    runner = JobRunner(flip_job(bpy.context, f, scene.voxfx.cache_directory, 1, 2, resume=False))
    assert runner.run() == "FINISHED", runner.error
    assert "time_centred_advection" not in recorded(folder)["settings"]["settings"]
