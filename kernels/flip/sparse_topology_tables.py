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

import numpy as np

from ..grid.sparse_join import JOIN_CHANNELS, join_arguments
from ..settings import env_choice
from .sparse_gpu import _NO_INDEX, CELLS
from . import sparse_topology_args as topology_args
from . import sparse_topology_tables_ahead as tables_ahead
from .sparse_topology_gpu import TOPOLOGY

# VOXFX_SPARSE_TOPOLOGY_TABLES: after an update, the slot tables, neighbours and marks by fused_tables (two
# launches, no fill) or the separate way (brick_tables' fills and launch, cell_neighbours, mark_walls, solid faces)
TABLES = ("fused", "separate")
# VOXFX_SPARSE_TOPOLOGY_FILL (fill_mode): after a fused update, the kept channels' fills of the added and freed
# slots by topology_cell_tables from the update's refill marks, or by retopologize (the A/B baseline)
FILLS = ("tables", "retopologize")
_NO_FILL = (np.uint64(0), *join_arguments([]))  # topology_cell_tables' fill arguments: no refill, no channel
_NO_FILL_MADE = []  # _NO_FILL's CScalars, made at the first use (sparse_topology_args)


def tables_mode() -> str:
    """``VOXFX_SPARSE_TOPOLOGY_TABLES``: ``fused`` (``fused_tables``) or ``separate`` (the A/B
    baseline: ``brick_tables`` and ``cell_neighbours`` after their fills, then ``mark_walls``
    and the zeroed solid faces): the same tables and marks."""
    return env_choice("VOXFX_SPARSE_TOPOLOGY_TABLES", TABLES)


def fill_mode() -> str:
    """``VOXFX_SPARSE_TOPOLOGY_FILL`` (``FILLS``): ``tables`` (the default; module notes) or
    ``retopologize``: the same channels."""
    return env_choice("VOXFX_SPARSE_TOPOLOGY_FILL", FILLS)


def fills_with_tables(grid, count: int, capacity: int) -> bool:
    """Whether ``fused_tables`` fills *count* kept channels (each one the joined kernels take,
    ``SparseMacGrid.retopologize`` checked) from the fused update's refill marks, for a pool of
    *capacity* slots (``retopologize`` asks before it grows them): CuPy, the fused tables,
    ``fill_mode()`` tables, at most ``JOIN_CHANNELS`` channels."""
    if grid.xp is np or not 0 < count <= JOIN_CHANNELS or capacity * CELLS >= 2 ** 31 - 1:
        return False
    return tables_mode() == "fused" and fill_mode() == "tables"


def ahead_marks(grid, plain: bool):
    """``SparseFlipGrid.update``'s request for the tables queued ahead of the flags read
    (``sparse_topology_tables_ahead``, ``VOXFX_SPARSE_TABLES_AHEAD=1`` with the fused tables): whether they
    write the marks (a grid without obstacles, the kernels serving it), else None (not queued)."""
    if tables_ahead.mode() != "1" or tables_mode() != "fused":
        return None
    from .sparse_gpu import available

    return bool(plain and available(grid))


def ahead_bound(grid) -> bool:
    """Whether the grid's next tables were queued ahead of the flags read (``sparse_topology_tables_ahead``:
    then ``retopologize`` fills the kept channels itself, the tables ahead take no refill marks)."""
    return tables_ahead.bound(grid)


def _no_fill(on: bool) -> tuple:
    """``_NO_FILL``, with *on* its scalars made once (``sparse_topology_args``)."""
    if not on:
        return _NO_FILL
    if not _NO_FILL_MADE:
        _NO_FILL_MADE.append(topology_args.made(_NO_FILL))
    return _NO_FILL_MADE[0]


def fused_tables(grid, marks: bool) -> None:
    """``SparseMacGrid._brick_tables`` of the grid's topology (its ``brick_slot`` the used
    slots) in two launches, no fill (``flip_sparse_topology.cu``'s ``topology_slot_tables``,
    ``topology_cell_tables``): slot_coords, brick_nbr and nbr, and with *marks*
    ``mark_walls``' channels, solid = wall and the solid faces 0 (a grid without obstacles)
    too. Each array is its own allocation, as the separate way's (one allocation of them all
    measured slower, H100: 0.27 against 0.20 ms synced: a fresh block of a new size each
    time; again with ``carve``'s cheaper views and the block at its size class, i24t3: the 8M
    stage 1.037 against 0.956 ms, substeps alternating; one carve of the eleven 29 µs of host time
    against 26 for their allocations; two sets kept on the grid, reused when nothing else held them,
    i24h: the tables' host 162–163 → 193–221 µs, views made over a kept set cost more than the pool's
    allocations: removed). The neighbours are looked up in the topology's brick index where one is cached
    for it (the fused update leaves it), else by search. Where ``retopologize`` left the kept channels'
    fills to the tables (``grid._table_fills``: the refill marks and the channels, ``fills_with_tables``)
    ``topology_cell_tables`` writes them, and clears that."""
    if getattr(grid, "_table_fills", None) is None and tables_ahead.take(grid, marks):
        return  # queued ahead of the flags read (sparse_topology_tables_ahead)
    cp, t = grid.xp, grid.topology
    cap = grid.capacity
    on = topology_args.kept()  # the scalars made once (sparse_topology_args)
    cached = getattr(grid, "_brick_index", None)
    index = cached[1] if cached is not None and cached[0] is t else (cp.zeros(1, cp.int32), *_NO_INDEX)
    tables = {"coords": cp.empty((cap, 3), cp.int32), "nbr27": cp.empty((cap, 27), cp.int32)}
    i64 = topology_args.i64
    TOPOLOGY.launch("topology_slot_tables", 27 * (t.count + cap), (t.keys, t.slots, i64(t.count, on),
                                                                   *topology_args.index_args(grid, index, on),
                                                                   grid.brick_slot, i64(cap, on), tables["coords"],
                                                                   tables["nbr27"]))
    grid.slot_coords, grid.brick_nbr = tables["coords"], tables["nbr27"]
    cells = cap * CELLS
    out = {"nbr": cp.empty((6, cells), cp.int32)}  # one allocation each, as the separate way's (the pool's sizes)
    if marks:
        out.update({name: cp.empty(cells, cp.uint8) for name in (*grid.EXISTS, "wall", "solid")})
        out.update({"solid_" + name: cp.empty(cells, cp.float32) for name in grid.FACES})
    names = [*grid.EXISTS, "wall", "solid", *("solid_" + n for n in grid.FACES)]
    channels = [out[n] for n in names] if marks else [out["nbr"]] * 5 + [tables["coords"]] * 3  # unused
    pending = getattr(grid, "_table_fills", None)
    fills = _no_fill(on)
    if pending is not None and pending[0].shape[0] >= cap and all(a.shape[0] == cells for a, _ in pending[1]):
        grid._table_fills = None  # taken: retopologize fills nothing
        fills = (pending[0], *join_arguments(pending[1]))
    _, dims, closed, _ = topology_args.grid_args(grid, on)
    TOPOLOGY.launch("topology_cell_tables", cells, (tables["nbr27"], grid.brick_slot, tables["coords"], i64(cells, on),
                                                    closed, *dims, out["nbr"], topology_args.i32(marks, on),
                                                    *channels, *fills))
    grid.nbr = out["nbr"]
    if marks:
        for name in names:
            grid[name] = out[name]

