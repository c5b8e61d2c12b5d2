"""The sparse FLIP topology's update on the device (seed 003 §5.2): the new keys, slots and free
list from the marking pipeline's reach (``sparse_topology_gpu`` holds the pipeline and the
module notes with every measurement: the update's ways, ``VOXFX_SPARSE_TOPOLOGY_UPDATE``, and
its scratch, ``VOXFX_SPARSE_TOPOLOGY_SCRATCH``; the kernels are ``flip_sparse_topology.cu``'s
update and ``flip_sparse_topology_fused.cu``'s; ``Topology.update`` is the reference). A pure
move out of ``sparse_topology_gpu.py``, which re-exports these names."""

from __future__ import annotations


import numpy as np

from ..grid.launch import Kernels
from ..grid.sparse_mac import carve, carve_buffer, segment
from ..settings import env_choice
from . import sparse_topology_args as topology_args
from .particles import THREADS
from .sparse_gpu import _I32, _I64, brick_index

TOPOLOGY = Kernels("flip_sparse_topology.cu", ("--fmad=false",), THREADS)  # |v|² rounds as NumPy's
FUSED = Kernels("flip_sparse_topology_fused.cu", ("--fmad=false",), THREADS)  # TOPOLOGY's options
# VOXFX_SPARSE_TOPOLOGY_UPDATE: update_topology_fused (the default; where a brick index is: else device),
# update_topology_table (likewise), update_topology, or Topology.update
TOPOLOGY_UPDATES = ("fused", "table", "device", "array")
_NULL = np.uint64(0)  # a null pointer argument
UPDATE_ITEMS = 8  # flip_sparse_topology_fused.cu's: a fused update block's tile is UPDATE_ITEMS · THREADS items
# VOXFX_SPARSE_TOPOLOGY_SCRATCH (scratch_mode): the pipeline's scratch kept on the grid (and the update's
# allocations at size classes; the default since i24t5) or allocated afresh each substep
SCRATCH_MODES = ("kept", "fresh")
# VOXFX_SPARSE_TOPOLOGY_PIPELINE (pipeline_mode): the marking pipeline's launches by classes merged (reach_slots for
# slot_margins, reach_classes and reach_compare_classes; count_unkept inside topology_fused_counts; the default) or
# separate
PIPELINES = ("merged", "separate")
# VOXFX_SPARSE_TOPOLOGY_ROOM (room_mode): with the kept scratch, the pipeline's scratch and the fused update's outputs
# kept on the grid with room for a growing pool (``room``; the outputs two sets, the one the installed topology does
# not hold written: no carve a changed substep, none a growth within the room; the default, i24t8) or sized to each
# substep (off, the A/B baseline)
ROOMS = ("on", "off")


def scratch_mode() -> str:
    """``VOXFX_SPARSE_TOPOLOGY_SCRATCH`` (``SCRATCH_MODES``, module notes): ``kept`` (the default:
    the scratch kept on the grid while its sizes hold, zeroed by one memset; the update's outputs
    and the pool's growth allocated at ``size_class`` sizes) or ``fresh`` (the pipeline's scratch
    allocated and zeroed each substep, each allocation its exact size): the same topology."""
    return env_choice("VOXFX_SPARSE_TOPOLOGY_SCRATCH", SCRATCH_MODES)


def pipeline_mode() -> str:
    """``VOXFX_SPARSE_TOPOLOGY_PIPELINE`` (``PIPELINES``; ``sparse_topology_gpu`` module notes):
    ``merged`` (the default; by classes: the slots' margins, class words and walks one launch,
    ``reach_slots``; with the fused update the freed count made by ``topology_fused_counts``: 8
    launches a changed substep in place of 11; the flags read into page-locked words) or
    ``separate`` (the A/B baseline): the same topology."""
    return env_choice("VOXFX_SPARSE_TOPOLOGY_PIPELINE", PIPELINES)


def room_mode() -> str:
    """``VOXFX_SPARSE_TOPOLOGY_ROOM`` (``ROOMS``): ``on`` (the default; with ``scratch_mode()``
    kept: the pipeline's scratch and the fused update's outputs kept on the grid at ``room`` slots,
    made again only past it; the outputs in two sets, ``_fused_outputs``) or ``off`` (the A/B
    baseline: each sized to its substep): the same topology (``sparse_topology_gpu`` module notes:
    the measurement)."""
    return env_choice("VOXFX_SPARSE_TOPOLOGY_ROOM", ROOMS)


def room(capacity: int) -> int:
    """Slots the kept scratch and outputs are made for at pool *capacity*: a quarter more (at
    least 64), so a pool that grows substep by substep reuses them for several growths."""
    capacity = int(capacity)
    return capacity + max(capacity // 4, 64)


def _installed(grid) -> list:
    """Device addresses of the arrays the grid's installed topology holds (keys, slots, free list,
    used slots, its cached brick index): a fused update's outputs hold them where it installed them."""
    t = grid.topology
    arrays = [t.keys, t.slots, t.free, grid.brick_slot]
    cached = getattr(grid, "_brick_index", None)
    if cached is not None and cached[0] is t:
        arrays.append(cached[1][0])
    return [a.data.ptr for a in arrays if a.size]


def _holds(base, addresses) -> bool:
    """Whether one of *addresses* lies in the allocation *base*."""
    lo = base.data.ptr
    hi = lo + base.nbytes
    return any(lo <= a < hi for a in addresses)


def _fused_outputs(grid, cap: int, entries: int, tile: int):
    """``launch_fused_update``'s outputs with ``room_mode()`` on: one of the grid's two kept sets
    (made for ``room`` slots and *entries* index entries) that the installed topology does not hold
    (the update reads that one's keys, slots and index while writing the other), else a new set in
    place of the one it does not hold. Their views are sized for the room; the launches and
    ``update_topology_fused``'s segments take the substep's sizes."""
    sets = getattr(grid, "_fused_sets", ())
    held = None
    for kept_cap, kept_entries, base, views in sets:
        if kept_cap >= cap and kept_entries == entries:
            held = _installed(grid) if held is None else held
            if not _holds(base, held):
                return views
    slots = room(cap)
    tiles = -(-slots // tile) + -(-entries // tile)
    base, views = carve_buffer(grid.xp, _output_parts(tiles, entries, slots))
    held = _installed(grid) if held is None else held
    grid._fused_sets = tuple(s for s in sets if _holds(s[2], held))[-1:] + ((slots, entries, base, views),)
    return views


def _output_parts(tiles: int, entries: int, cap: int) -> dict:
    """The fused update's outputs' ``carve`` parts."""
    return {"totals": (np.int32, 2 * tiles), "keys": (np.int64, entries), "slots": (np.int32, entries),
            "fresh": (np.int32, entries), "index": (np.int32, entries), "pool": (np.int32, cap),
            "freed": (np.int32, cap), "used": (np.uint8, cap + entries), "refill": (np.uint8, cap + entries)}


def _reach_list(cp, mask, coords, flags):
    """A key per (slot, offset) of the masks (``_reach``'s (mask, radius)): the brick's where
    reached, else −1 (bricks past the key range add to flags[1])."""
    mask, radius = mask
    offsets = (2 * radius + 1) ** 3
    cap = int(coords.shape[0])  # coords: (capacity, 3)
    reached = cp.empty(offsets * cap, cp.int64)
    TOPOLOGY.launch("reach_keys", offsets * cap, (mask, coords, _I64(cap), _I32(radius), reached, flags[1:2]))
    return reached


def _reached(cp, mask, coords, flags):
    """The keys the masks reach (repeats kept)."""
    reached = _reach_list(cp, mask, coords, flags)
    return reached[reached >= 0]


def topology_update_mode() -> str:
    """``VOXFX_SPARSE_TOPOLOGY_UPDATE``: ``fused`` (default: ``update_topology_fused`` where the
    grid has a brick index, else ``device``), ``table`` (``update_topology_table``, likewise),
    ``device`` (``update_topology``) or ``array`` (``Topology.update`` of the reached keys, the
    A/B baseline): the same topology."""
    return env_choice("VOXFX_SPARSE_TOPOLOGY_UPDATE", TOPOLOGY_UPDATES)


def update_topology(grid, mask, flags, kept, freed_count: int):
    """``grid.topology.update(keys)`` of the keys the masks reach (``_reach``'s mask and
    kept marks, *freed_count* the slots no reached brick kept), in the kernels of
    ``flip_sparse_topology.cu`` with one host read: (topology, added slots, freed slots), the
    same topology (freed slots ascending)."""
    from ..grid.sparse import Topology

    cp = grid.xp
    t = grid.topology
    cap, count, nk = grid.capacity, t.count, _I64(t.count)
    reached = cp.sort(_reach_list(cp, mask, grid.slot_coords, flags))
    m = int(reached.shape[0])
    marks = cp.empty(m, cp.int64)
    TOPOLOGY.launch("topology_heads", m, (reached, _I64(m), t.keys, t.slots, nk, marks))
    marks = cp.cumsum(marks)
    free = cp.empty(cap, cp.int64)
    TOPOLOGY.launch("topology_free", cap, (grid.brick_slot, kept, _I64(cap), free))
    free = cp.cumsum(free)
    n_add = int(marks[-1]) >> 32 if m else 0  # the one host read
    n_pool = cap - count + int(freed_count)
    pool, freed = cp.empty(n_pool, cp.int32), cp.empty(int(freed_count), cp.int32)
    TOPOLOGY.launch("topology_pool", cap, (free, _I64(cap), pool, freed))
    n_new = count - int(freed_count) + n_add
    keys, slots, fresh = cp.empty(n_new, cp.int64), cp.empty(n_new, cp.int32), cp.empty(n_add, cp.int32)
    TOPOLOGY.launch("topology_place", m, (reached, _I64(m), marks, t.keys, t.slots, nk, pool, _I64(n_pool),
                                          _I64(cap), keys, slots, fresh))
    grow = max(0, n_add - n_pool)
    topo = Topology(keys, slots, cap + grow, pool[n_add:] if n_add < n_pool else cp.zeros(0, cp.int32), cp)
    return topo, fresh, freed


def update_topology_table(grid, claimed, kept, n_add: int, freed_count: int):
    """``update_topology`` over the grid's brick index (``flip_sparse_topology.cu``'s table
    update: *claimed* and *kept* from ``_reach``, *n_add* and *freed_count* its flags, so the
    sizes need no host read of their own; no key list, no sort): (topology, added slots,
    freed slots), the same topology."""
    from ..grid.sparse import Topology

    cp = grid.xp
    t = grid.topology
    cap, count = grid.capacity, t.count
    index = brick_index(grid)
    entries = int(index[4]) * int(index[5]) * int(index[6])
    marks = cp.empty(entries, cp.int64)
    TOPOLOGY.launch("topology_table_marks", entries, (index[0], _I64(entries), kept, claimed, marks))
    marks = cp.cumsum(marks)
    free = cp.empty(cap, cp.int64)
    TOPOLOGY.launch("topology_free", cap, (grid.brick_slot, kept, _I64(cap), free))
    free = cp.cumsum(free)
    n_pool = cap - count + freed_count
    pool, freed = cp.empty(n_pool, cp.int32), cp.empty(freed_count, cp.int32)
    TOPOLOGY.launch("topology_pool", cap, (free, _I64(cap), pool, freed))
    n_new = count - freed_count + n_add
    keys, slots, fresh = cp.empty(n_new, cp.int64), cp.empty(n_new, cp.int32), cp.empty(n_add, cp.int32)
    TOPOLOGY.launch("topology_table_place", entries, (marks, *index, pool, _I64(n_pool), _I64(cap), keys, slots,
                                                      fresh))
    grow = max(0, n_add - n_pool)
    topo = Topology(keys, slots, cap + grow, pool[n_add:] if n_add < n_pool else cp.zeros(0, cp.int32), cp)
    return topo, fresh, freed


def launch_fused_update(grid, index, work, count_freed: bool = False, ways=None, on=None):
    """Queue the fused table update (module notes) of the current topology to the bricks
    ``_reach`` marked in *work* (``_reach_work``'s, *index* the grid's ``brick_index``), before
    the flags are read: returns its outputs, each sized for the most it can hold. *count_freed*
    (the merged pipeline, which launched no ``count_unkept``): ``topology_fused_counts`` adds
    the freed slots to the flags' freed count. *ways*: (``scratch_mode()``, ``room_mode()``) where
    the caller has read them; *on*: ``sparse_topology_args.kept()`` likewise (the scalars made once)."""
    cp = grid.xp
    t = grid.topology
    cap = grid.capacity
    entries = int(index[4]) * int(index[5]) * int(index[6])
    on = topology_args.kept() if on is None else on
    tile = UPDATE_ITEMS * THREADS
    pool_tiles, entry_tiles = -(-cap // tile), -(-entries // tile)
    tiles = pool_tiles + entry_tiles
    scratch, roomy = ways or (scratch_mode(), room_mode())
    if scratch == "kept" and roomy == "on":
        out = _fused_outputs(grid, cap, entries, tile)
    else:
        out = carve(cp, _output_parts(tiles, entries, cap), zero=False, classed=scratch == "kept")
    flags, kept, claimed = work["flags"], work["kept"], work["claimed"]
    i64 = topology_args.i64
    n_cap, n_tiles, n_pool = i64(cap, on), i64(tiles, on), i64(pool_tiles, on)
    FUSED.launch_grid("topology_fused_counts", (tiles,), (THREADS,),
                      (flags, grid.brick_slot, kept, n_cap, index[0], claimed, i64(entries, on), n_pool, n_tiles,
                       out["totals"], flags.data + 24 if count_freed else _NULL))
    FUSED.launch_grid("topology_fused_pool", (max(pool_tiles, 1),), (THREADS,),
                      (flags, grid.brick_slot, kept, n_cap, out["totals"], n_tiles, out["pool"], out["freed"],
                       out["used"], out["refill"]))
    FUSED.launch_grid("topology_fused_place", (max(entry_tiles, 1),), (THREADS,),
                      (flags, *topology_args.index_args(grid, index, on), kept, claimed, n_cap, i64(t.count, on),
                       out["totals"], n_pool, n_tiles, out["pool"], out["keys"], out["slots"], out["fresh"],
                       out["index"], out["used"], out["refill"]))
    return out


def update_topology_fused(grid, index, out, n_add: int, freed_count: int):
    """``update_topology_table``'s (topology, added slots, freed slots), the new used slots
    (bool per slot) and the refill marks (a byte per slot: added or freed, what ``retopologize``
    fills; ``topology_cell_tables`` fills them with ``sparse_topology_tables.fills_with_tables``),
    from ``launch_fused_update``'s outputs *out*, once the flags (*n_add*, *freed_count*) are read:
    slices, no launch. The outputs' brick index becomes the new topology's ``brick_index``."""
    from ..grid.sparse import Topology

    t = grid.topology
    cap, count = grid.capacity, t.count
    n_pool = cap - count + freed_count
    n_new = count - freed_count + n_add
    grow = max(0, n_add - n_pool)
    topo = Topology(segment(out["keys"], 0, n_new), segment(out["slots"], 0, n_new), cap + grow,
                    segment(out["pool"], n_add, n_pool), grid.xp)
    grid._brick_index = (topo, (out["index"], *index[1:]))  # brick_index's cache, for the topology installed next
    return (topo, segment(out["fresh"], 0, n_add), segment(out["freed"], 0, freed_count),
            segment(out["used"], 0, cap + grow, np.bool_), segment(out["refill"], 0, cap + grow))
