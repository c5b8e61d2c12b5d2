"""What every sparse FLIP launch module shares: ``flip_sparse_transfer.cu``'s kernels
(``KERNELS``), whether they serve a grid (``available``), the launches' frame, size and
topology arguments (kept on the grid) and a closed domain's brick index. A pure move out of
``sparse_gpu.py`` (which re-exports these names: the other launch modules, tests and benches
import them there).

The kernels read ``SparseMacGrid``'s brick tables (``slot_coords``, ``brick_nbr``: a
stencil crosses a brick border with one table read); a point finds its brick by binary
search on the keys, or from the 27 bricks around its own; in a closed domain the
particle passes (``mark_occupied``, ``count_particles_sparse``) read a dense brick index
over the box instead (``brick_index``: one load, no search)."""

from __future__ import annotations

import numpy as np

from ..grid import mac
from ..grid.launch import Kernels
from .particles import PUSH_EPSILON, THREADS

KERNELS = Kernels("flip_sparse_transfer.cu", ("--fmad=false",), THREADS,
                  defines={**mac.CELL_TYPES, "PUSH_EPSILON": PUSH_EPSILON})
CELLS = 512
_I64, _I32 = np.int64, np.int32


def available(grid, *particles) -> bool:
    """The kernels serve *grid* (CuPy, int32 pool indices, brick tables built) and the
    *particles* arrays (C-contiguous float32, or None)."""
    if grid.xp is np or grid.size >= 2 ** 31 - 1 or getattr(grid, "brick_nbr", None) is None:
        return False
    return all(a is None or (a.dtype == np.float32 and a.flags.c_contiguous) for a in particles)


def _frame(grid):
    """The kernels' (ox, oy, oz, h, 1/h) float32 arguments, kept on the grid while its ``origin``
    and ``h`` are the same objects (made each call they were 5.6 µs a call of the topology stage's
    cProfile, ``_dims`` 2.8: the profiler's overhead included; H100 host, i24t5)."""
    origin, h = grid.origin, grid.h
    kept = getattr(grid, "_frame_args", None)
    if kept is not None and kept[0] is origin and kept[1] is h:
        return kept[2]
    f = np.float32
    out = (*(f(o) for o in origin), f(h), f(1.0 / h))
    _keep(grid, "_frame_args", (origin, h, out))
    return out


def _dims(grid):
    """The kernels' (nx, ny, nz) int32 arguments, kept on the grid while its ``shape`` is the same
    object (``_frame``'s way)."""
    shape = grid.shape
    kept = getattr(grid, "_dims_args", None)
    if kept is not None and kept[0] is shape:
        return kept[1]
    out = tuple(_I32(n) for n in shape)
    _keep(grid, "_dims_args", (shape, out))
    return out


def _keep(grid, name, value):
    try:
        setattr(grid, name, value)
    except AttributeError:  # a grid that takes no attributes: made each time
        pass


def _topo(grid):
    t = grid.topology
    return t.keys, t.slots, _I64(t.count)


INDEX_LIMIT = 1 << 22  # entries (16 MiB): a closed domain up to ~1300³ cells has a brick index
_NO_INDEX = (_I32(0),) * 6


def brick_index(grid):
    """The kernels' brick index arguments (``BRICK_INDEX_ARGS``): a closed domain's table of
    slots over its bricks and wall ring, built once per topology (one launch), or none
    (open domains, or a table over ``INDEX_LIMIT``): binary search instead."""
    t = grid.topology
    cached = getattr(grid, "_brick_index", None)
    if cached is not None and cached[0] is t:
        return cached[1]
    cp = grid.xp
    dims = tuple((int(n) >> 3) + 2 for n in grid.shape)
    if not grid.closed or dims[0] * dims[1] * dims[2] > INDEX_LIMIT:
        out = (cp.zeros(1, cp.int32), *_NO_INDEX)
    else:
        table = cp.full(dims[0] * dims[1] * dims[2], -1, cp.int32)
        lo = (_I32(-1),) * 3
        KERNELS.launch("brick_index_fill", int(t.count), (t.keys, t.slots, _I64(t.count), table, *lo,
                                                          *(_I32(d) for d in dims)))
        out = (table, *lo, *(_I32(d) for d in dims))
    grid._brick_index = (t, out)
    return out
