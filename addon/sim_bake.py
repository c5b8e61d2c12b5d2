"""One way to drive a simulation bake through its cache: resume, repair, checkpoints.

``simulate`` is the frame loop that the snow and liquid bakes share. Given the cache's
``ResumePlan`` (frames missing or damaged, checkpoints that check out) it restores the
newest usable state before the first frame to do (an unreadable or ill-fitting
checkpoint is noted and an older one, or frame 1, used instead), then advances frame by
frame up to the last frame to do, writing each frame to do with its state. Frames that
are already whole are stepped through, not rewritten. A bake killed at any instant
therefore resumes after its last recorded frame, and a damaged frame N is re-baked from
the nearest checkpoint before N, not from the start.

No ``bpy`` here: the effects pass closures that talk to the scene.
"""

from __future__ import annotations

from typing import Callable

from .cache import BakeCache, ResumePlan, frame_ranges


def simulate(cache: BakeCache, plan: ResumePlan, make_sim: Callable[[], object],
             advance: Callable[[object, int], str], writers: Callable[[object], dict], *,
             first_frame_is_initial: bool):
    """Job generator for the frames of *plan*; returns (frames written, the simulation).

    *make_sim()* builds a fresh simulation in its initial state; *advance(sim, frame)*
    steps it from frame − 1 to *frame* and returns a progress line; *writers(sim)* gives
    the frame's file writers (suffix → write(path)). With *first_frame_is_initial* the
    plan's first frame shows the initial state (the liquid); otherwise the first frame is
    already one frame of simulation (the snow).
    """
    if not plan.todo:
        return [], make_sim()
    todo = set(plan.todo)
    sim, at = None, None
    for frame, state in cache.states(plan, before=plan.todo[0]):
        candidate = make_sim()
        try:
            candidate.restore(state)
        except (ValueError, KeyError, TypeError, IndexError) as e:
            cache.note(f"The checkpoint of frame {frame} does not fit this bake "
                       f"({type(e).__name__}: {str(e)[:100]}); using an older one")
            continue
        sim, at = candidate, frame
        break
    written = []
    if sim is None:
        if plan.todo[0] > plan.start:
            cache.note(f"No usable checkpoint before frame {plan.todo[0]}: the simulation runs again from "
                       f"frame {plan.start} (frames that are already whole are not rewritten)")
        sim = make_sim()
        at = plan.start - 1
        if first_frame_is_initial:
            at = plan.start
            if plan.start in todo:
                cache.write_frame(plan.start, writers(sim), state=sim.checkpoint())
                written.append(plan.start)
                yield 1 / max(1, plan.last_todo - plan.start + 1), f"frame {plan.start}: initial state"
    last = plan.last_todo
    for frame in range(at + 1, last + 1):
        message = advance(sim, frame)
        if frame in todo:
            cache.write_frame(frame, writers(sim), state=sim.checkpoint())
            written.append(frame)
        yield (frame - at) / max(1, last - at), message
    return written, sim


def summary(written: list[int], plan: ResumePlan) -> str:
    """One line saying which frames this run baked, e.g. for the CLI and reports."""
    if not written:
        return f"frames {plan.start}-{plan.end} were already baked"
    return f"baked frames {frame_ranges(written)}"
