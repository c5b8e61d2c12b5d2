"""The disk estimate before a bake (issue 17): the largest frame count that fits is
exact for the plan's own arithmetic, a bake that does not fit is refused naming it, and
the free-space query can be replaced by a test hook (a small disk injected, never filled)."""

import pytest

from voxfx.addon import disk_plan
from voxfx.addon.cache_folder import CacheError


def test_frames_that_fit_is_the_largest_count_whose_estimate_fits():
    plan = disk_plan.liquid_plan(240, 8_000_000, "COMPACT", 10)
    for free in (0, disk_plan.RESERVE, 5 * 10 ** 9, 20 * 10 ** 9, plan.total + disk_plan.RESERVE):
        fit = plan.frames_that_fit(free)
        assert 0 <= fit <= plan.frames
        if fit:
            assert plan.bytes_for(fit) + disk_plan.RESERVE <= free
        if fit < plan.frames:
            assert plan.bytes_for(fit + 1) + disk_plan.RESERVE > free
    assert plan.frames_that_fit(plan.total + disk_plan.RESERVE) == 240


def test_compact_frames_need_far_less_than_ply():
    compact = disk_plan.liquid_plan(240, 8_000_000, "COMPACT", 10)
    ply = disk_plan.liquid_plan(240, 8_000_000, "PLY_VDB", 10)
    assert 2.5 * compact.per_frame < ply.per_frame
    # PLY: 28 bytes a particle, as issue 17 measured (224 MB a frame at 8M)
    assert ply.per_frame >= 8_000_000 * 28


def test_a_bake_that_does_not_fit_is_refused_naming_the_frames_that_would(tmp_path, monkeypatch):
    plan = disk_plan.liquid_plan(240, 1_000_000, "PLY_VDB", 10)
    free = plan.bytes_for(100) + disk_plan.RESERVE
    monkeypatch.setenv(disk_plan.FREE_ENV, str(free))
    with pytest.raises(CacheError, match=r"100 frames would fit.*Compact cache format") as e:
        disk_plan.check(plan, tmp_path / "not yet made")
    assert str(tmp_path) in str(e.value)
    monkeypatch.setenv(disk_plan.FREE_ENV, str(disk_plan.RESERVE))
    with pytest.raises(CacheError, match="not even one frame fits"):
        disk_plan.check(plan, tmp_path)
    monkeypatch.setenv(disk_plan.FREE_ENV, str(plan.total + disk_plan.RESERVE))
    assert disk_plan.check(plan, tmp_path) == plan.total + disk_plan.RESERVE


def test_free_space_is_asked_of_the_nearest_existing_folder(tmp_path, monkeypatch):
    monkeypatch.delenv(disk_plan.FREE_ENV, raising=False)
    free = disk_plan.free_bytes(tmp_path / "a" / "b" / "c")
    assert free > 0 and abs(free - disk_plan.free_bytes(tmp_path)) < 2 ** 30


def _emitted_per_frame(velocity, nozzle_lo, nozzle_hi, frames=7):
    """Particles the real emitter (FlipBake's inflow, NumPy) adds per frame once it flows:
    the mean over frames 3..*frames* (frame 2 fills the empty nozzle), and its estimate."""
    import numpy as np

    from tests.meshes import box
    from voxfx.kernels.flip import bodies
    from voxfx.kernels.flip.bake import FlipBake
    from voxfx.kernels.flip.grid import FlipSettings
    from voxfx.kernels.grid import GridSpec

    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (16, 8, 16))
    v, t = box((0.0, 0.0, 0.0), (0.2, 0.4, 0.1))
    nv, nt = box(nozzle_lo, nozzle_hi)
    bake = FlipBake(spec, FlipSettings(), (v, t), xp=np, fps=24.0, inflows=[("tap", bodies.Body(nv, nt, np.eye(4)))])
    counts = [len(sim.pos) for _, sim in bake.frames(1, frames, velocities={"tap": velocity})]
    rate, fill = bake.inflow_emission({"tap": velocity})
    assert counts[1] - counts[0] == fill  # the empty nozzle filled at once, every cell a cell's worth
    return float(np.mean(np.diff(counts)[1:])), rate


@pytest.mark.parametrize("velocity, lo, hi", [
    ((0.0, 0.0, -1.0), (0.4, 0.1, 0.6), (0.55, 0.25, 0.7)),  # a tap pointing down
    ((0.0, 0.0, -3.0), (0.4, 0.1, 0.6), (0.6, 0.3, 0.7)),  # faster: more than one layer a frame
    ((2.0, 0.0, 0.0), (0.05, 0.1, 0.4), (0.15, 0.25, 0.55)),  # sideways, gravity across the flow
    ((0.0, 0.0, 0.0), (0.4, 0.1, 0.6), (0.55, 0.25, 0.75)),  # no velocity: only gravity pulls it out
])
def test_the_inflow_estimate_is_what_the_emitter_adds(velocity, lo, hi):
    real, estimate = _emitted_per_frame(velocity, lo, hi)
    assert real > 0 and real / 1.5 <= estimate <= 1.5 * real, (real, estimate)


def test_inflows_make_the_frames_and_checkpoints_grow_up_to_a_full_domain():
    still = disk_plan.liquid_plan(100, 10_000, "COMPACT", 10)
    flowing = disk_plan.liquid_plan(100, 10_000, "COMPACT", 10, inflow=(500.0, 2000), most=50_000)
    sizes = flowing.frame_sizes
    assert flowing.per_frame == still.per_frame == sizes[0]  # the first frame shows the liquid as it starts
    assert sizes[1] - sizes[0] > sizes[2] - sizes[1] > 0  # the fill, then the rate
    assert sizes[-1] == max(sizes) and sizes[-1] == sizes[-10]  # a full domain grows no more
    assert flowing.total > 3 * still.total
    resumed = disk_plan.liquid_plan(10, 10_000, "COMPACT", 10, inflow=(500.0, 2000), after=90, most=50_000)
    assert resumed.per_frame == sizes[90] and resumed.total > 10 * still.per_frame
    for free in (0, 10 ** 8, flowing.total // 2, flowing.total + disk_plan.RESERVE):  # the search still holds
        fit = flowing.frames_that_fit(free)
        assert fit == 0 or flowing.bytes_for(fit) + disk_plan.RESERVE <= free
        assert fit == flowing.frames or flowing.bytes_for(fit + 1) + disk_plan.RESERVE > free
    assert "growing to" in disk_plan.summary(flowing, 10 ** 12) and "growing" not in disk_plan.summary(still, 1)


def test_liquid_checkpoints_count_the_grid_velocity_dense_per_face_and_sparse_per_liquid_cell():
    """A liquid checkpoint holds the grid velocity its frame's VDB is written from (issue
    21 §1): 4 bytes a MAC face on the dense grid, about 48 a liquid cell on the sparse one."""
    particles, faces = 1_000_000, 3 * 128 ** 3
    dense = disk_plan.liquid_plan(100, particles, "COMPACT", 10, 8.0, grid_faces=faces)
    sparse = disk_plan.liquid_plan(100, particles, "COMPACT", 10, 8.0)
    assert dense.per_checkpoint == particles * disk_plan.LIQUID_STATE_PARTICLE + 4 * faces
    assert sparse.per_checkpoint == particles * disk_plan.LIQUID_STATE_PARTICLE + particles / 8 * 48
    growing = disk_plan.liquid_plan(100, particles, "COMPACT", 10, 8.0, inflow=(1000.0, 5000), grid_faces=faces)
    assert growing.checkpoint_sizes[0] == dense.per_checkpoint  # the grid's part does not grow with the liquid
    assert growing.checkpoint_sizes[-1] - growing.checkpoint_sizes[0] == \
        pytest.approx((5000 + 98 * 1000.0) * disk_plan.LIQUID_STATE_PARTICLE)
