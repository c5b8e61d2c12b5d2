"""The sparse FLIP topology on the device (seed 003 §5.1–5.2): ``SparseFlipGrid.update``'s
bricks from the particles without sorting them, launched from ``sparse_grid.py`` (the
NumPy reference is ``SparseFlipGrid.topology_keys`` and ``Topology.update``; the kernels
are ``flip_sparse_topology.cu``'s: the marking pipeline, then the update; the fused update's
are ``flip_sparse_topology_fused.cu``'s). The other stages' launches are ``sparse_gpu.py``'s.

Per substep, incremental: each particle marks its cell in the current topology
(``mark_occupied``), one thread per row of a brick's cells turns its marked cells into
the bricks their boxes (cell ± the brick's margin) reach (``brick_reach``: a mask of the
(2R + 1)³ brick offsets within R bricks, OR-ed by integer atomics), and those bricks' keys
are the new topology: the bricks of ``SparseFlipGrid.topology_keys`` exactly. Most
substeps change no brick (``reach_compare``): then nothing is sorted or rebuilt, and the
update is a handful of launches and one host sync. When a particle lies outside the
current topology (the first substep, an inflow, a restore) the same pipeline runs on the
bricks that hold particles (``full_keys``: one sort of a key per particle); the first
substep's build (no brick yet) is this one too, so no per-(particle, brick) key list is
ever expanded on the device.

Margins per brick (``sparse_grid.BrickReach``): with the particles' velocities,
``mark_occupied`` also keeps each slot's largest |v|² (float bits by integer atomicMax),
``slot_margins`` takes the largest over the 27 bricks around each slot and turns it into
the slot's margin in the reference's float64 arithmetic (the same integers), and
``brick_reach`` reads the margin of the row's slot. A margin of up to ``MAX_MARGIN`` = 64
cells reaches at most eight bricks away (``reach_radius``: R = ⌈margin/8⌉ of the largest
margin, the caller's global one; the masks are (2R + 1)³ bits a slot, 1 word at R = 1, 154
at R = 8): ``brick_reach`` walks the runs of reached offsets (any R, no register array),
and ``reach_keys``/``reach_compare``/``reach_compare_table`` take R as an argument. A slot
whose margin passes 8R (the caller's global margin was below a brick's: a last-bit
difference of two maxima) counts as beyond: the array path builds then, as it does past
``MAX_MARGIN``, with extra cells (the narrow band's deep cells) or beyond the key range
(its error). ``VOXFX_SPARSE_TOPOLOGY=legacy`` keeps the earliest limits (one brick; the
first build on the array path) for A/B timing.

Reach by classes (``sparse_reach.py``, ``VOXFX_SPARSE_REACH=classes``, the default): over a
closed domain's brick index 27 bits a slot replace the masks, at margins up to 256 cells.

The topology update, when bricks change, is ``update_topology_table`` in a closed domain
with a brick index (``flip_sparse_topology.cu``: the comparison claims each added brick's
index entry, so the one flags read already holds the new sizes; a scan over the index lists
the new keys in key order: no key list, no sort, no second host read; H200, 8M: 0.28 ms
against 0.52), else ``update_topology`` (a sort of the reached keys, two packed scans, a
second host read for the added count), or ``Topology.update``
(``VOXFX_SPARSE_TOPOLOGY_UPDATE=array``; ``device`` forces ``update_topology``): the same
topology every way.

``VOXFX_SPARSE_TOPOLOGY_UPDATE=fused`` (``update_topology_fused``): the table update's marks and
places in three launches (``topology_fused_counts``, ``_pool``, ``_place``) queued before the
pipeline's one host read, into outputs with room for the most they can hold (sizes from the
flags on the device), so after the read the host only slices them: no scan, allocation or
launch of the update's own after the sync, where every launch waits on the host. They also
write the next topology's brick index (``brick_index`` then builds none) and the pipeline's
scratch is one zeroed allocation; retopologize takes the used slots from it and grows the
rewritten channels as views of one zeroed allocation. The same topology, slot for slot, as
``table``, and the default since measured faster (H100 80GB HBM3, 8M dam break, 3,337 bricks,
bricks changed in 7 of 8 substeps, the pool grew in 5; ``bench/flip_sparse_topology.py``, both
ways on the same states, bit-identical every substep: update 0.80 → 0.53 ms median, and 1.46 →
1.08 on another machine's call; ``bench/flip_sparse.py --row 8m --topology-update table fused``:
topology stage 1.15 → 0.85 ms, substep 9.0 → 8.7 ms). What is left: the pipeline's one host read
(its sizes make the Python arrays), the neighbour tables' rebuild and the pool's growth.

The tables after an update (``fused_tables``, ``VOXFX_SPARSE_TOPOLOGY_TABLES``) are
``sparse_topology_tables.py``'s; the update's launches (``update_topology``, ``_table``, ``_fused``)
``sparse_topology_update.py``'s.

The margin on the device (``VOXFX_SPARSE_DEVICE_MARGIN=1``, the default): a caller that does not
know the fastest particle's speed (``SparseFlipSimulation.substep`` called alone, the benches)
passes margin None; ``incremental_keys`` sizes the masks by the last substep's radius
(``grid.last_margin``), ``slot_margins`` puts the largest |v|² bits in a fifth flag, and the
pipeline's one read brings the true margin for the next substep; a radius too small reads as
beyond and the pipeline runs again with the learned one; a first build or a particle outside the
bricks reads the speed first. ``step`` still reads the speed once a substep for its CFL Δt, and
the margin reuses it: there it changes nothing. The speed read itself (``transfer.max_speed``) is
a block's maximum first now (one atomic a block; 8M: 62.6 against 230.8 µs). Same H100,
``bench/flip_sparse.py --row 8m --ab`` (substeps alternating in one simulation, 8 a way): the
topology stage 1.123 ms (margin 0.284, update 0.844) with all three off, 0.943 (margin 0.120,
update 0.826) with the block maxima and the fused tables (what ``step`` sees), 0.892 (margin
0.022, update 0.870) with the device margin too; the substep 8.31 → 8.16 ms.

Where the stage's time goes (``bench/flip_sparse_topology_stage.py``, NVIDIA H100 80GB HBM3, driver
580.159.04, 8M dam break at 3,276–4,411 bricks, bricks changed in 12 of 12 substeps, the pool grew in
8–10): the stage is host-bound. Its device time (1.16–1.18 ms median, as the host's 1.14–1.17) holds
0.30 ms of kernels (11 launches: mark_occupied 121 µs, topology_cell_tables 43, fused place / counts /
pool 22 / 19 / 14, topology_slot_tables 20, fill_slots_f32 18 (a channel not rewritten), reach_classes
13, reach_compare_classes 10, slot_margins 8, count_unkept 4): the device idles ~0.86 ms. The host
spends 0.53 ms before the read (0.15 ms of it in the launch calls themselves, the rest Python and CuPy
objects between them), waits 0.08 ms at the read, then 0.53 ms after it (0.34 ms when the pool does not
grow: retopologize 0.46 / 0.27 ms of host time, its tables 0.13 ms). No cudaMalloc in the stage: the
memory pool serves every allocation (so the size classes below buy nothing). What is left, largest
first: the host's Python after the read (growth: the rewritten channels' views and the copy and fill of
the channels not rewritten), the Python between the launches before it, mark_occupied.

The host time cut (i24t3; ``bench/cupy_host_ops.py`` gives each CuPy operation's host cost,
``flip_sparse_topology_stage.py --profile`` the stage's Python): ``carve`` sizes its parts in Python
integers (``np.prod`` was 2.3 µs a call, twice a part) and makes each view one ``ndarray`` over the
allocation (1.3 µs against 2.4 for a slice and a dtype view), the flags' one-word arguments are
device addresses (``sparse_topology_args.flag_words``: 0.2 µs against 1.8 a slice), the update's outputs
``sparse_mac.segment``'s, the marks (``update`` replaces them) are not reallocated on growth
(``retopologize(replaced=)``), a kept channel grows uninitialised with one device copy, and the
added and freed slots are filled per list (a concatenate costs 25 µs, a launch 11). H100 80GB HBM3,
driver 580.159.04, the same 12 substeps of the 8M dam break, main and this in one call: the stage
1.031 → 0.774 ms (host before the read 457 → 299 µs, after it 457 → 339) without the last two;
with them (``bench/flip_sparse.py --row 8m``, a call whose host ran ~1.7× slower) topology 1.49 →
0.98 ms, substep 8.7 → 8.4. The tables carved out of one allocation (an A/B, removed) were slower:
1.037 against 0.956 ms. Left (that call's profile): the 11 launches (10–16 µs of host each, ~25
arguments marshalled), ~30 arrays made (1.3–2.4 µs each) and 15 pool allocations a substep, the
two zeroed allocations' memsets, the read.

``VOXFX_SPARSE_TOPOLOGY_SCRATCH`` (``scratch_mode``): ``kept`` (the default since i24t5) or ``fresh``:
the fused pipeline's scratch kept on the grid while its sizes hold (one memset a substep, no carve of
eight views) with its one-word flag slices, and the update's outputs and the pool's growth allocated at
size classes (``sparse_mac.size_class``); the same topology (``tests/gpu``). Same H100, one call:
``bench/flip_sparse.py --row 8m --ab VOXFX_SPARSE_TOPOLOGY_SCRATCH=kept --ab ''`` (12 substeps a way):
topology 1.062 → 1.014 ms; the stage bench: 1.224 → 1.199 ms. A first version that also allocated the
tables at size classes (a carve per array) was 0.15 ms slower (0.799 → 0.953 ms).

The merged pipeline (i24t5, ``VOXFX_SPARSE_TOPOLOGY_PIPELINE=merged``, the default; ``separate`` the A/B
baseline): by classes, a slot's margin, class word and walk need only its own cells and its 27
neighbours' speeds, all known once ``mark_occupied`` is done, so ``reach_slots`` (``flip_sparse_reach.cu``,
``sparse_reach.launch_slots``) does ``slot_margins``, ``reach_classes`` and ``reach_compare_classes`` in
one launch (128 threads a slot; a warp ORs its rows' class products by shuffles; the margins'
arithmetic one header, ``voxfx_slot_margin.cuh``), and with the fused update ``topology_fused_counts``
adds each slot tile's freed slots to the flags (no ``count_unkept``): 8 launches a changed substep in
place of 11, the margins' fill gone for one margin, the flags read into page-locked words
(``sparse_topology_args.flags_host``); the same margins, words, kept, claimed and flags (host harnesses
``test_cuda_sparse_reach_host.py``, ``test_cuda_sparse_topology_fused_host.py``; ``tests/gpu``). NVIDIA
H100 80GB HBM3, driver 580.159.04, substeps alternating in one simulation (8M dam break, bricks changed
every substep). Call 1: ``bench/flip_sparse.py --row 8m --steps 8 --warm 2`` topology 0.665 (separate,
fresh) → 0.608 (merged) → 0.595 ms (merged, kept: now the defaults), update 0.635 → 0.574 → 0.567; the
stage bench 0.919 → 0.913 → 0.901 ms. Call 2 (both ways with the one-launch fills and the kept frame
arguments of ``sparse_mac``/``sparse_gpu``, which are not switched): the same bench topology 0.715 →
0.629 ms, update 0.674 → 0.593, substep 7.54 → 7.37 ms (``--steps 16``: 0.796 → 0.778); the stage
bench (16 substeps a way) 1.142 → 1.045 ms, the host before the read 467 → 440 µs and after it 485 →
432, 11 → 8 launches (their calls 225 → 189 µs of host). What is left is the same kind (``--profile``):
the views ``carve`` makes (the fused update's eight outputs a substep), 13 pool allocations (the
tables' eleven), 8 launches of 17–31 arguments, ~10 environment reads, the read's wait (~100 µs:
``mark_occupied``, 135 µs for 8M particles, still runs when the host is done).

Room (i24t8, ``VOXFX_SPARSE_TOPOLOGY_ROOM=on``, the default; ``off`` the A/B baseline): with the kept
scratch, ``_reach_work``'s scratch is made for ``room`` slots (a quarter more, at least 64) and kept
while the pool fits it, and the fused update's outputs are two sets kept on the grid at that room
(``sparse_topology_update._fused_outputs``): each changed substep writes the set the installed topology
does not hold (its keys, slots, free list, used slots and brick index are the other's, which the update
reads), so no ``carve`` of eight views and no allocation a changed substep, nor the scratch's carve a
growth within the room; the switches the pipeline reads twice are read once. The same topology, tables
and channels to the bit (``tests/gpu``: on against off over growing pools and re-run pipelines). NVIDIA
H100 80GB HBM3, driver 580.159.04, one call, the ways alternating in one simulation (8M dam break, 3,862
bricks, bricks changed in 8 of 8 substeps a way): ``bench/flip_sparse_topology_stage.py`` stage 0.639 →
0.594 ms, host before the read 250 → 206 µs (after it 293 → 301), pool allocations 15 → 12 a substep, the
kernels' sum 258 → 239 µs (``topology_fused_place`` 22.8 → 11.4 µs: its outputs' memory reused);
``bench/flip_sparse.py --row 8m --steps 8 --warm 2 --ab VOXFX_SPARSE_TOPOLOGY_ROOM=on --ab ''``: topology
0.604 → 0.523 ms (update 0.576 → 0.497), substep 6.12 → 6.07 ms. That call's on way also kept
``retopologize``'s lean growth (the FLOW channels' zeroed allocation) with room; removed after it: the
host after the read did not drop, and P2G and classify replace those channels, so the kept allocation
held ~16 B a pool cell for nothing.

The launches' scalars are made once (``sparse_topology_args``, ``VOXFX_SPARSE_TOPOLOGY_ARGS=kept``, h21k; its
notes hold the measures).
"""

from __future__ import annotations

import math

import numpy as np

from ..grid.sparse_mac import brick_tables, carve, carve_buffer
from ..settings import env_choice
from . import sparse_reach
from . import sparse_topology_ahead as topology_ahead
from . import sparse_topology_args as topology_args
from . import sparse_topology_tables_ahead as tables_ahead
from .sparse_gpu import _I32, _I64, _NO_INDEX, CELLS, KERNELS, _dims, _frame, available, brick_index
from .sparse_topology_update import (  # noqa: F401  (the update's names, re-exported: tests and benches use them here)
    FUSED, PIPELINES, ROOMS, SCRATCH_MODES, TOPOLOGY, TOPOLOGY_UPDATES, UPDATE_ITEMS, _reach_list, _reached,
    launch_fused_update, pipeline_mode, room, room_mode, scratch_mode, topology_update_mode, update_topology,
    update_topology_fused, update_topology_table)

MAX_MARGIN = 64  # cells: brick_reach serves reach radii up to eight bricks (154 mask words a slot)
TOPOLOGY_MODES = ("device", "legacy")
# VOXFX_SPARSE_SPEED_MAX: how mark_occupied keeps each slot's largest |v|² (per-brick margins): one atomicMax a warp
# per slot (warp, sm_80+; plain below) or one a particle (plain, the A/B baseline). The same maxima.
# uniform: warp's, a warp on one slot without __match_any_sync: the same maxima, measured no faster (H100, 8M:
# mark_occupied 141.8 / 131.5 against 135.1 / 137.8 µs, the update 0.856 / 0.794 against 0.822 / 0.773 ms): off
SPEED_MAXIMA = ("warp", "uniform", "plain")
# VOXFX_SPARSE_DEVICE_MARGIN: 1 (a caller without the fastest speed passes margin None: incremental_keys takes the
# last substep's radius and learns the margin with its one read, module notes) or 0 (the A/B baseline: a host read)
DEVICE_MARGINS = ("1", "0")


def mark_walls(grid) -> None:
    """exists_u/v/w, wall and solid (= wall) of ``SparseFlipGrid.update``."""
    size = grid.size
    out = [grid.xp.empty(size, grid.xp.uint8) for _ in range(5)]
    KERNELS.launch("mark_walls", size, (grid.brick_slot, grid.slot_coords, _I64(size), _I32(grid.closed),
                                        *_dims(grid), *out))
    for name, a in zip((*grid.EXISTS, "wall", "solid"), out):
        grid[name] = a


def topology_mode() -> str:
    """``VOXFX_SPARSE_TOPOLOGY``: ``device`` (default: margins up to ``MAX_MARGIN``, the
    first build from the particles' bricks) or ``legacy`` (the A/B baseline: margins up to
    one brick, the first build on the array path)."""
    return env_choice("VOXFX_SPARSE_TOPOLOGY", TOPOLOGY_MODES)


def reach_radius(margin: int) -> int:
    """Bricks a cell's box (cell ± *margin*) may reach from the cell's brick: ⌈margin/8⌉,
    at least 1 ((2R + 1)³ offsets: 27 up to 8 cells, one mask word a brick; 4,913 at
    ``MAX_MARGIN`` = 64, 154 words)."""
    return max(1, -(-int(margin) // 8))


SPEED_CODES = {"plain": 1, "warp": 2, "uniform": 3}  # mark_occupied's `speeds`


def speed_max_mode() -> str:
    """``VOXFX_SPARSE_SPEED_MAX`` (``SPEED_MAXIMA``; default warp)."""
    return env_choice("VOXFX_SPARSE_SPEED_MAX", SPEED_MAXIMA)


def can_build(grid, pos) -> bool:
    """The device topology serves *grid* and *pos*: CuPy, float32 C-contiguous positions,
    and the current topology's brick tables built (or no brick yet: the first build)."""
    if grid.xp is np or pos.dtype != np.float32 or not pos.flags.c_contiguous:
        return False
    if grid.topology.count == 0:
        return topology_mode() == "device"
    return available(grid, pos)


def _margins(grid, margin, reach, used, nbr, cap, speed2, out=None, most=None):
    """Per slot int32 margins: *margin* everywhere, or with *reach* ``slot_margins``' of the
    slots' largest |v|² (*speed2*, from ``mark_occupied``) over their 27 bricks (*nbr*);
    into *out* where given; the largest |v|² bits of all into *most* (a uint64 flag, zeroed)."""
    cp = grid.xp
    if reach is None:
        if out is None:
            return cp.full(cap, int(margin), cp.int32)
        out.fill(int(margin))
        return out
    out = cp.empty(cap, cp.int32) if out is None else out
    most = cp.zeros(1, cp.uint64) if most is None else most
    TOPOLOGY.launch("slot_margins", cap, (speed2, used, nbr, _I64(cap), np.float64(reach.dt), np.float64(reach.gdt),
                                         np.float64(reach.h), _I32(reach.base), out, most))
    return out


def _reach_work(grid, margin, reach, entries: int, classes: bool = False, ways=None):
    """``_reach``'s scratch for the fused update, zeroed in one allocation: occupied, flags,
    speed2, the masks (with *classes* one word a slot), kept, claimed (*entries* words), and
    the margins and a stand-in velocity. ``scratch_mode()`` kept: the grid's last one, zeroed
    again, while its sizes are these; with ``room_mode()`` on too, while it has room for them
    (made for ``room`` slots: a growing pool reuses it). *ways*: (``scratch_mode()``,
    ``room_mode()``) where the caller has read them."""
    cap = grid.capacity
    scratch, roomy = ways or (scratch_mode(), room_mode())
    words = 1 if classes else -(-(2 * reach_radius(margin) + 1) ** 3 // 32)
    if scratch != "kept":
        return carve(grid.xp, _work_parts(cap, words, reach, entries), zero=True)
    if roomy == "on":  # its own attribute: an A/B alternating with off keeps both
        kept = getattr(grid, "_reach_room", None)
        if kept is not None and kept[0][0] >= cap and kept[0][1:] == (words, reach is not None, entries):
            kept[1].fill(0)  # one memset over the allocation
            return kept[2]
        key = (room(cap), words, reach is not None, entries)
    else:
        kept = getattr(grid, "_reach_scratch", None)
        key = (cap, words, reach is not None, entries)
        if kept is not None and kept[0] == key:
            kept[1].fill(0)
            return kept[2]
    base, work = carve_buffer(grid.xp, _work_parts(key[0], words, reach, entries), zero=True, classed=True)
    setattr(grid, "_reach_room" if roomy == "on" else "_reach_scratch", (key, base, work))
    return work


def _work_parts(cap: int, words: int, reach, entries: int) -> dict:
    """``_reach_work``'s ``carve`` parts for *cap* slots."""
    return {"occupied": (np.uint8, cap * CELLS), "flags": (np.uint64, 5),
            "speed2": (np.uint32, cap if reach is not None else 1), "mask": (np.uint32, cap * words),
            "kept": (np.uint8, cap), "claimed": (np.uint32, entries), "margins": (np.int32, cap),
            "vel": (np.float32, 1)}


def _reach(grid, pos, margin, keys, slots, used, coords, nbr, compare, index, claimed=None, reach=None, work=None,
           classes=False, merged=False, on=None, marked=False):
    """The marking pipeline (module notes) on the bricks *keys* in *slots* (*used*,
    *coords*, *nbr*: per slot; *index*: their ``brick_index``): the reach masks per slot
    (``reach_radius(margin)``'s words each), the flags [missed, beyond, added, freed, the
    largest |v|² bits (with *reach*)] (beyond, added, freed against *keys* when *compare*, straight from the masks;
    ``_reached`` lists the keys) and, when *compare*, the kept mark per slot (else None).
    Margins: *margin* for every brick, or with *reach* (``sparse_grid.BrickReach``) per
    brick (*margin*: their largest, for the radius). With *claimed* (zeroed uint32, one word
    an index entry) the comparison is over the index (``reach_compare_table``): added counts
    each added brick once and *claimed* marks them, for ``update_topology_table``. *work*:
    ``_reach_work``'s zeroed scratch (else each array is allocated here). With *classes* (and
    *claimed*: over the index only) the bricks come from ``flip_sparse_reach.cu``'s classes, one
    word a slot in place of the masks (``sparse_reach.by_classes``): the same kept, claimed and flags.
    With *merged* too (``pipeline_mode()``): the margins, words and walks one launch
    (``sparse_reach.launch_slots``), and with *work* no ``count_unkept`` (``launch_fused_update``
    counts the freed slots). *on*: ``sparse_topology_args.kept()`` where the caller has read it (the
    launches' scalars made once: that module's notes). *marked*: ``mark_occupied`` queued into *work* already
    (``sparse_topology_ahead``)."""
    cp = grid.xp
    cap = int(used.shape[0])
    radius = reach_radius(margin)
    offsets, words = (2 * radius + 1) ** 3, -(-(2 * radius + 1) ** 3 // 32)
    on = topology_args.kept() if on is None else on
    made = (on, topology_args.grid_args(grid, on))
    index = topology_args.index_args(grid, index, on)
    nk = topology_args.i64(keys.shape[0], on)
    w = work or {}
    occupied = w["occupied"] if work else cp.zeros(cap * CELLS, cp.uint8)
    flags = w["flags"] if work else cp.zeros(5, cp.uint64)
    f = topology_args.flag_words(flags)
    speed2 = w["speed2"] if work else cp.zeros(cap if reach is not None else 1, cp.uint32)
    vel = reach.vel if reach is not None else w["vel"] if work else cp.zeros(1, cp.float32)
    if not marked:  # else queued ahead of the step's speed read into *work* (sparse_topology_ahead)
        topology_ahead.mark_occupied(pos, keys, slots, nk, index, occupied, f[0], vel, speed2,
                                     SPEED_CODES[speed_max_mode()] if reach is not None else 0, on, made[1])
    if classes and merged:  # steps 1b, 2 and 4 in one launch; the fused update's counts make freed
        words, kept = sparse_reach.launch_slots(grid, occupied, used, coords, nbr, margin, reach, speed2, index,
                                                claimed, flags, work, f, made)
        if work is None:
            TOPOLOGY.launch("count_unkept", cap, (used, kept, _I64(cap), f[3]))
        return (words, None), flags, kept
    margins = _margins(grid, margin, reach, used, nbr, cap, speed2, w.get("margins"), f[4])
    del speed2
    if classes:  # sparse_reach's steps 2 and 4, then count_unkept
        words, kept = sparse_reach.launch(grid, occupied, used, coords, margins, index, claimed, flags, work, f)
        TOPOLOGY.launch("count_unkept", cap, (used, kept, _I64(cap), f[3]))
        return (words, None), flags, kept
    mask = w["mask"] if work else cp.zeros(cap * words, cp.uint32)
    TOPOLOGY.launch("brick_reach", 64 * cap, (occupied, used, coords, _I64(cap), margins, _I32(grid.closed),
                                             *_dims(grid), _I32(radius), mask, f[1]))
    del occupied, margins
    kept = None
    if compare:
        kept = w["kept"] if work else cp.zeros(cap, cp.uint8)
        if claimed is not None:
            TOPOLOGY.launch("reach_compare_table", offsets * cap, (mask, coords, _I64(cap), _I32(radius), *index,
                                                                  kept, claimed, f[2], f[1]))
            TOPOLOGY.launch("count_unkept", cap, (used, kept, _I64(cap), f[3]))
            return (mask, radius), flags, kept
        TOPOLOGY.launch("reach_compare", offsets * cap, (mask, coords, _I64(cap), _I32(radius), keys, slots, nk,
                                                        *index, kept, f[2], f[1]))
        TOPOLOGY.launch("count_unkept", cap, (used, kept, _I64(cap), f[3]))
    return (mask, radius), flags, kept


def _serves(reach) -> bool:
    """*reach* (or none) holds velocities the kernels read: float32, C-contiguous, (n, 3)."""
    if reach is None:
        return True
    v = reach.vel
    return v.dtype == np.float32 and v.flags.c_contiguous and v.ndim == 2 and v.shape[1] == 3


def _one_a_particle(reach, pos) -> bool:
    """*reach* (or none) holds one velocity a row of *pos*."""
    return reach is None or int(reach.vel.shape[0]) == int(pos.shape[0])


def _updated(grid, mode, mask, flags, kept, freed):
    """``incremental_keys``' update without a brick index: ``update_topology``'s, or the keys."""
    if mode != "array":
        return update_topology(grid, mask, flags, kept, freed)
    return _reached(grid.xp, mask, grid.slot_coords, flags)


def device_margin() -> bool:
    """``VOXFX_SPARSE_DEVICE_MARGIN`` (``DEVICE_MARGINS``, default 1): whether a substep that does
    not know its fastest particle's speed lets the topology learn its margin (``incremental_keys``
    with margin None) instead of reading the speed first."""
    return env_choice("VOXFX_SPARSE_DEVICE_MARGIN", DEVICE_MARGINS) == "1"


def host_margin(reach) -> int:
    """``sparse_grid.substep_margin`` of the fastest of *reach*'s particles (one host read)."""
    from . import transfer
    from .sparse_grid import substep_margin

    return substep_margin(float(transfer.max_speed(reach.vel)), reach.dt, reach.h, reach.gravity)


def _learned_margin(reach, most: int):
    """The largest per-brick margin from the largest |v|² bits *most* (``BrickReach.margins``,
    the same arithmetic as ``slot_margins``), None where not finite. In NumPy scalars (a float32
    root, then float64 as ``margins``' arrays): ~3 µs of host time against ~12 for the
    one-element arrays (``tests/unit/test_sparse_topology_learned_margin.py``: the same integers)."""
    speed2 = np.uint32(most).view(np.float32)
    if not np.isfinite(speed2):
        return None
    reach_cells = (float(np.sqrt(speed2)) + reach.gdt) * float(reach.dt) / float(reach.h)
    return reach.base + math.ceil(reach_cells)


def incremental_keys(grid, pos, margin, prebuilt: bool = False, reach=None):
    """The keys of ``grid.topology_keys(pos, margin, reach=reach)``, as ``(keys, same)``:
    *same* when they are the current bricks (then *keys* is None: nothing to update); None
    where the array path must build them (module notes). With *reach* the margins are per
    brick and *margin* is their largest (``substep_margin`` of the fastest particle), or None:
    the margin on the device (the masks' radius the last substep's, ``grid.last_margin``; the
    one host read brings the largest |v|², the true margin, kept for the next; a radius too
    small shows as beyond and the pipeline runs again with the learned one; a first build or
    a particle outside the bricks reads the speed first). From the current topology (one host
    sync), or, when a particle lies outside it (or there is none), from the bricks holding
    particles (``full_keys``). With *prebuilt* (and ``topology_update_mode()`` table or
    device), an update of the current topology comes as ``update_topology_table``'s or
    ``update_topology``'s (topology, added, freed) tuple in place of *keys*."""
    guessed = margin is None
    if guessed and (reach is None or not _serves(reach)):
        return None
    t = grid.topology
    exact = not guessed or t.count == 0 or getattr(grid, "last_margin", None) is None  # else the last one's
    margin = int(margin if not guessed else host_margin(reach) if exact else grid.last_margin)
    grid.last_margin = margin
    device = topology_mode() == "device"
    limit = MAX_MARGIN if device else 8
    if margin < 0 or int(pos.shape[0]) == 0 or not _serves(reach) or not _one_a_particle(reach, pos):
        return None
    if t.count:
        index = brick_index(grid)
        mode = topology_update_mode() if prebuilt else "array"
        table = mode in ("table", "fused") and int(index[4]) > 0
        classes = device and sparse_reach.by_classes(margin, table, sparse_reach.grid_limit(grid))
        if margin > limit and not classes:
            return None
        entries = int(index[4]) * int(index[5]) * int(index[6])
        ways = (scratch_mode(), room_mode()) if table and mode == "fused" else None  # read once a pipeline
        merged = classes and pipeline_mode() == "merged"
        on = topology_args.kept()  # the launches' scalars made once (read once a pipeline)
        ahead = topology_ahead.take(grid, pos, reach, index, entries, ways, on, merged)  # marked ahead: its work
        work = ahead or (_reach_work(grid, margin, reach, entries, classes, ways) if ways else None)
        claimed = (work["claimed"] if work else grid.xp.zeros(entries, grid.xp.uint32)) if table else None
        mask, flags, kept = _reach(grid, pos, margin, t.keys, t.slots, grid.brick_slot, grid.slot_coords,
                                   grid.brick_nbr, True, index, claimed, reach, work, classes, merged, on,
                                   ahead is not None)
        fused = launch_fused_update(grid, index, work, merged, ways, on) if work else None  # queued before the read
        read = (tables_ahead.read(grid, flags, topology_args.flags_host(grid), index, fused, on)
                if merged and fused is not None
                else flags.get(out=topology_args.flags_host(grid)) if merged else flags.get())  # the one host sync
        missed, beyond, added, freed, most = (int(f) for f in read)
        learned = _learned_margin(reach, most) if reach is not None and not missed else None
        if learned is not None:
            grid.last_margin = learned
        if beyond:
            if guessed and learned is not None and reach_radius(learned) > reach_radius(margin):
                return incremental_keys(grid, pos, learned, prebuilt, reach)  # the radius it needs
            return None
        if not missed:
            if added == 0 and freed == 0:
                return None, True
            if fused is not None:
                update = update_topology_fused(grid, index, fused, added, freed)
                tables_ahead.bind(grid, update[0])  # the tables queued ahead of the read are its
                return update, False
            if table:  # added: each brick once, so the sizes are known
                return update_topology_table(grid, claimed, kept, added, freed), False
            return _updated(grid, mode, mask, flags, kept, freed), False
    if not exact:  # a particle outside the bricks: the full build's radius from the fastest particle
        margin = host_margin(reach)
        grid.last_margin = margin
    if margin > limit:  # the full build's masks (the classes serve an update over a brick index only)
        return None
    keys = full_keys(grid, pos, margin, reach)
    return None if keys is None else (keys, False)


def full_keys(grid, pos, margin: int, reach=None):
    """``topology_keys`` built from nothing (§5.1): the sorted unique bricks holding
    particles are a topology every particle lies in; the marking pipeline on it gives the
    bricks of their influence boxes. None where the array path must build them."""
    cp = grid.xp
    n = int(pos.shape[0])
    bricks = cp.empty(n, cp.int64)
    beyond = cp.zeros(1, cp.uint64)
    ox, oy, oz, _, inv_h = _frame(grid)
    TOPOLOGY.launch("particle_brick_keys", n, (pos, _I64(n), ox, oy, oz, inv_h, _I32(grid.closed), *_dims(grid),
                                              bricks, beyond))
    keys = cp.unique(bricks)
    del bricks
    keys = keys[keys >= 0]
    cap = int(keys.shape[0])
    if int(beyond[0]) or cap == 0:
        return None
    slots = cp.arange(cap, dtype=cp.int32)
    coords, nbr = brick_tables(keys, slots, cap, cp)
    mask, flags, _ = _reach(grid, pos, margin, keys, slots, cp.ones(cap, cp.uint8), coords, nbr, False,
                            (cp.zeros(1, cp.int32), *_NO_INDEX), reach=reach)
    reached = _reached(cp, mask, coords, flags)
    if int(flags[:2].any()):
        return None
    return reached
