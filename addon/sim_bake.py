"""One way to drive a simulation bake through its cache: resume, repair, checkpoints.

``simulate`` is the frame loop that the snow and liquid bakes share. Given the cache's
``ResumePlan`` (frames missing or damaged, checkpoints that check out) it restores the
newest usable state up to the first frame to do (an unreadable or ill-fitting
checkpoint is noted and an older one, or frame 1, used instead), then advances frame by
frame up to the last frame to do, writing each frame to do with its state. Frames that
are already whole are stepped through, not rewritten. A frame to do that has a
checkpoint of its own (written before its files, which a kill cut short) is rewritten
from it, not simulated: a checkpoint holds everything the frame's files are computed
from (``restored_outputs``, below). A bake killed at any instant therefore resumes
after its last recorded frame, simulating again at most the frame that was being
simulated and, with the writer thread, the frame it was writing until that frame's
checkpoint is recorded (``cache_writer``), and a damaged frame N is re-baked from the
nearest checkpoint before N, not from the start.

A simulation whose ``restore`` may leave its frame's outputs unknown (a liquid
checkpoint written before it held the grid velocity) sets ``restored_outputs`` False;
that checkpoint then only serves to simulate the frames after it.

``run`` is how an effect's operator uses it: read settings → extract → run → write back.
The operator builds the effect's kernel-side bake object (``kernels/flip/bake.py``,
``kernels/snow/bake.py``: arrays and settings in, ``new_simulation``, ``step``, ``outputs``)
and passes it with the frame's file writers (arrays → files) and, where the step needs
the scene per frame (moving bodies), ``scene_inputs(frame)``.

No ``bpy`` here: the effects pass closures that talk to the scene. The array work
(building the simulation, stepping a frame, its output arrays and checkpoint) is
yielded as ``jobs.Kernel`` items, which the interactive path runs on a worker thread:
a cancel stops it inside the frame, and the cache keeps its last complete frame.
"""

from __future__ import annotations

from typing import Callable

from .cache import BakeCache, ResumePlan, frame_ranges
from .cache_writer import FrameWriter
from .jobs import Kernel


def simulate(cache: BakeCache, plan: ResumePlan, make_sim: Callable[..., object],
             advance: Callable[[object, int], object], writers: Callable[[object, object], dict], *,
             first_frame_is_initial: bool, background: bool = True):
    """Job generator for the frames of *plan*; returns (frames written, the simulation).

    *make_sim(progress)* builds a fresh simulation in its initial state (arrays only);
    *advance(sim, frame)* steps it from frame − 1 to *frame*: it may read the scene (main
    thread) and return either the progress line or a function ``step(progress) -> line``
    that does the stepping on arrays only (run as a ``Kernel``); *writers(sim, progress)*
    gives the frame's file writers (suffix → write(path)), its arrays computed when it is
    called (in a ``Kernel`` too: a writer must not read the simulation itself, which has
    moved on by the time it runs).
    With *first_frame_is_initial* the plan's first frame shows the initial state (the
    liquid); otherwise the first frame is already one frame of simulation (the snow).
    With *background* the files are written on a writer thread while the next frame is
    simulated (``cache_writer.FrameWriter``: the checkpoint recorded before the files,
    recorded in order); the frames are all recorded when this returns, and a cancel or
    error waits for the frame in flight. What a kill costs (never a recorded frame): with
    *background*, at most the frame being simulated (the checkpoint is durable before the
    next step; a frame whose files were cut short is rewritten from it), with
    ``VOXFX_CHECKPOINT=overlap`` (the checkpoint written on the thread too) also the frame
    being written until its checkpoint is recorded; without, the frame in flight (the next
    frame only starts once this one is recorded).
    """
    if not plan.todo:
        sim = yield Kernel(make_sim, "setting up", 0.0, 1.0)
        return [], sim
    sim, at = yield from _restore(cache, plan, make_sim, before=plan.todo[0] + 1)
    writer = FrameWriter(cache) if background else None
    write = writer.write if writer is not None else cache.write_frame
    try:
        written, sim = yield from _frames(cache, plan, sim, at, make_sim, advance, writers, write,
                                          first_frame_is_initial)
        if writer is not None:
            writer.wait()  # the last frame recorded (or its error raised) before the bake ends
    finally:
        if writer is not None:
            error = writer.close()  # a cancel or failure above: the frame in flight still ends whole
            if error is not None:
                cache.note(f"Writing the last frame failed too: {error}")
    return written, sim


def _restore(cache, plan, make_sim, before: int, after: int | None = None):
    """(simulation, frame): a fresh simulation restored from the newest usable checkpoint
    of a frame < *before* (and > *after*), or (None, None). A frame to do is only restored
    from its own checkpoint if that gives its outputs (``restored_outputs``)."""
    todo = set(plan.todo)
    for frame, state in cache.states(plan, before=before, after=after):
        candidate = yield Kernel(make_sim, "setting up", 0.0, 0.0)
        try:
            candidate.restore(state)
        except (ValueError, KeyError, TypeError, IndexError) as e:
            cache.note(f"The checkpoint of frame {frame} does not fit this bake "
                       f"({type(e).__name__}: {str(e)[:100]}); using an older one")
            continue
        if frame in todo and not getattr(candidate, "restored_outputs", True):
            continue  # it resumes the frames after it, but cannot rewrite its own: simulate that one
        return candidate, frame
    return None, None


def _frames(cache, plan, sim, at, make_sim, advance, writers, write, first_frame_is_initial):
    """``simulate``'s frame loop from the restored simulation (None: a fresh one); returns
    (frames written, the simulation). *write(frame, files, state)* records a frame (state
    None: its checkpoint is already recorded, the frame is rewritten from it)."""
    todo = set(plan.todo)
    written = []
    if sim is not None and at in todo:  # restored from the checkpoint of a frame whose files were cut short
        yield from _rewrite(sim, at, writers, write, written)
    if sim is None:
        if plan.todo[0] > plan.start:
            cache.note(f"No usable checkpoint before frame {plan.todo[0]}: the simulation runs again from "
                       f"frame {plan.start} (frames that are already whole are not rewritten)")
        sim = yield Kernel(make_sim, "setting up", 0.0, 0.0)
        at = plan.start - 1
        if first_frame_is_initial:
            at = plan.start
            if plan.start in todo:
                files, state = yield Kernel(lambda progress: (writers(sim, progress), sim.checkpoint()),
                                            f"frame {plan.start}: output", 0.0, 0.0)
                write(plan.start, files, state)
                written.append(plan.start)
                yield 1 / max(1, plan.last_todo - plan.start + 1), f"frame {plan.start}: initial state"
    last = plan.last_todo
    own = set(plan.checkpoints) & todo
    for frame in range(at + 1, last + 1):
        a, b = (frame - at - 1) / max(1, last - at), (frame - at) / max(1, last - at)
        if frame in own:  # its checkpoint is recorded, its files are not: rewrite it, no step
            restored, _ = yield from _restore(cache, plan, make_sim, before=frame + 1, after=frame - 1)
            if restored is not None:
                sim = restored
                yield from _rewrite(sim, frame, writers, write, written)
                yield b, f"frame {frame}: rewritten from its checkpoint"
                continue
        message = advance(sim, frame)  # the scene's part of the step, here
        if callable(message):
            message = yield Kernel(message, f"frame {frame}", a, a + 0.9 * (b - a))
        if frame in todo:  # a complete frame only: a cancel above leaves the cache as it was
            files, state = yield Kernel(lambda progress, sim=sim: (writers(sim, progress), sim.checkpoint()),
                                        f"frame {frame}: output", a + 0.9 * (b - a), b)
            write(frame, files, state)
            written.append(frame)
        yield b, message
    return written, sim


def _rewrite(sim, frame, writers, write, written):
    """Write *frame*'s files from *sim*, just restored from the frame's own checkpoint."""
    files = yield Kernel(lambda progress: writers(sim, progress), f"frame {frame}: output from its checkpoint",
                         0.0, 0.0)
    write(frame, files, None)
    written.append(frame)


def run(cache: BakeCache, plan: ResumePlan, bake, writers: Callable[[dict], dict],
        scene_inputs: Callable[[int], dict] | None = None, *, background: bool = True):
    """Job generator: the frames of *plan* from the kernel-side *bake* (its
    ``new_simulation(progress)``, ``step(sim, frame, progress=, **inputs)``,
    ``outputs(sim, progress)`` and ``first_frame_is_initial``), through ``simulate``.
    *writers(arrays)*: the frame's file writers (suffix → write(path)) from ``outputs``;
    *scene_inputs(frame)*: keyword arguments of ``step`` read from the scene on the main
    thread before the step (None: the step needs nothing from the scene); *background*:
    the scene's Write While Simulating (``simulate``). Returns (frames written, the
    simulation)."""

    def advance(sim, frame):
        inputs = scene_inputs(frame) if scene_inputs is not None else {}
        return lambda progress: bake.step(sim, frame, progress=progress, **inputs)

    def frame_writers(sim, progress):
        return writers(bake.outputs(sim, progress))

    return (yield from simulate(cache, plan, bake.new_simulation, advance, frame_writers,
                                first_frame_is_initial=bake.first_frame_is_initial, background=background))


def summary(written: list[int], plan: ResumePlan) -> str:
    """One line saying which frames this run baked, e.g. for the CLI and reports."""
    if not written:
        return f"frames {plan.start}-{plan.end} were already baked"
    return f"baked frames {frame_ranges(written)}"
