"""Frames written on a writer thread (addon/cache_writer.py) while the bake simulates the
next frame: the writing really overlaps the next step, frames are recorded in order,
bpy writers stay on the bake's thread, a writer's error is the bake's one-line error,
and a cancel waits for the frame in flight (which is then whole and recorded)."""

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from voxfx.addon import fsio, sim_bake
from voxfx.addon.cache import BakeCache, CacheError, on_main_thread
from voxfx.addon.jobs import CANCELLED, FAILED, FINISHED, JobRunner, run_inline
from voxfx.kernels.errors import Cancelled

WAIT = 20.0  # seconds: far longer than any step here; reached only when the overlap is missing


class Counter:
    def __init__(self, progress=None):
        self.frames = 0

    def checkpoint(self):
        return {"frames": np.int64(self.frames)}

    def restore(self, state):
        self.frames = int(state["frames"])


def start(folder, first=1, last=4):
    cache = BakeCache(folder, "liquid", kind="flip", checkpoint_every=2)
    return cache, cache.begin({"test": 1}, first, last)


def writer_threads():
    return [t for t in threading.enumerate() if t.name.startswith("voxfx-frame-")]


def test_a_frame_is_written_while_the_next_one_is_simulated(tmp_path):
    """Frame N's writer waits until frame N + 1's step has begun: only a writer on its own
    thread can see that (written inline, it would wait out WAIT and fail)."""
    cache, plan = start(tmp_path)
    stepping = {f: threading.Event() for f in range(1, 6)}
    seen = []

    def advance(sim, frame):
        stepping[frame].set()
        sim.frames += 1
        return f"frame {frame}"

    def writers(sim, progress=None):
        frame = sim.frames

        def write(path):
            if frame < 4 and not stepping[frame + 1].wait(WAIT):
                raise AssertionError(f"frame {frame} was written before frame {frame + 1} was stepped")
            seen.append((frame, threading.current_thread().name))
            Path(path).write_bytes(b"frame %d" % frame)
        return {".ply": write}

    written, _ = run_inline(sim_bake.simulate(cache, plan, Counter, advance, writers, first_frame_is_initial=False))
    assert written == [1, 2, 3, 4] and cache.frames_done() == [1, 2, 3, 4]
    assert [f for f, _ in seen] == [1, 2, 3, 4]
    assert all(name != threading.main_thread().name for _, name in seen)
    assert [cache.frame_path(f, ".ply").read_bytes() for f in (1, 2, 3, 4)] == [b"frame %d" % f for f in (1, 2, 3, 4)]
    assert writer_threads() == []


def test_writers_that_use_bpy_run_on_the_bakes_own_thread(tmp_path):
    cache, plan = start(tmp_path, 1, 2)
    threads = {}

    def writers(sim, progress=None):
        def record(suffix):
            def write(path):
                threads.setdefault(suffix, set()).add(threading.current_thread() is threading.main_thread())
                Path(path).write_bytes(suffix.encode())
            return write
        return {".ply": record(".ply"), ".vdb": on_main_thread(record(".vdb"))}

    advance = step_one

    run_inline(sim_bake.simulate(cache, plan, Counter, advance, writers, first_frame_is_initial=False))
    assert threads == {".ply": {False}, ".vdb": {True}}
    assert cache.frames_done() == [1, 2]


def test_a_full_disk_on_the_writer_thread_is_the_bakes_one_line_error(tmp_path, monkeypatch):
    """The injected failure (``VOXFX_FAULT_AT``) of frame 2's file, raised on the writer
    thread, fails the job with the cache's message; frame 1 stays recorded, nothing is
    left half-written."""
    cache, plan = start(tmp_path)

    advance = step_one

    writers = frame_writers

    fsio.reset_faults()
    run_inline(sim_bake.simulate(cache, plan, Counter, advance, writers, first_frame_is_initial=False))
    labels = fsio.fault_labels()
    cache, plan = start(tmp_path / "cut")
    monkeypatch.setenv(fsio.FAULT_ENV, str(labels.index("liquid_0002.ply written") + 1))
    fsio.reset_faults()
    runner = JobRunner(sim_bake.simulate(cache, plan, Counter, advance, writers, first_frame_is_initial=False))
    assert runner.run() == FAILED
    assert "is full" in runner.error and "frames up to the last recorded one are kept" in runner.error
    assert cache.frames_done() == [1]
    assert not [p.name for p in cache.folder.iterdir() if fsio.is_temporary(p.name)]
    assert writer_threads() == []


def test_a_cancel_waits_for_the_frame_in_flight_which_is_then_whole(tmp_path):
    """Esc during frame 3's step while frame 2 is still being written: the job ends
    cancelled only after frame 2 is on the disk and recorded; frame 3 never is."""
    cache, plan = start(tmp_path)
    writing = threading.Event()
    release = threading.Event()

    def advance(sim, frame):
        def step(progress):
            if frame == 3:
                assert writing.wait(WAIT)
                release.set()  # let frame 2's writer go on only now: it is still in flight at the cancel
                raise Cancelled("cancelled")
            sim.frames += 1
            return ""
        return step

    def writers(sim, progress=None):
        frame = sim.frames

        def write(path):
            if frame == 2:
                writing.set()
                assert release.wait(WAIT)
            Path(path).write_bytes(b"frame %d" % frame)
        return {".ply": write}

    runner = JobRunner(sim_bake.simulate(cache, plan, Counter, advance, writers, first_frame_is_initial=False))
    assert runner.run() == CANCELLED
    assert writer_threads() == []
    assert cache.frames_done() == [1, 2] and cache.frame_path(2, ".ply").read_bytes() == b"frame 2"
    assert not cache.frame_path(3, ".ply").exists()
    assert not [p.name for p in cache.folder.iterdir() if fsio.is_temporary(p.name)]


def test_a_finished_bake_has_recorded_every_frame_before_it_returns(tmp_path):
    """The last frame is written in the background too; the bake waits for it."""
    cache, plan = start(tmp_path, 1, 3)

    advance = step_one

    def writers(sim, progress=None):
        frame = sim.frames

        def write(path):
            if frame == 3:
                threading.Event().wait(0.3)  # slower than the rest of the bake
            Path(path).write_bytes(b"x")
        return {".ply": write}

    runner = JobRunner(sim_bake.simulate(cache, plan, Counter, advance, writers, first_frame_is_initial=False))
    assert runner.run() == FINISHED
    assert cache.frames_done() == [1, 2, 3] and runner.result[0] == [1, 2, 3]


def test_start_and_finish_frame_are_write_frame(tmp_path):
    """``write_frame`` is ``start_frame`` then ``finish_frame``: the same files and
    records, and an unknown suffix is refused before anything is written."""
    cache, _ = start(tmp_path)
    cache.write_frame(1, {".ply": lambda p: Path(p).write_bytes(b"a")}, state={"v": np.int64(1)})
    cache.finish_frame(cache.start_frame(2, {".ply": lambda p: Path(p).write_bytes(b"b")}), {"v": np.int64(2)})
    data = cache.read_manifest()
    assert sorted(data["frames"]) == [1, 2] and cache.frame_path(2, ".ply").read_bytes() == b"b"
    assert data["frames"][2]["liquid_0002.ply"][0] == 1
    with pytest.raises(CacheError, match="not"):
        cache.start_frame(3, {".sh": lambda p: Path(p).write_bytes(b"x")})
    assert not [p.name for p in cache.folder.iterdir() if fsio.is_temporary(p.name)]


def recording_checkpoints(cache, at_step):
    """A frame's step that notes in *at_step* the checkpoints recorded when each frame steps."""
    def advance(sim, frame):
        at_step[frame] = sorted(cache.read_manifest()["checkpoints"])
        sim.frames += 1
        return ""
    return advance


def step_one(sim, frame):
    """A bake's step: one frame further, no notes."""
    sim.frames += 1
    return ""


def frame_writers(sim, progress=None):
    """A frame's writers: one ``.ply`` file holding "frame N"."""
    data = b"frame %d" % sim.frames
    return {".ply": lambda p: Path(p).write_bytes(data)}


def recording_writers(cache, while_writing, before_write=None):
    """A frame's writers (one ``.ply`` file) that record, for each frame, whether its checkpoint
    and the frame itself were in the manifest while its file was written (*while_writing*), then
    call *before_write(frame)* (if given) and write the file."""
    def writers(sim, progress=None):
        frame = sim.frames

        def write(path):
            data = cache.read_manifest()
            while_writing[frame] = (frame in data["checkpoints"], frame in data["frames"])
            if before_write is not None:
                before_write(frame)
            Path(path).write_bytes(b"frame %d" % frame)
        return {".ply": write}
    return writers


@pytest.mark.parametrize("mode", ["before_step", "legacy"])
def test_a_frames_checkpoint_is_recorded_before_the_next_frame_steps(tmp_path, monkeypatch, mode):
    """Issue 21 §1 with the writer thread and ``VOXFX_CHECKPOINT=before_step`` (or the
    legacy writes): frame N's checkpoint is durable and recorded before frame N + 1 is
    simulated (a kill then costs at most N + 1), and while the thread writes N's files N
    is not recorded but its checkpoint is."""
    monkeypatch.setenv("VOXFX_CHECKPOINT", mode)
    cache = BakeCache(tmp_path, "liquid", kind="flip", checkpoint_every=0)
    plan = cache.begin({"test": 1}, 1, 4)
    at_step, while_writing = {}, {}
    advance = recording_checkpoints(cache, at_step)

    writers = recording_writers(cache, while_writing)

    fsio.reset_faults()
    run_inline(sim_bake.simulate(cache, plan, Counter, advance, writers, first_frame_is_initial=False))
    assert [label for label in fsio.fault_labels() if label.startswith("state ")] == \
        [f"state {f} {step}" for f in (1, 2, 3, 4) for step in (("staged",) if mode != "legacy" else ()) + ("written",)]
    assert all(frame - 1 in at_step[frame] for frame in (2, 3, 4)), at_step
    assert while_writing == {f: (True, False) for f in (1, 2, 3, 4)}
    assert sorted(cache.read_manifest()["checkpoints"]) == [4] and cache.frames_done() == [1, 2, 3, 4]
    assert sorted(p.name for p in tmp_path.glob("liquid_state_*.npz")) == ["liquid_state_0004.npz"]


def test_a_frames_checkpoint_is_written_beside_its_files_while_the_next_frame_steps(tmp_path, monkeypatch):
    """``VOXFX_CHECKPOINT=overlap`` (opt-in): frame N's checkpoint is written on the
    writer thread while frame N + 1 steps, at the same time as N's files (N's file writer
    waits until the checkpoint is staged: written one after the other, it would wait out
    WAIT), and recorded before N's files are renamed; each checkpoint once, in order.
    When a frame steps, the checkpoint of one of the two frames before it is recorded (a
    kill costs at most those two: ``test_cache_faults``)."""
    monkeypatch.setenv("VOXFX_CHECKPOINT", "overlap")
    cache = BakeCache(tmp_path, "liquid", kind="flip", checkpoint_every=0)
    plan = cache.begin({"test": 1}, 1, 4)
    at_step, while_writing = {}, {}
    advance = recording_checkpoints(cache, at_step)

    def staged(frame):  # the checkpoint's own thread staged it before the file is written
        deadline = time.monotonic() + WAIT
        while f"state {frame} staged" not in fsio.fault_labels():
            if time.monotonic() > deadline:
                raise AssertionError(f"frame {frame}'s checkpoint was not written beside its file")
            time.sleep(0.002)

    writers = recording_writers(cache, while_writing, staged)

    fsio.reset_faults()
    run_inline(sim_bake.simulate(cache, plan, Counter, advance, writers, first_frame_is_initial=False))
    labels = fsio.fault_labels()
    assert [label for label in labels if label.startswith("state ")] == \
        [f"state {f} {step}" for f in (1, 2, 3, 4) for step in ("staged", "written")]
    for f in (1, 2, 3, 4):  # staged, the file flushed, the checkpoint renamed and recorded, the file renamed
        at = labels.index(f"state {f} staged")
        assert labels[at:at + 5] == [f"state {f} staged", f"liquid_{f:04d}.ply written", f"state {f} written",
                                     "manifest saved", f"frame {f} renamed"], labels
    assert all({frame - 2, frame - 1} & set(at_step[frame]) for frame in (3, 4)), at_step
    assert while_writing == {f: (False, False) for f in (1, 2, 3, 4)}
    assert sorted(cache.read_manifest()["checkpoints"]) == [4] and cache.frames_done() == [1, 2, 3, 4]
    assert writer_threads() == []
    restored = Counter()
    restored.restore(next(cache.states(cache.begin({"test": 1}, 1, 4), before=5))[1])
    assert restored.frames == 4


class Ring:
    """Where a ``HostState``'s block goes back (``kernels.checkpoint.HostRing.give_back``)."""

    def __init__(self):
        self.back = []

    def give_back(self, block):
        self.back.append((block, threading.current_thread().name))


@pytest.mark.parametrize("mode", ["overlap", "before_step"])
def test_a_checkpoints_host_block_is_given_back_once_written_and_never_before(tmp_path, monkeypatch, mode):
    """``HostState.release``: each frame's block goes back after its checkpoint file is
    written (the checkpoint then reads back equal to what was gathered), exactly once, and
    on a failure too (a full disk at frame 3's checkpoint)."""
    from voxfx.kernels.checkpoint import HostState

    monkeypatch.setenv("VOXFX_CHECKPOINT", mode)
    cache, plan = start(tmp_path)
    ring = Ring()
    written_when_back = {}

    class Gathered(Counter):
        def checkpoint(self):
            block = np.full(32, self.frames, np.float32)
            return HostState({"frames": np.int64(self.frames), "x": block}, block, ring)

    real = ring.give_back

    def give_back(block):
        frame = int(block[0])
        path = cache.checkpoint_path(frame)
        written_when_back[frame] = path.exists() and bool((np.load(path)["x"] == frame).all())
        real(block)
    ring.give_back = give_back

    advance = step_one

    writers = frame_writers

    run_inline(sim_bake.simulate(cache, plan, Gathered, advance, writers, first_frame_is_initial=False))
    assert sorted(int(b[0]) for b, _ in ring.back) == [1, 2, 3, 4]
    assert written_when_back == {1: True, 2: True, 3: True, 4: True}
    fsio.reset_faults()
    run_inline(sim_bake.simulate(*start(tmp_path / "count"), Gathered, advance, writers,
                                 first_frame_is_initial=False))
    labels = fsio.fault_labels()
    ring.back.clear()
    cache, plan = start(tmp_path / "cut")
    first = "state 3 staged" if mode == "overlap" else "state 3 written"
    monkeypatch.setenv(fsio.FAULT_ENV, str(labels.index(first) + 1))
    fsio.reset_faults()
    runner = JobRunner(sim_bake.simulate(cache, plan, Gathered, advance, writers, first_frame_is_initial=False))
    assert runner.run() == FAILED and "is full" in runner.error
    # each block back once: frame 3's after its failure; frame 4's too when it was gathered
    # (with the overlap it is, while frame 3 is written; the failure reaches its hand-over)
    assert sorted(int(b[0]) for b, _ in ring.back) == ([1, 2, 3, 4] if mode == "overlap" else [1, 2, 3])
    assert cache.frames_done() == [1, 2]
    assert not [p.name for p in cache.folder.iterdir() if fsio.is_temporary(p.name)]
    assert writer_threads() == []


def test_a_checkpoint_is_kept_until_its_frame_is_recorded(tmp_path):
    """Checkpoint Every 0 keeps the newest state only, but never removes the checkpoint
    of a frame not recorded yet: that frame is rewritten from it after a crash."""
    cache = BakeCache(tmp_path, "liquid", kind="flip", checkpoint_every=0)
    cache.begin({"test": 1}, 1, 4)
    cache.write_state(1, {"v": np.int64(1)})
    cache.write_state(2, {"v": np.int64(2)})
    cache.write_frame(1, {".ply": lambda p: Path(p).write_bytes(b"1")})
    assert sorted(cache.read_manifest()["checkpoints"]) == [2]  # frame 1 recorded: its state goes
    cache.write_state(3, {"v": np.int64(3)})
    cache.write_frame(3, {".ply": lambda p: Path(p).write_bytes(b"3")})
    assert sorted(cache.read_manifest()["checkpoints"]) == [2, 3]  # frame 2 is not recorded: its state stays
    assert sorted(p.name for p in tmp_path.glob("liquid_state_*.npz")) == ["liquid_state_0002.npz",
                                                                         "liquid_state_0003.npz"]
    plan = cache.begin({"test": 1}, 1, 4)
    assert plan.todo == [2, 4] and plan.checkpoints == [2, 3]
