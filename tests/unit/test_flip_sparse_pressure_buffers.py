"""The sparse GPU solver's buffer sizing (sparse_pressure_buffers.grown_strides, carve: NumPy
here; the device runs are tests/gpu/test_flip_sparse_pressure_persist_gpu.py)."""

import numpy as np
import pytest

from voxfx.kernels.flip import sparse_pressure_gpu
from voxfx.kernels.flip.sparse_pressure_buffers import carve, grown_strides


def test_fresh_strides_take_the_headroom():
    assert grown_strides([1000, 100, 1]) == [1314, 189, 65]
    assert grown_strides([1000, 100], old=[5000]) == [1314, 189]  # another number of levels: fresh


def test_strides_keep_what_fits_and_grow_geometrically_where_outgrown():
    old = [1314, 189, 65]
    assert grown_strides([1314, 10, 65], old) == old  # fits: never smaller
    grown = grown_strides([1315, 189, 66], old)
    assert grown[1] == 189 and grown[0] == int(1314 * 1.5) and grown[2] == int(66 * 1.25) + 64
    assert grown_strides([10_000, 189, 65], old)[0] == int(10_000 * 1.25) + 64  # more than the factor
    # growing by one entry at a time: a new size only every ~1.5×, not at every step
    strides, changes = [100], 0
    for n in range(100, 20_000):
        new = grown_strides([n], strides)
        changes += new != strides
        assert new[0] >= n
        strides = new
    assert changes <= 14


def test_carve_gives_aligned_disjoint_zeroed_views():
    lengths = [5, 64, 65, 1, 0, 130]
    arena, views = carve(np, lengths, np.float32, align=64)
    assert [v.shape[0] for v in views] == lengths and arena.dtype == np.float32
    starts = [v.__array_interface__["data"][0] - arena.__array_interface__["data"][0] for v in views]
    assert all(s % (64 * 4) == 0 for s in starts)
    for i, v in enumerate(views):
        v[...] = i + 1
    for i, v in enumerate(views):  # no view overlaps another
        assert np.all(v == i + 1)
    arena.fill(0)  # one fill zeroes them all
    assert all(not v.any() for v in views)
    assert sparse_pressure_gpu.PERSIST in (True, False)


def _spread(mode):
    """Generations of the workspace's coarse capacities (``table_caps``) and their largest
    bytes as a liquid's level-0 set grows 0.3% a substep from 400k to 4M cells."""
    from voxfx.kernels.flip.sparse_pressure_buffers import table_caps
    from voxfx.kernels.flip.sparse_pressure_setup import level_bounds
    from voxfx.kernels.flip.sparse_pressure_workspace import tables_bytes

    caps, generations, peak, n = None, 0, 0, 400_000
    while n < 4_000_000:
        needs = [b + 1 for b in level_bounds(n)[1:]]
        new = table_caps(needs, caps, mode)
        assert len(new) == len(needs) + 1 and all(c >= k for c, k in zip(new[1:], needs))
        generations += new != caps
        caps, peak, n = new, max(peak, tables_bytes(new)), int(n * 1.003)
    return generations, peak


def test_coarse_capacities_grow_together_in_fewer_generations_for_as_many_bytes():
    """``CAPS`` "together": once one level outgrows, every level grows (its +64 let a deeper
    level outgrow a few substeps after level 1: another generation, another solver)."""
    from voxfx.kernels.flip.sparse_pressure_buffers import grown_strides, table_caps

    needs, held = [1000, 126, 17], (0, 1314, 221, 85)
    assert table_caps(needs, None, "together", "fresh") == (0,) + tuple(grown_strides(needs))
    assert table_caps(needs, held, "level") == table_caps(needs, held, "together") == held  # fits: kept
    grown = table_caps([1315, 126, 17], held, "together")
    assert grown == (0, int(1314 * 1.5), int(221 * 1.5), int(85 * 1.5))  # level 1 outgrew: all of them grow
    assert table_caps([1315, 126, 17], held, "level") == (0, int(1314 * 1.5), 221, 85)
    # a new level count (a set of 8^k cells; a new generation either way): every level afresh, as "level"
    for first in ("fresh", "grown"):
        more = [1000, 126, 17, 3]
        assert table_caps(more, held, "together", first) == table_caps(more, held, "level", first)
    assert table_caps([1000, 126, 17, 3], held, "together", "fresh") == (0,) + tuple(grown_strides([1000, 126, 17, 3]))
    for mode in ("level", "together"):
        assert table_caps([1073, 126, 17], held, mode) == held  # it fits
    level, together = _spread("level"), _spread("together")
    assert together[0] * 2 < level[0] and together[1] <= 1.02 * level[1]


@pytest.mark.parametrize("first", ["grown", "fresh"])
def test_coarse_capacities_grown_together_hold_no_more_at_any_substep(first):
    """``CAPS`` "together" against "level" substep by substep as a 1M liquid's level-0 set
    grows 2.2× over 36 substeps (12 frames), from every start across a level-count change
    (262,144 cells): the tables' bytes within 6% and 2.2 MiB at every substep (the deeper levels
    grown with level 1; the model: 5.2%, 2.06 MiB with ``FIRST`` "fresh", 4.9%, 1.99 with "grown"), in
    fewer generations. Before, a count change
    kept the levels' room under "together" where "level" went back to fresh: up to 20% and 5.5
    MiB more (the spreading liquid's memory check, tests/gpu/test_liquid_memory_check_gpu.py,
    went over its estimate)."""
    from voxfx.kernels.flip.sparse_pressure_buffers import table_caps
    from voxfx.kernels.flip.sparse_pressure_setup import level_bounds
    from voxfx.kernels.flip.sparse_pressure_workspace import tables_bytes

    counted = 0
    for start in range(100_000, 300_000, 2_000):
        caps, gens = {"level": None, "together": None}, {"level": 0, "together": 0}
        for n in np.geomspace(start, 2.2 * start, 36).astype(int):
            needs = [b + 1 for b in level_bounds(int(n))[1:]]
            for mode in caps:
                new = table_caps(needs, caps[mode], mode, first)
                gens[mode] += new != caps[mode]
                caps[mode] = new
            counted += len(caps["level"]) != len(caps["together"])
            more = tables_bytes(caps["together"]) - tables_bytes(caps["level"])
            assert more <= min(0.06 * tables_bytes(caps["level"]), 2.2 * 2 ** 20), (start, n, caps)
        assert gens["together"] <= gens["level"]
    assert counted == 0  # the same level counts throughout


# The 8M dam break's coarse needs (bench/flip_sparse.py --row 8m --frames 12 --timing fast --stages,
# H100, session 18 call 1): frame 0's set-up, then frame 10's two that outgrew "fresh"'s capacities
_NEEDS_8M = ([167309, 20914, 2615, 327, 41, 6, 1], [211473, 26435, 3305, 414, 52, 7, 1],
             [215627, 26954, 3370, 422, 53, 7, 1])


def test_first_capacities_grown_are_a_first_growths_and_hold_the_8m_frames():
    """``FIRST`` "grown": where the capacities are sized afresh (no workspace yet, a new level
    count) they are ``_GROWTH`` times ``grown_strides``' — what "together" grew to at the first
    growth; "fresh" the way before. The 8M dam break's frame-10 set-ups outgrew "fresh"'s (a new
    generation: a new solver in frame 10) and fit "grown"'s, the very capacities "fresh" grew to
    there (session 17, call 2: [313800, 39309, 4998, 708, 172, 106, 97])."""
    from voxfx.kernels.flip.sparse_pressure_buffers import first_caps, table_caps

    needs, held = [1000, 126, 17], (0, 1314, 221, 85)
    assert first_caps() == "grown"  # the default
    for mode in ("together", "level"):
        assert table_caps(needs, None, mode, "fresh") == (0,) + tuple(grown_strides(needs))
        assert table_caps(needs, None, mode, "grown") == (0, int(1314 * 1.5), int(221 * 1.5), int(85 * 1.5))
        # a new level count: afresh either way, as FIRST says; the same count: FIRST plays no part
        assert table_caps(needs + [3], held, mode, "grown") == (0,) + tuple(int(f * 1.5) for f in
                                                                            grown_strides(needs + [3]))
        assert table_caps(needs + [3], held, mode, "fresh") == (0,) + tuple(grown_strides(needs + [3]))
        for first in ("grown", "fresh"):
            assert table_caps(needs, held, mode, first) == held
            assert table_caps([1315, 126, 17], held, mode, first) == table_caps([1315, 126, 17], held, mode)
    frame0, *frame10 = _NEEDS_8M
    fresh, grown = table_caps(frame0, None, "together", "fresh"), table_caps(frame0, None, "together", "grown")
    assert fresh == (0, 209200, 26206, 3332, 472, 115, 71, 65)  # the 8M frames' generation 1
    assert grown == (0, 313800, 39309, 4998, 708, 172, 106, 97)
    caps = fresh
    for n in frame10:
        caps = table_caps(n, caps, "together")
    assert caps == grown and caps != fresh  # "fresh": a generation in frame 10, to "grown"'s
    assert all(table_caps(n, grown, "together") == grown for n in frame10)  # "grown": none


def _chain(sets, first, mode="together"):
    """Per substep the capacities ``table_caps`` holds for level-0 sets of *sets* cells, and the
    generations (sizings that changed them)."""
    from voxfx.kernels.flip.sparse_pressure_buffers import table_caps
    from voxfx.kernels.flip.sparse_pressure_setup import level_bounds

    caps, held, generations = None, [], 0
    for n in sets:
        new = table_caps([b + 1 for b in level_bounds(int(n))[1:]], caps, mode, first)
        generations += new != caps
        caps = new
        held.append(caps)
    return held, generations


@pytest.mark.parametrize("mode", ["together", "level"])
def test_first_capacities_grown_take_fewer_generations_and_the_same_tables_once_fresh_grew(mode):
    """A liquid whose level-0 set grows as the 8M dam break's over Fast frames 1–10 (1.29× over 30
    substeps) from every start between 300k and 3M cells (across the level-count change at 8^7),
    and one growing 10× (0.3% a substep): "grown" never takes more generations than "fresh", and
    at the 8M's pace one only (its first sizing) within a level count, where "fresh" took one more
    in 86% of the starts (93 of 108; the 10× liquid: 6 against 8 with "together", 15 against 23);
    substep by substep "grown" holds at most 1.5× "fresh"'s tables and, with ``CAPS`` "together" (the
    default), from "fresh"'s first growth after a sizing afresh exactly its capacities (one generation
    of the chain ahead; with "level" a deep level's growth can take its fresh size, 1.25× + 64)."""
    from voxfx.kernels.flip.sparse_pressure_workspace import tables_bytes

    runs = [np.geomspace(start, 1.29 * start, 31) for start in range(300_000, 3_000_000, 25_000)]
    runs.append(np.geomspace(400_000, 4_000_000, 770))
    fewer = 0
    for sets in runs:
        (grown, g), (fresh, f) = _chain(sets, "grown", mode), _chain(sets, "fresh", mode)
        assert g <= f
        fewer += g < f
        afresh = 0  # the substep "fresh" last sized afresh (a new level count)
        for at, (a, b) in enumerate(zip(grown, fresh)):
            if at and len(b) != len(fresh[at - 1]):
                afresh = at
            assert tables_bytes(a) <= 1.5 * tables_bytes(b) + 4096, (at, a, b)
            for level in range(1, len(b) if mode == "together" else 1):  # "level": a deep level's +64 can lead
                grew = any(fresh[i][level] != fresh[afresh][level] for i in range(afresh, at + 1))
                assert a[level] == (b[level] if grew else int(b[level] * 1.5)), (at, level, a, b)
        if len(sets) == 31 and len(grown[0]) == len(grown[-1]):
            assert g == 1  # the 8M's pace within a level count: no generation after the first
    assert fewer >= 0.85 * (len(runs) - 1), fewer


_H100_SHARED = 232448  # sharedMemPerBlockOptin of an H100 (227 KiB)


def test_solver_bytes_count_the_dense_inverse_and_its_scratch():
    """``solver_memory_bytes`` with the V-cycle's dense mode counts the coarsest level's G
    (stride² float32) and, where it passes the shared memory a block, mg_dense_inverse's scratch
    (stride² + 2·stride doubles) as ``_dense_setup`` allocates them; before, it counted neither
    (``backend.ensure_fits`` before a solver is built: 29.3 MiB unseen at a coarsest stride of 1599)."""
    from voxfx.kernels.flip.sparse_pressure_buffers import dense_bytes, dense_scratch_bytes, solver_memory_bytes

    assert dense_scratch_bytes(71) == 8 * (71 * 71 + 142)
    assert dense_bytes(115, _H100_SHARED) == 4 * 115 * 115  # the 8M dam break's: its scratch in shared memory
    assert dense_bytes(169, _H100_SHARED) == 4 * 169 * 169  # the largest stride whose scratch fits there
    assert dense_bytes(170, _H100_SHARED) == 4 * 170 * 170 + 8 * (170 * 170 + 340)  # then global
    assert dense_bytes(115, 0) == 4 * 115 * 115 + 8 * (115 * 115 + 230)  # a device without that room
    strides = (162650, 93267, 11782, 1599)
    plain = solver_memory_bytes(strides)
    assert solver_memory_bytes(strides, dense=2, shared_limit=_H100_SHARED) - plain == dense_bytes(1599, _H100_SHARED)
    assert solver_memory_bytes(strides, dense=0, shared_limit=_H100_SHARED) == plain
    assert solver_memory_bytes(strides, "jacobi", dense=2) == solver_memory_bytes(strides, "jacobi")  # no V-cycle
    assert solver_memory_bytes(strides[:1], dense=2) == solver_memory_bytes(strides[:1])  # one level: no coarse solve


def _pooled(nbytes):
    return -(-int(nbytes) // 512) * 512  # CuPy's pool rounds each allocation to 512 B


def _kept_table_bytes(caps):
    """Bytes of the set-up workspace's kept tables (``Workspace.tables``: position, nbr, diag, up,
    down a coarse level) for capacities *caps*, pool-rounded."""
    total = 0
    for level in range(1, len(caps)):
        c = caps[level]
        total += sum(_pooled(b) for b in (4 * (c - 1), 24 * c, 4 * c, 32 * caps[level - 1], 256 * c))
    return total


def test_the_coarsest_levels_dense_inverse_is_what_caps_together_held_more_in_frame_11():
    """The spreading 1M liquid of tests/gpu/test_liquid_memory_check_gpu.py, frame 11 (H100, session
    15 call 3, bench/_memory_check_probe.py): "together" held 152.15 MiB in use after the frame,
    "level" 135.59 (peaks 242.05 and 225.49), one solver cached each, the same strides but the
    coarsest's (level 3: 1599, 1066). G and mg_dense_inverse's global scratch of that level
    (quadratic in its stride: the workspace's capacity, grown with level 1 under "together")
    and the workspace's kept tables account for the 16.56 MiB to within the probe's rounding."""
    from voxfx.kernels.flip.sparse_pressure_buffers import dense_bytes

    level = {"caps": (0, 93267, 11782, 1066, 145, 75, 66, 65), "solver": (162650, 93267, 11782, 1066)}
    together = {"caps": (0, 93267, 11782, 1599, 325, 168, 148, 145), "solver": (162650, 93267, 11782, 1599)}

    def dense(way):
        s = way["solver"][-1]
        return _pooled(4 * s * s) + _pooled(dense_bytes(s, _H100_SHARED) - 4 * s * s)

    mib = 2 ** 20
    tables = (_kept_table_bytes(together["caps"]) - _kept_table_bytes(level["caps"])) / mib
    assert abs(tables - (34.46 - 34.17)) < 0.01  # the probe's "ws held" (its other buffers the same)
    more = (dense(together) - dense(level)) / mib + tables
    assert abs(more - (152.15 - 135.59)) < 0.01 and abs(more - (242.05 - 225.49)) < 0.01
    assert dense(level) / mib < 13.1 and dense(together) / mib > 29.2  # 2.25×: 1.5² for the stride's 1.5×


def test_dense_rows_bound_the_coarsest_levels_unknowns_not_its_stride():
    """``DENSE_ROWS`` "bound": G of ``dense_rows`` rows (≥ 128, the coarsest level's unknowns at most:
    < 4 cells on its longest axis, or the one above such a level with ≤ 128) and its scratch for as
    many; the frame-11 solvers of the spreading 1M liquid then hold 0.78 MiB for it under "together"
    and 0.52 under "level" (29.3 and 13.0 with "stride"); a solver whose coarsest level outgrows the
    rows does not fit, and a solve launched ahead on it gets sizes of 0 (``ahead_sizes_reference``)."""
    from types import SimpleNamespace

    from voxfx.kernels.flip.sparse_pressure_buffers import ahead_limits, dense_bytes, dense_rows
    from voxfx.kernels.flip.sparse_pressure_gpu import SparsePressureSolverGPU
    from voxfx.kernels.flip.sparse_pressure_solve_ahead import ahead_sizes_reference

    assert dense_rows(7, 1599, "stride") == 1599 and dense_rows(7, 1599) == 128  # the default: "bound"
    assert dense_rows(7, 1599, "bound") == 128 and dense_rows(129, 1599, "bound") == int(129 * 1.25) + 64
    assert dense_rows(7, 71, "bound") == 71  # within the stride (the 8M dam break's: unchanged)
    mib = 2 ** 20
    rows = dense_rows(129, 1599, "bound")
    assert dense_bytes(1599, _H100_SHARED, 128) == 4 * 128 * 1599  # its scratch in shared memory
    assert dense_bytes(1599, _H100_SHARED, 128) / mib < 0.79 and dense_bytes(1066, _H100_SHARED, 128) / mib < 0.53
    assert dense_bytes(1599, _H100_SHARED, rows) == 4 * rows * 1599 + 8 * (rows * rows + 2 * rows)
    assert dense_bytes(1599, _H100_SHARED, 1599) == dense_bytes(1599, _H100_SHARED) > 29 * mib
    # fits: the coarsest level's m within the rows (its needs are m + 1), the strides as before
    solver = SimpleNamespace(strides=(5000, 1599), dense=object(), dense_rows=128)
    assert SparsePressureSolverGPU.fits(solver, [4000, 129]) and not SparsePressureSolverGPU.fits(solver, [4000, 130])
    assert not SparsePressureSolverGPU.fits(solver, [5001, 10])
    assert SparsePressureSolverGPU.fits(SimpleNamespace(strides=(5000, 1599), dense=None, dense_rows=128), [10, 1599])
    # ahead_sizes' limits: m ≤ rows on the coarsest level, else every size 0
    limits = ahead_limits((5000, 1599), 128)
    assert limits == [5000, 129] and ahead_limits((5000, 1599)) == [5000, 1599]
    cnt = [0, 900, 1000, 1000, 0, 60, 128, 128]
    assert list(ahead_sizes_reference(cnt, limits, 50)) == [0, 0, 0, 50, 900, 1000, 60, 128]
    cnt[6] = 129
    assert list(ahead_sizes_reference(cnt, limits, 50)) == [0, 0, 0, 50, 0, 0, 0, 0]
    assert list(ahead_sizes_reference(cnt, ahead_limits((5000, 1599)), 50))[6:] == [60, 129]


def test_vector_layout_gives_each_persisted_vector_its_level_and_that_levels_stride():
    """The arena's order (sparse_pressure_buffers.vector_layout): level 0's six vectors and its r
    where coarser levels exist, three a level below the coarsest, two on it, the brick smoother's x
    last; each length its level's stride, so the solve ahead zeroes each vector at its own level's m."""
    from voxfx.kernels.flip.sparse_pressure_buffers import vector_layout

    assert vector_layout([100], False) == ([100] * 6, [0] * 6)
    lengths, levels = vector_layout([100, 20, 7], True)
    assert levels == [0] * 7 + [1, 1, 1] + [2, 2] + [0]
    assert lengths == [100] * 7 + [20] * 3 + [7] * 2 + [100]
    lengths, levels = vector_layout([64, 9], False)
    assert levels == [0] * 7 + [1, 1] and lengths == [64] * 7 + [9] * 2
