"""Issue 12's settings of a liquid bake: the CFL substep cap and its report, the sparse
memory estimate against measured peaks."""

import math

import numpy as np
import pytest

from tests.meshes import box
from voxfx.kernels.errors import InputError
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec


@pytest.mark.parametrize("sparse", [False, True])
def test_the_substep_cap_is_a_setting_and_the_frame_reports_when_it_limits_the_cfl(sparse):
    """A cube thrown at 20 m/s through 5 cm cells: a 24 fps frame wants ⌈(20 + √(2gh))·Δt/h⌉
    substeps. Capped at 4 the frame takes 4 and says so; with a cap of 32 it takes them all."""
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (16, 8, 8))
    v, t = box((0.1, 0.1, 0.1), (0.3, 0.3, 0.3))
    speed = 20.0
    wanted = math.ceil((speed + math.sqrt(2 * 9.81 * 0.05)) * (1 / 24) / (FlipSettings().cfl * 0.05))
    kw = dict(sparse=True, boundary="open", kill_distance=100.0) if sparse else {}
    capped = FlipSimulation(spec, FlipSettings(max_substeps=4, gravity=(0.0, 0.0, 0.0)), v, t, xp=np,
                            initial_velocity=(speed, 0.0, 0.0), **kw)
    stats = capped.step(1 / 24)
    assert stats["substeps"] == 4 and stats["capped"] and stats["cfl_substeps"] == wanted > 4
    assert capped.capped_frames == 1
    free = FlipSimulation(spec, FlipSettings(max_substeps=32, gravity=(0.0, 0.0, 0.0)), v, t, xp=np,
                          initial_velocity=(speed, 0.0, 0.0), **kw)
    stats = free.step(1 / 24)
    assert stats["substeps"] == stats["cfl_substeps"] == wanted and not stats["capped"]
    assert free.capped_frames == 0


def _measured_peak(spec, mesh, kw, frames=8):
    """tracemalloc peak of building a sparse liquid, *frames* 24 fps frames and the frame
    outputs a bake writes (NumPy allocations are traced), with the bricks it reached."""
    import tracemalloc

    from voxfx.kernels.flip.surface import WALL_CELLS

    warm = FlipSimulation(GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8)), FlipSettings(), *box((0, 0, 0), (0.4,) * 3),
                          xp=np, sparse=True)  # first-call caches outside the measurement
    warm.step(1 / 24), warm.level_set(), warm.cell_velocity(WALL_CELLS)
    del warm
    tracemalloc.start()
    try:
        sim = FlipSimulation(spec, FlipSettings(), *mesh, xp=np, sparse=True, **kw)
        bricks = 0
        for _ in range(frames):
            sim.step(1 / 24)
            bricks = max(bricks, sim.grid.brick_count())
        sim.level_set(), sim.cell_velocity(WALL_CELLS)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return len(sim.pos), bricks, peak


@pytest.mark.parametrize("case", ["dam break", "open blob"])
def test_the_sparse_memory_estimate_from_the_liquid_volume_is_within_1_5x_of_the_measured_peak(case):
    from voxfx.kernels.flip.sparse_memory import estimate_bricks, sparse_flip_memory

    if case == "dam break":
        spec, mesh, kw = GridSpec((0.0, 0.0, 0.0), 0.05, (24, 10, 16)), box((0, 0, 0), (0.4, 0.5, 0.5)), {}
    else:
        spec, mesh, kw = (GridSpec((0.0, 0.0, 0.0), 0.05, (32, 32, 32)), box((0.5, 0.5, 0.8), (1.0, 1.0, 1.3)),
                          {"boundary": "open"})
    particles, bricks, peak = _measured_peak(spec, mesh, kw)
    closed = not kw
    estimate = sparse_flip_memory(spec, particles, closed=closed, xp=np)
    assert peak / 1.5 <= estimate <= 1.5 * peak
    assert bricks / 1.5 <= estimate_bricks(particles / 8, spec, closed) <= 1.5 * bricks
    box_bytes = sparse_flip_memory(GridSpec(spec.origin, spec.voxel_size, (256, 256, 256)), particles, closed=False,
                                   xp=np)
    assert box_bytes == estimate or closed  # open: the liquid's volume, not the box, sizes it


def test_the_kill_distance_setting_deletes_liquid_beyond_it_and_keeps_liquid_inside_it():
    """Open domain, no gravity: a blob thrown along +x at 3 m/s out of a 0.8 m box. With a
    Kill Distance of 0.3 m (a setting, in metres) particles past x = 1.1 m are deleted,
    those between the box and 1.1 m are kept."""
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    v, t = box((0.4, 0.3, 0.3), (0.7, 0.6, 0.6))
    settings = FlipSettings(sparse=True, boundary="open", kill_distance=0.3, gravity=(0.0, 0.0, 0.0))
    sim = FlipSimulation(spec, settings, v, t, xp=np, initial_velocity=(3.0, 0.0, 0.0))
    assert sim.kill_distance == 0.3
    n0 = len(sim.pos)
    kept_outside = 0
    for _ in range(8):
        sim.step(1 / 24)
        x = sim.particles_host()["position"][:, 0]
        assert (x <= 0.8 + 0.3).all()  # nothing beyond the kill distance survives a substep
        assert sim.killed + len(x) == n0  # only the kill deletes
        kept_outside = max(kept_outside, int((x > 0.8).sum()))
    assert kept_outside > 0  # outside the box but within the distance: kept
    assert sim.killed == n0 and len(sim.pos) == 0  # at last all of it went past 1.1 m
    near = FlipSimulation(spec, FlipSettings(sparse=True, boundary="open", kill_distance=2.0,
                                             gravity=(0.0, 0.0, 0.0)), v, t, xp=np, initial_velocity=(3.0, 0.0, 0.0))
    for _ in range(8):
        near.step(1 / 24)
    assert near.killed == 0 and len(near.pos) == n0  # 1 m travelled: within 2 m of the box
    with pytest.raises(InputError, match="kill distance"):
        FlipSimulation(spec, FlipSettings(sparse=True, boundary="open", kill_distance=-1.0), v, t, xp=np)
