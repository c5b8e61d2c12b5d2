"""The narrow band's cost on the GPU (issue 24, ``kernels/flip/sparse_band.py``): the dam
break of ``bench/flip_sparse.py``'s rows with a narrow band, user frames (``step(1/24)``),
each frame's ms split into the band's pieces by CUDA events as they are queued
(``NarrowBand.snapshot``, ``carry``, ``update`` and its sub-pieces through
``sparse_band.PROFILE``, and the topology, which the band's deep cells send down the array
path), against the same frame without a band.

    python3 bench/flip_sparse_band.py [--row 8m|65m] [--frames N] [--narrow-band C]
                                      [--ways arrays kernels] [--off] [--time-cap S]

``--ways arrays kernels`` steps one simulation per way (``VOXFX_SPARSE_BAND``, set before each
way's frame), the same scene and seed, frame by frame in one process, and after each frame
compares the ways' band state (deep cells, the level set's cells and φ, the deep mass),
particles and bricks to the bit: an A/B on the same states. A way ``kernels/kernels`` also sets
``VOXFX_SPARSE_BAND_REDUCE`` (the part after the slash): ``--ways kernels/arrays kernels/kernels``.
``--off`` adds a run without a band (the full-particle frame the band is meant to beat) after
the band frames.

H100 80GB HBM3, ``--row 8m --frames 3 --narrow-band 4 --ways arrays kernels --off`` (frames 1–2):
arrays 1,239–1,305 ms a frame, kernels 237–246 ms, the same bits; no band 65–66 ms
(``kernels/flip/sparse_band.py``'s module text has the pieces).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from voxfx.kernels import backend  # noqa: E402
from voxfx.kernels.flip import sparse_band  # noqa: E402
from voxfx.kernels.flip.grid import FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from _sparse_scene import scene  # noqa: E402

ROWS = {"8m": (256, 8_000_000), "65m": (512, 65_536_000)}


class Pieces:
    """Wraps a simulation's band and grid methods with CUDA events: ms per piece a frame."""

    def __init__(self, sim):
        import cupy as cp

        self.cp = cp
        self.marks = []  # (piece, start event, end event)
        self.inner = []  # lists of sparse_band.PROFILE of each update
        band, grid = sim.band, sim.grid
        for owner, name, label in ((grid, "update", "topology"), (band, "topology", "topology: band keys"),
                                   (band, "snapshot", "snapshot"),
                                   (band, "carry", "carry"), (band, "update", "update")):
            if owner is not None:
                setattr(owner, name, self._wrapped(getattr(owner, name), label))

    def _wrapped(self, fn, label):
        cp = self.cp

        def call(*args, **kwargs):
            a = cp.cuda.Event()
            a.record()
            if label == "update":
                sparse_band.PROFILE = [("update: start", a)]
            try:
                return fn(*args, **kwargs)
            finally:
                b = cp.cuda.Event()
                b.record()
                self.marks.append((label, a, b))
                if label == "update":
                    self.inner.append(sparse_band.PROFILE)
                    sparse_band.PROFILE = None

        return call

    def frame(self):
        """{piece: ms} over the frame's calls so far (synchronized), then forgotten."""
        cp = self.cp
        cp.cuda.Device().synchronize()
        out = {}
        for label, a, b in self.marks:
            out[label] = out.get(label, 0.0) + cp.cuda.get_elapsed_time(a, b)
        for marks in self.inner:
            for (_, e0), (name, e1) in zip(marks, marks[1:]):
                out[name] = out.get(name, 0.0) + cp.cuda.get_elapsed_time(e0, e1)
        self.marks, self.inner = [], []
        return out


def same_state(a, b):
    """Names of the band state and particle arrays that differ between simulations *a* and *b*."""
    bad = []
    for name in ("deep", "lattice", "phi", "mass"):
        x, y = (backend.to_numpy(getattr(s.band, name)) for s in (a, b))
        if x.shape != y.shape or not np.array_equal(x, y):
            bad.append(name)
    for name in ("pos", "vel"):
        x, y = (backend.to_numpy(getattr(s, name)) for s in (a, b))
        if x.shape != y.shape or not np.array_equal(x.view(np.uint32), y.view(np.uint32)):
            bad.append(name)
    x, y = (backend.to_numpy(s.grid.topology.keys) for s in (a, b))
    if x.shape != y.shape or not np.array_equal(x, y):
        bad.append("bricks")
    return bad


def main():
    import cupy as cp

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--row", choices=sorted(ROWS), default="8m")
    ap.add_argument("--frames", type=int, default=3)
    ap.add_argument("--narrow-band", type=int, default=4)
    ap.add_argument("--ways", nargs="+", default=None, help="VOXFX_SPARSE_BAND ways, one simulation each (A/B)")
    ap.add_argument("--off", action="store_true", help="also the frames without a band")
    ap.add_argument("--time-cap", type=float, default=120.0)
    args = ap.parse_args()
    n, particles = ROWS[args.row]
    spec, v, t = scene(n, particles, "dam")
    ways = args.ways or [os.environ.get("VOXFX_SPARSE_BAND", "") or "default"]
    sims, pieces = [], []
    begin = time.perf_counter()
    for _ in ways:
        sim = FlipSimulation(spec, FlipSettings(narrow_band=args.narrow_band), v, t, xp=cp, sparse=True)
        sims.append(sim)
        pieces.append(Pieces(sim))
    cp.cuda.Device().synchronize()
    print(f"{args.row}: {len(sims[0].pos):,} particles, band {args.narrow_band} cells, ways {ways}, set-up "
          f"{time.perf_counter() - begin:.1f} s", flush=True)
    for frame in range(args.frames):
        for way, sim, piece in zip(ways, sims, pieces):
            if way != "default":  # "band way" or "band way/reduce way" (VOXFX_SPARSE_BAND_REDUCE)
                band_way, _, reduce_way = way.partition("/")
                os.environ["VOXFX_SPARSE_BAND"] = band_way
                if reduce_way:
                    os.environ["VOXFX_SPARSE_BAND_REDUCE"] = reduce_way
            cp.cuda.Device().synchronize()
            a = time.perf_counter()
            stats = sim.step(1 / 24)
            cp.cuda.Device().synchronize()
            ms = (time.perf_counter() - a) * 1e3
            parts = piece.frame()
            band_ms = sum(parts.get(k, 0.0) for k in ("snapshot", "carry", "update", "topology: band keys"))
            subs = max(1, stats["substeps"])
            print(f"frame {frame} {way}: {stats['substeps']} substeps, {ms:.0f} ms ({ms / subs:.1f} a substep); band "
                  f"{band_ms:.1f} ms ({band_ms / subs:.2f} a substep, its topology keys included), topology "
                  f"{parts.get('topology', 0):.1f} ms; "
                  f"{len(sim.pos):,} particles kept ({sim.liquid_particles():,}), {len(sim.band.deep):,} deep cells, "
                  f"{sim.grid.brick_count()} bricks", flush=True)
            print("   " + ", ".join(f"{k} {val / subs:.3f}" for k, val in parts.items()) + " (ms a substep)",
                  flush=True)
        if len(sims) > 1:
            bad = same_state(sims[0], sims[1])
            print(f"   {ways[1]} against {ways[0]}: " + ("the same bits" if not bad else f"DIFFER in {bad}"),
                  flush=True)
        if time.perf_counter() - begin > args.time_cap:
            print(f"(time cap {args.time_cap:.0f} s)")
            break
    del sims, pieces
    cp.get_default_memory_pool().free_all_blocks()
    if args.off:
        sim = FlipSimulation(spec, FlipSettings(), v, t, xp=cp, sparse=True)
        for frame in range(args.frames):
            cp.cuda.Device().synchronize()
            a = time.perf_counter()
            stats = sim.step(1 / 24)
            cp.cuda.Device().synchronize()
            ms = (time.perf_counter() - a) * 1e3
            print(f"frame {frame} no band: {stats['substeps']} substeps, {ms:.0f} ms "
                  f"({ms / max(1, stats['substeps']):.1f} a substep), {len(sim.pos):,} particles", flush=True)


if __name__ == "__main__":
    main()
