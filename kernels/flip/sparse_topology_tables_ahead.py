"""The fused tables queued ahead of the topology's flags read (issue 24, helper s22f;
``VOXFX_SPARSE_TABLES_AHEAD``, ``"0"`` the A/B baseline).

bench/RESULTS.md s22d (``bench/flip_sparse.py --pace``, H100 80GB HBM3): after the merged pipeline's one
flags read the device has nothing queued until ``fused_tables`` launches — the read's return, the
fused update's slices and ``retopologize``'s Python, ~0.17 ms a substep of device idle — while before
the read the host waits ~0.13–0.15 ms for the device (``mark_occupied``, the fused update). With "1"
the flags are copied into the page-locked words behind an event, then ``topology_slot_tables_ahead``
and ``topology_cell_tables_ahead`` (``flip_sparse_topology_tables_ahead.cu``: the fused tables with the
new count and capacity from the flags on the device, over the fused update's outputs) are queued, and
the host waits on the event only: the tables run while the host reads the flags and does the Python
after the read, and their launches' host time falls in the wait. They write arrays made for
``room(capacity)`` slots (``sparse_topology_update.room``); ``fused_tables`` takes views of them at the
new capacity (``take``). Where the flags say no update (missed, beyond, the same bricks) or the new pool
passes the room, the kernels write nothing and the arrays are dropped: the tables are launched after the
read as before. The kept channels' fills stay ``retopologize``'s (no refill marks taken by the tables:
one joined launch after the read, queued behind the tables). The same tables, marks and channels to the
bit (``tests/gpu/test_flip_sparse_tables_ahead_gpu.py``; the kernels' host harness
``tests/unit/test_cuda_sparse_topology_tables_ahead_host.py``).

Measured (NVIDIA H100 80GB HBM3, driver 580.159.04, two calls; ``bench/flip_sparse.py --row 8m --pace 4
--pace-kinds step "step marked" --ab``, "0" and "1" alternating in one simulation, 7 runs in both orders): the
device's idle from the flags read to P2G 0.136–0.248 ms a substep (mean 0.188) → 0.055–0.158 (mean 0.086), what
is left mostly ``take``'s views with the device done (0.04–0.08); the paced step per round, "1" less "0": medians
−0.09 / −0.10 / −0.14 with "0" first, +0.10 / +0.03 / −0.03 with "1" first (the second way reads ~0.07 lower
whatever it is): ~−0.04 ms, not resolved; the Fast frames in one process (36 frames, ``--frames --ab``) 6–35
summed 858.5 → 856.5 ms, the same particles to the bit. Opt-in: "0" stays the default.
"""

from __future__ import annotations

import numpy as np

from ..grid.launch import Kernels
from ..settings import env_choice
from . import sparse_topology_args as topology_args
from .particles import THREADS
from .sparse_gpu import CELLS
from .sparse_topology_update import room

AHEAD = Kernels("flip_sparse_topology_tables_ahead.cu", (), THREADS)
# VOXFX_SPARSE_TABLES_AHEAD: "1" the fused tables queued behind the flags' copy, before the host waits on it;
# (the default since session 22, with VOXFX_SPARSE_OCCUPIED_AHEAD: sparse_topology_ahead.py's notes);
# "0" (the A/B baseline) the flags read with a stream sync and the tables launched after it
MODES = ("0", "1")
counts = {"queued": 0, "taken": 0}  # tables queued ahead, and taken by fused_tables (the GPU tests read them)


def mode(given=None) -> str:
    """``VOXFX_SPARSE_TABLES_AHEAD`` (``MODES``; module notes), or *given*."""
    return env_choice("VOXFX_SPARSE_TABLES_AHEAD", MODES, given, default="1")


def sizes(count: int, capacity: int, added: int, freed: int) -> tuple[int, int]:
    """The new topology's (key count, pool capacity) after an update of *added* and *freed* bricks
    (``Topology.update``'s: the pool grows only past its free slots), as the kernels' ``ahead_sizes``."""
    n_new = count - freed + added
    return n_new, max(capacity, n_new)


def _event(grid):
    """The grid's kept event for the flags' copy."""
    event = getattr(grid, "_tables_ahead_event", None)
    if event is None:
        import cupy as cp

        event = grid._tables_ahead_event = cp.cuda.Event(disable_timing=True)
    return event


def read(grid, flags, host, index, out, on):
    """The merged pipeline's flags read into *host* (page-locked words): with ``mode()`` "1" and the
    grid's update asking for the fused tables (``grid._ahead_marks``: the marks flag, set by
    ``SparseFlipGrid.update``), the copy behind an event, the tables queued (*index*: the grid's
    ``brick_index``, *out*: ``launch_fused_update``'s outputs, *on*: the kept scalars) and the wait on the
    event; else ``flags.get``. Returns *host*."""
    grid._tables_ahead = None
    marks = getattr(grid, "_ahead_marks", None)
    cap = grid.capacity
    slots = room(cap)
    if marks is None or mode() != "1" or slots * CELLS >= 2 ** 31 - 1:
        return flags.get(out=host)
    import cupy as cp

    stream = cp.cuda.get_current_stream()
    cp.cuda.runtime.memcpyAsync(host.ctypes.data, flags.data.ptr, 40, cp.cuda.runtime.memcpyDeviceToHost, stream.ptr)
    event = _event(grid)
    event.record(stream)
    count = grid.topology.count
    arrays = _queue(grid, flags, index, out, on, count, cap, slots, marks)
    counts["queued"] += 1
    event.synchronize()
    missed, beyond, added, freed = (int(host[i]) for i in range(4))
    n_new, cap_new = sizes(count, cap, added, freed)
    if not (missed or beyond or (added == 0 and freed == 0) or cap_new > slots):
        grid._tables_ahead = {"topology": None, "capacity": cap_new, "marks": marks, "arrays": arrays}
    return host


def _queue(grid, flags, index, out, on, count: int, cap: int, slots: int, marks: bool) -> dict:
    """``topology_slot_tables_ahead`` and ``topology_cell_tables_ahead`` into arrays for *slots* slots."""
    cp = grid.xp
    cells = slots * CELLS
    a = {"coords": cp.empty(3 * slots, cp.int32), "nbr27": cp.empty(27 * slots, cp.int32),
         "nbr": cp.empty(6 * cells, cp.int32)}
    names = [*grid.EXISTS, "wall", "solid", *("solid_" + n for n in grid.FACES)]
    if marks:
        a.update({name: cp.empty(cells, cp.uint8) for name in names[:5]})
        a.update({name: cp.empty(cells, cp.float32) for name in names[5:]})
    channels = [a[n] for n in names] if marks else [a["nbr"]] * 5 + [a["coords"]] * 3  # unused without marks
    i64 = topology_args.i64
    n_old, c_old, room_slots = i64(count, on), i64(cap, on), i64(slots, on)
    new_index = topology_args.index_args(grid, (out["index"], *index[1:]), on)
    AHEAD.launch("topology_slot_tables_ahead", 54 * slots,
                 (flags, out["keys"], out["slots"], n_old, *new_index, out["used"], c_old, room_slots, a["coords"],
                  a["nbr27"]))
    _, dims, closed, _ = topology_args.grid_args(grid, on)
    AHEAD.launch("topology_cell_tables_ahead", cells,
                 (flags, n_old, c_old, room_slots, a["nbr27"], out["used"], a["coords"], closed, *dims, a["nbr"],
                  topology_args.i32(marks, on), *channels))
    return a


def bind(grid, topology) -> None:
    """The pending tables (``read``'s) belong to *topology*, the fused update's new one."""
    pending = getattr(grid, "_tables_ahead", None)
    if pending is not None:
        pending["topology"] = topology


def bound(grid) -> bool:
    """Whether tables queued ahead wait for the grid's next ``fused_tables``."""
    pending = getattr(grid, "_tables_ahead", None)
    return pending is not None and pending["topology"] is not None


def take(grid, marks: bool) -> bool:
    """``fused_tables``' arrays from the tables queued ahead for the grid's topology (views at its
    capacity), installed on *grid*; False (and dropped) where there are none for it."""
    pending = getattr(grid, "_tables_ahead", None)
    if pending is None:
        return False
    grid._tables_ahead = None
    cap = grid.capacity
    if pending["topology"] is not grid.topology or pending["capacity"] != cap or pending["marks"] != marks:
        return False
    a = pending["arrays"]
    view = type(a["nbr"])  # cupy.ndarray over the allocation's memory
    cells = cap * CELLS
    grid.slot_coords = view((cap, 3), np.int32, memptr=a["coords"].data)
    grid.brick_nbr = view((cap, 27), np.int32, memptr=a["nbr27"].data)
    grid.nbr = view((6, cells), np.int32, memptr=a["nbr"].data)
    if marks:
        for name in (*grid.EXISTS, "wall", "solid"):
            grid[name] = view(cells, np.uint8, memptr=a[name].data)
        for name in grid.FACES:
            grid["solid_" + name] = view(cells, np.float32, memptr=a["solid_" + name].data)
    counts["taken"] += 1
    return True
