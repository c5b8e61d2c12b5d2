"""Snow and liquid bakes survive a failure at every durable write step.

``VOXFX_FAULT_AT=k`` (``addon/fsio.py``) fails the k-th write step of the process: an
``OSError`` like a full disk in this process, or ``kill -9`` (``k:exit``) in a child
Blender. After it, Bake must report one clear line, leave no temporaries, resume after
the last recorded frame (never from frame 1 again), simulate again at most the frame
that was in flight, with Write While Simulating on or off (a frame whose checkpoint is
recorded but whose files are not is rewritten from the checkpoint), and end with frames
equal to an uninterrupted bake: PLY and EXR byte for byte, VDB byte for byte but for the
random UUID OpenVDB writes into every file. The liquid runs on the dense and the sparse
solver.
"""

import os
import re
import subprocess
import sys

import bpy
import pytest

from voxfx.addon import fsio
from voxfx.addon.cache import BakeCache
from voxfx.addon.jobs import JobRunner

from tests.unit.test_cache_faults import allowed_loss

from .helpers import ROOT, set_snow, snow_receivers, voxfx_registered

_UUID = re.compile(rb"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")


def frame_files(folder):
    out = {}
    for p in sorted(folder.iterdir()):
        if p.suffix in (".ply", ".vxp", ".exr", ".vdb"):
            data = p.read_bytes()
            out[p.name] = _UUID.sub(b"UUID", data, count=1) if p.suffix == ".vdb" else data
    return out


@pytest.fixture
def snow_scene(tmp_path):
    scene, coll = snow_receivers(tmp_path / "snow.blend", 8)
    with voxfx_registered():
        s = scene.voxfx.snow
        set_snow(s, coll, 8, 9, 500, 4000.0, 1, 3.0)
        scene.voxfx.checkpoint_every = 2

        def job(resume=True):
            from voxfx.addon.operators.snow import snow_job

            return snow_job(bpy.context, s, scene.voxfx.cache_directory, 1, 3, resume=resume)

        yield tmp_path / "voxfx_cache" / "snow" / "snow", job


@pytest.fixture
def liquid_scene(tmp_path):
    yield from dam_break(tmp_path, "DENSE")


@pytest.fixture
def sparse_liquid_scene(tmp_path):
    yield from dam_break(tmp_path, "SPARSE")


def dam_break(tmp_path, solver):
    bpy.ops.mesh.primitive_cube_add(size=1, location=(0.5, 0.5, 0.5))
    domain = bpy.context.active_object
    bpy.ops.mesh.primitive_cube_add(size=0.4, location=(0.25, 0.5, 0.25))
    water = bpy.context.active_object
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 3
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "dam.blend"))
    with voxfx_registered():
        water.voxfx_flip.role = "LIQUID"
        f = scene.voxfx.flip
        f.domain, f.resolution, f.solver = domain, 10, solver
        scene.voxfx.checkpoint_every = 2

        def job(resume=True):
            from voxfx.addon.operators.flip import flip_job

            return flip_job(bpy.context, f, scene.voxfx.cache_directory, 1, 3, resume=resume)

        yield tmp_path / "voxfx_cache" / "dam" / "liquid", job


def run(job):
    runner = JobRunner(job)
    runner.run()
    return runner


def count_steps(monkeypatch, effect):
    """Log the frames the effect's bake simulates (its kernel-side ``step``; the liquid's
    first frame too when its outputs come from a new simulation, not from its
    checkpoint), to count the frames a failure makes the next bake simulate again."""
    if effect == "snow_scene":
        from voxfx.kernels.snow.bake import SnowBake as Bake
    else:
        from voxfx.kernels.flip.bake import FlipBake as Bake
    stepped, real, outputs = [], Bake.step, Bake.outputs

    def step(self, sim, frame, *args, **kwargs):
        result = real(self, sim, frame, *args, **kwargs)
        stepped.append(frame)
        return result

    def initial(self, sim, *args, **kwargs):
        if sim.frames == 0 and getattr(sim, "_restored", None) is None:
            stepped.append(1)  # the liquid's initial state, made anew
        return outputs(self, sim, *args, **kwargs)

    monkeypatch.setattr(Bake, "step", step)
    if effect != "snow_scene":
        monkeypatch.setattr(Bake, "outputs", initial)
    return stepped


@pytest.mark.parametrize("way", ["overlap", "before_step", "synchronous"])
@pytest.mark.parametrize("effect", ["snow_scene", "liquid_scene", "sparse_liquid_scene"])
def test_io_error_at_every_write_step(effect, way, request, monkeypatch):
    """*way*: Write While Simulating on with each frame's checkpoint written on the writer
    thread beside its files (``VOXFX_CHECKPOINT=overlap``), on with it durable before the next
    frame steps (``before_step``, the default), or off."""
    folder, job = request.getfixturevalue(effect)
    bpy.context.scene.voxfx.write_while_simulating = way != "synchronous"
    monkeypatch.setenv("VOXFX_CHECKPOINT", "overlap" if way == "overlap" else "before_step")
    stepped = count_steps(monkeypatch, effect)
    fsio.reset_faults()
    assert run(job()).state == "FINISHED"
    labels = fsio.fault_labels()
    reference = frame_files(folder)
    assert len(reference) == 3 * (3 if effect == "snow_scene" else 2)
    kind = "snow" if effect == "snow_scene" else "flip"
    lost = []
    for k in range(1, len(labels) + 1):
        BakeCache(folder, folder.name, kind=kind).free()
        monkeypatch.setenv(fsio.FAULT_ENV, str(k))
        fsio.reset_faults()
        stepped.clear()
        failed = run(job())
        monkeypatch.delenv(fsio.FAULT_ENV)
        assert failed.state == "FAILED" and "is full" in failed.error and "Internal error" not in failed.error, \
            (k, failed.error)
        assert not [p.name for p in folder.iterdir() if fsio.is_temporary(p.name)], k
        done = BakeCache(folder, folder.name, kind=kind).frames_done()
        simulated = list(stepped)
        stepped.clear()
        resumed = run(job())
        lost.append(len(set(simulated) & set(stepped)))  # frames simulated by both bakes
        assert lost[-1] <= allowed_loss(way, labels, k), (k, labels[k - 1], lost[-1])
        assert resumed.state == "FINISHED", (k, resumed.error)
        expected = f"baked frames {len(done) + 1}-3" if len(done) < 2 else "baked frames 3"
        if len(done) == 3:
            expected = "frames 1-3 were already baked"
        assert resumed.result.summary == expected, (k, done, resumed.result.summary)
        assert not any("runs again from frame" in n for n in resumed.result.notes) or not done, k
        assert frame_files(folder) == reference, k
    # a failure costs at most the frame in flight (overlap: and the frame being written,
    # until its checkpoint is recorded), and one while simulating or checkpointing it does
    assert max(lost) == (2 if way == "overlap" else 1), lost


def test_snow_bake_killed_after_a_frame_is_renamed_and_after_its_state(snow_scene):
    """kill -9 in a child Blender (the CLI) at the two steps that lost frames before."""
    folder, job = snow_scene
    fsio.reset_faults()
    assert run(job()).state == "FINISHED"
    labels = fsio.fault_labels()
    reference = frame_files(folder)
    bpy.ops.voxfx.snow_free()
    bpy.ops.wm.save_mainfile()
    steps = [labels.index("frame 2 renamed") + 1, labels.index("state 2 written") + 1]
    for k in steps + [steps[-1] + 1]:  # and right after frame 2's manifest
        env = dict(os.environ, VOXFX_BACKEND="cpu", **{fsio.FAULT_ENV: f"{k}:exit"})
        r = subprocess.run([sys.executable, "-m", "tools.cli", "--blend", bpy.data.filepath, "snow"], cwd=ROOT,
                           capture_output=True, text=True, timeout=300, env=env)
        assert r.returncode == 137, r.stdout[-800:] + r.stderr[-800:]
        done = BakeCache(folder, "snow", kind="snow").frames_done()
        resumed = run(job())
        assert resumed.state == "FINISHED", resumed.error
        assert resumed.result.summary.startswith(f"baked frames {len(done) + 1}"), (k, done, resumed.result.summary)
        assert frame_files(folder) == reference, k
        bpy.ops.voxfx.snow_free()


@pytest.mark.parametrize("way", ["overlap", "before_step"])
def test_liquid_killed_while_a_frame_is_written_resumes_from_its_checkpoint_once_recorded(liquid_scene, monkeypatch,
                                                                                          way):
    """kill -9 in a child Blender (the CLI, Write While Simulating on) while the writer
    thread writes frame 2 (its checkpoint and files: ``overlap``) and after it renamed its
    files. Once frame 2's checkpoint is recorded the next Bake rewrites frame 2 from it and
    simulates only frame 3; killed while that checkpoint is still being written (on the
    writer thread, beside the files: staged, renamed), it simulates frames 2 and 3. With
    ``VOXFX_CHECKPOINT=before_step`` (the default) the checkpoint is recorded before frame 3 steps."""
    folder, job = liquid_scene
    monkeypatch.setenv("VOXFX_CHECKPOINT", "overlap" if way == "overlap" else "before_step")
    fsio.reset_faults()
    assert run(job()).state == "FINISHED"
    labels = fsio.fault_labels()
    reference = frame_files(folder)
    bpy.ops.voxfx.flip_free()
    bpy.ops.wm.save_mainfile()
    first_file = next(i for i, label in enumerate(labels) if label.startswith("liquid_0002."))
    recorded = labels.index("state 2 written") + 1  # its manifest save: the checkpoint is recorded
    assert labels[recorded] == "manifest saved" and recorded < labels.index("frame 2 renamed")
    if way == "overlap":  # staged beside the files, renamed and recorded after them
        assert labels.index("state 2 staged") < first_file < recorded
        kills = {labels.index("state 2 staged") + 1: [2, 3], first_file + 1: [2, 3], recorded: [2, 3],
                 recorded + 1: [3], labels.index("frame 2 renamed") + 1: [3]}
    else:
        assert recorded < first_file  # durable before the next frame, before the files
        kills = {first_file + 1: [3], labels.index("frame 2 renamed") + 1: [3]}
    stepped = count_steps(monkeypatch, "liquid_scene")
    for k, again in kills.items():
        env = dict(os.environ, VOXFX_BACKEND="cpu", **{fsio.FAULT_ENV: f"{k}:exit"})
        r = subprocess.run([sys.executable, "-m", "tools.cli", "--blend", bpy.data.filepath, "flip"], cwd=ROOT,
                           capture_output=True, text=True, timeout=300, env=env)
        assert r.returncode == 137, r.stdout[-800:] + r.stderr[-800:]
        assert BakeCache(folder, "liquid", kind="flip").frames_done() == [1], k
        stepped.clear()
        resumed = run(job())
        assert resumed.state == "FINISHED", resumed.error
        assert resumed.result.summary == "baked frames 2-3" and stepped == again, (k, labels[k - 1], stepped)
        assert frame_files(folder) == reference, k
        bpy.ops.voxfx.flip_free()


@pytest.mark.parametrize("value", ["on", "off"])
def test_cli_sets_write_while_simulating(value):
    """``--write-while-simulating on|off`` sets the scene's setting for the snow and liquid
    bakes (default on: the writer thread)."""
    from voxfx.addon import cli

    with voxfx_registered():
        scene = bpy.context.scene
        assert scene.voxfx.write_while_simulating is True
        for command in ("snow", "flip"):
            scene.voxfx.write_while_simulating = value == "off"
            args = cli.build_parser().parse_args([command, "--write-while-simulating", value])
            cli._set_cache_format(args, scene)
            assert scene.voxfx.write_while_simulating is (value == "on")
            unset = cli.build_parser().parse_args([command])
            cli._set_cache_format(unset, scene)  # not given: the scene's setting stays
            assert scene.voxfx.write_while_simulating is (value == "on")
