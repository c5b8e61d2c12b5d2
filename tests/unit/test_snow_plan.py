"""The snow bake's domain, memory check and cover mesh on the kernel side (issue 19):
planned from numbers, never by writing settings into the scene."""

import math

import numpy as np
import pytest

from voxfx.kernels.errors import InputError
from voxfx.kernels.snow import plan
from voxfx.kernels.snow.cover import cover_max_slope, cover_mesh
from voxfx.kernels.snow.domain import NO_GROUND, SnowDomain

PLANE = (np.array([[0, 0, 0], [16, 0, 0], [16, 8, 0], [0, 8, 0]], np.float32), np.array([[0, 1, 2], [0, 2, 3]]))


def test_the_domain_is_the_receivers_plus_the_sky_or_the_given_box():
    lo, hi = plan.domain_box((0, 0, 0), (16, 8, 1), 6.0)
    assert np.allclose(lo, (0, 0, 0)) and np.allclose(hi, (16, 8, 7))
    lo2, hi2 = plan.domain_box((0, 0, 0), (16, 8, 1), 6.0, box=((-1, -1, -1), (20, 9, 4)))
    assert np.allclose(hi2, (20, 9, 4))
    d = plan.plan_domain(lo, hi, (0, 0, 0), (16, 8, 1), 32, 65)
    assert isinstance(d, SnowDomain) and max(d.wind.shape[:2]) == 32
    with pytest.raises(InputError, match="outside the snow domain"):
        plan.plan_domain((30, 30, 0), (40, 40, 5), (0, 0, 0), (16, 8, 1), 32, 65)


def test_the_memory_check_names_a_wind_resolution_that_fits_and_it_does():
    v, t = PLANE
    lo, hi = plan.domain_box((0, 0, 0), (16, 8, 0), 6.0)
    args = (v, t, lo, hi, (0, 0, 0), (16, 8, 0))
    d = plan.check_memory(*args, 64, 129, 10_000, 1 << 40, "test", xp=np)
    need = d.nbytes(10_000, xp=np, terrain_items=plan_items(v, t, d), triangles=2)
    with pytest.raises(InputError, match=r"largest wind resolution that fits is (\d+)") as e:
        plan.check_memory(*args, 64, 129, 10_000, need // 2, "test", xp=np)
    best = int(str(e.value).rsplit(" ", 1)[-1])
    assert 8 <= best < 64
    plan.check_memory(*args, best, 129, 10_000, need // 2, "test", xp=np)  # the named size passes
    with pytest.raises(InputError):
        plan.check_memory(*args, best + 1, 129, 10_000, need // 2, "test", xp=np)


def plan_items(v, t, d):
    from voxfx.kernels.snow.ground import terrain_items

    return terrain_items(v, t, d)


def test_cover_quads_skip_missing_ground_and_steps_steeper_than_repose():
    d = plan.plan_domain((0, 0, 0), (8, 8, 6), (0, 0, 0), (8, 8, 0), 8, 9)
    gx, gy = d.ground_shape
    terrain = np.zeros((gy, gx), np.float32)
    terrain[:, 0] = NO_GROUND  # no receiver under the first column
    terrain[:, gx // 2:] += 3.0  # a 3 m wall across the middle
    verts, quads = cover_mesh(terrain, d, cover_max_slope(math.radians(38.0)))
    assert verts.shape == (gx * gy, 3) and quads.dtype == np.int32
    assert len(quads) == (gy - 1) * (gx - 1 - 1 - 1)  # not the first column's, not across the wall
    xs = verts[quads][..., 0]
    assert (xs.min(axis=1) > d.ground_origin[0]).all()
    assert cover_max_slope(math.radians(80.0)) == 85.0
