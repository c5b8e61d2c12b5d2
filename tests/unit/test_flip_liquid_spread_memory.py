"""The sparse liquid's memory estimate covers the liquid's spread, and the bake's check
before every frame (``frame_check.FrameCheck``) covers the next frame (issue 21 §6).

Device rows: ``bench/memory_liquid.py`` on an NVIDIA H100 (CuPy 14.2, 2026-11-26, after the
solvers left their reference cycles: ``GraphLoop``), the pool's bytes in use per frame (a
memory hook), the user's frame (step(1/24) and the level set). The start-only estimate (the
start's bricks ×1.5) was 0.58× the dam break's peak and 0.68× the river's (H200, before);
the CPU rows are measured here with tracemalloc. Those rows ran with the pressure set-up's
fresh arrays (``VOXFX_SPARSE_SETUP=fresh``); the set-up's workspace (the default now) was
measured on an H200 (``bench/workspace_memory_call.sh``) beside a fresh run of the same
scene."""

import tracemalloc

import numpy as np
import pytest

from tests.conftest import ROOT
from tests.meshes import box
from voxfx.kernels.flip import sparse_memory as M
from voxfx.kernels.flip.frame_check import FrameCheck
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec

GPU = object()  # any module but NumPy: the estimates' device branch
GIB = 2 ** 30

# (row, particles, most bricks held, the largest in-use peak GiB, frames): H100 rows
MEASURED = [("dam 8M", 8_000_033, 12_317, 1.310, 60),  # peak at frame 23, bricks 3,247 at frame 1
            ("dam 65M", 65_536_000, 52_622, 8.073, 40),  # peak at frame 18, bricks 20,763 at frame 1
            ("river 100M", 101_910_528, 108_098, 16.230, 179)]  # 36,400 bricks at frame 1, the most at frame 90


def scene(row):
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    from flip import dam_break
    from flip_sparse import river

    if row.startswith("dam"):
        return dam_break(512, 65_536_000) if "65M" in row else dam_break(256, 8_000_000)
    return river(2048, 100_663_296)


@pytest.mark.parametrize("row, particles, bricks, peak, frames", MEASURED, ids=[m[0] for m in MEASURED])
def test_the_spread_estimate_covers_the_measured_rows(row, particles, bricks, peak, frames):
    spec, v, _ = scene(row)
    top = (float(v[:, 2].max()) - spec.origin[2]) / spec.voxel_size
    climb = M.climb_cells(top, 0.0, spec)
    assert M.estimate_bricks(particles / 8, spec, True, climb) >= bricks
    estimate = M.sparse_flip_memory(spec, particles, xp=GPU, climb=climb, workspace=False)  # fresh set-up rows
    assert peak * GIB <= estimate <= 1.5 * peak * GIB, estimate / GIB
    start_only = M.SPREAD * M.start_bricks(particles / 8)  # the estimate before the spread was counted
    assert start_only < bricks


def test_the_layer_covers_the_floor_and_the_walls_up_to_the_climb():
    spec = GridSpec((0.0, 0.0, 0.0), 0.01, (256, 256, 256))
    floor_only = M.layer_bricks(1e6, spec, climb=0.0)
    walls = M.layer_bricks(1e6, spec, climb=100.0)
    assert floor_only < walls < M.layer_bricks(1e6, spec, climb=None)  # None: up to the box's top
    assert M.climb_cells(50.0, 0.0, spec) == pytest.approx(M.SPLASH * 50.0)
    assert M.climb_cells(50.0, 4.43, spec) > M.climb_cells(50.0, 0.0, spec)  # v²/2g ≈ 1 m = 100 cells higher
    assert M.climb_cells(50.0, 0.0, spec, gravity=0.0) == 256  # no gravity: anywhere
    small = M.layer_bricks(5_000.0, spec)  # too little to cover the floor 2 cells deep: a patch
    assert small < 0.1 * floor_only
    assert M.estimate_bricks(1e9, spec) == M.box_bricks(spec)  # never more than the box


def test_the_frame_check_counts_the_capacity_and_twice_the_last_growth():
    spec = GridSpec((0.0, 0.0, 0.0), 1 / 256, (256, 256, 256))
    check = FrameCheck(lambda b, p, parts=False: M.memory_at(spec, b, p, 8, parts=parts, xp=GPU), True,
                       M.box_bricks(spec), first=7_000)
    at = lambda b: M.memory_at(spec, b, 8_000_000, xp=GPU)  # noqa: E731
    assert check.plan(0, 0, 8_000_000)[0] == at(7_000)  # not built yet: the estimate's bricks
    check.saw(3_000, 8_000_000)
    assert check.plan(3_500, 3_500, 8_000_000)[0] == at(3_500 + 2 * 500)
    assert check.plan(3_500, 9_000, 8_000_000)[0] == at(9_000)  # shrunk: the channels keep their capacity
    check.saw(30_000, 8_000_000)
    assert check.plan(38_000, 38_000, 8_000_000)[0] == at(M.box_bricks(spec))  # capped by the box


def test_the_frame_check_covers_each_frames_traced_peak_on_the_cpu():
    """A small dam break on the NumPy path: before each frame the check's need beyond what
    the simulation holds is at least the frame's own allocations (step and level set,
    tracemalloc) and at most 1.5x them."""
    warm = FlipSimulation(GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8)), FlipSettings(), *box((0, 0, 0), (0.4,) * 3),
                          xp=np, sparse=True)
    warm.step(1 / 24), warm.level_set()  # first-call caches outside the measurement
    del warm
    spec = GridSpec((0.0, 0.0, 0.0), 1 / 32, (32, 16, 32))
    sim = FlipSimulation(spec, FlipSettings(), *box((0.0, 0.0, 0.0), (0.25, 0.5, 0.6)), xp=np, sparse=True)
    P = len(sim.pos)
    check = FrameCheck(lambda b, p, parts=False: M.memory_at(spec, b, p, 8, parts=parts, xp=np), True,
                       M.box_bricks(spec), first=M.estimate_bricks(P / 8, spec))
    for _ in range(3):
        need, held = check.need(sim)
        tracemalloc.start()
        try:
            sim.step(1 / 24)
            sim.level_set()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        check.seen(sim)
        assert peak <= need - held <= 1.5 * peak, (peak / 2 ** 20, (need - held) / 2 ** 20)


# bench/workspace_memory_call.sh on an NVIDIA H200 (CuPy 14, 2026-11-26): the 8M dam break at 256³
# over 60 frames in separate processes, the set-up fresh and in its workspace; per frame the
# bricks held after it (the same in both: the same bits) and the in-use peak (MiB)
DAM_BRICKS = [3247, 3297, 3495, 3688, 3933, 4242, 4580, 4904, 5187, 5683, 6300, 6976, 7757, 8416, 8971, 9515, 9978,
              10768, 11439, 12065, 12317, 12238, 11593, 10232, 8508, 7271, 7236, 7097, 6856, 6349, 5857, 5605, 5587,
              5518, 5414, 5315, 5154, 5056, 5062, 5105, 5140, 5319, 5506, 5714, 5883, 5960, 5920, 5659, 5397, 5172,
              4991, 4811, 4631, 4622, 4597, 4587, 4600, 4632, 4677, 4649]
FRESH_MIB = [854.2, 857.3, 865.6, 872.8, 883.8, 898.1, 914.7, 932.8, 954.4, 1077.5, 1113.4, 1150.2, 1186.9, 1217.3,
             1199.1, 1216.9, 1230.8, 1252.6, 1267.8, 1315.7, 1335.3, 1336.8, 1341.1, 1336.2, 1335.2, 1334.4, 1334.9,
             1335.4, 1335.4, 1335.3, 1334.7, 1334.0, 1334.1, 1334.2, 1334.3, 1327.1, 1327.6, 1327.6, 1327.9, 1328.2,
             1328.6, 1329.3, 1329.9, 1330.0, 1330.1, 1330.2, 1330.2, 1330.2, 1330.2, 1330.2, 1330.2, 1330.2, 1330.2,
             1330.2, 1330.3, 1330.3, 1330.3, 1330.4, 1330.4, 1330.4]
WORKSPACE_MIB = [876.3, 879.5, 887.8, 896.3, 907.3, 922.9, 939.5, 957.6, 1017.0, 1140.1, 1178.0, 1214.8, 1251.5,
                 1287.5, 1292.4, 1310.2, 1324.1, 1345.9, 1361.0, 1384.3, 1403.9, 1405.7, 1411.8, 1407.9, 1406.9,
                 1406.9, 1406.9, 1406.9, 1406.9, 1406.9, 1406.9, 1406.9, 1406.9, 1406.9, 1406.9, 1397.7, 1397.7,
                 1397.7, 1397.6, 1397.7, 1397.9, 1398.2, 1398.7, 1398.7, 1398.7, 1398.7, 1398.7, 1398.7, 1398.7,
                 1398.7, 1398.6, 1398.6, 1398.6, 1398.6, 1398.6, 1398.6, 1398.6, 1398.6, 1398.6, 1398.6]


def _brick_smooth(particles, cells):
    """The brick smoother's bytes in the workspace's estimate (``BRICK_SMOOTH_LIQUID`` a liquid
    cell, ``BRICK_SMOOTH_POOL`` a pool cell) where its solver holds them (the default)."""
    return int(M.BRICK_SMOOTH_LIQUID * particles / 8) + M.BRICK_SMOOTH_POOL * cells if M.brick_smooth_held() else 0


def _dam_8m():
    spec, v, _ = scene("dam 8M")
    top = (float(v[:, 2].max()) - spec.origin[2]) / spec.voxel_size
    return spec, M.climb_cells(top, 0.0, spec)


def test_the_estimate_counts_the_setup_workspace_where_it_is_on():
    """The workspace's estimate (``WORKSPACE_CELL`` a pool cell, in the state and the
    substep, less the solver's level-0 nbr rows it no longer holds: ``LEVEL0_NBR`` a liquid
    cell) covers its run's peak within [1, 1.5]× (that run held the rows); off (fresh), the
    bytes of the fresh rows' fit; on the CPU there is no workspace."""
    spec, climb = _dam_8m()
    particles, peak = 8_000_033, max(WORKSPACE_MIB) * 2 ** 20
    on = M.sparse_flip_memory(spec, particles, xp=GPU, climb=climb, workspace=True, parts=True)
    off = M.sparse_flip_memory(spec, particles, xp=GPU, climb=climb, workspace=False, parts=True)
    assert peak <= on["total"] <= 1.5 * peak, on["total"] / peak
    cells = on["bricks"] * 512
    table = int(M.LEVEL0_NBR * particles / 8)  # the defaults: no level-0 nbr rows held
    added = M.WORKSPACE_CELL * cells - table + _brick_smooth(particles, cells)
    assert on["state"] - off["state"] == on["substep"] - off["substep"] == added
    assert off["total"] <= 1.5 * max(FRESH_MIB) * 2 ** 20  # the fresh rows' fit, untouched
    assert M.sparse_flip_memory(spec, particles, xp=np, workspace=True) == M.sparse_flip_memory(spec, particles,
                                                                                                   xp=np)  # GPU only


@pytest.mark.parametrize("first, cell", [("grown", 21), ("fresh", 14)])
def test_the_estimate_counts_the_kept_scratch_where_the_setup_graph_is_on(monkeypatch, first, cell):
    """With the coarse levels' graph on (``VOXFX_SPARSE_SETUP_GRAPH=1``) the workspace keeps
    their scratch: ``graph_scratch_cell`` a pool cell more in the state and the substep, a
    bound of ``Workspace.tables``' scratch bytes (level 1 at 1.25 × an eighth of the pool, 1.5×
    that where the first capacities are a first growth's: ``FIRST_CAPS`` "grown"; the bound
    fails by that 1.5× if counted as "fresh"); nothing without the workspace or on the CPU."""
    from voxfx.kernels.flip import sparse_pressure_workspace as W
    from voxfx.kernels.flip.sparse_pressure_buffers import table_caps

    monkeypatch.setenv("VOXFX_SPARSE_SETUP_FIRST_CAPS", first)
    assert M.graph_scratch_cell() == cell
    spec, climb = _dam_8m()
    particles = 8_000_033
    got = {}
    for graph in ("0", "1"):
        monkeypatch.setenv("VOXFX_SPARSE_SETUP_GRAPH", graph)
        got[graph] = [M.sparse_flip_memory(spec, particles, xp=GPU, climb=climb, workspace=ws, parts=True)
                      for ws in (True, False)]
        assert M.sparse_flip_memory(spec, particles, xp=np) == M.sparse_flip_memory(spec, particles, xp=np,
                                                                                    workspace=True)
    (on0, off0), (on1, off1) = got["0"], got["1"]
    cells = on1["bricks"] * 512
    assert on1["state"] - on0["state"] == on1["substep"] - on0["substep"] == cell * cells
    assert off1 == off0
    pool = 1 << 20  # a set of every pool cell: the largest scratch the bound must cover
    bounds = [pool]
    while bounds[-1] > 0:
        bounds.append(bounds[-1] // 8)
    scratch = {}
    for way in ("grown", "fresh"):
        caps = table_caps([b + 1 for b in bounds[1:]], None, first=way)
        scratch[way] = 0
        for level in range(1, len(caps)):
            k, fk = caps[level] - 1, max(caps[level - 1] - 1, 0)
            scratch[way] += k * (8 + 1 + 8 + 24 + 1 + 1 + 8 + 8 + 4 + (4 if level == 1 else 0)) + fk * 9
    assert scratch[first] <= cell * pool, scratch[first] / pool
    assert scratch["grown"] > M.GRAPH_SCRATCH_CELL * pool  # the first growth's room needs the larger term
    assert W._KEPT == ("position", "nbr", "diag", "up", "down")  # the rest of a level's arrays: its scratch


@pytest.mark.parametrize("nbr, table, held", [("bricks", "skip", False), ("bricks", "fill", True),
                                              ("table", "skip", True), ("table", "fill", True)])
def test_the_level0_nbr_rows_are_counted_where_the_solver_holds_them(monkeypatch, nbr, table, held):
    """Level 0's nbr rows come off the workspace's estimate only where the solver holds none
    (``sparse_pressure_vcycle.NBR`` "bricks" with ``NBR_TABLE`` "skip"), by ``LEVEL0_NBR`` a
    liquid cell: the solver's own bytes for them (``solver_memory_bytes``, 24 B an entry of
    level 0's stride, ``grown_strides``' 1.25× headroom) within 0.1% at a million unknowns;
    without the workspace (no brick passes) and on the CPU they are always counted."""
    from voxfx.kernels.flip.sparse_pressure_buffers import grown_strides, solver_memory_bytes

    monkeypatch.setenv("VOXFX_SPARSE_MG_NBR", nbr)
    monkeypatch.setenv("VOXFX_SPARSE_MG_NBR_TABLE", table)
    assert M.level0_nbr_held() == held and M.level0_nbr_held(workspace=False)
    spec, climb = _dam_8m()
    particles = 8_000_033
    on = M.sparse_flip_memory(spec, particles, xp=GPU, climb=climb, workspace=True, parts=True)
    off = M.sparse_flip_memory(spec, particles, xp=GPU, climb=climb, workspace=False, parts=True)
    table_bytes = 0 if held else int(M.LEVEL0_NBR * particles / 8)
    cells = on["bricks"] * 512
    assert on["state"] - off["state"] == M.WORKSPACE_CELL * cells - table_bytes + _brick_smooth(particles, cells)
    assert M.sparse_flip_memory(spec, particles, xp=np, workspace=True) == M.sparse_flip_memory(spec, particles,
                                                                                                   xp=np)
    strides = grown_strides([1_000_001, 125_001])
    rows = solver_memory_bytes(strides) - solver_memory_bytes(strides, level0_nbr=False)
    assert rows == 24 * strides[0] and M.LEVEL0_NBR * 1_000_000 == pytest.approx(rows, rel=1e-3)


@pytest.mark.parametrize("way", ["brick", "rb"])
def test_the_brick_smoothers_bytes_are_counted_where_its_solver_holds_them(monkeypatch, way):
    """The brick smoother (``sparse_multigrid_bricks.SMOOTHER`` "brick", the default) holds brick_x,
    its r·z partials and the span table (``solver_memory_bytes``' *brick_smooth*: ``brick_smooth_bytes``):
    the workspace's estimate counts ``BRICK_SMOOTH_LIQUID`` a liquid cell and ``BRICK_SMOOTH_POOL`` a
    pool cell for them, bounds of the solver's bytes at a million unknowns (level 0's stride
    ``grown_strides``' 1.25× + 64) and a pool of 3,198 slots (the 8M row's); nothing with the
    red-black sweeps, without the workspace (its solvers sweep red-black) or on the CPU."""
    from voxfx.kernels.flip import sparse_multigrid_bricks
    from voxfx.kernels.flip.sparse_pressure_buffers import (brick_smooth_bytes, grown_strides, solver_memory_bytes,
                                                            span_table_bytes)

    monkeypatch.setattr(sparse_multigrid_bricks, "SMOOTHER", way)
    assert M.brick_smooth_held() == (way == "brick") and not M.brick_smooth_held(workspace=False)
    spec, climb = _dam_8m()
    particles = 8_000_033
    on = M.sparse_flip_memory(spec, particles, xp=GPU, climb=climb, workspace=True, parts=True)
    monkeypatch.setattr(sparse_multigrid_bricks, "SMOOTHER", "rb" if way == "brick" else "brick")
    other = M.sparse_flip_memory(spec, particles, xp=GPU, climb=climb, workspace=True, parts=True)
    cells = on["bricks"] * 512
    brick = int(M.BRICK_SMOOTH_LIQUID * particles / 8) + M.BRICK_SMOOTH_POOL * cells
    assert on["state"] - other["state"] == on["substep"] - other["substep"] == (brick if way == "brick" else -brick)
    assert M.sparse_flip_memory(spec, particles, xp=np) == M.sparse_flip_memory(spec, particles, xp=np,
                                                                                workspace=True)
    strides = grown_strides([1_000_001, 125_001])
    slots = 3198
    held = solver_memory_bytes(strides, brick_smooth=True, slots=slots) - solver_memory_bytes(strides)
    assert held == brick_smooth_bytes(strides[0], slots) == 4 * strides[0] + 8 * (strides[0] // 256 + 1) + \
        span_table_bytes(slots)
    assert span_table_bytes(slots) == 256 * (slots + slots // 4) and span_table_bytes(0) == 0
    assert brick_smooth_bytes(strides[0]) <= M.BRICK_SMOOTH_LIQUID * 1_000_000
    assert span_table_bytes(slots) <= M.BRICK_SMOOTH_POOL * slots * 512
    assert solver_memory_bytes(strides[:1], brick_smooth=True) == solver_memory_bytes(strides[:1])  # one level
    assert solver_memory_bytes(strides, "jacobi", brick_smooth=True) == solver_memory_bytes(strides, "jacobi")


def test_the_workspace_term_covers_what_the_workspace_adds_at_the_runs_peak():
    """Frame by frame the workspace's peak minus the fresh path's, per pool cell of the grid's
    capacity (the most bricks held so far): at most ``WORKSPACE_CELL`` from the frame the
    liquid stops spreading on (the frames before: its tables grow a generation while the
    fresh path's transient arrays do not peak with them, up to 25 B; the frame check's
    margin covers them, next test)."""
    capacity, added = 0, []
    for bricks, fresh, held in zip(DAM_BRICKS, FRESH_MIB, WORKSPACE_MIB):
        capacity = max(capacity, bricks)
        added.append((held - fresh) * 2 ** 20 / (capacity * 512))
    assert min(added) > 0  # the workspace does add
    peak_frame = WORKSPACE_MIB.index(max(WORKSPACE_MIB))
    assert max(added[peak_frame:]) <= M.WORKSPACE_CELL
    assert max(added) <= 1.1 * M.WORKSPACE_CELL


def test_the_frame_check_covers_each_frame_of_the_workspace_run():
    """``FrameCheck`` replayed on the workspace run's counts (the bricks a frame ago, the
    grid's capacity, their growth): its need before each frame is at least that frame's
    in-use peak, and from the second frame on at most 1.6× it."""
    spec, climb = _dam_8m()
    particles = 8_000_033
    check = FrameCheck(lambda b, p, parts=False: M.memory_at(spec, b, p, 8, parts=parts, xp=GPU, workspace=True),
                       True, M.box_bricks(spec), first=M.estimate_bricks(particles / 8, spec, True, climb))
    bricks = capacity = 0
    ratios = []
    for after, peak in zip(DAM_BRICKS, WORKSPACE_MIB):
        need, _ = check.plan(bricks, capacity, particles)
        ratios.append(need / (peak * 2 ** 20))
        bricks, capacity = after, max(capacity, after)
        check.saw(bricks, particles)
    assert min(ratios) >= 1.0, min(ratios)
    assert max(ratios[1:]) <= 1.6, max(ratios[1:])


@pytest.mark.parametrize("apic", [False, True])
def test_the_estimate_counts_the_particle_sorts_spare_arrays_only_where_it_holds_them(monkeypatch, apic):
    """The particle sort (``VOXFX_SPARSE_PARTICLE_SORT``, off by default): on its gather path the
    estimate with the sort on less the estimate with it off is the spare pos, vel (and C) of the
    particles held, 24 B a particle (60 with APIC), in the state and every stage (a band's and
    the count control's too); the argsort path, the sort off and NumPy hold none. Either path adds
    its frame-end work as a stage beside the state, below the substep's peak."""
    from voxfx.kernels.flip import particle_sort as S

    monkeypatch.delenv(S.SWITCH, raising=False)
    monkeypatch.delenv(S.PATH_SWITCH, raising=False)
    spec, climb = _dam_8m()
    P, per = 8_000_033, 24 + (36 if apic else 0)

    def est(band=0, **kw):
        return M.sparse_flip_memory(spec, P, apic=apic, xp=GPU, climb=climb, parts=True, narrow_band=band,
                                    count_control=True, **kw)

    for band in (0, 4):
        off = est(band)
        held = P if not band else M.band_kept(P, 8, band, spec, True, climb)  # a band's particles held
        assert held < P if band else held == P
        assert "particle sort" not in off and est(band, sort="off", sort_path="gather") == off
        for way in ("1", "auto", "8"):
            on = est(band, sort=way, sort_path="gather")
            work = on.pop("particle sort")
            assert set(on) == set(off) and on["bricks"] == off["bricks"]
            assert all(on[k] - off[k] == per * held for k in on if k != "bricks"), (on, off)
            assert work == on["state"] + held * (76 if apic else 48) < on["substep"]
        argsort = est(band, sort="1", sort_path="argsort")
        assert argsort.pop("particle sort") == argsort["state"] + held * (52 if apic else 48)
        assert argsort == off  # no spare held
    monkeypatch.setenv(S.SWITCH, "2")  # the variables' way and path where the caller names none
    monkeypatch.setenv(S.PATH_SWITCH, "gather")
    assert est()["total"] - est(sort="off")["total"] == per * P
    cpu = M.sparse_flip_memory(spec, P, apic=apic, xp=np, parts=True)  # NumPy: no spare, the frame-end stage only
    assert cpu.pop("particle sort") == cpu["state"] + P * (52 if apic else 48)
    assert cpu == M.sparse_flip_memory(spec, P, apic=apic, xp=np, parts=True, sort="off")


def test_the_sorts_spare_bytes_are_the_particle_arrays_it_copies():
    """``particle_sort.spare_bytes`` is the bytes of the arrays the gather path copies into its
    spare (``gather``: ``empty_like`` of pos, vel and, with APIC, C), on a simulation's own."""
    from voxfx.kernels.flip import particle_sort as S

    for apic in (False, True):
        sim = FlipSimulation(GridSpec((0.0, 0.0, 0.0), 0.05, (12, 8, 10)), FlipSettings(apic=apic),
                             *box((0.0, 0.0, 0.0), (0.25, 0.2, 0.3)), xp=np, sparse=True)
        n = len(sim.pos)
        arrays = [a for a in (sim.pos, sim.vel, sim.c) if a is not None]
        assert all(a.dtype == np.float32 and a.flags.c_contiguous for a in arrays)
        assert sum(a.nbytes for a in arrays) == S.spare_bytes(n, apic, "1", "gather") > 0
        assert S.spare_bytes(n, apic, "1", "gather", gpu=False) == S.spare_bytes(n, apic, "off", "gather") == 0
        assert S.spare_bytes(n, apic, "1", "argsort") == 0
