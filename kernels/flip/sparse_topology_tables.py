"""The sparse FLIP grid's tables after a topology update on the device (seed 003 §5.1–5.2),
launched from ``sparse_grid.py`` (``SparseFlipGrid._brick_tables``); the update itself is
``sparse_topology_gpu.py``'s, and these kernels are ``flip_sparse_topology.cu``'s too.

The tables after an update (``fused_tables``, ``VOXFX_SPARSE_TOPOLOGY_TABLES=fused``, the default;
``separate`` the A/B baseline): ``topology_slot_tables`` writes every slot's coordinates and 27
neighbours (the keys' threads look them up in the new brick index the fused update left, the free
slots' threads write their rows: no fill first), ``topology_cell_tables`` each cell's six
neighbours and, without obstacles, the marks (``mark_walls``', the same ``voxfx_sparse_marks.cuh``)
and the zeroed solid faces: two launches for brick_tables' two fills and launch,
cell_neighbours, mark_walls and three zeroed faces, the same tables and marks to the bit. NVIDIA
H100 80GB HBM3, 8M dam break, 3,337 bricks (``bench/flip_sparse_topology.py --modes fused
--tables separate fused``, the same states, bit-identical every substep): the update 0.822 →
0.773 ms median (mean 0.807 → 0.742), the tables' kernels 60 → 56 µs.

The kept channels' fills with the tables (``fills_with_tables``, ``VOXFX_SPARSE_TOPOLOGY_FILL=tables``,
the default; ``retopologize`` the A/B baseline): after a fused update ``retopologize`` fills every
channel it keeps (the warm start's carried pressure; with time-centred advection the six kept faces
and masks too) with its background in the added and freed slots, a launch a channel (or one for all,
``sparse_join.join_kept``). The fused update marks those slots (its refill bytes, written before the
host read), and ``topology_cell_tables``, which visits every pool cell anyway, writes the backgrounds
of up to eight channels in the marked slots' cells: no fill launch of its own after the read. The
same channels to the bit (host harnesses ``test_cuda_sparse_topology_fused_host.py``,
``test_cuda_sparse_topology_tables_host.py``; ``tests/gpu``). NVIDIA H100 80GB HBM3, driver 580.159.04,
8M dam break, ways alternating in one simulation, with ``VOXFX_SPARSE_KEPT_JOIN`` (``sparse_join``):
``bench/flip_sparse_topology_stage.py --kept-channels`` (seven kept channels) stage 1.153 → 0.980 ms,
host after the read 719 → 515 µs, 14 → 8 launches a changed substep (``fused_tables`` itself 181 →
222 µs of host: the fills' arguments); ``bench/flip_sparse.py --row 8m --ab`` (the carried pressure
alone) topology 0.731 → 0.676 ms.
"""

from __future__ import annotations

import math
from sys import getrefcount

import numpy as np

from ..grid.sparse_join import JOIN_CHANNELS, join_arguments
from ..settings import env_choice
from .sparse_gpu import _I32, _I64, _NO_INDEX, CELLS, _dims
from .sparse_topology_gpu import TOPOLOGY
from .sparse_topology_update import room

# VOXFX_SPARSE_TOPOLOGY_TABLES: after an update, the slot tables, neighbours and marks by fused_tables (two
# launches, no fill) or the separate way (brick_tables' fills and launch, cell_neighbours, mark_walls, solid faces)
TABLES = ("fused", "separate")
# VOXFX_SPARSE_TOPOLOGY_FILL (fill_mode): after a fused update, the kept channels' fills of the added and freed
# slots by topology_cell_tables from the update's refill marks, or by retopologize (the A/B baseline)
FILLS = ("tables", "retopologize")
# VOXFX_SPARSE_TOPOLOGY_TABLE_SETS (table_sets_mode): fused_tables' eleven arrays taken from two sets kept on the grid
# (table_arrays; the default, i24h) or allocated each update (fresh, the A/B baseline)
TABLE_SETS = ("kept", "fresh")
_NO_FILL = (np.uint64(0), *join_arguments([]))  # topology_cell_tables' fill arguments: no refill, no channel


def tables_mode() -> str:
    """``VOXFX_SPARSE_TOPOLOGY_TABLES``: ``fused`` (``fused_tables``) or ``separate`` (the A/B
    baseline: ``brick_tables`` and ``cell_neighbours`` after their fills, then ``mark_walls``
    and the zeroed solid faces): the same tables and marks."""
    return env_choice("VOXFX_SPARSE_TOPOLOGY_TABLES", TABLES)


def fill_mode() -> str:
    """``VOXFX_SPARSE_TOPOLOGY_FILL`` (``FILLS``): ``tables`` (the default; module notes) or
    ``retopologize``: the same channels."""
    return env_choice("VOXFX_SPARSE_TOPOLOGY_FILL", FILLS)


def table_sets_mode() -> str:
    """``VOXFX_SPARSE_TOPOLOGY_TABLE_SETS`` (``TABLE_SETS``): ``kept`` (the default; ``table_arrays``)
    or ``fresh``: the same tables and marks."""
    return env_choice("VOXFX_SPARSE_TOPOLOGY_TABLE_SETS", TABLE_SETS)


def fills_with_tables(grid, count: int, capacity: int) -> bool:
    """Whether ``fused_tables`` fills *count* kept channels (each one the joined kernels take,
    ``SparseMacGrid.retopologize`` checked) from the fused update's refill marks, for a pool of
    *capacity* slots (``retopologize`` asks before it grows them): CuPy, the fused tables,
    ``fill_mode()`` tables, at most ``JOIN_CHANNELS`` channels."""
    if grid.xp is np or not 0 < count <= JOIN_CHANNELS or capacity * CELLS >= 2 ** 31 - 1:
        return False
    return tables_mode() == "fused" and fill_mode() == "tables"


def _table_parts(cap: int, marks: bool, names) -> dict:
    """``fused_tables``' arrays for *cap* slots: {name: (shape, dtype)}."""
    cells = cap * CELLS
    parts = {"coords": ((cap, 3), np.int32), "nbr27": ((cap, 27), np.int32), "nbr": ((6, cells), np.int32)}
    if marks:
        parts.update({name: ((cells,), np.float32 if name.startswith("solid_") else np.uint8) for name in names})
    return parts


def _refs(arrays) -> list:
    """Each of *arrays*' references, its pointer's and its memory's (every view of one adds to one
    of them: a slice holds the array, a ``carve``-style view its pointer, a ``segment`` or an offset
    view its memory): ``table_arrays`` compares them with those taken when only its set held them."""
    return [(getrefcount(a), getrefcount(a.data), getrefcount(a.data.mem)) for a in arrays]


def table_arrays(grid, cap: int, marks: bool, names) -> dict:
    """``fused_tables``' arrays (coords, nbr27, nbr and with *marks* the mark channels *names*) for a
    pool of *cap* slots. ``table_sets_mode()`` fresh (the A/B baseline): eleven allocations, as the
    separate way's. ``kept`` (the default, i24h): views at the start of one of the grid's kept sets
    of allocations (one an array, made for ``room(cap)`` slots: a pool that grows within the room
    keeps its sets), of this mark way and stream, that nothing outside the set holds: its arrays'
    and views' references, pointers' and memories' as when the set last made its views (the grid's
    attributes, a slice, a ``segment`` or a cache such as the pressure set-up's ``_pressure_memo``,
    which holds the ``nbr`` it was built from, each keep a set). The grid holds the set it installed
    last, so a changed substep writes the other: no allocation, and no view made while the capacity
    holds. The kernels write every element (``topology_slot_tables`` each slot's row, free or used;
    ``topology_cell_tables`` each cell), so what a set held before is never read: the same tables
    and marks to the bit. The spare set holds ~41 B a pool cell (nbr 24, the marks 17) and 120 B a
    slot, a quarter more for the room: the blocks the memory pool would hold free between two
    changed substeps anyway."""
    cp = grid.xp
    parts = _table_parts(cap, marks, names)
    if cap == 0 or table_sets_mode() != "kept":
        return {name: cp.empty(shape, dtype) for name, (shape, dtype) in parts.items()}
    key = (marks, cp.cuda.get_current_stream().ptr)
    sets = getattr(grid, "_table_sets", ())
    for kept in sets:  # [key, room, bases, views, refs]
        if kept[0] == key and kept[1] >= cap and _refs(kept[2] + tuple(kept[3].values())) == kept[4]:
            views = kept[3]
            if views["coords"].shape[0] != cap:
                views = _views(kept, parts)
            return views
    slots = room(cap)
    kept = [key, slots, tuple(cp.empty(math.prod(shape), dtype) for shape, dtype in
                              _table_parts(slots, marks, names).values()), None, None]
    installed = grid.nbr
    grid._table_sets = tuple(s for s in sets if s[0] == key and s[3]["nbr"] is installed)[-1:] + (kept,)
    return _views(kept, parts)


def _views(kept: list, parts: dict) -> dict:
    """*kept*'s set's views for *parts* (each at the start of its allocation), kept in the set with
    the set's references then (``_refs``)."""
    ndarray = type(kept[2][0])
    views = kept[3] = {name: ndarray(shape, dtype, memptr=base.data)
                       for (name, (shape, dtype)), base in zip(parts.items(), kept[2])}
    kept[4] = _refs(kept[2] + tuple(views.values()))
    return views


def fused_tables(grid, marks: bool) -> None:
    """``SparseMacGrid._brick_tables`` of the grid's topology (its ``brick_slot`` the used
    slots) in two launches, no fill (``flip_sparse_topology.cu``'s ``topology_slot_tables``,
    ``topology_cell_tables``): slot_coords, brick_nbr and nbr, and with *marks*
    ``mark_walls``' channels, solid = wall and the solid faces 0 (a grid without obstacles)
    too. The arrays are ``table_arrays``' (by default views of a set kept on the grid; ``fresh``: each
    its own allocation, as the separate way's; one allocation of them all
    measured slower, H100: 0.27 against 0.20 ms synced: a fresh block of a new size each
    time; again with ``carve``'s cheaper views and the block at its size class, i24t3: the 8M
    stage 1.037 against 0.956 ms, substeps alternating; one carve of the eleven 29 µs of host time
    against 26 for their allocations). The neighbours are looked up in the topology's brick index where one is cached
    for it (the fused update leaves it), else by search. Where ``retopologize`` left the kept channels'
    fills to the tables (``grid._table_fills``: the refill marks and the channels, ``fills_with_tables``)
    ``topology_cell_tables`` writes them, and clears that."""
    cp, t = grid.xp, grid.topology
    cap = grid.capacity
    cached = getattr(grid, "_brick_index", None)
    index = cached[1] if cached is not None and cached[0] is t else (cp.zeros(1, cp.int32), *_NO_INDEX)
    names = [*grid.EXISTS, "wall", "solid", *("solid_" + n for n in grid.FACES)]
    out = table_arrays(grid, cap, marks, names)
    TOPOLOGY.launch("topology_slot_tables", 27 * (t.count + cap), (t.keys, t.slots, _I64(t.count), *index,
                                                                   grid.brick_slot, _I64(cap), out["coords"],
                                                                   out["nbr27"]))
    grid.slot_coords, grid.brick_nbr = out["coords"], out["nbr27"]
    cells = cap * CELLS
    channels = [out[n] for n in names] if marks else [out["nbr"]] * 5 + [out["coords"]] * 3  # unused
    pending = getattr(grid, "_table_fills", None)
    fills = _NO_FILL
    if pending is not None and pending[0].shape[0] >= cap and all(a.shape[0] == cells for a, _ in pending[1]):
        grid._table_fills = None  # taken: retopologize fills nothing
        fills = (pending[0], *join_arguments(pending[1]))
    TOPOLOGY.launch("topology_cell_tables", cells, (out["nbr27"], grid.brick_slot, out["coords"], _I64(cells),
                                                    _I32(grid.closed), *_dims(grid), out["nbr"], _I32(marks),
                                                    *channels, *fills))
    grid.nbr = out["nbr"]
    if marks:
        for name in names:
            grid[name] = out[name]

