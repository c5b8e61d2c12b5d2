"""The sparse liquid's memory on the device against its estimates (issue 21 §6): the
estimate before the bake covers every frame's in-use peak of a spreading dam break, and
the bake's check before each frame (``frame_check.FrameCheck``: the bricks the grid
holds, their growth, what the pool already holds) covers that frame's peak."""

import sys

import numpy as np
import pytest

from tests.conftest import ROOT
from tests.gpu.pool_peak import pool_peak
from voxfx.kernels import memory
from voxfx.kernels.flip import sparse_memory as M
from voxfx.kernels.flip.frame_check import FrameCheck
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation

cp = pytest.importorskip("cupy")


def _as_a_bake_starts(pool) -> int:
    """The pool as the bake operator leaves it before a bake (``memory.release_gpu_pool``: the
    cached solvers and set-up workspaces dropped, the free blocks given back), and the bytes
    still in use then: arrays VoxFX does not hold for a bake (earlier tests' objects in this
    process), which this bake's peak does not count (the GPU suite's shard 1, session 25: frame
    11 of the spreading liquid peaked 8.0 MiB over its need there, 4.9 MiB under it alone)."""
    memory.release_gpu_pool()
    return pool.used_bytes()


@pytest.mark.parametrize("sort, path", [("off", "argsort"), ("1", "gather")])
def test_the_estimate_and_the_frame_check_cover_each_frames_peak_as_the_liquid_spreads(monkeypatch, sort, path):
    """Also with the particle sort on every frame by its gather path (``VOXFX_SPARSE_PARTICLE_SORT``
    1, ``VOXFX_SPARSE_PARTICLE_SORT_PATH`` gather), whose spare arrays the estimate then counts
    (``particle_sort.spare_bytes``) and which sorts at each frame's end inside the measured step."""
    sys.path.insert(0, str(ROOT / "bench"))
    from flip import spreading_liquid

    monkeypatch.setenv("VOXFX_SPARSE_PARTICLE_SORT", sort)
    monkeypatch.setenv("VOXFX_SPARSE_PARTICLE_SORT_PATH", path)

    pool = cp.get_default_memory_pool()
    base = _as_a_bake_starts(pool)
    sim, estimate, check = spreading_liquid(cp)

    bricks = []
    for frame in range(12):
        cp.cuda.Device().synchronize()
        need, held = check.need(sim)
        assert held >= pool.used_bytes()  # what the pool holds is counted as the simulation's
        with pool_peak() as hook:
            sim.step(1 / 24)
            sim.level_set()
            cp.cuda.Device().synchronize()
        check.seen(sim)
        peak = hook.peak - base  # this bake's bytes
        bricks.append(sim.grid.brick_count())
        assert peak <= need, (frame, peak / 2 ** 20, need / 2 ** 20)
        assert peak <= estimate["total"], (frame, peak / 2 ** 20, estimate["total"] / 2 ** 20)
        if frame:  # after the first frame (the estimate's bricks) the check follows the grid
            assert need <= 2 * peak, (frame, peak / 2 ** 20, need / 2 ** 20)
    assert max(bricks) > 1.5 * bricks[0]  # it spread
    assert max(bricks) <= estimate["bricks"]
    spare = getattr(sim, "sort_spare", None)  # held by the gather path: what the estimate counts
    held = sum(a.nbytes for a in spare if a is not None) if spare is not None else 0
    assert held == M.particle_sort.spare_bytes(len(sim.pos), False) == (24 * len(sim.pos) if sort != "off" else 0)


@pytest.mark.parametrize("band", [2, 4, 8])
def test_the_band_estimate_and_check_count_the_particles_the_band_keeps(band):
    """With a narrow band the simulation holds only the band's particles: the estimate
    before the bake (``band_kept``'s share) and the check before each frame (the particles
    held, ``FrameCheck(band=True)``) cover each frame's in-use peak, the check within 2×
    of it after the first frame (fitted on the 8M dam break at 256³; here 1M at 128³)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from flip import dam_break

    pool = cp.get_default_memory_pool()
    base = _as_a_bake_starts(pool)
    spec, v, t = dam_break(128, 1_000_000)
    sim = FlipSimulation(spec, FlipSettings(narrow_band=band), v, t, xp=cp, sparse=True)
    P = len(sim.pos)
    top = (float(np.asarray(v)[:, 2].max()) - spec.origin[2]) / spec.voxel_size
    estimate = M.sparse_flip_memory(spec, P, xp=cp, climb=M.climb_cells(top, 0.0, spec), parts=True,
                                    narrow_band=band)
    asked = []

    def memory(b, p, parts=False, kept=None):
        asked.append(kept)
        return M.memory_at(spec, b, p, 8, parts=parts, xp=cp, narrow_band=band, kept=kept)

    check = FrameCheck(memory, True, M.box_bricks(spec), xp=cp, first=estimate["bricks"], band=True)

    for frame in range(12):
        cp.cuda.Device().synchronize()
        asked.clear()
        need, held = check.need(sim)
        assert asked[-1] == len(sim.pos)  # the state held now: the band's particles
        with pool_peak() as hook:
            sim.step(1 / 24)
            sim.level_set()
            cp.cuda.Device().synchronize()
        check.seen(sim)
        peak = hook.peak - base  # this bake's bytes
        assert len(sim.pos) < sim.liquid_particles()  # the band keeps fewer
        assert peak <= need, (frame, peak / 2 ** 20, need / 2 ** 20)
        assert peak <= estimate["total"], (frame, peak / 2 ** 20, estimate["total"] / 2 ** 20)
        if frame:
            assert need <= 2 * peak, (frame, peak / 2 ** 20, need / 2 ** 20)
