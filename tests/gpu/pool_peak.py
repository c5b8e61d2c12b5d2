"""The GPU memory tests' measure: the default CuPy pool's bytes in use at their highest
over a ``with`` block (a memory hook that looks at the pool after every allocation)."""


def pool_peak():
    """``with pool_peak() as hook: …`` then ``hook.peak``: the most bytes the default pool
    held in use from the block's start (what it held then included) to its end."""
    import cupy as cp
    from cupy.cuda import memory_hook

    pool = cp.get_default_memory_pool()

    class Peak(memory_hook.MemoryHook):
        name = "VoxFXTestPoolPeak"

        def __enter__(self):
            self.peak = pool.used_bytes()
            return super().__enter__()

        def malloc_postprocess(self, **kwargs):
            self.peak = max(self.peak, pool.used_bytes())

    return Peak()
