"""A CuPy memory hook for the benches (``flip_sparse.py --memory-trace``): live pool bytes per
allocation, the high-water mark, the stage it was reached in and the largest live arrays
then, by the source line that allocated them."""

from __future__ import annotations

from pathlib import Path


class MemoryTrace:
    """Live pool bytes per allocation (a CuPy memory hook): the high-water mark, the stage
    it was reached in and the largest live arrays then, by allocating source line."""

    def __init__(self):
        import cupy as cp
        from cupy.cuda import memory_hook

        class Hook(memory_hook.MemoryHook):
            name = "voxfx_trace"

            def malloc_postprocess(hook, **kw):
                self.malloc(kw.get("mem_ptr"), int(kw.get("mem_size", kw.get("size", 0))))

            def free_postprocess(hook, **kw):
                self.free(kw.get("mem_ptr"), int(kw.get("mem_size", kw.get("size", 0))))

        self.cp, self.hook = cp, Hook()
        self.live, self.bytes, self.peak, self.stage, self.at_peak = {}, 0, 0, "set-up", []
        self.peak_stage = self.stage

    def where(self):
        import traceback

        for frame in reversed(traceback.extract_stack()[:-3]):
            if "/kernels/" in frame.filename or "/bench/" in frame.filename:
                return f"{Path(frame.filename).name}:{frame.lineno} {frame.name}"
        return "?"

    def malloc(self, ptr, size):
        self.live[ptr] = (size, self.stage, self.where())
        self.bytes += size
        if self.bytes > self.peak:
            self.peak = self.bytes
            self.peak_stage = self.stage
            self.at_peak = None  # taken lazily: the largest live arrays at the peak

    def free(self, ptr, size):
        if ptr in self.live:
            if self.at_peak is None:
                self.at_peak = sorted(self.live.values(), reverse=True)[:12]
            self.bytes -= self.live.pop(ptr)[0]

    def report(self):
        pool = self.cp.get_default_memory_pool()
        top = self.at_peak if self.at_peak is not None else sorted(self.live.values(), reverse=True)[:12]
        lines = [f"   memory trace: live peak {self.peak / 2 ** 20:.0f} MiB in stage {self.peak_stage}, pool "
                 f"{pool.total_bytes() / 2 ** 20:.0f} MiB (cached blocks included); largest live then:"]
        lines += [f"     {size / 2 ** 20:8.1f} MiB  {stage:12s} {where}" for size, stage, where in top]
        return "\n".join(lines)
