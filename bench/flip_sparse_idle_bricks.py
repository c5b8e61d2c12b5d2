"""How much of the pool the sparse FLIP's per-cell passes could skip (helper h18f; NumPy, no GPU):
the dam break run through user frames (``sim.step(1/24)``, a Timing preset) on the CPU, and at
each substep's P2G tail (``sparse_transfer.extrapolate_and_boundaries``) and G2P's extrapolation
(``sparse_transfer.extrapolate(valid=fluid)``) the pool's bricks counted:

    slots     the pool's slots (capacity: the passes run one thread a cell over all of them)
    used      slots holding an active brick
    live      active bricks with a FLUID cell or a valid face in themselves or their 26 neighbours
              (the passes' reach: P2G's one face and two extrapolation rings stay within a brick's
              neighbours)
    occupied  active bricks whose own cells hold a particle (FLUID) or a valid face

and what the tail writes in the rest (idle): the faces (P2G's 0, gravity·Δt after the boundaries,
or the solids' velocity), the masks (0). Printed per frame (its substeps' mean) and the run's mean:

    python3 bench/flip_sparse_idle_bricks.py [--res 64] [--frames 12] [--timing fast]

Results: bench/RESULTS.md, "h18f"."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from voxfx.kernels.flip import sparse_transfer  # noqa: E402
from voxfx.kernels.flip.grid import FLUID, TIMINGS, FlipSettings  # noqa: E402
from voxfx.kernels.flip.sim import FlipSimulation  # noqa: E402
from voxfx.kernels.grid.sparse import brick_coords  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from flip import dam_break  # noqa: E402

CELLS = 512


def brick_counts(grid, masks):
    """(slots, used, live, occupied, idle faces' values) of *grid* with the per-cell bool *masks*
    (any true: the cell's brick is occupied)."""
    topo = grid.topology
    slots = int(topo.capacity)
    keys, where = np.asarray(topo.keys), np.asarray(topo.slots)
    cell = np.zeros(slots * CELLS, bool)
    for m in masks:
        cell |= np.asarray(m) != 0
    occ_slot = cell.reshape(slots, CELLS).any(axis=1)
    occupied = occ_slot[where]
    coords = brick_coords(keys, np)
    live = np.zeros(len(keys), bool)
    occ_keys = set(map(tuple, coords[occupied].tolist()))
    for i, c in enumerate(coords.tolist()):
        live[i] = any((c[0] + dx, c[1] + dy, c[2] + dz) in occ_keys
                      for dx in (-1, 0, 1) for dy in (-1, 0, 1) for dz in (-1, 0, 1))
    return slots, len(keys), int(live.sum()), int(occupied.sum()), where[~live]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--res", type=int, default=64)
    ap.add_argument("--frames", type=int, default=12)
    ap.add_argument("--timing", default="fast", choices=sorted(TIMINGS))
    args = ap.parse_args()
    n = args.res
    spec, v, t = dam_break(n, 8_000_000 * (n / 256) ** 3)
    sim = FlipSimulation(spec, FlipSettings(**TIMINGS[args.timing]), v, t, xp=np, sparse=True)
    rows = {"tail": [], "g2p": []}
    original_tail, original_ext = sparse_transfer.extrapolate_and_boundaries, sparse_transfer.extrapolate

    def tail(grid, add=None, layers=2, mode=None):
        counts = brick_counts(grid, (grid["cell"] == FLUID, *grid.valid))
        old = original_tail(grid, add, layers, mode)
        idle = (np.asarray(counts[4])[:, None] * CELLS + np.arange(CELLS)).ravel()
        seen = ({f"{name} {float(x):.6g}" for name in grid.FACES for x in np.unique(grid[name][idle])}
                if len(idle) else set())
        mask_ok = all(int(np.asarray(m)[idle].max(initial=0)) == 0 for m in grid.valid)
        old_ok = all(float(np.abs(o[idle]).max(initial=0)) == 0 for o in old)
        rows["tail"].append((*counts[:4], sorted(seen), mask_ok, old_ok))
        return old

    def ext(grid, layers=2, valid=None):
        if valid is not None:
            counts = brick_counts(grid, (grid["cell"] == FLUID, *valid))
            rows["g2p"].append(counts[:4])
        return original_ext(grid, layers, valid)

    sparse_transfer.extrapolate_and_boundaries, sparse_transfer.extrapolate = tail, ext
    print(f"dam break {n}³, {len(sim.pos):,} particles, timing {args.timing}", flush=True)
    print("frame | substeps | slots | used | live | occupied | idle/used | idle/slots (P2G tail); "
          "live (G2P rings) | idle faces' values after the tail", flush=True)
    total = {"tail": [], "g2p": []}
    for frame in range(args.frames + 1):
        rows["tail"].clear()
        rows["g2p"].clear()
        if frame:
            sim.step(1 / 24)
        else:
            sim.substep(1 / 72)
        a = np.array([r[:4] for r in rows["tail"]], float)
        g = np.array(rows["g2p"], float)
        total["tail"] += rows["tail"]
        total["g2p"] += rows["g2p"]
        slots, used, live, occ = a.mean(axis=0)
        values = sorted({x for r in rows["tail"] for x in r[4]})
        ok = all(r[5] and r[6] for r in rows["tail"])
        print(f"{frame} | {len(a)} | {slots:,.0f} | {used:,.0f} | {live:,.0f} | {occ:,.0f} | {1 - live / used:.1%} | "
              f"{1 - live / slots:.1%}; {g[:, 2].mean():,.0f} | {', '.join(values[:8])}"
              f"{' …' if len(values) > 8 else ''}; masks 0, old 0: {ok}", flush=True)
    a = np.array([r[:4] for r in total["tail"]], float)
    after = a[len(a) // 2:]
    for name, part in (("all substeps", a), ("the second half", after)):
        s = part.sum(axis=0)
        print(f"{name}: idle {1 - s[2] / s[1]:.1%} of the used bricks, {1 - s[2] / s[0]:.1%} of the slots "
              f"(free slots {1 - s[1] / s[0]:.1%})", flush=True)


if __name__ == "__main__":
    main()
