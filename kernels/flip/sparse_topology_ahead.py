"""The topology's first kernel queued ahead of the step's speed read (issue 24, helper s22d;
``VOXFX_SPARSE_OCCUPIED_AHEAD``, ``AHEAD_MODES``).

``FlipSimulation.step`` reads the fastest particle's speed before each substep (its Δt: a host
read, the device drained), so each substep's topology starts on an idle device: the host's Python
from the read to the topology's first launch leaves it waiting (``bench/flip_sparse.py --pace``'s
step blocks, NVIDIA H100 80GB HBM3, 8M row: 0.052 ms from the read's return to the topology's entry,
then its own preamble, the device's lag ~0 there). That first kernel, ``mark_occupied`` (each particle
marks its cell in the current topology and its brick's largest |v|²), needs no Δt. With "1",
``SparseFlipSimulation._substep_speed`` reads the speed here (``speed_read``): the speed's copy into
page-locked memory and an event are queued, then the topology's scratch zeroed and ``mark_occupied``
(``launch``), and the host waits on the event only, so the kernel runs while the host computes Δt and
enters the substep. ``sparse_topology_gpu.incremental_keys`` takes it (``take``) where it would make
the very same launch next (the same topology, positions, velocities, brick index, scratch ways and
scalars; the merged pipeline by classes over the fused update's kept scratch, per-brick margins);
otherwise it zeroes the scratch again and marks as before. An ahead lives until the next ``take`` or
the end of the substep that follows (``drop``). The same kernel on the same inputs: the same bits.
"0" (the default until a device call says otherwise) is the A/B baseline."""

from __future__ import annotations

import numpy as np

from ..settings import env_choice
from . import sparse_topology_args as topology_args
from .sparse_topology_update import TOPOLOGY

# VOXFX_SPARSE_OCCUPIED_AHEAD: "1" the default since session 22 (with VOXFX_SPARSE_TABLES_AHEAD "1": H100 80GB HBM3,
# bench/flip_sparse.py --row 8m --pace 4 --rounds 12, the step blocks both aheads against neither, paired by round:
# −0.193 ms a substep with neither first, −0.195 with both first; the sparse FLIP, topology, ahead and args GPU files
# 51 passed with both on); "0" the A/B baseline
AHEAD_MODES = ("0", "1")
counts = {"launched": 0, "taken": 0, "refused": 0}  # aheads queued, taken by incremental_keys, dropped


def ahead_mode(given=None) -> str:
    """``VOXFX_SPARSE_OCCUPIED_AHEAD`` (or *given*): "1" queues ``mark_occupied`` ahead of the step's speed read."""
    return env_choice("VOXFX_SPARSE_OCCUPIED_AHEAD", AHEAD_MODES, given, default="1")


def same_key(a, b) -> bool:
    """Whether two ``_key``s are the same launch: (objects, values), the objects the very same
    (identity: arrays are not compared by value) and the values equal."""
    return (a is not None and b is not None and len(a[0]) == len(b[0])
            and all(x is y for x, y in zip(a[0], b[0])) and a[1] == b[1])


def mark_occupied(pos, keys, slots, nk, index, occupied, missed, vel, speed2, code: int, on, made) -> None:
    """``sparse_topology_gpu._reach``'s first launch, made here too (``launch``): *nk* its key count and *index*
    ``index_args``' (made), *made* ``grid_args``', *missed* the flags' first word, *code* the speed maxima's
    (0: no per-brick speeds)."""
    n = int(pos.shape[0])
    (ox, oy, oz, _, inv_h), dims, closed, _ = made
    TOPOLOGY.launch("mark_occupied", n, (pos, topology_args.i64(n, on), ox, oy, oz, inv_h, closed, *dims, keys, slots,
                                        nk, *index, occupied, missed, vel, speed2, topology_args.i32(code, on)))


def drop(grid, unless=None) -> None:
    """Forget an ahead not taken (counted refused in its counts: these, or ``sparse_g2p_marks``' for the
    G2P's marks, held the same way), but for one held with the counts *unless*."""
    held = getattr(grid, "_occupied_ahead", None)
    if held is not None and held[2] is not unless:
        held[2]["refused"] += 1
        grid._occupied_ahead = None


def _plan(grid, pos, vel):
    """(key, index, entries, ways, on) of ``mark_occupied`` as ``incremental_keys`` would launch it next
    over the grid's topology, or None where it would not (or might not) take that way."""
    from . import sparse_topology_gpu as tg

    t = grid.topology
    n = int(pos.shape[0])
    if (grid.xp is np or not t.count or not n or tg.topology_mode() != "device" or not tg.can_build(grid, pos)
            or vel.dtype != np.float32 or vel.ndim != 2 or vel.shape[1] != 3 or not vel.flags.c_contiguous
            or int(vel.shape[0]) != n or tg.topology_update_mode() != "fused" or tg.pipeline_mode() != "merged"):
        return None
    index = tg.brick_index(grid)
    if int(index[4]) <= 0:
        return None
    entries = int(index[4]) * int(index[5]) * int(index[6])
    ways = (tg.scratch_mode(), tg.room_mode())
    on = topology_args.kept()
    key = ((t, pos, vel, index[0], grid.brick_slot),
           (n, int(grid.capacity), entries, ways, on, tg.SPEED_CODES[tg.speed_max_mode()]))
    return key, index, entries, ways, on


def launch(grid, pos, vel, plan=None) -> bool:
    """Queue the next ``incremental_keys``' scratch (``_reach_work``, zeroed) and ``mark_occupied`` of
    *pos* with per-brick speeds of *vel*, kept on the grid for ``take``; False where it would not take it
    (*plan*: ``_plan``'s where the caller made it)."""
    from . import sparse_topology_gpu as tg

    drop(grid)
    plan = plan or _plan(grid, pos, vel)
    if plan is None:
        return False
    key, index, entries, ways, on = plan
    work = tg._reach_work(grid, None, True, entries, True, ways)  # by classes: one word a slot, speeds per slot
    t = grid.topology
    mark_occupied(pos, t.keys, t.slots, topology_args.i64(t.keys.shape[0], on),
                  topology_args.index_args(grid, index, on), work["occupied"],
                  topology_args.flag_words(work["flags"])[0], vel, work["speed2"], key[1][5], on,
                  topology_args.grid_args(grid, on))
    grid._occupied_ahead = (key, work, counts)
    counts["launched"] += 1
    return True


def take(grid, pos, reach, index, entries: int, ways, on, merged: bool):
    """The scratch of an ahead ``launch`` that is this pipeline's own first launch (``incremental_keys``'
    *index*, *entries*, *ways* and *on*; *merged*: by classes, the merged pipeline; *reach*: per-brick
    margins), ``mark_occupied`` done in it; else None (an ahead dropped). Taken once. The G2P's marks
    (``sparse_g2p_marks``) are held and taken the same way, counted in their own counts (``held[2]``)."""
    held = getattr(grid, "_occupied_ahead", None)
    if held is None:
        return None
    grid._occupied_ahead = None
    if merged and reach is not None and ways is not None:
        from . import sparse_topology_gpu as tg

        key = ((grid.topology, pos, reach.vel, index[0], grid.brick_slot),
               (int(pos.shape[0]), int(grid.capacity), int(entries), ways, on, tg.SPEED_CODES[tg.speed_max_mode()]))
        if same_key(held[0], key):
            held[2]["taken"] += 1
            return held[1]
    held[2]["refused"] += 1
    return None


def speed_read(sim):
    """``FlipSimulation._substep_speed``'s speed (a Python float of the same float32) with the next
    substep's ``mark_occupied`` queued behind the speed's copy (module notes); None where
    ``ahead_mode()`` is "0" or the substep would not take it (the caller reads the speed itself)."""
    from . import air_band, transfer
    from .sparse_grid import margin_mode

    grid = sim.grid
    drop(grid)
    if ahead_mode() != "1" or sim.xp is np or sim.band is not None or air_band.enabled() or margin_mode() != "brick":
        return None
    plan = _plan(grid, sim.pos, sim.vel)
    if plan is None:
        return None
    cp = sim.xp
    speed = transfer.max_speed(sim.vel)  # a 0-d float32 on the device
    host, event = _buffers(grid)
    stream = cp.cuda.get_current_stream()
    cp.cuda.runtime.memcpyAsync(host.ctypes.data, speed.data.ptr, 4, cp.cuda.runtime.memcpyDeviceToHost, stream.ptr)
    event.record(stream)
    launch(grid, sim.pos, sim.vel, plan)
    event.synchronize()
    return float(host[0])


def _buffers(grid):
    """(page-locked float32 word, event) kept on the grid for ``speed_read``."""
    held = getattr(grid, "_speed_ahead", None)
    if held is None:
        import cupy as cp
        import cupyx

        held = grid._speed_ahead = (cupyx.empty_pinned(1, np.float32), cp.cuda.Event(disable_timing=True))
    return held
