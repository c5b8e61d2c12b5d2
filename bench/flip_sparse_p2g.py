"""Sparse FLIP topology and P2G split into their launches (issue 24, item 3: where
"bin+gather" and "update" spend their time), on the GPU, in one process:

    python3 bench/flip_sparse_p2g.py [--res 256] [--particles 8e6] [--substeps 4] [--repeat 5]

The dam break of ``bench/flip.py`` runs *substeps* substeps of 1/120 s (the particles
spread, the bricks move), then each call of ``sparse_gpu.bin_particles`` and the gather
is timed with CUDA events, *repeat* times, medians printed in ms beside the launch's
bytes at the H100's 3.35 TB/s; then the topology update of the next substep (the
device's marking pipeline, and ``VOXFX_SPARSE_TOPOLOGY=legacy``'s path for the same
positions where its margin allows).

The gathers (``sparse_gpu.GATHERS``): brick, cell, and the staged gather with
``--staged SLAB:KIB:FILTER ...`` (layers a slab, shared memory a block in KiB, 0: all a
block may have; 1: the cells' masks), each checked to give the brick gather's bits; with
APIC (a random C) for the brick gather and the first two staged variants too. The scatter
(``--spread N ...``: a warp's lanes take particles N apart; ``--blocks B ...``: also built
for B blocks an SM, default build 4) is checked against the brick
gather's masks and its faces' largest difference printed (fixed point: not the same bits),
and two scatters of the same particles against each other (the same bits). The scatter's
two binnings (``VOXFX_SPARSE_BINNING`` sorted / order: count + cumsum + place + per-cell
sort + sorted copies, or the count with the bound fused + the two-launch scan + place, the
scatter reading through the order) are timed launch by launch and whole, alternately,
checked for the same faces bit for bit, and their P2G's live memory peak printed.

``--ab SUBSTEPS`` (helper i24y) runs only the order binning's two counts
(``VOXFX_SPARSE_BIN_COUNT`` atomic / grouped): the same faces, masks and counts bit for bit
(FLIP and APIC), the P2G launches one by one, whole P2G and SUBSTEPS whole substeps
(``flip_sparse.timed_sparse_substep``) with the counts in turn;
``bench/flip_sparse_p2g_call.sh`` is the device call that runs it with the P2G GPU files.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tools.package import load  # noqa: E402

load()
from voxfx.kernels.flip import sparse_gpu, sparse_scatter, sparse_topology_gpu, transfer  # noqa: E402
from voxfx.kernels.flip.particles import KERNELS as DENSE  # noqa: E402
from voxfx.kernels.flip.sparse_grid import substep_margin  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from _cuda_events import timed  # noqa: E402
from _sparse_scene import add_scene_arguments, stepped_dam_break  # noqa: E402

BANDWIDTH = 3.35e12


class Peak:
    """CuPy memory hook: the pool's most bytes in use while it is on."""

    def __enter__(self):
        from cupy.cuda import memory_hook

        class Hook(memory_hook.MemoryHook):
            name = "peak"

            def malloc_postprocess(hook, **kwargs):
                import cupy as cp

                self.peak = max(self.peak, cp.get_default_memory_pool().used_bytes())

        import cupy as cp

        self.peak = cp.get_default_memory_pool().used_bytes()
        self._hook = Hook()
        self._hook.__enter__()
        return self

    def __exit__(self, *exc):
        self._hook.__exit__(*exc)


def compare_binnings(cp, g, p2g_binning):
    """The two binnings' P2G: the same faces and counts bit for bit, and each one's live peak."""
    out = {}
    for mode in ("sorted", "order"):
        p2g_binning(mode)()
        out[mode] = [cp.concatenate([g[f].view(cp.uint32) for f in g.FACES]), g.bins[1].copy()]
    os.environ.pop("VOXFX_SPARSE_BINNING", None)
    print("order binning's P2G: " + ("the same faces and counts bit for bit" if all(
        bool((a == b).all()) for a, b in zip(out["sorted"], out["order"])) else "FACES DIFFER"))
    del out
    pool = cp.get_default_memory_pool()
    for mode in ("sorted", "order"):  # the live bytes P2G adds (its arrays while the scatter runs)
        g.bins = None
        pool.free_all_blocks()
        before = pool.used_bytes()
        hook = Peak()
        with hook:
            p2g_binning(mode)()
        print(f"P2G live peak over the state, {mode} binning: {(hook.peak - before) / 2 ** 20:.1f} MiB")
    os.environ.pop("VOXFX_SPARSE_BINNING", None)


def scatter_pieces(cp, g, pos, vel, binned, faces, valid, repeat):
    """The scatter's launches one by one (spread 8, four blocks an SM; FLIP), on the sorted
    copies *binned* (spos, svel, dummy, start, count), and through the order binning's order."""
    from voxfx.kernels.flip.sparse_gpu import _I32, _I64, _frame

    spos, svel, dummy, start, count = binned
    n, cells = int(pos.shape[0]), g.size
    # the scatter's launches (spread 8, four blocks an SM; FLIP)
    sparse_scatter.SCATTER_SPREAD, sparse_scatter.SCATTER_MIN_BLOCKS = 8, 4
    scatter_in = (spos, svel, dummy, _I32(0), start, count, g.brick_slot, g.slot_coords, g.brick_nbr,
                  _I64(cells), _I32(g.closed), *sparse_gpu._dims(g), *_frame(g))
    start_o, count_o, order_o, _, _ = sparse_gpu.bin_particles_order(g, pos, vel, None)
    scatter_in_o = (pos, vel, dummy, _I32(0), start_o, count_o, *scatter_in[6:])
    bounds, acc = cp.zeros(2, cp.uint32), cp.zeros(6 * cells, cp.uint64)
    scatter, scatter_threads = sparse_scatter.SCATTER, sparse_scatter.SCATTER_THREADS
    bound_grid = (min(sparse_scatter.BOUND_BLOCKS, -(-max(n, cells) // 256)),)
    pieces = [("scatter_bounds", lambda: scatter.launch_grid("scatter_bounds", bound_grid, (256,), (
                  svel, dummy, _I32(0), _I64(n), count, _I64(cells), _frame(g)[3], bounds)), 12 * n + 4 * cells),
              ("scatter sums zeroed", lambda: acc.fill(0), 48 * cells),
              ("p2g_scatter_brick", lambda: scatter.launch_grid("p2g_scatter_brick", (cells // 512,), (
                  scatter_threads,), (*scatter_in, bounds, _I32(8), count, _I32(0), acc)),
               24 * n + 8 * cells + 48 * cells),
              ("p2g_scatter_brick through the order (order binning)", lambda: scatter.launch_grid(
                  "p2g_scatter_brick", (cells // 512,), (scatter_threads,), (*scatter_in_o, bounds, _I32(8), order_o,
                                                                             _I32(1), acc)),
               28 * n + 8 * cells + 48 * cells),
              ("p2g_scatter_finish", lambda: scatter.launch("p2g_scatter_finish", cells, (
                  acc, _I64(cells), bounds, *faces, *valid)), 48 * cells + 15 * cells)]
    for name, fn, nbytes in pieces:
        fn()
        ms = timed(cp, fn, repeat)
        floor = nbytes / BANDWIDTH * 1e3
        print(f"{name} | {ms:.3f} | {floor:.3f} | {ms / floor:.0f}×")


COUNTS = ("atomic", "grouped")  # sparse_gpu.BIN_COUNTS: the old way first


def ab_bits(cp, g, pos, vel):
    """The grouped count's faces, masks and counts against the atomic count's, bit for bit
    (FLIP, and APIC with a random C)."""
    n = int(pos.shape[0])
    c = cp.random.default_rng(2).standard_normal((n, 3, 3), dtype=cp.float32)
    for apic in (False, True):
        out = []
        for mode in COUNTS:
            os.environ["VOXFX_SPARSE_BIN_COUNT"] = mode
            valid = sparse_gpu.particles_to_grid(g, pos, vel, c if apic else None, "scatter")
            out.append([cp.concatenate([g[f].view(cp.uint32) for f in g.FACES]), g.bins[1].copy(),
                        cp.concatenate(valid)])
        same = all(bool((a == b).all()) for a, b in zip(*out))
        print(f"{'APIC' if apic else 'FLIP'} grouped count: " +
              ("the atomic count's faces, masks and counts bit for bit" if same else "FACES DIFFER"))


def ab_launches(cp, g, pos, vel, repeat):
    """The order binning's and scatter's launches one by one on the same inputs (FLIP): both
    counts, the scan, place, the sums zeroed and the brick scatter through the order."""
    from _p2g_order import OrderLaunches

    run = OrderLaunches(cp, g, pos, vel)
    n, cells = run.n, run.cells

    print(f"launch | ms (median of {repeat}) | floor ms")
    rows = [("count_particles_bounds (atomic)", run.count_pass("count_particles_bounds"), 32 * n + 4 * cells),
            ("count_particles_grouped", run.count_pass("count_particles_grouped"), 32 * n + 4 * cells),
            ("bin_scan_sums + bin_scan", run.scan, 12 * cells),
            ("place_particles (after grouped)", run.place, 16 * n),
            ("scatter sums zeroed", lambda: run.acc.fill(0), 48 * cells),
            ("p2g_scatter_brick through the order", run.scatter(sparse_scatter.SCATTER), 28 * n + 56 * cells)]
    for name, fn, nbytes in rows:
        fn()  # warm (compiles)
        ms = timed(cp, fn, repeat)
        print(f"{name} | {ms:.3f} | {nbytes / BANDWIDTH * 1e3:.3f}")


def ab_substeps(cp, sim, dt, repeat, substeps):
    """Whole P2G with either count (in turn, *repeat* rounds), then *substeps* whole substeps
    (``flip_sparse.timed_sparse_substep``) with either count in turn (one round to warm)."""
    g, pos, vel = sim.grid, sim.pos, sim.vel
    whole = {m: [] for m in COUNTS}
    for _ in range(repeat):
        for mode in COUNTS:
            os.environ["VOXFX_SPARSE_BIN_COUNT"] = mode
            whole[mode].append(timed(cp, lambda: sparse_gpu.particles_to_grid(g, pos, vel, None, "scatter"), 1))
    for mode in COUNTS:
        print(f"particles_to_grid (whole), {mode} count | {np.median(whole[mode]):.3f}")
    from flip_sparse import STAGES, SUBSTAGES, timed_sparse_substep

    ev = [cp.cuda.Event() for _ in range(6)]
    sub = [cp.cuda.Event() for _ in range(6)]
    rows = {m: [] for m in COUNTS}
    for i in range(substeps + len(COUNTS)):
        mode = COUNTS[i % len(COUNTS)]
        os.environ["VOXFX_SPARSE_BIN_COUNT"] = mode
        ms, _, parts = timed_sparse_substep(sim, dt, ev, sub)
        if i >= len(COUNTS):
            rows[mode].append((ms, parts))
    for mode in COUNTS:
        ms = np.median(np.array([r[0] for r in rows[mode]]), axis=0)
        parts = np.median(np.array([r[1] for r in rows[mode]]), axis=0)
        print(f"substeps, {mode} count ({len(rows[mode])}): " + ", ".join(f"{k} {v:.3f}" for k, v in zip(STAGES, ms)) +
              f", substep {sum(ms):.2f} ms; bin+gather {parts[SUBSTAGES.index('bin+gather')]:.3f}")


def p2g_ab(cp, sim, dt, repeat, substeps):
    """``--ab`` (helper i24y): the order binning's two counts (``VOXFX_SPARSE_BIN_COUNT``): their
    bits (``ab_bits``), the P2G launches (``ab_launches``), whole P2G and whole substeps
    (``ab_substeps``)."""
    saved = os.environ.get("VOXFX_SPARSE_BIN_COUNT")
    ab_bits(cp, sim.grid, sim.pos, sim.vel)
    ab_launches(cp, sim.grid, sim.pos, sim.vel, repeat)
    ab_substeps(cp, sim, dt, repeat, substeps)
    if saved is None:
        os.environ.pop("VOXFX_SPARSE_BIN_COUNT", None)
    else:
        os.environ["VOXFX_SPARSE_BIN_COUNT"] = saved


def main():  # noqa: C901 (one bench: its launches timed in turn, each a small closure)
    ap = argparse.ArgumentParser()
    add_scene_arguments(ap)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--staged", nargs="*", default=["4:0:1", "4:0:0", "3:0:1", "2:0:1"],
                    help="staged gather variants SLAB:KIB:FILTER (KiB 0: all a block may have)")
    ap.add_argument("--spread", nargs="*", type=int, default=[8, 1, 32], help="scatter variants (lanes' spread)")
    ap.add_argument("--blocks", nargs="*", type=int, default=[3, 5],
                    help="scatter variants built for these blocks an SM (default build: 4)")
    ap.add_argument("--ab", type=int, default=0, metavar="SUBSTEPS",
                    help="only the two counts' A/B (p2g_ab), then this many whole substeps")
    args = ap.parse_args()
    import cupy as cp

    if args.ab:
        _, sim, dt = stepped_dam_break(args)
        print(f"{args.res}³, {int(sim.pos.shape[0]):,} particles, {sim.grid.brick_count()} bricks")
        p2g_ab(cp, sim, dt, args.repeat, args.ab)
        return

    from voxfx.kernels.flip.sparse_gpu import _I32, _I64, KERNELS, _frame, _topo, brick_index

    spec, sim, dt = stepped_dam_break(args)
    g, pos, vel = sim.grid, sim.pos, sim.vel
    n, cells = int(pos.shape[0]), g.size
    print(f"{args.res}³, {n:,} particles, {g.brick_count()} bricks ({cells:,} pool cells)")
    keys, slots, nk = _topo(g)
    ox, oy, oz, _, inv_h = _frame(g)
    index = brick_index(g)
    count = cp.zeros(cells + 1, cp.int32)
    cell_of, rank, order = (cp.empty(n, cp.int32) for _ in range(3))
    state = {}

    def count_pass():
        count.fill(0)
        KERNELS.launch("count_particles_sparse", n, (pos, _I64(n), ox, oy, oz, inv_h, keys, slots, nk, *index,
                                                     _I64(cells), count, cell_of, rank))

    def scan():
        state["start"] = cp.cumsum(count, dtype=cp.int32) - count

    def place():
        DENSE.launch("place_particles", n, (cell_of, rank, state["start"], _I64(n), order))

    def segments():
        DENSE.launch("sort_cell_segments", cells + 1, (order, state["start"], count, _I64(cells + 1)))

    spos, svel = cp.empty_like(pos), cp.empty_like(vel)
    dummy = cp.zeros(1, cp.float32)

    def copy():
        DENSE.launch("copy_sorted_particles", n, (order, _I64(n), pos, vel, dummy, _I32(0), spos, svel, dummy))

    faces = tuple(cp.empty(cells, cp.float32) for _ in range(3))
    valid = tuple(cp.empty(cells, cp.uint8) for _ in range(3))
    bounds_o = cp.zeros(2, cp.uint32)

    def count_bounds():  # the "order" binning's count, the scatter's |q| bound fused in
        count.fill(0)
        bounds_o.fill(0)
        KERNELS.launch("count_particles_bounds", n, (pos, vel, count, _I32(0), _I64(n), ox, oy, oz, inv_h,
                                                     _frame(g)[3], keys, slots, nk, *index, _I64(cells), count,
                                                     cell_of, rank, bounds_o))

    def scan_kernels():
        state["start_o"] = sparse_gpu.scan_counts(cp, count, cells, bounds_o)

    def p2g_binning(mode):
        def run():
            os.environ["VOXFX_SPARSE_BINNING"] = mode
            sparse_gpu.particles_to_grid(g, pos, vel, None, "scatter")
        return run

    rows = [("count_particles_sparse", count_pass, 12 * n + 12 * n + 4 * cells),
            ("count_particles_bounds (order binning: + |q| bound)", count_bounds, 24 * n + 12 * n + 4 * cells),
            ("bin_scan_sums + bin_scan (+ max count)", scan_kernels, 12 * cells),
            ("cumsum (exclusive scan)", scan, 8 * cells),
            ("place_particles", place, 16 * n),
            ("sort_cell_segments", segments, 8 * n + 8 * cells),
            ("copy_sorted_particles", copy, 52 * n),
            ("bin_particles (whole)", lambda: sparse_gpu.bin_particles(g, pos, vel, None), 0),
            ("particles_to_grid (whole, brick)", lambda: sparse_gpu.particles_to_grid(g, pos, vel, None, "brick"), 0),
            ("particles_to_grid (whole, staged)", lambda: sparse_gpu.particles_to_grid(g, pos, vel, None, "staged"),
             0),
            ("bin_particles_order (whole)", lambda: sparse_gpu.bin_particles_order(g, pos, vel, None), 0),
            ("particles_to_grid (whole, scatter, sorted binning)", p2g_binning("sorted"), 0),
            ("particles_to_grid (whole, scatter, order binning)", p2g_binning("order"), 0),
            ("particles_to_grid (whole, scatter, sorted binning) again", p2g_binning("sorted"), 0),
            ("particles_to_grid (whole, scatter, order binning) again", p2g_binning("order"), 0)]
    print("launch | ms | floor ms | ratio")
    for name, fn, nbytes in rows:
        fn()  # warm (compiles)
        ms = timed(cp, fn, args.repeat)
        floor = nbytes / BANDWIDTH * 1e3
        print(f"{name} | {ms:.3f} | {floor:.3f} | {ms / floor:.0f}×" if nbytes else f"{name} | {ms:.3f} | - | -")
    scan()
    count_bounds()
    scan_kernels()
    print("bin_scan == cumsum − count:", bool((state["start_o"] == state["start"]).all()))
    compare_binnings(cp, g, p2g_binning)

    # the gathers, on the sorted copies of these positions (with a random C for APIC)
    c = cp.random.default_rng(1).standard_normal((n, 3, 3), dtype=cp.float32)
    sc = cp.empty_like(c)
    DENSE.launch("copy_sorted_particles", n, (order, _I64(n), pos, vel, c, _I32(1), spos, svel, sc))
    del c

    def gather(mode, apic=False, slab=None, kib=None, masks=None, spread=None, blocks=None):
        sparse_scatter.SCATTER_SPREAD = spread or 8
        sparse_scatter.SCATTER_MIN_BLOCKS = blocks or 4
        args_ = (spos, svel, sc if apic else dummy, _I32(apic), state["start"], count, g.brick_slot, g.slot_coords,
                 g.brick_nbr, _I64(cells), _I32(g.closed), *sparse_gpu._dims(g), *_frame(g), *faces, *valid)
        sparse_gpu.launch_gather(mode, cells, args_, apic, slab, kib * 1024 if kib else None, masks)

    staged = [tuple(int(x) for x in v.split(":")) for v in args.staged]
    gathers = [("gather brick", dict(mode="brick")), ("gather cell", dict(mode="cell"))]
    gathers += [(f"gather staged, slab {slab}, {kib or 'all'} KiB, masks {masks}",
                 dict(mode="staged", slab=slab, kib=kib, masks=masks)) for slab, kib, masks in staged]
    gathers += [("gather brick, APIC", dict(mode="brick", apic=True))]
    gathers += [(f"gather staged, slab {slab}, {kib or 'all'} KiB, masks {masks}, APIC",
                 dict(mode="staged", apic=True, slab=slab, kib=kib, masks=masks)) for slab, kib, masks in staged[:2]]
    gathers += [(f"scatter, spread {s}", dict(mode="scatter", spread=s)) for s in args.spread]
    gathers += [(f"scatter, spread {args.spread[0]}, {b} blocks an SM", dict(mode="scatter", spread=args.spread[0],
                                                                            blocks=b)) for b in args.blocks]
    gathers += [(f"scatter, spread {args.spread[0]}, APIC", dict(mode="scatter", apic=True, spread=args.spread[0]))]
    gather_bytes = {False: 24 * n + 8 * cells + 15 * cells, True: 60 * n + 8 * cells + 15 * cells}
    reference = {}
    for name, kw in gathers:
        gather(**kw)  # warm (compiles), then the bits against the brick gather's
        out = [cp.concatenate([f.view(cp.uint32) for f in faces]), cp.concatenate(valid)]
        apic = kw.get("apic", False)
        if kw["mode"] == "brick":
            reference[apic] = out
        same = all(bool((a == b).all()) for a, b in zip(out, reference[apic]))
        ms = timed(cp, lambda kw=kw: gather(**kw), args.repeat)
        floor = gather_bytes[apic] / BANDWIDTH * 1e3
        if kw["mode"] == "scatter":  # fixed point: the brick gather's masks, faces within rounding
            masks = bool((out[1] == reference[apic][1]).all())
            diff = float(cp.abs(out[0].view(cp.float32) - reference[apic][0].view(cp.float32)).max())
            gather(**kw)
            again = all(bool((a == b).all()) for a, b in zip(out, [cp.concatenate([f.view(cp.uint32) for f in faces]),
                                                                   cp.concatenate(valid)]))
            same = f"{'same masks' if masks else 'MASKS DIFFER'}, max |Δ| {diff:.2e} m/s, " + (
                "same bits run to run" if again else "NOT DETERMINISTIC")
        else:
            same = "same bits" if same else "BITS DIFFER"
        print(f"{name} | {ms:.3f} | {floor:.3f} | {ms / floor:.0f}× | {same}")
    del reference
    scatter_pieces(cp, g, pos, vel, (spos, svel, dummy, state["start"], count), faces, valid, args.repeat)
    c = count[:-1]
    print(f"particles per occupied cell: mean {float(c[c > 0].mean()):.2f}, max {int(c.max())}; "
          f"unbinned {int(count[-1])}")
    margin = substep_margin(float(transfer.max_speed(vel)), dt, spec.voxel_size, 9.81)
    print(f"topology (margin {margin}, reach radius {sparse_topology_gpu.reach_radius(margin)}):")
    moved = pos + cp.float32(0.25 * spec.voxel_size)  # a quarter cell: some bricks change
    for label, p in (("same positions", pos), ("moved ¼ cell", moved)):
        ms = timed(cp, lambda p=p: sparse_topology_gpu.incremental_keys(g, p, margin), args.repeat)
        print(f"  incremental_keys, {label} | {ms:.3f}")
    ms = timed(cp, lambda: g.topology_keys(moved, margin), args.repeat)
    print(f"  topology_keys (array path, keys_of_boxes), moved | {ms:.3f}")
    found = sparse_topology_gpu.incremental_keys(g, moved, margin)
    if found is not None and found[0] is not None:
        ms = timed(cp, lambda: g.topology.update(found[0]), args.repeat)
        print(f"  Topology.update of those keys | {ms:.3f}")
    print(f"pool: {cp.get_default_memory_pool().total_bytes() / 2 ** 20:.0f} MiB")


if __name__ == "__main__":
    main()
