"""``bench/flip_sparse.py --frames N --stages``' account of the sparse pressure solvers a frame
built (issue 24: the 8M Fast frames 6 and 10, 37 and 46 ms against 26–33, were those that built
one and two). ``SolverBuilds`` wraps, calling through: the solver lookup
(``sparse_pressure_solvers._solver``: why it built — first, level 0 outgrew its stride, the level
count changed, a new workspace generation), the solver's construction (host ms, the pool's
cudaMallocs in it, read from ``FrameStages``' hook), every graph capture (``GraphLoop.capture``:
host ms of the recording and instantiation, named by the recorded method — ``_start``,
``_iteration``, ``_block``) and each graph's first replay (host ms), the workspace's new
generations (``Workspace.tables``: host ms, the capacities before and after) and the solve-ahead
counts (``sparse_pressure_solve_ahead.counts``). ``lines()`` gives the frame's and forgets it."""

from __future__ import annotations

import time


class SolverBuilds:
    def __init__(self, mallocs):
        from voxfx.kernels.flip import sparse_pressure_gpu, sparse_pressure_solve_ahead, sparse_pressure_solvers
        from voxfx.kernels.flip import sparse_pressure_workspace
        from voxfx.kernels.grid import launch

        self.mallocs = mallocs  # FrameStages.mallocs: [count, host ms, bytes], counted by its hook
        self.ahead = sparse_pressure_solve_ahead.counts
        self.ahead0 = dict(self.ahead)
        self.events, self.last = [], None
        watch = self

        lookup = sparse_pressure_solvers._solver

        def solver(needs, *args, **kwargs):
            t0 = time.perf_counter()
            got = lookup(needs, *args, **kwargs)
            last, watch.last = watch.last, got
            if got is not last:
                why = []
                if last is None:
                    why.append("first")
                else:
                    if len(last.strides) != len(needs):
                        why.append(f"levels {len(last.strides)}→{len(needs)}")
                    if last.generation != got.generation:
                        why.append(f"generation {last.generation}→{got.generation}")
                    if len(last.strides) == len(needs):
                        why += [f"level {i} {n}>{s}" for i, (n, s) in enumerate(zip(needs, last.strides)) if n > s]
                watch.events.append(f"built ({', '.join(why) or 'other'}; needs {needs[0]}, strides "
                                    f"{list(got.strides)}, lookup {(time.perf_counter() - t0) * 1e3:.2f} ms)")
            return got

        sparse_pressure_solvers._solver = solver

        init = sparse_pressure_gpu.SparsePressureSolverGPU.__init__

        def built(solver_self, *args, **kwargs):
            t0, m0 = time.perf_counter(), list(watch.mallocs)
            init(solver_self, *args, **kwargs)
            n = watch.mallocs[0] - m0[0]
            watch.events.append(f"__init__ {(time.perf_counter() - t0) * 1e3:.2f} ms"
                                + (f" ({n} cudaMalloc {watch.mallocs[1] - m0[1]:.2f} ms)" if n else ""))

        sparse_pressure_gpu.SparsePressureSolverGPU.__init__ = built

        capture = launch.GraphLoop.capture

        def captured(loop):
            if loop.graph is not None or not loop.enabled or loop.failed:
                return capture(loop)
            t0 = time.perf_counter()
            graph = capture(loop)
            fn = loop._record()
            name = getattr(fn, "__name__", "?") + (f"{loop.args}" if loop.args else "")
            watch.events.append(f"capture {name} {(time.perf_counter() - t0) * 1e3:.2f} ms")
            return graph

        launch.GraphLoop.capture = captured

        run = launch.GraphLoop.run

        def ran(loop):
            if loop.launches or not loop.enabled or loop.failed:
                return run(loop)
            t0 = time.perf_counter()
            run(loop)
            fn = loop._record()
            watch.events.append(f"first run {getattr(fn, '__name__', '?')} {(time.perf_counter() - t0) * 1e3:.2f} ms"
                                " (with its capture where it made it)")

        launch.GraphLoop.run = ran

        tables = sparse_pressure_workspace.Workspace.tables

        def grown(ws, needs):
            before, t0 = ws.caps, time.perf_counter()
            caps = tables(ws, needs)
            if caps != before:
                watch.events.append(f"workspace generation {ws.generation} ({(time.perf_counter() - t0) * 1e3:.2f} ms;"
                                    f" caps {None if before is None else list(before[1:])} → {list(caps[1:])}, "
                                    f"needs {list(needs)})")
            return caps

        sparse_pressure_workspace.Workspace.tables = grown

    def lines(self) -> list:
        ahead = {k: v - self.ahead0.get(k, 0) for k, v in self.ahead.items()}
        self.ahead0 = dict(self.ahead)
        out = [f"   solve ahead {ahead}"] + [f"   solver event: {e}" for e in self.events]
        self.events = []
        return out
