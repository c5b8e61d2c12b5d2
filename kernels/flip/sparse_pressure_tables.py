"""``sparse_multigrid.TableBuilder``'s tables by the kernels of ``cuda/flip_sparse_pressure.cu``
level by level, the host reading each compaction's size (the "host" set-up,
``sparse_pressure_setup.SETUP``; the default "device" set-up is ``sparse_pressure_setup.py``).
Moved out of ``sparse_pressure_gpu.py`` (issue 24: that module's PCG grew)."""

from __future__ import annotations

import numpy as np

from .sparse_multigrid import _CellSet, _Level
from .sparse_pressure_gpu import _K


def _ints(values):
    return tuple(np.int32(v) for v in values)


def _bytes(flags):
    """A bool array as the uint8 the kernels read."""
    return flags.astype(np.uint8)


class TableKernels:
    """``sparse_multigrid.TableBuilder``'s tables by the kernels of flip_sparse_pressure.cu:
    the same integers, a handful of launches per level instead of a few hundred array
    operations (the host syncs only for the sizes of compactions)."""

    def __init__(self):
        import cupy as cp

        self.cp = cp

    def coarser(self, cells):
        cp = self.cp
        n = int(cells.keys.shape[0])
        base = cells.coarser_base()
        flag = cp.zeros(n, cp.uint8)
        _K.launch("mg_coarsen", n, (cells.keys, _bytes(cells.fluid), np.int32(n), *_ints(cells.base), flag))
        picked = cp.flatnonzero(flag)
        k = int(picked.shape[0])
        parents = cp.empty(k, cp.int64)
        _K.launch("mg_parent_keys", k, (cells.keys, picked, np.int32(k), *_ints(cells.base), *_ints(base), parents))
        return _CellSet(parents, flag[picked] == 2, base)

    def level(self, cells):
        cp = self.cp
        keys = cells.keys
        n = int(keys.shape[0])
        around = cp.empty((6, n), cp.int32)
        diag8 = cp.zeros(n, cp.uint8)
        cls = cp.zeros(n, cp.uint8)
        _K.launch("mg_level_cells", n, (keys, _bytes(cells.fluid), np.int32(n), *_ints(cells.base), around, diag8, cls))
        reds, blacks = cp.flatnonzero(cls == 1), cp.flatnonzero(cls == 2)
        order = cp.concatenate([reds, blacks])
        m = int(order.shape[0])
        cells.position = cp.full(n, m, cp.int32)
        cells.position[order] = cp.arange(m, dtype=cp.int32)
        nbr = cp.empty((6, m + 1), cp.int32)
        diag = cp.empty(m + 1, cp.float32)
        _K.launch("mg_level_tables", m + 1, (order, np.int32(m), around, np.int32(n), cells.position, diag8, nbr, diag))
        return _Level(m, reds.shape[0], nbr, diag, keys[order])

    def prolong(self, fine_keys, fine_base, coarse, m_coarse):
        mf = int(fine_keys.shape[0])
        up = self.cp.empty((8, mf + 1), self.cp.int32)
        _K.launch("mg_prolong_table", mf + 1, (fine_keys, np.int32(mf), *_ints(fine_base), coarse.keys,
                                               np.int32(coarse.keys.shape[0]), coarse.position, *_ints(coarse.base),
                                               np.int32(m_coarse), up))
        return up

    def restrict(self, coarse_keys, coarse_base, fine, m_fine):
        mc = int(coarse_keys.shape[0])
        down = self.cp.empty((64, mc + 1), self.cp.int32)
        _K.launch("mg_restrict_table", mc + 1, (coarse_keys, np.int32(mc), *_ints(coarse_base), fine.keys,
                                                np.int32(fine.keys.shape[0]), fine.position, *_ints(fine.base),
                                                np.int32(m_fine), down))
        return down

    def extent(self, keys, base) -> int:
        m = int(keys.shape[0])
        if m == 0:
            return 0
        span = self.cp.full(6, -(2 ** 31 - 1), self.cp.int32)
        _K.launch("mg_key_span", m, (keys, np.int32(m), span))
        s = [int(v) for v in span.get()]
        return max(s[a] + s[a + 3] for a in range(3)) + 1
