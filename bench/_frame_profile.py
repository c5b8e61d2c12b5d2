"""``bench/flip_sparse.py --frames N --profile-frames A-B --timeline-frames A-B`` (helper h17b): where
the host time of the frames A…B goes (issue 24: the 8M Fast frames after the splash, 31–36 ms
against the ≤ 30 ms goal).

``FrameProfile``: cProfile around those frames' ``step`` and (``call``) their level set, its functions
ranked by their own host time (tottime) and by time inside them (cumtime), per frame; for the
largest own times, their callers (h21h: which of the project's functions the CuPy calls serve). A host read
(``ndarray.get``, ``Event.synchronize``, ``float`` of a device scalar) counts the wait for the device
as its own time: those lines are the device's, the rest the host's Python, CuPy's launches and
the driver's allocations. The profiler's own cost (~1 µs a Python call) is in every number.

``FrameTimeline``: ``flip_sparse_pressure_timeline``'s marks inside ``solve_pressure`` (the host
clock and a CUDA event at each, no extra syncs) in those frames' substeps; each piece's (mark to
mark) medians, host Δ and device Δ, as that bench prints them for the row. A piece whose host Δ
exceeds its device Δ while the device is not behind is where the device waits for the host."""

from __future__ import annotations

import cProfile
import io
import pstats
import time
from collections import defaultdict


def frame_range(text: str | None) -> range:
    """``A-B`` (or ``A``) → range(A, B + 1); None → an empty range."""
    if not text:
        return range(0)
    first, _, last = text.partition("-")
    return range(int(first), int(last or first) + 1)


class FrameProfile:
    def __init__(self, frames: range, top: int = 40, callers: int = 14):
        self.frames, self.top, self.callers = frames, top, callers
        self.profile = cProfile.Profile()
        self.profiled = 0
        self.wall = 0.0
        self.level_set_wall = 0.0

    def call(self, frame, fn, *args):
        """``fn(*args)`` (the frame's level set), profiled into the same profile when *frame* is one of
        the frames."""
        if frame not in self.frames:
            return fn(*args)
        t0 = time.perf_counter()
        self.profile.enable()
        try:
            return fn(*args)
        finally:
            self.profile.disable()
            self.level_set_wall += (time.perf_counter() - t0) * 1e3

    def step(self, sim, frame, frame_dt):
        """``sim.step(frame_dt)``, profiled when *frame* is one of the frames."""
        if frame not in self.frames:
            return sim.step(frame_dt)
        t0 = time.perf_counter()
        self.profile.enable()
        try:
            return sim.step(frame_dt)
        finally:
            self.profile.disable()
            self.wall += (time.perf_counter() - t0) * 1e3
            self.profiled += 1

    def lines(self) -> list:
        if not self.profiled:
            return []
        out = [f"profile of frames {self.frames.start}-{self.frames.stop - 1} ({self.profiled} frames, step "
               f"{self.wall / self.profiled:.2f} ms + level set {self.level_set_wall / self.profiled:.2f} ms a frame "
               "under the profiler): ms a frame"]
        for key, title in (("tottime", "own time"), ("cumtime", "time inside")):
            stream = io.StringIO()
            stats = pstats.Stats(self.profile, stream=stream)
            stats.sort_stats(key)
            out.append(f"  by {title} ({key}): calls a frame | own ms | inside ms | function")
            rows = sorted(stats.stats.items(), key=lambda kv: kv[1][2 if key == "tottime" else 3], reverse=True)
            for (path, line, name), (_, calls, own, inside, _) in rows[:self.top]:
                where = "/".join(path.split("/")[-2:])
                out.append(f"    {calls / self.profiled:8.1f} | {own * 1e3 / self.profiled:7.3f} | "
                           f"{inside * 1e3 / self.profiled:7.3f} | {where}:{line}({name})")
        out.append("  callers of the largest own times: calls a frame | own ms | inside ms | caller")
        stats = pstats.Stats(self.profile)
        rows = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)
        for (path, line, name), (_, _, own, _, callers) in rows[:self.callers]:
            out.append(f"    {'/'.join(path.split('/')[-2:])}:{line}({name}) {own * 1e3 / self.profiled:.3f} ms:")
            by = sorted(callers.items(), key=lambda kv: kv[1][2], reverse=True)
            for (cpath, cline, cname), (_, ncalls, ctt, cct) in by[:6]:
                out.append(f"      {ncalls / self.profiled:8.1f} | {ctt * 1e3 / self.profiled:7.3f} | "
                           f"{cct * 1e3 / self.profiled:7.3f} | {'/'.join(cpath.split('/')[-2:])}:{cline}({cname})")
        return out


class FrameTimeline:
    def __init__(self, frames: range):
        self.frames, self.timeline = frames, None
        if len(frames):  # instrumented only when asked (the marks' events cost the host a little)
            import flip_sparse_pressure_timeline as timeline

            self.timeline = timeline
            timeline.instrument()
        self.pieces = defaultdict(list)
        self.substeps = 0

    def begin(self, frame):
        if self.timeline is None:
            return
        self.timeline._marks.clear()
        self.timeline._on[0] = frame in self.frames

    def end(self, frame):
        """After the frame's sync: its substeps' pieces kept."""
        import cupy as cp

        if self.timeline is None:
            return
        on, self.timeline._on[0] = self.timeline._on[0], False
        if not on:
            return
        marks, runs = self.timeline._marks, []
        for label, host, event in marks:  # a substep's marks start at solve_pressure's entry
            if label == "solve_pressure >" or not runs:
                runs.append([])
            runs[-1].append((label, host, event))
        for run in runs:
            self.substeps += 1
            seen = defaultdict(int)
            for (a, ha, ea), (b, hb, eb) in zip(run, run[1:]):
                key = f"{a} .. {b}"
                seen[key] += 1
                key = key if seen[key] == 1 else f"{key} #{seen[key]}"
                self.pieces[key].append(((hb - ha) * 1e3, cp.cuda.get_elapsed_time(ea, eb)))
            first, last = run[0], run[-1]
            self.pieces["(whole: first to last mark)"].append(
                ((last[1] - first[1]) * 1e3, cp.cuda.get_elapsed_time(first[2], last[2])))
        marks.clear()

    def lines(self) -> list:
        import numpy as np

        if not self.substeps:
            return []
        out = [f"pressure timeline of frames {self.frames.start}-{self.frames.stop - 1} ({self.substeps} solves): "
               "piece (mark .. mark) | host Δ ms | device Δ ms (medians) | solves"]
        for key, vals in self.pieces.items():
            a = np.median(np.array(vals), axis=0)
            out.append(f"  {key:52s} | {a[0]:7.3f} | {a[1]:7.3f} | {len(vals)}")
        return out
