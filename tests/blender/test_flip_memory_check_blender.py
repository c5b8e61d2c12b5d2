"""The liquid bake looks at its memory again before every frame (issue 21 §6): where the
limit drops below what the next frame needs (here a real ``RLIMIT_AS`` lowered after
frame 2, as another program taking the memory would), the bake stops before stepping,
in one line naming the frame, the need and what fits; the frames before it stay baked
with their checkpoint, and the next Bake resumes there and ends equal to an
uninterrupted bake."""

import re
import resource

import bpy
import numpy as np
import pytest

from voxfx.addon.jobs import JobRunner

from .helpers import dam_scene

MiB = 1 << 20


@pytest.fixture
def dam(tmp_path):
    with dam_scene(tmp_path / "dam.blend", 20) as (scene, f):
        scene.voxfx.write_while_simulating = False  # frame 2's files on disk: the job is between frames
        yield scene, f, tmp_path


def vm_size() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))


def frames_of(folder):
    return {int(p.stem.split("_")[1]): p.read_bytes() for p in sorted(folder.glob("liquid_*.*"))
            if p.suffix in (".vxp", ".ply")}


@pytest.mark.parametrize("solver", ["SPARSE", "DENSE"])
def test_a_bake_whose_next_frame_no_longer_fits_stops_cleanly_and_resumes(dam, solver):
    from voxfx.addon.flip_sparse import memory_need
    from voxfx.addon.operators.flip import domain_spec, flip_job

    scene, f, tmp = dam
    f.solver = solver
    scene.voxfx.cache_directory = str(tmp / "reference") + "/"
    assert bpy.ops.voxfx.flip_bake() == {"FINISHED"}
    reference = frames_of(tmp / "reference" / "liquid")
    assert sorted(reference) == [1, 2, 3, 4]

    scene.voxfx.cache_directory = str(tmp / "cache") + "/"
    folder = tmp / "cache" / "liquid"
    need = memory_need(domain_spec(f.domain, f.resolution), 8 * 6 ** 3, f, xp=np)  # the 0.3 m cube: 6³ cells
    headroom = need // 4  # far below a frame's need, above what stopping needs
    assert headroom > 2 * MiB, need
    runner = JobRunner(flip_job(bpy.context, f, scene.voxfx.cache_directory, 1, 4))
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    try:
        while not any(folder.glob("liquid_0002.*")):
            assert runner.step() == "RUNNING", runner.error
        resource.setrlimit(resource.RLIMIT_AS, (vm_size() + headroom, hard))
        while runner.step() == "RUNNING":
            pass
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    assert runner.state == "FAILED"
    error = runner.error
    assert "\n" not in error and "Traceback" not in error and "Internal error" not in error, error
    m = re.fullmatch(r"Frame 3: the liquid now needs ([\d.]+) (MiB|KiB|GiB), ([\d.]+) (MiB|KiB|GiB) fits; "
                     r"frames 1–2 are baked and resume from there", error)
    assert m, error
    assert sorted(frames_of(folder)) == [1, 2]  # frame 3 was never stepped or written
    assert not list(folder.glob("*.tmp*"))

    resumed = JobRunner(flip_job(bpy.context, f, scene.voxfx.cache_directory, 1, 4))
    assert resumed.run() == "FINISHED", resumed.error
    assert resumed.result.summary == "baked frames 3-4"
    assert frames_of(folder) == reference  # CPU: bit-identical to the uninterrupted bake
