"""Snow's GPU guard counts the device encoder of Compact frames (issue 21 §6) as the
liquid's does (``compact_points.with_device_encoder``): the flakes' state between steps
plus the encoder's ~60 B a flake, where that is above the step's own peak. The kernels'
check is given the combination by the operator (``addon/operators/snow.check_memory``)."""

import re

import numpy as np
import pytest

from voxfx.addon import compact_points
from voxfx.kernels.errors import InputError
from voxfx.kernels.snow import plan
from voxfx.kernels.snow.domain import SnowDomain
from voxfx.kernels.snow.ground import terrain_items

PLANE = (np.array([[0, 0, 0], [16, 0, 0], [16, 8, 0], [0, 8, 0]], np.float32), np.array([[0, 1, 2], [0, 2, 3]]))
DEVICE = object()  # any array module but NumPy: the GPU estimate (no device needed to count it)


def setup():
    v, t = PLANE
    lo, hi = plan.domain_box((0, 0, 0), (16, 8, 0), 6.0)
    return (v, t, lo, hi, (0, 0, 0), (16, 8, 0))


def gpu_need(d, flakes, encoder):
    v, t = PLANE
    stages = d.nbytes(flakes, xp=DEVICE, terrain_items=terrain_items(v, t, d), triangles=len(t), parts=True)
    return compact_points.with_device_encoder(stages, flakes) if encoder else stages["total"]


def test_the_encoder_is_counted_beside_the_flakes_state():
    args = setup()
    d = plan.check_memory(*args, 64, 129, 1000, 1 << 40, "test", xp=DEVICE)
    flakes = 4_000_000
    stages = d.nbytes(flakes, xp=DEVICE, parts=True)
    assert stages["total"] == d.nbytes(flakes, xp=DEVICE)
    assert stages["state"] < stages["total"]
    # flake-heavy: state (48 B) + encoder (60 B) a flake is above the step's 64 B
    assert gpu_need(d, flakes, True) == stages["state"] + compact_points.device_encoder_bytes(flakes)
    assert gpu_need(d, flakes, True) > gpu_need(d, flakes, False)
    # no flakes: the grids' step is the peak, the encoder adds nothing
    assert gpu_need(d, 0, True) == gpu_need(d, 0, False)


def test_the_guard_refuses_what_only_fits_without_the_encoder_and_names_flakes_that_fit():
    args = setup()
    flakes = 4_000_000
    d = plan.check_memory(*args, 64, 129, flakes, 1 << 40, "test", xp=DEVICE)
    without, with_encoder = gpu_need(d, flakes, False), gpu_need(d, flakes, True)
    free = (without + with_encoder) // 2
    plan.check_memory(*args, 64, 129, flakes, free, "test", xp=DEVICE)  # fits without the encoder
    with pytest.raises(InputError, match=r"At most ([\d,]+) flakes fit") as e:
        plan.check_memory(*args, 64, 129, flakes, free, "test", xp=DEVICE,
                          with_encoder=compact_points.with_device_encoder)
    most = int(re.search(r"At most ([\d,]+) flakes", str(e.value)).group(1).replace(",", ""))
    assert 0 < most < flakes
    smallest = plan.plan_domain(*args[2:], 8, 129)
    assert gpu_need(smallest, most, True) <= free < gpu_need(smallest, most + 1, True)
    # the CPU has no device encoder: the same check on NumPy ignores it
    cpu = d.nbytes(flakes, xp=np, terrain_items=terrain_items(*PLANE, d), triangles=2)
    plan.check_memory(*args, 64, 129, flakes, cpu, "test", xp=np, with_encoder=compact_points.with_device_encoder)


def test_state_per_flake_is_below_the_steps_peak():
    assert SnowDomain.GPU_STATE_BYTES_PER_FLAKE < SnowDomain.BYTES_PER_FLAKE
