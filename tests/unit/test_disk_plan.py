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
