"""A failure at *every* durable write step of a simulation bake loses nothing.

A small deterministic simulation is baked through the real cache and the real frame
loop (``sim_bake.simulate``). ``VOXFX_FAULT_AT=k`` makes the k-th write step fail: as a
full disk (``OSError``, in-process) or as ``kill -9`` (``os._exit`` in a child process,
no clean-up at all), with the writer thread (Write While Simulating) and without. After
each, the next bake must resume from the last recorded frame (a frame whose checkpoint
is recorded but whose files were cut short is rewritten from its checkpoint, not
simulated; never restarting from the first frame), leave no temporaries, and end with
frame files byte-identical to an uninterrupted bake. What it simulates again: with the
writer thread writing each frame's checkpoint beside its files while the next frame
steps (``VOXFX_CHECKPOINT=overlap``, opt-in), at most the frame being written and the
frame being simulated, and only the frame being simulated once the checkpoint is
recorded; with the checkpoint durable before the next step (``before_step``, the default
with the variable unset, and the ``legacy`` writes) and without the thread, at most the
frame in flight.
The same for Free: cut at any step, the next Free finishes it.
"""

import multiprocessing
import os
import re
from pathlib import Path

import numpy as np
import pytest

from voxfx.addon import fsio, sim_bake
from voxfx.addon.cache import CacheError, BakeCache
from voxfx.addon.jobs import run_inline

START, END, EVERY = 1, 5, 2
# way: (background, VOXFX_CHECKPOINT)
WAYS = {"overlap": (True, "overlap"), "before_step": (True, ""), "legacy": (True, "legacy"),
        "synchronous": (False, "")}


class Toy:
    """A deterministic 'simulation' with a state that depends on every earlier frame."""

    def __init__(self, progress=None):
        self.x = np.zeros(256, np.float64)
        self.frames = 0

    def checkpoint(self):
        return {"x": self.x.copy(), "frames": np.int64(self.frames)}

    def restore(self, state):
        if state["x"].shape != self.x.shape:
            raise ValueError(f"state has {state['x'].shape}, expected {self.x.shape}")
        self.x = state["x"].copy()
        self.frames = int(state["frames"])


def advance(sim, frame):
    sim.x = 0.5 * sim.x + np.sin(np.arange(256) * frame)
    sim.frames += 1
    return f"frame {frame}"


def writers(sim, progress=None):
    """The frame's files from its values now (the frame is written while the next one is
    simulated: ``sim_bake.simulate``'s contract)."""
    x, frames = sim.x.astype("<f8").tobytes(), sim.frames
    return {".ply": lambda p: Path(p).write_bytes(x),
            ".vdb": lambda p: Path(p).write_bytes(b"frames=%d" % frames)}


def bake(folder, first_frame_is_initial=False, background=True, log=None):
    """Run the whole bake; return (frames written, notes). With *log* (a list, or a file
    path for a child process that is killed) every frame simulated is appended to it."""
    cache = BakeCache(folder, "liquid", kind="flip", checkpoint_every=EVERY)
    plan = cache.begin({"toy": 1}, START, END)
    step = advance
    if log is not None:
        def step(sim, frame):
            if isinstance(log, list):
                log.append(frame)
            else:  # one unbuffered write per frame: it is on the disk whenever the process is killed
                handle = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
                os.write(handle, b"%d\n" % frame)
                os.close(handle)
            return advance(sim, frame)
    job = sim_bake.simulate(cache, plan, Toy, step, writers, first_frame_is_initial=first_frame_is_initial,
                            background=background)
    written, _ = run_inline(job)
    return written, cache.notes


def resimulated(before, after):
    """Frames a failure cost: simulated by the failed bake and again by the resumed one."""
    return len(set(before) & set(after))


def frame_files(folder):
    return {p.name: p.read_bytes() for p in sorted(Path(folder).iterdir()) if p.suffix in (".ply", ".vdb")}


def count_steps(folder, fn):
    fsio.reset_faults()
    fn(folder)
    return fsio.fault_count()


def way_env(way):
    """The environment of *way* (``WAYS``) for this process."""
    mode = WAYS[way][1]
    if mode:
        os.environ["VOXFX_CHECKPOINT"] = mode
    else:
        os.environ.pop("VOXFX_CHECKPOINT", None)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted bake's frames, and each way's write steps (their labels): a
    frame's checkpoint is recorded before its files, one manifest write more a frame."""
    folder = tmp_path_factory.mktemp("reference")
    labels = {}
    try:
        for way, (background, _) in WAYS.items():
            way_env(way)
            count_steps(tmp_path_factory.mktemp(way), lambda f, b=background: bake(f, background=b))
            labels[way] = fsio.fault_labels()
        way_env("overlap")
        count_steps(folder, bake)
    finally:
        os.environ.pop("VOXFX_CHECKPOINT", None)
    return frame_files(folder), labels


def allowed_loss(way, labels, k):
    """Frames a failure at step *k* (of a bake whose write steps are *labels*) may cost
    *way*: with the checkpoint written beside the files (overlap), 2 while a frame's files
    or checkpoint are written, until that checkpoint is recorded (``state N written`` and
    the manifest after it); else, and in the other ways, 1."""
    if way != "overlap":
        return 1
    match = re.fullmatch(r"state (\d+) (staged|written)|\w+_(\d+)\.\w+ written", labels[k - 1])
    if match is None:
        return 1
    frame = int(match.group(1) or match.group(3))
    return 2 if k <= labels.index(f"state {frame} written") + 1 else 1


def recorded(folder):
    return BakeCache(folder, "liquid", kind="flip", checkpoint_every=EVERY).frames_done()


def test_reference_bake_is_whole(reference):
    files, labels = reference
    steps = len(labels["overlap"])
    assert [label for label in labels["overlap"] if label.endswith(" 2 written") or " 2 " in label] == \
        ["state 2 staged", "state 2 written", "frame 2 renamed"]  # staged beside the files, recorded before them
    assert sorted(files) == [f"liquid_{f:04d}{s}" for f in range(START, END + 1) for s in (".ply", ".vdb")]
    assert steps >= 6 * (END - START + 1)  # each frame: 2 files, rename, state, manifest, prune


@pytest.mark.parametrize("way", sorted(WAYS))
def test_io_error_at_every_step_loses_nothing(reference, tmp_path, monkeypatch, way):
    files, labels = reference[0], reference[1][way]
    background, mode = WAYS[way]
    monkeypatch.setenv("VOXFX_CHECKPOINT", mode)  # "": the default way (checkpoint_mode)
    lost = []
    for k in range(1, len(labels) + 1):
        folder = tmp_path / f"k{k}"
        monkeypatch.setenv(fsio.FAULT_ENV, str(k))
        fsio.reset_faults()
        simulated, again = [], []
        with pytest.raises(CacheError, match="full"):
            bake(folder, background=background, log=simulated)
        monkeypatch.delenv(fsio.FAULT_ENV)
        left = [p.name for p in folder.iterdir() if fsio.is_temporary(p.name)]
        assert left == [], f"step {k}: temporaries left: {left}"
        done = recorded(folder)
        assert done == list(range(START, START + len(done))), f"step {k}: recorded frames {done}"
        written, _ = bake(folder, background=background, log=again)
        assert written == list(range(START + len(done), END + 1)), f"step {k}: re-baked {written} after {done}"
        assert again == list(range(again[0], END + 1)) if again else True, f"step {k}: simulated {again}"
        lost.append(resimulated(simulated, again))
        assert lost[-1] <= allowed_loss(way, labels, k), (k, labels[k - 1], lost[-1])
        assert frame_files(folder) == files, f"step {k}: frames differ from an uninterrupted bake"
    # at most the frame in flight is simulated again (with the checkpoint beside the files:
    # and the frame being written, until its checkpoint is recorded), and that does happen
    assert max(lost) == (2 if way == "overlap" else 1), lost


def _child_bake(folder, k, background=True, log=None, mode=""):
    """Bake in a child process that ``fault_point`` kills (``os._exit(137)``) at write step
    *k*; return its exit code. The children fork from one ``forkserver`` process that has
    imported the bake once (a new Python a step took ~0.5 s)."""
    from tests.unit import killed_bake

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([killed_bake.__name__])
    child = context.Process(target=killed_bake.bake_until_killed, args=(str(folder), k, background, log, mode))
    child.start()
    child.join(60)
    if child.exitcode is None:  # hung: end it, and the test fails on its exit code
        child.kill()
        child.join()
        return None
    return child.exitcode


@pytest.mark.parametrize("way", sorted(WAYS))
def test_kill_at_every_step_loses_at_most_the_frame_in_flight(reference, tmp_path, monkeypatch, way):
    files, labels = reference[0], reference[1][way]
    background, mode = WAYS[way]
    monkeypatch.setenv("VOXFX_CHECKPOINT", mode)  # "": the default way (checkpoint_mode)
    lost = []
    for k in range(1, len(labels) + 1):
        folder, log = tmp_path / f"k{k}", tmp_path / f"k{k}.log"
        code = _child_bake(folder, k, background, log, mode)
        assert code == 137, f"step {k}: the child was not killed at the step (exit {code})"
        done = recorded(folder)
        simulated = [int(f) for f in log.read_text().split()] if log.exists() else []
        assert done == list(range(START, START + len(done))), f"step {k}: recorded frames {done}"
        # everything whose manifest entry became durable is kept: only unrecorded frames are baked again
        again = []
        written, notes = bake(folder, background=background, log=again)
        assert written == list(range(START + len(done), END + 1)), f"step {k}: re-baked {written} after {done}"
        assert not any("runs again from frame" in n for n in notes) or not done, notes
        assert [p.name for p in folder.iterdir() if fsio.is_temporary(p.name)] == []
        assert frame_files(folder) == files, f"step {k}: frames differ from an uninterrupted bake"
        lost.append(resimulated(simulated, again))
        assert lost[-1] <= allowed_loss(way, labels, k), (k, labels[k - 1], lost[-1])
    assert max(lost) == (2 if way == "overlap" else 1), lost  # see test_io_error_at_every_step_loses_nothing


def test_a_damaged_frame_is_rebaked_from_the_nearest_checkpoint(reference, tmp_path):
    files, _ = reference
    bake(tmp_path)
    with open(tmp_path / "liquid_0004.ply", "r+b") as f:
        f.truncate(100)
    written, notes = bake(tmp_path)
    assert written == [4]  # from the state of frame 3 (kept: every 2nd from 1), not frame 1
    assert any("damaged" in n for n in notes)
    assert frame_files(tmp_path) == files


def test_a_damaged_frame_with_a_checkpoint_of_its_own_is_rewritten_without_simulating(reference, tmp_path):
    files, _ = reference
    bake(tmp_path)
    with open(tmp_path / "liquid_0003.vdb", "r+b") as f:  # frame 3 keeps its state (every 2nd from 1)
        f.truncate(3)
    simulated = []
    written, notes = bake(tmp_path, log=simulated)
    assert written == [3] and simulated == []
    assert frame_files(tmp_path) == files


def test_liquid_style_initial_frame_resumes_too(tmp_path):
    ref = tmp_path / "ref"
    fsio.reset_faults()
    bake(ref, first_frame_is_initial=True)
    at = fsio.fault_labels().index("liquid_0003.ply written") + 1  # frames 1 and 2 are recorded by then
    folder = tmp_path / "cut"
    fsio.reset_faults()
    os.environ[fsio.FAULT_ENV] = str(at)
    try:
        with pytest.raises(CacheError):
            bake(folder, first_frame_is_initial=True)
    finally:
        del os.environ[fsio.FAULT_ENV]
    assert recorded(folder)  # something was kept...
    written, _ = bake(folder, first_frame_is_initial=True)
    assert written and written[0] > START  # ...and not baked again
    assert frame_files(folder) == frame_files(ref)


def test_free_cut_at_any_step_is_finished_by_the_next_free(tmp_path, monkeypatch):
    steps = count_steps(tmp_path / "count", lambda f: (bake(f), BakeCache(f, "liquid", kind="flip").free()))
    bake_steps = count_steps(tmp_path / "count2", bake)
    for k in range(bake_steps + 1, steps + 1):
        folder = tmp_path / f"k{k}"
        monkeypatch.setenv(fsio.FAULT_ENV, str(k))
        fsio.reset_faults()
        bake(folder)
        with pytest.raises(CacheError):
            BakeCache(folder, "liquid", kind="flip").free()
        monkeypatch.delenv(fsio.FAULT_ENV)
        assert recorded(folder) == []  # a half-freed cache never looks like a bake
        BakeCache(folder, "liquid", kind="flip").free()
        assert not folder.exists(), f"step {k}: {sorted(p.name for p in folder.iterdir())}"


def test_move_atomic_renames_within_a_file_system_and_copies_across(tmp_path, monkeypatch):
    """The CLI moves a finished volume out of the cache: across file systems (EXDEV) it is
    copied whole under a temporary name, then renamed; the source goes only after."""
    import errno

    src, dst = tmp_path / "a.vdb", tmp_path / "out" / "b.vdb"
    dst.parent.mkdir()
    src.write_bytes(b"x" * 1000)
    fsio.move_atomic(src, dst)
    assert dst.read_bytes() == b"x" * 1000 and not src.exists()
    src.write_bytes(b"y" * 2000)
    real = os.replace
    calls = []

    def cross_device(a, b):
        calls.append((a, b))
        if Path(a) == src:
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real(a, b)

    monkeypatch.setattr(os, "replace", cross_device)
    fsio.move_atomic(src, dst)
    assert dst.read_bytes() == b"y" * 2000 and not src.exists()
    assert len(calls) == 2 and Path(calls[1][1]) == dst  # the copy went in under a temporary name
    assert sorted(p.name for p in dst.parent.iterdir()) == ["b.vdb"]
