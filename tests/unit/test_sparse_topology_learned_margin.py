"""``sparse_topology_gpu._learned_margin`` (the device margin's one read turned into the next
substep's margin, in NumPy scalars) gives ``BrickReach.margins``' integers (its arrays' float32
root and float64 arithmetic) for |v|² bits from 0 to past any margin, and None for a |v|² that
is not finite."""

import numpy as np
import pytest

from voxfx.kernels.flip.sparse_grid import BrickReach
from voxfx.kernels.flip.sparse_topology_gpu import _learned_margin


@pytest.mark.parametrize("dt,h", [(1 / 120, 0.05), (1 / 24, 0.0078125), (0.013, 0.37)])
def test_learned_margin_is_brick_reach_margins(dt, h):
    rng = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)))
    reach = BrickReach(np.zeros((1, 3), np.float32), dt, 9.81, h)
    speed2 = np.concatenate([rng.uniform(0, 1e4, 3000), rng.uniform(0, 1, 500), 10.0 ** rng.uniform(-30, 20, 500),
                             [0.0, 1.0, 2.0, 1e-45]]).astype(np.float32)
    ceilings = ((np.sqrt(speed2).astype(np.float64) + reach.gdt) * dt / h)
    edges = np.ceil(ceilings[:200]) * h / dt - reach.gdt  # speeds whose reach lands on an integer
    speed2 = np.concatenate([speed2, (edges.astype(np.float32) ** 2).astype(np.float32)])
    want = reach.margins(speed2, np)
    got = [_learned_margin(reach, int(b)) for b in speed2.view(np.uint32)]
    assert got == [int(w) for w in want]
    assert len(set(got)) > 100


@pytest.mark.parametrize("value", [np.inf, np.nan, -np.nan])
def test_learned_margin_of_a_speed_that_is_not_finite_is_none(value):
    reach = BrickReach(np.zeros((1, 3), np.float32), 1 / 120, 9.81, 0.05)
    assert _learned_margin(reach, int(np.array([value], np.float32).view(np.uint32)[0])) is None
