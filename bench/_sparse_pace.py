"""``bench/flip_sparse.py --pace N``: the substep as ``SparseFlipSimulation`` runs it (issue 24). The row's
``timed_sparse_substep`` sums stage intervals with a ``synchronize()`` closing every substep; a simulation
queues substep after substep with no sync of its own, the host blocking only at its reads (the
topology's flag words, the PCG's checks and, in ``step``, the fastest particle's speed before each
substep). Here N substeps run back to back through ``sim.substep`` itself, in blocks:

    synced   N substeps of ``timed_sparse_substep`` (the row's numbers, the same process)
    substep  ``sim.substep(dt)`` back to back, nothing between (the device learns the margin)
    step     ``sim._substep_speed()`` (the step's speed read), then ``sim.substep(dt)``, as ``step`` does

each of the last two twice: plain (a CUDA event at each substep's start, nothing else: the pace) and
marked (a CUDA event and the host clock at the entry and exit of the substep's calls, ``MARKS``: where
the device waits). Per block: the device's pace (ms from one substep's start event to the next, median)
and the host's wall clock over the block (its last substep's drain included) a substep. Marked: the
pieces between consecutive marks (host Δ, device Δ, RawKernel launches and graph replays queued in
them). A piece in which nothing was queued (no launch, no replay; CuPy's own array ops — fills,
copies — are not counted, so a piece holding one counts its few µs as idle) has a device Δ that is
the device's idle: its second event runs the moment the host records it if the device had drained
(max(0, host's record − device at the first)), else right after the first. The idle a substep is
those pieces' sum, the device's busy time its span less that; the device's lag behind the host at
each mark (less the block's least: ~0 where the device waits) says where the host is behind.

``--ab`` ways (environment settings) alternate block by block in one simulation, the blocks' order
(way and kind) turned by one each round: the states move on (the 8M dam break's bricks grow ~10× over
120 substeps), so call 1's fixed order (synced, substep, step) ranked the kinds by when they ran. The
marks' own host cost shows as the marked blocks' pace against the plain ones' (call 1: +0.6 ms a substep,
~50 marks: the marked blocks locate the idle, the plain ones give the pace). ``analyse`` and ``summary``
are pure arithmetic (unit tests).
"""

from __future__ import annotations

import importlib
import os
import time

import numpy as np

# (module, attribute path, label): a mark at the entry ("label >") and exit ("label <") of each call
MARKS = (
    ("voxfx.kernels.flip.sparse_sim", "SparseFlipSimulation._substep_speed", "speed read"),
    ("voxfx.kernels.flip.sparse_grid", "SparseFlipGrid.update", "topology"),
    ("voxfx.kernels.flip.sparse_topology_gpu", "launch_fused_update", "fused update"),  # its exit: the read next
    ("voxfx.kernels.flip.sparse_topology_gpu", "update_topology_fused", "after read"),  # its entry: the read back
    ("voxfx.kernels.flip.sparse_topology_tables", "fused_tables", "tables"),
    ("voxfx.kernels.flip.sparse_transfer", "particles_to_grid", "p2g"),
    ("voxfx.kernels.flip.sparse_transfer", "classify", "classify"),
    ("voxfx.kernels.flip.sparse_transfer", "extrapolate_and_boundaries", "p2g tail"),
    ("voxfx.kernels.flip.sparse_pressure", "solve_pressure", "pressure"),
    ("voxfx.kernels.flip.sparse_pressure_buffers", "BufferLoads.read_control", "check read"),
    ("voxfx.kernels.flip.sparse_pressure", "project", "project"),
    ("voxfx.kernels.flip.sparse_transfer", "fluid_faces", "fluid faces"),
    ("voxfx.kernels.flip.sparse_transfer", "extrapolate", "extrapolate"),
    ("voxfx.kernels.flip.sparse_transfer", "g2p_advect", "g2p"),
)
START = "substep >"  # each substep's first mark (the plain blocks' only one)
QUIET_LAG_MS = 0.010  # a mark whose lag is within this of the least: the device was waiting there


def analyse(marks, end):
    """*marks*: [(label, host ms, device ms, launches so far)] of a block in order (one clock origin each),
    ``START`` opening each substep; *end*: the block's closing (host ms, device ms, launches). Per substep
    {"span": device ms to the next substep's start (or *end*), "idle": device Δ summed over the pieces
    with no launch, "busy": span − idle, "host": host ms to the next start, "pieces": {"a .. b": [host Δ,
    device Δ, launches, idle Δ]} summed over a substep's occurrences, "lags": {label: lag at its first
    occurrence, less the block's least lag}}."""
    rows = list(marks) + [("end", *end)]
    least = min(d - h for _, h, d, _ in rows)
    subs = []
    for (a, ha, da, na), (b, hb, db, nb) in zip(rows, rows[1:]):
        if a == START:
            subs.append({"span": 0.0, "idle": 0.0, "host": 0.0, "pieces": {}, "lags": {}})
        if not subs:
            continue  # marks before the first substep
        s = subs[-1]
        s["lags"].setdefault(a, da - ha - least)
        quiet = nb == na
        piece = s["pieces"].setdefault(f"{a} .. {b}", [0.0, 0.0, 0, 0.0])
        piece[0] += hb - ha
        piece[1] += db - da
        piece[2] += nb - na
        piece[3] += (db - da) if quiet else 0.0
        s["span"] += db - da
        s["host"] += hb - ha
        s["idle"] += (db - da) if quiet else 0.0
    for s in subs:
        s["busy"] = s["span"] - s["idle"]
    return subs


def summary(subs, top=8, by=4):
    """Medians over the substeps of *subs* (``analyse``'s): (span, idle, busy, host) ms and the *top*
    pieces by median idle (*by* 4; 2: by device Δ) [(piece, host Δ, device Δ, launches, idle)], a piece
    absent from a substep counted 0 there."""
    med = {k: float(np.median([s[k] for s in subs])) for k in ("span", "idle", "busy", "host")}
    keys = {k for s in subs for k in s["pieces"]}
    rows = []
    for k in keys:
        vals = np.array([s["pieces"].get(k, [0.0, 0.0, 0, 0.0]) for s in subs], dtype=float)
        rows.append((k, *np.median(vals, axis=0)))
    rows.sort(key=lambda r: -r[by])
    return med, rows[:top]


def paired(rounds, kind, ways):
    """Per round, each way's block median (ms a substep) of *kind* less way 0's, and their median per way:
    ``{w: (diffs, median)}`` for w ≥ 1. *rounds*: [{(way, kind): median}] a round (a round missing either
    block is left out)."""
    out = {}
    for w in range(1, ways):
        diffs = [r[(w, kind)] - r[(0, kind)] for r in rounds if (w, kind) in r and (0, kind) in r]
        out[w] = (diffs, float(np.median(diffs)) if diffs else float("nan"))
    return out


def lag_line(subs, labels=("topology >", "after read >", "p2g >", "pressure >", "project >", "g2p >")):
    """The device's lag behind the host (ms, less the block's least) at *labels*' first marks, medians."""
    out = []
    for label in labels:
        vals = [s["lags"][label] for s in subs if label in s["lags"]]
        if vals:
            out.append(f"{label[:-2]} {np.median(vals):.3f}")
    return ", ".join(out)


class Pace:
    """The marks (``MARKS``) wrapped around the substep's calls, recording only while ``on``; RawKernel
    launches (``Kernels.launch``, ``launch_grid``) and graph replays (``GraphLoop.run``) counted."""

    def __init__(self, cp, events=8192):
        self.cp, self.on = cp, False
        self.events = [cp.cuda.Event() for _ in range(events)]  # made once: a mark records, nothing more
        self.marks, self.launches = [], 0
        from voxfx.kernels.grid import launch

        for owner, name in ((launch.Kernels, "launch"), (launch.Kernels, "launch_grid"), (launch.GraphLoop, "run")):
            setattr(owner, name, self._counted(getattr(owner, name)))
        for module, path, label in MARKS:
            *outer, name = path.split(".")
            owner = importlib.import_module(module)
            for part in outer:
                owner = getattr(owner, part)
            setattr(owner, name, self._marked(getattr(owner, name), label))

    def _counted(self, fn):
        pace = self

        def counted(*args, **kwargs):
            pace.launches += 1
            return fn(*args, **kwargs)
        return counted

    def _marked(self, fn, label):
        pace = self

        def marked(*args, **kwargs):
            pace.mark(label + " >")
            try:
                return fn(*args, **kwargs)
            finally:
                pace.mark(label + " <")
        return marked

    def mark(self, label, always=False):
        if (self.on or always) and len(self.marks) < len(self.events) - 1:  # the last: the block's end
            e = self.events[len(self.marks)]
            e.record()
            self.marks.append((label, time.perf_counter(), e, self.launches))

    def block(self, sim, dt, n, speed, marked):
        """*n* substeps back to back (*speed*: each after the step's speed read); analysed marks."""
        cp = self.cp
        cp.cuda.Device().synchronize()  # the block starts on a drained device, as after a frame's reads
        self.marks, self.on = [], marked
        for _ in range(n):
            self.mark(START, always=True)
            if speed:
                sim._substep_speed()
            sim.substep(dt)
        self.on = False
        end = self.events[-1]
        end.record()
        launches = self.launches
        end.synchronize()
        t_end = time.perf_counter()
        h0, e0 = self.marks[0][1], self.marks[0][2]
        ms = cp.cuda.get_elapsed_time
        rows = [(label, (h - h0) * 1e3, ms(e0, e), k) for label, h, e, k in self.marks]
        return analyse(rows, ((t_end - h0) * 1e3, ms(e0, end), launches))


def use_way(ways, w):
    """Way *w* of *ways* (each a list of NAME=VALUE) into the environment (also ``flip_sparse.run_ab``'s)."""
    for way in ways:  # a variable another way sets is unset (its default) unless this way sets it
        for item in way:
            os.environ.pop(item.partition("=")[0], None)
    for item in ways[w]:
        name, _, value = item.partition("=")
        os.environ[name] = value


KINDS = ("synced", "substep", "step", "substep marked", "step marked")


def run_pace(n, particles, steps, warm, rounds, ways, timed_sparse_substep, stages, kind="dam", kinds=KINDS):
    """One simulation of the row (*n*³, *particles*); per round and way (environment *ways*, alternating,
    the order turned each round) the blocks of the module notes, *steps* substeps each, after *warm*
    synced substeps a way (*kinds*: the blocks run, ``KINDS``'); prints each way's lines."""
    import cupy as cp

    from _sparse_scene import scene
    from voxfx.kernels.flip.grid import FlipSettings
    from voxfx.kernels.flip.sim import FlipSimulation

    spec, v, t = scene(n, particles, kind)
    sim = FlipSimulation(spec, FlipSettings(), v, t, xp=cp, sparse=True)
    dt = 1 / 120
    ev = [cp.cuda.Event() for _ in range(6)]
    sub = [cp.cuda.Event() for _ in range(6)]
    pace = Pace(cp)
    for w in range(len(ways)):
        use_way(ways, w)
        for _ in range(warm):
            timed_sparse_substep(sim, dt, ev, sub)
    out = {w: {k: [] for k in KINDS} for w in range(len(ways))}
    pairs = [(w, k) for k in kinds for w in range(len(ways))]
    spans = []  # per round {(way, kind): the block's median}
    for r in range(rounds):  # the states move on (the bricks grow): each round the blocks' order turns by one
        trend = []
        spans.append({})
        for w, k in pairs[r % len(pairs):] + pairs[:r % len(pairs)]:
            use_way(ways, w)
            if k == "synced":
                rows = [timed_sparse_substep(sim, dt, ev, sub) for _ in range(steps)]
                out[w][k] += rows
                spans[-1][(w, k)] = float(np.median([sum(x[0]) for x in rows]))
                trend.append(f"{w}:{k} {spans[-1][(w, k)]:.2f}")
            else:
                subs = pace.block(sim, dt, steps, k.startswith("step"), k.endswith("marked"))
                out[w][k] += subs
                spans[-1][(w, k)] = summary(subs)[0]["span"]
                trend.append(f"{w}:{k} {spans[-1][(w, k)]:.2f}")
        print(f"round {r}: {sim.grid.brick_count():,} bricks; block medians (ms a substep, device): "
              + ", ".join(trend), flush=True)
    print(f"{n}³, {len(sim.pos):,} particles, {sim.grid.brick_count():,} bricks; {rounds} rounds of {steps}-substep "
          "blocks a way and kind (module notes of bench/_sparse_pace.py)")
    for w, way in enumerate(ways):
        o = out[w]
        print(f"{' '.join(way) or '(defaults)'}:")
        if o["synced"]:
            ms = np.median(np.array([r[0] for r in o["synced"]]), axis=0)
            print("   synced row | " + " | ".join(f"{k} {m:.3f}" for k, m in zip(stages, ms))
                  + f" | substep {sum(ms):.2f} ms | CG it {[r[1] for r in o['synced']]}")
        for name in ("substep", "step"):
            if not o[name] or not o[name + " marked"]:
                continue
            plain, marked = summary(o[name])[0], summary(o[name + " marked"])
            med, rows = marked
            print(f"   {name:7s} paced: device {plain['span']:.3f} ms a substep (host {plain['host']:.3f}); marked: "
                  f"device {med['span']:.3f} (host {med['host']:.3f}), idle {med['idle']:.3f}, busy {med['busy']:.3f}")
            print(f"      lag (ms) at: {lag_line(o[name + ' marked'])}")
            print("      idle pieces (medians a substep: host Δ / device Δ / launches / idle): " + "; ".join(
                f"{k} {h:.3f}/{d:.3f}/{n_:.0f}/{i:.3f}" for k, h, d, n_, i in rows if i > 0.001))
            print("      longest pieces on the device (host Δ / device Δ / launches): " + "; ".join(
                f"{k} {h:.3f}/{d:.3f}/{n_:.0f}" for k, h, d, n_, _ in summary(o[name + " marked"], 14, 2)[1]))
    from voxfx.kernels.flip.sparse_topology_tables_ahead import counts

    if counts["queued"]:  # VOXFX_SPARSE_TABLES_AHEAD=1's tables: queued ahead of the flags read, taken after it
        print(f"tables ahead of the flags read: queued {counts['queued']}, taken {counts['taken']}")
    from voxfx.kernels.flip.sparse_g2p_marks import counts as marked

    if marked["made"]:  # VOXFX_SPARSE_G2P_MARKS=1: the G2P's marks taken by the next substep's topology (s23j)
        print("G2P marks: " + ", ".join(f"{k} {v}" for k, v in marked.items()))
    for k in kinds if len(ways) > 1 else ():
        for w, (diffs, med) in paired(spans, k, len(ways)).items():
            print(f"paired by round, {k}: way {w} − way 0 (ms a substep) median {med:+.3f}; "
                  + " ".join(f"{d:+.2f}" for d in diffs))
    return out
