"""The pool's bytes in use by stage of a sparse liquid's frame (``memory_liquid.py --stages``):
a CuPy memory hook that counts the live bytes, the highest count while each stage was the
innermost one running (topology, P2G, pressure, the band's update and its parts, the
level set's virtual particles and kernels, ...), and at the frame's high-water mark the live
bytes by the stage and source line that allocated them (what holds the peak)."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path

# (module, attribute path, stage): the functions whose allocations are named by stage
STAGES = (
    ("voxfx.kernels.flip.sparse_grid", "SparseFlipGrid.update", "topology"),
    ("voxfx.kernels.flip.sparse_transfer", "particles_to_grid", "p2g"),
    ("voxfx.kernels.flip.sparse_transfer", "classify", "classify"),
    ("voxfx.kernels.flip.sparse_transfer", "extrapolate", "extrapolate"),
    ("voxfx.kernels.flip.sparse_transfer", "enforce_boundaries", "boundaries"),
    ("voxfx.kernels.flip.sparse_transfer", "g2p_advect", "g2p"),
    ("voxfx.kernels.flip.sparse_pressure", "solve_pressure", "pressure"),
    ("voxfx.kernels.flip.sparse_pressure", "project", "project"),
    ("voxfx.kernels.flip.sparse_band", "NarrowBand.snapshot", "band snapshot"),
    ("voxfx.kernels.flip.sparse_band", "NarrowBand.carry", "band carry"),
    ("voxfx.kernels.flip.sparse_band", "NarrowBand.update", "band update"),
    ("voxfx.kernels.flip.sparse_band", "NarrowBand.sample", "sample"),
    ("voxfx.kernels.flip.sparse_band", "NarrowBand._depths", "depths"),
    ("voxfx.kernels.flip.sparse_band", "NarrowBand._store", "store"),
    ("voxfx.kernels.flip.sparse_band", "NarrowBand._resample", "resample"),
    ("voxfx.kernels.flip.sparse_band", "NarrowBand.virtual_particles", "virtual particles"),
    ("voxfx.kernels.flip.sparse_sim", "SparseFlipSimulation.level_set", "level set"),
    ("voxfx.kernels.flip.surface_gpu", "_bricks_gpu", "level set kernels"),
    ("voxfx.kernels.flip.sim", "phi_out", "to host"),
)


def _site(depth: int = 2) -> str:
    """The innermost VoxFX source line (kernels/ or bench/) of the allocating call."""
    f = sys._getframe(depth)
    while f is not None:
        name = f.f_code.co_filename
        if ("/kernels/" in name or "/bench/" in name) and not name.endswith("_stage_trace.py"):
            return f"{Path(name).name}:{f.f_lineno} {f.f_code.co_name}"
        f = f.f_back
    return "?"


class StageTrace:
    """``memory_liquid.InUse``'s counts (``start``, ``reset``, ``peak``, ``hook``) and per
    frame ``frame_report()``: each stage's highest in-use bytes and the live bytes at the
    frame's peak by (stage, source line)."""

    def __init__(self, cp):
        from cupy.cuda import memory_hook

        watch = self

        class Hook(memory_hook.MemoryHook):
            name = "voxfx_stages"

            def malloc_postprocess(self, **kw):
                watch._malloc(kw.get("mem_ptr"), int(kw.get("mem_size", kw.get("size", 0))))

            def free_postprocess(self, **kw):
                watch._free(kw.get("mem_ptr"), int(kw.get("mem_size", 0)))

        self.hook, self.pool = Hook(), cp.get_default_memory_pool()
        self.stack, self.live, self.bytes, self.peak, self.base = [], {}, 0, 0, 0
        self.stage_peak, self.at_peak, self.dirty, self.calls = {}, {}, False, {}

    # ---------------------------------------------------------------- counting
    def stage(self) -> str:
        return "/".join(self.stack) or "frame"

    def _malloc(self, ptr, size):
        stage = self.stage()
        self.live[ptr] = (size, stage, _site(3))
        self.bytes += size
        if self.bytes > self.stage_peak.get(stage, 0):
            self.stage_peak[stage] = self.bytes
        if self.bytes > self.peak:
            self.peak, self.dirty = self.bytes, True

    def _free(self, ptr, size: int = 0):
        if self.dirty:
            self.at_peak, self.dirty = self.snapshot(), False
        entry = self.live.pop(ptr, None)
        if entry is not None:
            self.bytes -= entry[0]
        else:  # a block from before the row (counted in its base) freed now
            freed = min(int(size), self.base)
            self.bytes -= freed
            self.base -= freed

    def snapshot(self, top: int = 14) -> dict:
        """Live bytes by (stage, site), the largest *top* (the rest summed)."""
        sums = {}
        for size, stage, site in self.live.values():
            key = f"{stage} | {site}"
            sums[key] = sums.get(key, 0) + size
        items = sorted(sums.items(), key=lambda kv: -kv[1])
        out = dict(items[:top])
        rest = sum(v for _, v in items[top:])
        if rest:
            out["(rest)"] = rest
        if self.base:
            out["(held before the row)"] = self.base
        return out

    # ---------------------------------------------------------------- InUse's interface
    def start(self):
        self.live, self.base = {}, int(self.pool.used_bytes())
        self.bytes = self.peak = self.base

    def reset(self):
        self.peak, self.stage_peak, self.at_peak, self.dirty, self.calls = self.bytes, {}, {}, False, {}
        self.held_at_start = self.snapshot(10)

    def frame_report(self) -> dict:
        if self.dirty:
            self.at_peak, self.dirty = self.snapshot(), False
        return {"stage peaks": dict(sorted(self.stage_peak.items(), key=lambda kv: -kv[1])),
                "at peak": self.at_peak, "held at start": self.held_at_start, "calls": dict(self.calls)}

    # ---------------------------------------------------------------- naming the stages
    @contextmanager
    def stages(self):
        """Wrap ``STAGES``' functions so that what they allocate is named by stage."""
        import importlib

        undo = []
        for module, path, name in STAGES:
            owner = importlib.import_module(module)
            *outer, attr = path.split(".")
            for part in outer:
                owner = getattr(owner, part)
            original = owner.__dict__[attr] if attr in owner.__dict__ else getattr(owner, attr)
            setattr(owner, attr, self._wrap(original, name))
            undo.append((owner, attr, original))
        try:
            yield self
        finally:
            for owner, attr, original in reversed(undo):
                setattr(owner, attr, original)

    def _wrap(self, fn, name):
        import functools

        watch = self

        @functools.wraps(fn)
        def staged(*args, **kwargs):
            watch.stack.append(name)
            watch.calls[name] = watch.calls.get(name, 0) + 1
            try:
                return fn(*args, **kwargs)
            finally:
                watch.stack.pop()

        return staged
