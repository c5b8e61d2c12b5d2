"""``bench/flip_sparse.py --frames N --stages``' account of the sparse pressure solvers a frame
built (issue 24: the 8M Fast frames 6 and 10, 37 and 46 ms against 26–33, were those that built
one and two). ``SolverBuilds`` wraps, calling through: the solver lookup
(``sparse_pressure_solvers._solver``: why it built — first, level 0 outgrew its stride, the level
count changed, a new workspace generation), the solver's construction (host ms, the pool's
cudaMallocs in it, read from ``FrameStages``' hook), every graph capture (``GraphLoop.capture``:
host ms of the recording and instantiation, named by the recorded method — ``_start``,
``_iteration``, ``_block``), each graph's first run (host ms), each solver's first solve (host
ms, beside the frame's other solves), the workspace's new
generations (``Workspace.tables``: host ms, the capacities before and after) and the solve-ahead
counts (``sparse_pressure_solve_ahead.counts``). ``lines()`` gives the frame's and forgets it."""

from __future__ import annotations

import time
import weakref


class SolverBuilds:
    def __init__(self, mallocs):
        from voxfx.kernels.flip import sparse_pressure_gpu, sparse_pressure_solve_ahead, sparse_pressure_solvers
        from voxfx.kernels.flip import sparse_pressure_workspace
        from voxfx.kernels.grid import launch

        self.mallocs = mallocs  # FrameStages.mallocs: [count, host ms, bytes], counted by its hook
        self.ahead = sparse_pressure_solve_ahead.counts
        self.ahead0 = dict(self.ahead)
        self.events, self.last = [], None
        self._lookup(sparse_pressure_solvers)
        self._solver(sparse_pressure_gpu.SparsePressureSolverGPU)
        self._graphs(launch.GraphLoop)
        self._tables(sparse_pressure_workspace.Workspace)

    def _lookup(self, sparse_pressure_solvers):
        watch = self
        lookup = sparse_pressure_solvers._solver

        def solver(needs, *args, **kwargs):
            t0 = time.perf_counter()
            got = lookup(needs, *args, **kwargs)
            # the last solver weakly (a strong reference would keep a dropped solver's buffers)
            last, watch.last = watch.last, (weakref.ref(got), got.strides, got.generation)
            if last is None or last[0]() is not got:
                why = []
                if last is None:
                    why.append("first")
                else:
                    _, strides, generation = last
                    if len(strides) != len(needs):
                        why.append(f"levels {len(strides)}→{len(needs)}")
                    if generation != got.generation:
                        why.append(f"generation {generation}→{got.generation}")
                    if len(strides) == len(needs):
                        why += [f"level {i} {n}>{s}" for i, (n, s) in enumerate(zip(needs, strides)) if n > s]
                watch.events.append(f"built ({', '.join(why) or 'other'}; needs {list(needs)}, strides "
                                    f"{list(got.strides)}, lookup {(time.perf_counter() - t0) * 1e3:.2f} ms)")
            return got

        sparse_pressure_solvers._solver = solver

    def _solver(self, cls):
        watch = self
        init = cls.__init__

        def built(solver_self, *args, **kwargs):
            t0, m0 = time.perf_counter(), list(watch.mallocs)
            init(solver_self, *args, **kwargs)
            n = watch.mallocs[0] - m0[0]
            watch.events.append(f"__init__ {(time.perf_counter() - t0) * 1e3:.2f} ms"
                                + (f" ({n} cudaMalloc {watch.mallocs[1] - m0[1]:.2f} ms)" if n else ""))

        cls.__init__ = built

        solve = cls.solve
        self.solves = []  # host ms of the frame's solves that were not a solver's first

        def solved(solver_self, *args, **kwargs):
            t0 = time.perf_counter()
            out = solve(solver_self, *args, **kwargs)
            ms = (time.perf_counter() - t0) * 1e3
            if getattr(solver_self, "_bench_solved", False):
                watch.solves.append(ms)
            else:
                solver_self._bench_solved = True
                watch.events.append(f"first solve {ms:.2f} ms host ({out[1]} iterations, blocks run "
                                    f"{solver_self.loop.launches})")
            return out

        cls.solve = solved

    def _graphs(self, cls):
        watch = self
        capture = cls.capture

        def captured(loop):
            if loop.graph is not None or not loop.enabled or loop.failed:
                return capture(loop)
            t0 = time.perf_counter()
            graph = capture(loop)
            fn = loop._record()
            name = getattr(fn, "__name__", "?") + (f"{loop.args}" if loop.args else "")
            watch.events.append(f"capture {name} {(time.perf_counter() - t0) * 1e3:.2f} ms")
            return graph

        cls.capture = captured
        run = cls.run

        def ran(loop):
            if loop.launches or not loop.enabled or loop.failed:
                return run(loop)
            t0 = time.perf_counter()
            run(loop)
            fn = loop._record()
            watch.events.append(f"first run {getattr(fn, '__name__', '?')} {(time.perf_counter() - t0) * 1e3:.2f} ms"
                                " (with its capture where it made it)")

        cls.run = ran

    def _tables(self, cls):
        watch = self
        tables = cls.tables

        def grown(ws, needs, *args):
            before, t0 = ws.caps, time.perf_counter()
            caps = tables(ws, needs, *args)
            if caps != before:
                watch.events.append(f"workspace generation {ws.generation} ({(time.perf_counter() - t0) * 1e3:.2f} ms;"
                                    f" caps {None if before is None else list(before[1:])} → {list(caps[1:])}, "
                                    f"needs {list(needs)})")
            return caps

        cls.tables = grown

    def lines(self) -> list:
        ahead = {k: v - self.ahead0.get(k, 0) for k, v in self.ahead.items()}
        self.ahead0 = dict(self.ahead)
        others = sorted(self.solves)
        out = [f"   solve ahead {ahead}; other solves' host ms "
               + (f"{others[0]:.2f}–{others[-1]:.2f} ({len(others)})" if others else "none")]
        out += [f"   solver event: {e}" for e in self.events]
        self.events, self.solves = [], []
        return out
