"""The sparse liquid's memory estimate covers the liquid's spread, and the bake's check
before every frame (``sparse_memory.FrameCheck``) covers the next frame (issue 21 §6).

Device rows: ``bench/memory_liquid.py`` on an NVIDIA H100 (CuPy 14.2, 2026-11-26, after the
solvers left their reference cycles: ``GraphLoop``), the pool's bytes in use per frame (a
memory hook), the user's frame (step(1/24) and the level set). The start-only estimate (the
start's bricks ×1.5) was 0.58× the dam break's peak and 0.68× the river's (H200, before);
the CPU rows are measured here with tracemalloc."""

import tracemalloc

import numpy as np
import pytest

from tests.conftest import ROOT
from tests.meshes import box
from voxfx.kernels.flip import sparse_memory as M
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
    estimate = M.sparse_flip_memory(spec, particles, xp=GPU, climb=climb)
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
    check = M.FrameCheck(lambda b, p, parts=False: M.memory_at(spec, b, p, 8, parts=parts, xp=GPU), True,
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
    check = M.FrameCheck(lambda b, p, parts=False: M.memory_at(spec, b, p, 8, parts=parts, xp=np), True,
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
