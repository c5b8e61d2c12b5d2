"""The sparse pressure set-up's coarse levels launched into a ``sparse_pressure_workspace``
(issue 24): ``sparse_pressure_setup.build``'s launches, level 1 by brick look-ups and ranks
(``_level1``), each coarser level launch by launch (``_coarse_level``) and the one-block tail
(``_tail``, decided on the host bounds, as there), into the workspace's tables of capacity
C_l: each level's kernels launched with bound C_l − 1 so that every row is C_l long, the
solver's stride (the kernels read their counts from the device and pad past them: the same
integers as ``build``'s). ``sparse_pressure_workspace.unknowns`` (ahead of its host read) or
``build`` (after it) calls ``_launch_levels``; the sizes land in ``Workspace.cnt`` and
``span``. From level 2 on the restriction tables are the prolongations' transposes
(``sparse_pressure_setup.RESTRICT`` "scatter", the default: no key searches, one launch fewer
a level; "search": mgs_restrict_table's searches, as ``build``'s). ``fuse()``
(``VOXFX_SPARSE_SETUP_FUSE``, "1" the default since session 17; "0") joins launches with no
grid-wide dependency between them: 30 → 25 launches at 8M (``FUSE``). ``_pairing()``
(``VOXFX_SPARSE_SCAN_JOIN`` "1", the default since session 22; ``sparse_pressure_scan.SCAN_JOIN``): a level whose
next level is launched too writes that level's coarsen with its own cells
(mgs_level_cells_coarsen) and scans both in one launch (``sparse_pressure_scan.inclusive_scans``):
25 → 22 launches at 8M, the same integers.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ..settings import env_choice
from . import sparse_pressure_setup as setup
from . import sparse_pressure_setup_graph as setup_graph
from . import sparse_pressure_workspace_kept as held_levels
from .sparse_multigrid import _CellSet
from .sparse_pressure_scan import inclusive_scans, scan_join, scan_way
from .sparse_pressure_setup import _ints
from .sparse_pressure_vcycle_tail import NON_PORTABLE_CLUSTER_ATTRIBUTE

# VOXFX_SPARSE_SETUP_FUSE (read at each set-up): "1" joins launches that read nothing another
# one writes — level 0's mgb_unknown_span into mgb_coarsen (mgb_coarsen_span), level 1's
# mgs_key_span into mgb_restrict (mgb_restrict_span), and from level 2 on (scatter) the
# level's mgs_prolong_restrict, mgs_key_span and the next launched level's mgs_coarsen
# (mgs_level_end): one launch fewer at level 0, 1 and the last launched level, two at the
# others (8M dam break, levels 0 … 3 launched, the tail from 4: 30 → 25). The same integers
# (host harness: the fused kernels against the separate ones; GPU test); "0" the separate
# launches. "1" the default since session 17 (8M on an H100: the coarse levels' kernels
# 0.449 → 0.412 ms of device a substep; bench/RESULTS.md).
FUSE = ("1", "0")


def fuse(given=None) -> str:
    """The coarse levels' launches: "1" joins the independent ones (``FUSE``)."""
    return env_choice("VOXFX_SPARSE_SETUP_FUSE", FUSE, given)


# VOXFX_SPARSE_SETUP_TAIL_GROUP (read at each set-up): the threads of the one-launch tail
# (``_tail``, mgs_tail_levels*): "block" (one block of 1024 threads, the default before session 22); one cluster of
# 8 ("cluster") or 16 ("cluster16", a non-portable cluster) such blocks, every pass spread over the
# cluster with its barriers the cluster's (mgs_tail_levels_cluster*; compute capability 9.0 on,
# else "fast"); "fast": one block without the barriers a pass's own items need not, its scans by
# warp shuffles (mgs_tail_levels_fast*); "hybrid" / "hybrid16": the tail's levels whose finer
# level's bound exceeds _CLUSTER_FROM on the cluster, the rest by "fast" (two launches). The same
# integers (host harness on threads, GPU test). Issue 24, 8M dam break on an H100
# (bench/flip_sparse_setup_kernels.py, ways in turn, medians of 4; bench/RESULTS.md, s22b): the tail
# (levels 4 … 7: ~3,300 fine cells, then a few hundred, then the empty ones) block 0.094 / 0.087 ms
# of device a substep (two calls), cluster 0.089 / 0.085, cluster16 0.105 — the cluster's barriers
# cost what its threads save on levels this small —; fast **0.066**; hybrid 0.038 + 0.027 = 0.064
# in two launches (0.037 + 0.024 with _FAST_THREADS 256; the fast block alone on 256: 0.111),
# hybrid16 0.041 + 0.029; the coarse levels' kernels 0.372 → 0.357 (fast), 0.354 ms (hybrid). The
# 8M row A/B (block / hybrid, both orders) did not resolve it: pressure 3.895 / 4.021, 3.910 / 3.844.
# "fast" the default since session 22 (one launch, no cluster, any GPU; −0.021 ms of device a substep).
TAIL_GROUPS = ("block", "cluster", "cluster16", "fast", "hybrid", "hybrid16")
_TAIL_CLUSTERS = {"cluster": 8, "cluster16": 16, "hybrid": 8, "hybrid16": 16}
_CLUSTER_FROM = 1024  # "hybrid": a level on the cluster where its finer level's bound exceeds this (a block's threads)
_FAST_THREADS = 1024  # the fast block's threads (a multiple of 32: its scans take whole warps)
_KC = {blocks: setup.Kernels("flip_sparse_pressure_setup.cu", (), setup.THREADS,
                             defines={**setup._DEFINES, "TAIL_CLUSTER": blocks}) for blocks in (8, 16)}
_NON_PORTABLE = set()  # ids of the 16-block kernels allowed their non-portable cluster (Kernels keeps them)


def tail_group(given=None) -> str:
    """The tail's group of threads (``TAIL_GROUPS``)."""
    return env_choice("VOXFX_SPARSE_SETUP_TAIL_GROUP", TAIL_GROUPS, given, default="fast")


def _tail_way() -> tuple:
    """(group, cluster blocks): the blocks 0 where the group has no cluster or the device none."""
    import cupy as cp

    group = tail_group()
    blocks = _TAIL_CLUSTERS.get(group, 0)
    return group, blocks if blocks and int(cp.cuda.Device().compute_capability) >= 90 else 0


def _pairing() -> bool:
    """``sparse_pressure_scan.scan_join()`` "1": a level and the next launched level's take
    scanned in one launch (module notes)."""
    return scan_join() == "1"


def _launch_levels(grid, kind, ws, level0, base, bounds, most, keep=False):
    """The coarse levels' launches on level 0's key *base* (its set of host *bounds*; at most
    *most* level-0 unknowns: the span kernel's grid), sizes into ``ws.cnt`` and ``ws.span``;
    from level 2 on as one graph replay where ``sparse_pressure_setup_graph`` is on, or (*keep*:
    levels ≥ 2 held, ``sparse_pressure_workspace_kept``) only level 1 ↔ 2's transfers."""
    cnt, span = ws.cnt, ws.span
    joined = fuse() == "1" and len(bounds) > 1
    if not joined:
        setup._widening(setup._B, "mgb_unknown_span", most, (level0._tables_args[0], cnt[0], grid.slot_coords, span[0]))
    if len(bounds) > 1:
        graph = not keep and len(bounds) > 2 and setup_graph.enabled()  # a graph of levels 2 …
        ws.scratch(keep=graph or getattr(level0, "mg_every", 0) > 0)  # held levels: level 2's keys stay
        try:
            first = _tail_start(bounds)  # build's test, on the host bounds
            pair = _pairing() and 2 < (ws.held.first if keep else first)  # level 2 launched on its own too
            fine = _level1(grid, kind, base, ws, level0.position, (level0._tables_args[0], most) if joined else None,
                           ws.work[2] if pair else None)
            level0._prolong_args = (cnt[0], grid.brick_nbr, ws.map1, ws.levels[1]["position"], cnt[1])
            level0.candidates = int(grid.brick_slot.shape[0]) * 64  # map1's entries this set-up wrote
            if keep:  # levels 2 … K − 1 built (on their own: ``held_levels.decide``), then level K's transfers
                fine = _coarser_to(fine, ws, ws.held.first)
                held_levels.launch(ws, fine)
            elif graph:
                key = (ws.generation, int(ws.arena.data.ptr), fine[1], first, setup.SCAN, scan_way(), _scatter(),
                       joined, pair, _tail_way())
                ws.graphs.run(key, partial(_coarser, fine, ws, first), partial(_tail_record, first, fine, ws))
            else:
                _coarser(fine, ws, first, *_tail_record(first, fine, ws, ws.rec))
        finally:
            ws.end_scratch()  # freed in stream order: the launches above still read it


def _tail_start(bounds) -> int:
    """The first level of the one-block tail (``build``'s test on the host *bounds*), or
    ``len(bounds)`` where every level is launched on its own."""
    for level in range(2, len(bounds)):
        if setup.TAIL_BOUND and bounds[level - 1] <= setup.TAIL_BOUND:
            return level
    return len(bounds)


def _coarser(fine, ws, first, rec=None):
    """Levels 2 … launch by launch up to *first*, the tail from there (its record in *rec*)."""
    fine = _coarser_to(fine, ws, first)
    if first < len(ws.caps):
        _tail(first, ws, rec)


def _coarser_to(fine, ws, first):
    """Levels 2 … *first* − 1 launch by launch, as ``_coarser`` (none past them: the held levels
    from *first* on); (first − 1, its key base)."""
    joined = fuse() == "1" and _scatter()  # mgs_level_end: the next level's coarsen in this level's last launch
    pair = _pairing()  # level − 1 scanned this level's take with its flags (level 1: _launch_levels' same test)
    for level in range(2, first):
        fine = _coarse_level(level, fine, ws, joined, coarsened=joined and level > 2, ahead=level + 1 < first,
                             paired=pair)
    return fine


def _level_tables(t, base, cnt, k, sums, fcnt=None, nxt=None):
    """``sparse_pressure_setup._level_tables`` on level buffers *t* with bound *k*; with
    *fcnt* (the finer level's sizes: ``RESTRICT`` "scatter") down filled with its sentinel too;
    with *nxt* (the next level's buffers: ``_pairing``) that level's coarsen and scan too
    (mgs_level_cells_coarsen, one scan_lookback_pair)."""
    K = setup._K
    if nxt is None:
        K.launch("mgs_level_cells", k, (t["keys"], t["fluid"], cnt, np.int32(k), *_ints(base), t["around"],
                                        t["diag8"], t["cls"], t["flags"]))
        setup.inclusive_scan(t["flags"], t["scans"], sums)
    else:  # the next level's take is k long: its fine level is this one
        K.launch("mgs_level_cells_coarsen", k, (t["keys"], t["fluid"], cnt, np.int32(k), *_ints(base), t["around"],
                                                t["diag8"], t["cls"], t["flags"], np.int32(k), nxt["flag"],
                                                nxt["take"]))
        inclusive_scans(t["flags"], t["scans"], nxt["take"], nxt["scan"], sums)
    K.launch("mgs_order", max(k, 1), (t["cls"], t["scans"], cnt, np.int32(k), t["position"], t["order"]))
    if fcnt is None:
        K.launch("mgs_level_tables", k + 1, (t["order"], cnt, np.int32(k), t["around"], t["position"], t["diag8"],
                                             t["keys"], t["nbr"], t["diag"], t["ukeys"]))
    else:
        K.launch("mgs_level_tables_down", k + 1, (t["order"], cnt, np.int32(k), t["around"], t["position"],
                                                  t["diag8"], t["keys"], t["nbr"], t["diag"], t["ukeys"], fcnt,
                                                  t["down"]))


def _level1(grid, kind, base, ws, position0, span0=None, nxt=None):
    """Level 1 by brick look-ups and ranks (``sparse_pressure_setup._level1_by_bricks``;
    *position0*: level 0's flat cell → unknown): (1, its key base). *span0*: (level 0's
    unknowns' cells, its bound) where ``fuse()`` is "1": mgb_unknown_span launched within mgb_coarsen,
    and level 1's mgs_key_span within mgb_restrict. *nxt*: level 2's buffers, its coarsen and
    scan with level 1's (``_pairing``)."""
    import cupy as cp

    B = setup._B
    cand_count = int(grid.brick_slot.shape[0]) * 64
    topo = grid.topology
    bkeys = cp.ascontiguousarray(topo.keys, dtype=cp.int64)  # sorted: (bz, by, bx) order
    bslots = cp.ascontiguousarray(topo.slots, dtype=cp.int32)
    bricks = int(bkeys.shape[0])
    ws.candidates(cand_count, max(16 * bricks, 1))
    flag, take, map1 = ws.flag1, ws.take1, ws.map1
    active = grid.brick_slot.astype(cp.bool_, copy=False)
    kind8, cnt, span = kind.astype(cp.uint8, copy=False), ws.cnt, ws.span
    if span0 is None:
        B.launch("mgb_coarsen", cand_count, (kind8, active, np.int32(cand_count), flag, take, map1))
    else:
        wide = _span_blocks(span0[1])
        B.launch_grid("mgb_coarsen_span", (max(setup.blocks(cand_count)[0], wide, 1),), (setup.THREADS,),
                      (kind8, active, np.int32(cand_count), flag, take, map1, span0[0], cnt[0], grid.slot_coords,
                       span[0], np.int32(wide)))
    t, c1 = ws.work[1], ws.caps[1]
    k1 = c1 - 1
    cbase = _CellSet(None, None, base).coarser_base()
    seg = ws.seg
    B.launch("mgb_segment_counts", 16 * bricks, (bkeys, bslots, np.int32(bricks), flag, seg))
    scan = setup.inclusive_scan(seg[:16 * bricks], ws.seg_scan[:16 * bricks], ws.sums)
    B.launch("mgb_ranked", max(16 * bricks, 1), (bkeys, bslots, np.int32(bricks), flag, seg, scan, grid.slot_coords,
                                                 *_ints(cbase), np.int32(k1), t["keys"], t["fluid"], t["scand"], map1,
                                                 cnt[1]))
    _level_tables(t, cbase, cnt[1], k1, ws.sums, nxt=nxt)
    # up onto level 0 (mgb_prolong) is Level0.fill's, at the solver's stride
    if span0 is None:
        B.launch("mgb_restrict", k1 + 1, (t["scand"], t["order"], cnt[1], np.int32(c1), grid.brick_nbr, position0,
                                          cnt[0], t["down"]))
        setup._widening(setup._K, "mgs_key_span", k1, (t["ukeys"], cnt[1], span[1]))
    else:
        wide = _span_blocks(k1)
        B.launch_grid("mgb_restrict_span", (max(setup.blocks(k1 + 1)[0], wide),), (setup.THREADS,),
                      (t["scand"], t["order"], cnt[1], np.int32(c1), grid.brick_nbr, position0, cnt[0], t["down"],
                       t["ukeys"], span[1], np.int32(wide)))
    return 1, cbase


def _coarse_level(level, fine, ws, joined=False, coarsened=False, ahead=False, paired=False):
    """One coarse level launch by launch (``build``'s loop body); (level, its key base).
    *joined* (``fuse()`` "1" with "scatter"): its last launches as one mgs_level_end, with the
    next level's mgs_coarsen where that level is launched too (*ahead*); *coarsened*: this
    level's mgs_coarsen was the finer level's mgs_level_end. *paired* (``_pairing``): this
    level's coarsen and scan were the finer level's (mgs_level_cells_coarsen and its paired
    scan), and where *ahead* this level does the next one's the same way (no coarsen in its
    mgs_level_end)."""
    K = setup._K
    f, fbase = fine
    tf, t = ws.work[f], ws.work[level]
    cf, c = ws.caps[f], ws.caps[level]
    fk, k = cf - 1, c - 1
    cbase = _CellSet(None, None, fbase).coarser_base()
    cnt, span = ws.cnt, ws.span
    if paired:  # the finer level's mgs_level_cells_coarsen and scan_lookback_pair wrote take and scan
        scan = t["scan"]
    else:
        if not coarsened:
            K.launch("mgs_coarsen", fk, (tf["keys"], tf["fluid"], cnt[f], np.int32(fk), *_ints(fbase), t["flag"],
                                         t["take"]))
        scan = setup.inclusive_scan(t["take"], t["scan"], ws.sums)
    K.launch("mgs_parents", max(fk, 1), (tf["keys"], t["flag"], scan, cnt[f], np.int32(fk), *_ints(fbase),
                                         *_ints(cbase), np.int32(k), t["keys"], t["fluid"], cnt[level]))
    nxt = ws.work[level + 1] if paired and ahead else None  # the next level's coarsen and scan with this one's
    if joined:  # prolong_restrict, the span and the next level's coarsen (none where that is the tail's)
        _level_tables(t, cbase, cnt[level], k, ws.sums, fcnt=cnt[f], nxt=nxt)
        n = ws.work[level + 1] if ahead and nxt is None else t
        nbound = k if ahead and nxt is None else 0  # 0: t's flag and take stand in, not written
        wide = _span_blocks(k)
        K.launch_grid("mgs_level_end", (max(setup.blocks(max(cf, k, 1))[0], wide),), (setup.THREADS,),
                      (tf["ukeys"], cnt[f], np.int32(cf), *_ints(fbase), t["keys"], cnt[level], t["position"],
                       *_ints(cbase), t["up"], np.int32(c), t["down"], t["ukeys"], span[level], np.int32(wide),
                       t["fluid"], np.int32(nbound), n["flag"], n["take"]))
        return level, cbase
    if _scatter():  # down as up's transpose: no searches, one launch fewer
        _level_tables(t, cbase, cnt[level], k, ws.sums, fcnt=cnt[f], nxt=nxt)
        K.launch("mgs_prolong_restrict", cf, (tf["ukeys"], cnt[f], np.int32(cf), *_ints(fbase), t["keys"], cnt[level],
                                              t["position"], *_ints(cbase), t["up"], np.int32(c), t["down"]))
    else:
        _level_tables(t, cbase, cnt[level], k, ws.sums, nxt=nxt)
        K.launch("mgs_prolong_table", cf, (tf["ukeys"], cnt[f], np.int32(cf), *_ints(fbase), t["keys"], cnt[level],
                                           t["position"], *_ints(cbase), t["up"]))
        K.launch("mgs_restrict_table", c, (t["ukeys"], cnt[level], np.int32(c), *_ints(cbase), tf["keys"], cnt[f],
                                           tf["position"], *_ints(fbase), t["down"]))
    setup._widening(K, "mgs_key_span", k, (t["ukeys"], cnt[level], span[level]))
    return level, cbase


def _tail_record(first, fine, ws, rec=None):
    """``mgs_tail_levels``' record (per level its arrays' pointers, bound, key base and stride)
    for the tail from level *first* on *fine* (level 1's (1, key base)), written into *rec*
    (a new device array where None: a graph's own); (rec,), or () without a tail."""
    import cupy as cp

    from .sparse_pressure_workspace import _LEVEL_ARRAYS

    count = len(ws.caps)
    if first >= count:
        return ()
    f, base = fine
    for _ in range(f + 1, first):  # the fine level of the tail: first − 1
        base = _CellSet(None, None, base).coarser_base()
    f = first - 1
    host = np.zeros((count, len(_LEVEL_ARRAYS) + 5), np.int64)
    host[:, :len(_LEVEL_ARRAYS)] = ws.pointers
    host[f, -5:] = [ws.caps[f] - 1, *base, ws.caps[f]]
    for level in range(first, count):
        base = _CellSet(None, None, base).coarser_base()
        host[level, -5:] = [ws.caps[level] - 1, *base, ws.caps[level]]
    if rec is None:
        return (cp.asarray(host),)
    rec.set(host)
    return (rec,)


def _tail(first, ws, rec):
    """Levels first … of the workspace by mgs_tail_levels (``sparse_pressure_setup._tail_levels``;
    *rec*: ``_tail_record``'s) in one block, or by its twins (``tail_group``): on one cluster, by the
    "fast" block, or the first levels on the cluster and the rest by the fast block."""
    count = len(ws.caps)
    sizes = ws.sizes[:10 * count]
    group, blocks = _tail_way()
    if group == "block" and _scatter():
        setup._K.launch_grid("mgs_tail_levels_scatter", (1,), (setup._TAIL_THREADS,),
                             (rec, np.int32(first), np.int32(count), sizes[:4 * count], sizes[4 * count:]))
    elif group == "block":
        setup._K.launch_grid("mgs_tail_levels", (1,), (setup._TAIL_THREADS,),
                             (rec, np.int32(first), np.int32(count), sizes[:4 * count], sizes[4 * count:]))
    else:
        _tail_groups(first, ws, rec, group, blocks)


def _tail_groups(first, ws, rec, group, blocks):
    """``_tail``'s twins of the block: levels first … split − 1 on one cluster of *blocks* (0: none;
    ``_KC``'s module, compiled only when a cluster runs), the rest by the fast block (the plain module's)."""
    count = len(ws.caps)
    sizes = ws.sizes[:10 * count]
    name = "mgs_tail_levels_scatter" if _scatter() else "mgs_tail_levels"
    split = first  # the cluster's levels first … split − 1, the fast block's split …
    if blocks and group.startswith("cluster"):
        split = count
    elif blocks:
        while split < count and ws.caps[split - 1] - 1 > _CLUSTER_FROM:
            split += 1
    if split > first:
        kernels = _KC[blocks]
        cluster = name.replace("mgs_tail_levels", "mgs_tail_levels_cluster")
        kernel = kernels.get(cluster)
        if blocks > 8 and id(kernel) not in _NON_PORTABLE:  # beyond the portable cluster size: allowed per kernel
            import cupy as cp

            cp.cuda.driver.funcSetAttribute(kernel.kernel.ptr, NON_PORTABLE_CLUSTER_ATTRIBUTE, 1)
            _NON_PORTABLE.add(id(kernel))
        kernels.launch_grid(cluster, (blocks,), (setup._TAIL_THREADS,),
                            (rec, np.int32(first), np.int32(split), sizes[:4 * count], sizes[4 * count:]))
    if split < count:
        setup._K.launch_grid(name.replace("mgs_tail_levels", "mgs_tail_levels_fast"), (1,), (_FAST_THREADS,),
                            (rec, np.int32(split), np.int32(count), sizes[:4 * count], sizes[4 * count:]))


def _span_blocks(n) -> int:
    """The blocks a span over *n* items runs on (``setup._widening``'s grid; 0 for n = 0)."""
    return min(setup._WIDEN_BLOCKS, setup.blocks(n)[0]) if int(n) > 0 else 0


def _scatter() -> bool:
    """``sparse_pressure_setup.RESTRICT``: the restriction as the prolongation's transpose."""
    if setup.RESTRICT not in ("search", "scatter"):
        raise ValueError(f"VOXFX_SPARSE_MG_RESTRICT must be search or scatter, not {setup.RESTRICT!r}")
    return setup.RESTRICT == "scatter"

