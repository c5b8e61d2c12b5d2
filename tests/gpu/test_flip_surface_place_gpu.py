"""The level set's binning ways that place the tags alone (kernels/flip/surface_place.py,
``VOXFX_LEVEL_SET_PLACE``: "tags", "tags-plain") on the device against "lean", the default: the
same counts per binning cell, every cell filled, the same list of points in each cell's tag
order bit for bit (the warps' groups of 32 lanes, which the host harness, a lane a warp, cannot
show), and φ the same bits — in a box with a corner ball, a pool in seeding order (whole warps
in a cell, their images too) and a pile of 1,500 particles in a corner cell ranked in place or
sorted apart, and on a dense dam break after its splash. The host harness is
tests/unit/test_cuda_surface_place_host.py."""

import numpy as np
import pytest

from tests.gpu.test_flip_surface_bricks_gpu import liquid_in_a_box
from tests.meshes import box
from tests.unit.test_flip_surface import seeded_pool
from voxfx.kernels.flip import sparse_gpu, surface_gpu
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.surface import closed_level_set, surface_grid, surface_radii
from voxfx.kernels.grid import GridSpec

WAYS = ("tags", "tags-plain")


def binned(way, pos, spec, r, R):
    """(counts, fill after the place, the ordered points) of surface_gpu's steps 1–3 for *way*,
    closed against *spec*'s walls (the lean kernels for "lean")."""
    import cupy as cp

    grid = surface_grid(spec)
    f32, i32 = np.float32, np.int32
    lo = [f32(o) for o in spec.origin]
    hi = [f32(o + c * spec.voxel_size) for o, c in zip(spec.origin, spec.shape)]
    wall_args = (i32(1), *lo, *hi, f32(R + spec.voxel_size))
    (cox, coy, coz), edge, (cx, cy, cz) = surface_gpu._cell_grid(grid, R)
    cell_args = (f32(cox), f32(coy), f32(coz), f32(1.0 / edge), i32(cx), i32(cy), i32(cz))
    n, n_cells = len(pos), cx * cy * cz
    counts, bad = cp.zeros(n_cells + 1, cp.int32), cp.zeros(1, cp.int32)
    surface_gpu._count(way, surface_gpu._K_LEAN, pos, n, wall_args, cell_args, counts, bad)
    bounds = cp.zeros(2, cp.uint32)
    starts = sparse_gpu.scan_counts(cp, counts, n_cells, bounds)
    points, fullest = int(starts[-1]), int(bounds[1])
    assert int(bad[0]) == 0
    counted = counts.copy()
    counts.fill(0)
    radii = cp.full(1, r, cp.float32)
    packed, tags = surface_gpu._place(way, surface_gpu._K_LEAN, pos, radii, True, n, wall_args, cell_args, starts,
                                      counts, points, cp)
    fill = counts.copy()
    ordered = surface_gpu._order_cells(way, surface_gpu._K_LEAN, packed, tags, pos, radii, True, n, wall_args,
                                       cell_args, starts, points, fullest, cp)
    return counted.get(), fill.get(), ordered.get(), fullest


def scenes(rng):
    """(spec, particles): a box with a corner ball; the same with a pile of 1,500 in a corner
    cell; a pool across the floor in seeding order, 10 cells deep."""
    spec, pos = liquid_in_a_box(rng)
    lo, h = np.asarray(spec.origin), spec.voxel_size
    pile = (lo + rng.uniform(0.05, 0.3, (1500, 3)) * h).astype(np.float32)
    pool = seeded_pool(float(min(spec.shape[:2])) * h, 10 * h, 10 * h, h / 2, rng) + lo
    pool = np.clip(pool, lo + 1e-3 * h, np.asarray(spec.upper) - 1e-3 * h).astype(np.float32)
    return [(spec, pos), (spec, np.concatenate([pos, pile])), (spec, pool)]


@pytest.mark.parametrize("limit", ["default", "1024", 40])
def test_each_way_counts_fills_and_orders_as_lean(monkeypatch, limit):
    """Counts, fill and the ordered list (cells over *limit* sorted apart: 40 by SORT_CELL_MAX,
    which the variable's choices do not hold) of tags and tags-plain equal lean's bit for bit."""
    import cupy

    if isinstance(limit, int):
        monkeypatch.delenv("VOXFX_LEVEL_SET_SORT_CELL_MAX", raising=False)
        monkeypatch.setattr(surface_gpu, "SORT_CELL_MAX", limit)
    else:
        monkeypatch.setenv("VOXFX_LEVEL_SET_SORT_CELL_MAX", limit)
    rng = np.random.default_rng()
    for spec, pos in scenes(rng):
        r, R = surface_radii(spec.voxel_size, 8)
        pos = cupy.asarray(pos)
        counts, fill, want, fullest = binned("lean", pos, spec, r, R)
        np.testing.assert_array_equal(fill, counts)
        assert want.shape[0] > len(pos)  # images
        for way in WAYS:
            got = binned(way, pos, spec, r, R)
            np.testing.assert_array_equal(got[0], counts)
            np.testing.assert_array_equal(got[1], counts)
            assert got[2].tobytes() == want.tobytes(), way
            assert got[3] == fullest


@pytest.mark.parametrize("smooth_iterations", [0, 1])
def test_closed_level_set_each_way_the_same_bits(monkeypatch, smooth_iterations):
    import cupy

    rng = np.random.default_rng()
    for spec, pos in scenes(rng):
        r, R = surface_radii(spec.voxel_size, 8)
        phis = {}
        for way in ("lean", *WAYS):
            monkeypatch.setenv("VOXFX_LEVEL_SET_PLACE", way)
            phis[way] = closed_level_set(cupy.asarray(pos), spec, r, R, xp=cupy,
                                         smooth_iterations=smooth_iterations).get()
        assert (phis["lean"] < 0).any()
        for way in WAYS:
            assert phis[way].tobytes() == phis["lean"].tobytes(), way


def test_dam_break_after_the_splash_each_way_the_same_bits(monkeypatch):
    """A dense 48³ dam break after 10 frames (the column across the floor and up the far wall):
    its level set (on the device) the same bits each way, and the points and fullest cell alike."""
    import cupy

    h = 1 / 48
    spec = GridSpec((0.0, 0.0, 0.0), h, (48, 48, 48))
    sim = FlipSimulation(spec, FlipSettings(), *box((0.0, 0.0, 0.0), (0.4, 0.4, 0.8)), xp=cupy)
    for _ in range(10):
        sim.step(1 / 24)
    phis, stats = {}, {}
    for way in ("lean", *WAYS):
        monkeypatch.setenv("VOXFX_LEVEL_SET_PLACE", way)
        monkeypatch.setattr(surface_gpu, "STATS", {})
        phis[way] = cupy.asnumpy(sim.level_set(on_device=True))
        stats[way] = dict(surface_gpu.STATS)
    assert (phis["lean"] < 0).any() and stats["lean"]["points"] > len(sim.pos)
    for way in WAYS:
        assert phis[way].tobytes() == phis["lean"].tobytes(), way
        assert stats[way]["points"] == stats["lean"]["points"] and stats[way]["fullest"] == stats["lean"]["fullest"]
