"""``bench/flip_sparse.py --frames N --stages``: where a frame's time goes (issue 24: the 8M
Fast frames' step grows 22–24 → 25–29 ms after the splash, frame 10 ~46 ms; the level set
4 → 7–10 ms). ``FrameStages`` wraps, calling through, the substep's stage functions (the
outermost call only: a stage inside another counts to the outer one) with a CUDA event
and the host clock on each side, counts the device allocations CuPy's pool makes
(``cudaMalloc``: a memory hook's ``alloc`` callbacks, with their host ms) and the sparse
pressure solvers built, and times the level set's own stages (``surface_gpu.PROFILE``);
``report()`` gives the frame's lines and starts the next frame's count.

Beside the stages (helper h17b): the device time *between* the stages (from one stage's closing
event to the next one's opening event: the device idle, waiting for the host, or running kernels
no stage wraps — the P2G tail's ring and boundaries, the fluid faces), the span from the first
stage's opening event to the last one's closing event against the step's wall clock (the rest is
the host before the first stage and the wait for the device at the step's end), the cyclic
garbage collector's passes (``gc.callbacks``: count per generation and host ms) and the topology's
reads (``sparse_topology_gpu.incremental_keys`` calls, a second one a substep being the pipeline
run again with a larger learned margin, and ``full_keys``, the build from nothing), the array path's
builds (``SparseFlipGrid.topology_keys``: where the device pipeline does not serve the margin — helper
h20g: the 65M Fast frames 10–11 with the brick smoother, spray ~300 cells a substep past the classes'
256, spent 22–34 s there) and the largest margin asked of the topology in the frame."""

from __future__ import annotations

import gc
import importlib
import time

# (module, attribute path, stage) of a substep (sparse_sim.SparseFlipSimulation.substep and step)
STEP_STAGES = (
    ("voxfx.kernels.flip.sparse_sim", "SparseFlipSimulation._substep_speed", "speed"),
    ("voxfx.kernels.flip.sparse_grid", "SparseFlipGrid.update", "topology"),
    ("voxfx.kernels.flip.sparse_transfer", "particles_to_grid", "p2g"),
    ("voxfx.kernels.flip.sparse_transfer", "classify", "classify"),
    ("voxfx.kernels.flip.sparse_transfer", "extrapolate", "extrapolate"),
    ("voxfx.kernels.flip.sparse_transfer", "enforce_boundaries", "boundaries"),
    ("voxfx.kernels.flip.sparse_pressure", "solve_pressure", "pressure"),
    ("voxfx.kernels.flip.sparse_pressure", "project", "project"),
    ("voxfx.kernels.flip.sparse_transfer", "g2p_advect", "g2p"),
    ("voxfx.kernels.flip.sparse_sim", "SparseFlipSimulation._limit_count", "count control"),
)
SOLVER = ("voxfx.kernels.flip.sparse_pressure_gpu", "SparsePressureSolverGPU.__init__")


def _owner(module, path):
    """(object holding the attribute, its name) for *module*'s dotted *path*."""
    *outer, name = path.split(".")
    owner = importlib.import_module(module)
    for part in outer:
        owner = getattr(owner, part)
    return owner, name


class FrameStages:
    def __init__(self, cp):
        from cupy.cuda import memory_hook

        self.cp = cp
        self.depth = 0
        self.calls = []  # (stage, event before, event after, host ms, cudaMallocs, their ms, their bytes)
        self.mallocs = [0, 0.0, 0]  # count, host ms, bytes
        self.solvers = 0
        self.gc = [0, 0, 0, 0.0]  # collections of generation 0, 1, 2, their host ms
        self.topology = {"incremental_keys": 0, "full_keys": 0, "array_keys": 0, "margin": 0}
        watch = self

        def collected(phase, info):
            if phase == "start":
                watch._gc_at = time.perf_counter()
            elif getattr(watch, "_gc_at", None) is not None:
                watch.gc[min(int(info.get("generation", 0)), 2)] += 1
                watch.gc[3] += (time.perf_counter() - watch._gc_at) * 1e3
                watch._gc_at = None

        gc.callbacks.append(collected)
        for name in ("incremental_keys", "full_keys"):
            owner, _ = _owner("voxfx.kernels.flip.sparse_topology_gpu", name)
            setattr(owner, name, self._counted(getattr(owner, name), name))
        owner, _ = _owner("voxfx.kernels.flip.sparse_grid", "SparseFlipGrid.topology_keys")
        owner.topology_keys = self._counted(owner.topology_keys, "array_keys")
        owner, _ = _owner("voxfx.kernels.flip.sparse_grid", "SparseFlipGrid.update")
        updated = owner.update

        def update(grid, pos, margin, *args, **kwargs):  # the margin asked (or learned on the device)
            try:
                return updated(grid, pos, margin, *args, **kwargs)
            finally:
                asked = margin if margin is not None else getattr(grid, "last_margin", None)
                watch.topology["margin"] = max(watch.topology["margin"], int(asked or 0))

        owner.update = update

        class Hook(memory_hook.MemoryHook):
            name = "voxfx_frame_stages"

            def alloc_preprocess(self, **kwargs):
                watch._alloc_at = time.perf_counter()

            def alloc_postprocess(self, **kwargs):
                watch.mallocs[0] += 1
                watch.mallocs[1] += (time.perf_counter() - watch._alloc_at) * 1e3
                watch.mallocs[2] += int(kwargs.get("mem_size", 0))

        self.hook = Hook()
        self.hook.__enter__()
        for module, path, stage in STEP_STAGES:
            owner, name = _owner(module, path)
            setattr(owner, name, self._timed(getattr(owner, name), stage))
        owner, name = _owner(*SOLVER)
        built = getattr(owner, name)

        def counted(*args, **kwargs):
            watch.solvers += 1
            return built(*args, **kwargs)

        setattr(owner, name, counted)
        from _solver_builds import SolverBuilds

        self.builds = SolverBuilds(self.mallocs)  # why each solver was built, and what it cost

    def _counted(self, fn, name):
        watch = self

        def counted(*args, **kwargs):
            watch.topology[name] += 1
            return fn(*args, **kwargs)

        return counted

    def _timed(self, fn, stage):
        watch = self

        def timed(*args, **kwargs):
            if watch.depth:
                return fn(*args, **kwargs)
            watch.depth += 1
            before = watch.cp.cuda.Event()
            before.record()
            t0, m0 = time.perf_counter(), list(watch.mallocs)
            try:
                return fn(*args, **kwargs)
            finally:
                after = watch.cp.cuda.Event()
                after.record()
                watch.calls.append((stage, before, after, (time.perf_counter() - t0) * 1e3,
                                    *(a - b for a, b in zip(watch.mallocs, m0))))
                watch.depth -= 1

        return timed

    def report(self, step_ms, level_set=None) -> list:
        """The frame's lines (stages' host / device ms, sums over its substeps, with the pool's
        cudaMallocs inside each; what the step spent outside them; solvers built) and the level
        set's stages (*level_set*: the ``surface_gpu.PROFILE`` list of its call, or None);
        forgets the frame's calls."""
        self.cp.cuda.Device().synchronize()
        sums = {}
        for stage, e0, e1, host, n, ms, nbytes in self.calls:
            s = sums.setdefault(stage, [0.0, 0.0, 0, 0, 0.0, 0])
            s[0] += host
            s[1] += self.cp.cuda.get_elapsed_time(e0, e1)
            s[2] += 1
            s[3] += n
            s[4] += ms
            s[5] += nbytes
        host = sum(s[0] for s in sums.values())
        parts = [f"{k} {s[0]:.2f}/{s[1]:.2f}" + (f" [{s[3]} mallocs {s[5] / 2 ** 20:.0f} MiB {s[4]:.1f} ms]"
                                                  if s[3] else "") for k, s in sums.items()]
        lines = ["   step stages host/device ms (sums over the substeps): " + ", ".join(parts)
                 + f"; outside them {step_ms - host:.2f}; cudaMalloc {self.mallocs[0]} "
                 f"({self.mallocs[2] / 2 ** 20:.0f} MiB, {self.mallocs[1]:.1f} ms) this frame incl. the level set; "
                 f"solvers built {self.solvers}"]
        lines += self._between_lines(step_ms, sums)
        if level_set:
            stages = [(name, self.cp.cuda.get_elapsed_time(e0, e1)) for (_, e0), (name, e1) in
                      zip(level_set, level_set[1:])]
            lines.append("   level set device ms: " + ", ".join(f"{k} {v:.2f}" for k, v in stages)
                         + f" (sum {sum(v for _, v in stages):.2f})")
        lines += self.builds.lines()
        self.gc[:] = [0, 0, 0, 0.0]
        self.topology = dict.fromkeys(self.topology, 0)
        self.calls, self.solvers = [], 0
        self.mallocs[:] = [0, 0.0, 0]  # the same list: SolverBuilds reads it
        return lines

    def _between_lines(self, step_ms, sums) -> list:
        """The device between the stages (summed by the stage that follows), the stages' device
        span against the step's wall clock, the garbage collector's passes and the topology's reads
        (module notes)."""
        if not self.calls:
            return []
        elapsed = self.cp.cuda.get_elapsed_time
        between = {}
        for (_, _, after, *_), (stage, before, *_) in zip(self.calls, self.calls[1:]):
            between[stage] = between.get(stage, 0.0) + elapsed(after, before)
        span = elapsed(self.calls[0][1], self.calls[-1][2])
        inside = sum(s[1] for s in sums.values())
        return [f"   device between stages {sum(between.values()):.2f} ms (before: "
                + ", ".join(f"{k} {v:.2f}" for k, v in between.items()) + f"); stages' span {span:.2f} of the "
                f"step's {step_ms:.2f} ms (in stages {inside:.2f}); gc {self.gc[0]}/{self.gc[1]}/{self.gc[2]} "
                f"passes (gen 0/1/2) {self.gc[3]:.2f} ms; topology reads: incremental_keys "
                f"{self.topology['incremental_keys']}, full_keys {self.topology['full_keys']}; array path "
                f"{self.topology['array_keys']}, largest margin {self.topology['margin']} cells"]
