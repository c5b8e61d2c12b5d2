"""What a ``sparse_pressure_workspace`` set-up hands out (split from that module, issue 24: no
behaviour change): level 0's unknowns (``Level0``, its tables filled where they are needed,
``fill_tables``) and ``build``'s views of the coarse levels' buffers (``_CoarseLevel``, and
``_Views`` / ``_Up``: ``down`` and ``up`` made when read, ``VIEWS`` "lazy")."""

from __future__ import annotations

import numpy as np

from . import sparse_pressure_setup as setup
from .sparse_multigrid import _Level


def fill_tables(tables_args, sizes, stride, nbr, diag, threads):
    """Level 0's nbr (6 rows of *stride*) and diag from a set-up's ``Level0._tables_args`` with
    the unknowns' counts in *sizes* (m at 1), over *threads* threads: unk_tables_strided, or with
    *nbr* None the diag alone (unk_diag_strided; ``sparse_pressure_vcycle.NBR_TABLE`` "skip").
    ``Level0.fill`` and the solve launched ahead (``sparse_pressure_solve_ahead``)."""
    cells, _, grid_nbr, size, position, diag8 = tables_args
    if nbr is None:
        setup._U.launch("unk_diag_strided", threads, (cells, sizes, diag8, diag))
    else:
        setup._U.launch("unk_tables_strided", threads, (cells, sizes, np.int32(stride), grid_nbr, size, position,
                                                        diag8, nbr, diag))


class Level0(setup._BrickUnknowns):
    """Level 0's unknowns found into the workspace (``unknowns``). Its nbr, diag and the
    prolongation onto it (``VCycle.up[0]``) are filled in where needed: ``fill`` straight into
    a solver's buffers of its stride, or (``nbr``, ``diag``, ``up``) into arrays of their own
    the first time they are read (the earlier path's shapes)."""

    def _check(self):
        from .sparse_pressure_workspace import current

        if not current(self):
            raise RuntimeError("the sparse pressure set-up's workspace was rebuilt since these unknowns were found")

    def fill(self, nbr, diag, stride, up=None):
        """nbr (6 rows of *stride*), diag and, with *up* (8 rows of *stride*), the
        prolongation from level 1, by unk_tables_strided and mgb_prolong; *nbr* None: diag
        alone, by unk_diag_strided (a solver without level 0's rows, ``sparse_pressure_vcycle.NBR_TABLE``)."""
        self._check()
        fill_tables(self._tables_args, self._tables_args[1], stride, nbr, diag, self.m + 1)
        if up is not None:
            cnt0, nbr27, map1, position1, cnt1 = self._prolong_args
            setup._B.launch("mgb_prolong", self.m + 1, (self._tables_args[0], cnt0, np.int32(stride), nbr27, map1,
                                                        position1, cnt1, up))

    def brick_words(self):
        """The table of flip_sparse_pressure_vcycle_bricks.cu (BT_* order: position, cells,
        nbr27, map1, level 1's position, the candidates' count) for this set-up's arrays
        (``sparse_pressure_vcycle``'s brick transfers; valid while its tables are current)."""
        self._check()
        _, nbr27, map1, position1, _ = self._prolong_args
        arrays = (self.position, self._tables_args[0], nbr27, map1, position1)
        return np.array([a.data.ptr for a in arrays] + [self.candidates], np.uint64)

    def _own(self):
        import cupy as cp

        if self._nbr is None:
            nbr, diag = cp.empty((6, self.m + 1), cp.int32), cp.empty(self.m + 1, cp.float32)
            self.fill(nbr, diag, self.m + 1)
            self._nbr, self._diag = nbr, diag

    @property
    def nbr(self):
        self._own()
        return self._nbr

    @property
    def diag(self):
        self._own()
        return self._diag

    def up(self):
        """The prolongation from level 1 onto this level, (8, m + 1) of its own."""
        import cupy as cp

        self._check()
        out = cp.empty((8, self.m + 1), cp.int32)
        cells, _, _, _, _, _ = self._tables_args
        cnt0, nbr27, map1, position1, cnt1 = self._prolong_args
        setup._B.launch("mgb_prolong", self.m + 1, (cells, cnt0, np.int32(self.m + 1), nbr27, map1, position1, cnt1,
                                                    out))
        return out


class _Views(list):
    """A list of table views each made when first read (an entry is a callable until then):
    ``build``'s ``up`` and ``down``, which a solver of the workspace never reads (its tables are
    the buffers themselves), so a set-up does not make them (``VIEWS``)."""

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        item = list.__getitem__(self, i)
        if callable(item):
            item = item()
            list.__setitem__(self, i, item)
        return item

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __add__(self, other):  # list's own would copy the entries unmade
        return list(self) + list(other)

    def __radd__(self, other):
        return list(other) + list(self)


class _Up(_Views):
    """``VCycle.up`` whose first table (onto level 0) is made when read (``Level0.up``): a
    solver of the workspace fills its own instead."""

    def __init__(self, items, level0):
        super().__init__([level0.up] + items)
        self.level0 = level0


def _rows(table, n):
    """The first *n* columns of a level's table (a view)."""
    return table[:, :n] if table.ndim == 2 else table[:n]


class _CoarseLevel(_Level):
    """A coarse level of the workspace (``build``): m and m_red; its nbr and diag the views of
    the workspace's buffers, made when read (``VIEWS`` "lazy")."""

    def __init__(self, m, m_red, tables, generation):
        self.m, self.m_red, self.keys, self.ws_generation = int(m), int(m_red), None, generation
        self._tables = tables

    @property
    def nbr(self):
        return self._tables["nbr"][:, :self.m + 1]

    @property
    def diag(self):
        return self._tables["diag"][:self.m + 1]
