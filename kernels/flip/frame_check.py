"""The liquid's memory looked at again before each frame of a bake (issue 12, issue 21 §6):
``FrameCheck``, which the bake's guard asks before every frame whether the next one fits.

From the bricks and particles the simulation holds now: the next frame's bricks are the
most of the grid's capacity (its channels keep the most bricks it held) and those in use
plus up to ``GROWTH``× the last frame's new ones (a wave speeds up), the particles likewise
(inflows), and the same bytes per brick and particle as the estimate before the bake
(``sparse_memory.memory_at``, or ``memory.flip_memory`` for the dense box) give the need,
against what is usable then plus what the simulation already holds (on the H200 rows the
check was 1.10–1.41× each frame's in-use peak from the second frame on). With a narrow band
the particles it holds grow as a frame ago within the liquid's, and on a GPU the pool's bytes
in use beyond the state's estimate are added to the need (``sparse_memory``'s module text
gives the fits and the replays).
"""

from __future__ import annotations

import math

import numpy as np

GROWTH = 2.0  # FrameCheck: the next frame's new bricks (and particles), at most this many times the last's


def next_frame(now: int, before: int | None) -> int:
    """Bricks (or particles) the next frame may hold: *now* plus up to ``GROWTH`` times
    what the last frame added (*before*: the count a frame ago; None: not known yet)."""
    now = int(now)
    grown = 0 if before is None else max(0, now - int(before))
    return int(math.ceil(now + GROWTH * grown))


class FrameCheck:
    """The liquid's memory looked at again before each frame of a bake (module text).

    ``need(sim)`` → (bytes the next frame needs, bytes the simulation holds now) from the
    bricks (sparse) or the box (dense) and the particles it holds, with ``next_frame``'s
    growth. *memory(bricks, particles, parts=True)* gives the stages (``memory_at`` or
    ``flip_memory``), whose ``state`` is what is held between frames; with *band* (a
    narrow band) it is also given ``kept=``, the particles the simulation holds of the
    liquid's. On a GPU (*xp* CuPy) held is at least the pool's bytes in use (the state and
    the cached solver, which the next frame reuses). Call ``seen(sim)`` after each frame
    (the counts a frame ago)."""

    def __init__(self, memory, closed: bool = True, box: int | None = None, xp=None, first: int = 0,
                 band: bool = False):
        self.memory, self.closed, self.box, self.xp, self.band = memory, closed, box, xp, bool(band)
        self.first = int(first)  # bricks before the grid is built (a new or restored simulation): the estimate's
        self.bricks = self.particles = self.kept = None

    @staticmethod
    def counts(sim) -> tuple[int, int, int, int]:
        """(bricks in use, bricks allocated, liquid particles, particles held): the grid's
        channels keep their capacity (the most bricks it held) when bricks are freed; the
        liquid's particles count those a narrow band's deep cells stand for (its update
        works on the whole liquid's cells), the particles held only the band's."""
        grid = sim.grid
        bricks = int(grid.brick_count()) if hasattr(grid, "brick_count") else 0
        liquid = getattr(sim, "liquid_particles", None)
        held = int(len(sim.pos))
        particles = max(held, int(liquid()) if liquid is not None else 0)
        return bricks, max(bricks, int(getattr(grid, "capacity", 0) or 0)), particles, held

    def need(self, sim) -> tuple[int, int]:
        used = None
        if self.xp is not None and self.xp is not np:  # on a GPU: what VoxFX's pool holds in use
            used = int(self.xp.get_default_memory_pool().used_bytes())
        need, held = self.plan(*self.counts(sim), used=used)
        return need, held if used is None else max(held, used)

    def plan(self, bricks: int, capacity: int, particles: int, kept: int | None = None,
             used: int | None = None) -> tuple[int, int]:
        """``need`` from the counts (``counts``; *kept* None: all *particles* held): (the
        next frame's bytes, the state's now). With a band, *used* (the pool's bytes in use
        now, on a GPU) beyond the state's estimate is added to the need: the frame's work
        comes on top of what is held, whatever holds it (``sparse_memory``'s module text)."""
        if not bricks:  # not built yet (a new or restored simulation)
            bricks = capacity = self.first
        later = max(capacity, next_frame(bricks, self.bricks))
        if self.closed and self.box is not None:
            later = min(later, max(capacity, int(self.box)))
        grown = next_frame(particles, self.particles)
        if self.band:  # the band's particles grow as its liquid spreads (a frame ago's growth), within the liquid
            kept = particles if kept is None else int(kept)
            more = {"kept": min(grown, next_frame(kept, self.kept))}
            now = {"kept": kept}
        else:
            more = now = {}
        stages = self.memory(later, grown, parts=True, **more)
        held = self.memory(capacity, particles, parts=True, **now)["state"]
        beyond = max(0, int(used) - int(held)) if self.band and used is not None else 0
        return int(stages["total"]) + beyond, int(held)

    def seen(self, sim) -> None:
        """After a frame: its counts are the next frame's 'a frame ago'."""
        bricks, _, particles, kept = self.counts(sim)
        self.saw(bricks, particles, kept)

    def saw(self, bricks: int, particles: int, kept: int | None = None) -> None:
        self.bricks, self.particles = int(bricks), int(particles)
        self.kept = self.particles if kept is None else int(kept)
