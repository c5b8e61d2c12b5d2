"""Issue 12's settings of a liquid bake: the CFL substep cap and its report, the sparse
memory estimate against measured peaks."""

import math

import numpy as np
import pytest

from tests.meshes import box
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
    wanted = math.ceil((speed + math.sqrt(2 * 9.81 * 0.05)) * (1 / 24) / 0.05)
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
