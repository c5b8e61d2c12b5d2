"""The kernel-side bake objects (kernels/flip/bake.py, kernels/snow/bake.py): their frames
are the simulation stepped as the paper's loop steps it (compared bit for bit with the
step sequence written out here), inflows and outflows act per frame, a blown-up step
stops with a one-line error, and the outputs are the frame's arrays."""

import numpy as np
import pytest

from tests.meshes import box, merge
from voxfx.kernels.errors import InputError
from voxfx.kernels.flip import bodies
from voxfx.kernels.flip.bake import FlipBake
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.snow.bake import SnowBake
from voxfx.kernels.snow.domain import SnowDomain, SnowSettings
from voxfx.kernels.snow.sim import SnowSimulation

FPS = 24.0


def water():
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (12, 6, 12))
    return spec, box((0.0, 0.0, 0.0), (0.2, 0.3, 0.15))


def body(lo, hi):
    v, t = box(lo, hi)
    return bodies.Body(v, t, np.eye(4))


def test_flip_bake_frames_are_the_steps_with_inflow_and_outflow():
    spec, (v, t) = water()
    nozzle = body((0.4, 0.1, 0.45), (0.5, 0.2, 0.5))
    drain = body((0.5, 0.0, 0.0), (0.6, 0.3, 0.05))
    bake = FlipBake(spec, FlipSettings(), (v, t), xp=np, fps=FPS, inflows=[("nozzle", nozzle)],
                    outflows=[("drain", drain)], frame_end=3)
    velocities = {"nozzle": (0.0, 0.0, -1.0)}
    got = []
    for frame, sim in bake.frames(1, 3, velocities=velocities):
        got.append((frame, sim.pos.copy(), sim.vel.copy()))
    ref = FlipSimulation(spec, FlipSettings(), v, t, xp=np)
    want = [(1, ref.pos.copy(), ref.vel.copy())]
    for frame in (2, 3):
        ref.emit(bodies.cells(nozzle, spec, np), velocities["nozzle"])
        ref.step(1.0 / FPS)
        ref.drain(bodies.cells_of_all([drain], spec, np))
        want.append((frame, ref.pos.copy(), ref.vel.copy()))
    assert [g[0] for g in got] == [1, 2, 3]
    for (_, gp, gv), (_, wp, wv) in zip(got, want):
        assert np.array_equal(gp, wp) and np.array_equal(gv, wv)
    assert len(want[2][1]) != len(want[0][1])  # the inflow and outflow did act
    arrays = bake.outputs(sim)
    assert np.array_equal(arrays["position"], sim.particles_host()["position"])
    assert arrays["size"].shape == (len(sim.pos),) and np.all(arrays["size"] == np.float32(0.25 * spec.voxel_size))
    assert arrays["surface"].shape == arrays["cell_velocity"].shape[:3]


def test_particles_on_device_are_still_copies_on_the_cpu():
    """Asked to leave the particles on the device, a NumPy bake still hands out copies:
    its frame may be written while the next step moves the particles."""
    spec, (v, t) = water()
    bake = FlipBake(spec, FlipSettings(), (v, t), xp=np, fps=FPS, particles_on_device=True)
    sim = bake.new_simulation()
    arrays = bake.outputs(sim)
    assert isinstance(arrays["position"], np.ndarray) and not np.shares_memory(arrays["position"], sim.pos)
    assert not np.shares_memory(arrays["velocity"], sim.vel)
    assert np.array_equal(arrays["position"], sim.particles_host()["position"])


def test_snow_flakes_on_device_are_still_copies_on_the_cpu():
    v, t = box((0, 0, -1), (16, 16, 0))
    domain = SnowDomain.from_box((0, 0, 0), (16, 16, 8), wind_cells_xy=16, ground_vertices_xy=33)
    settings = SnowSettings(initial_depth=0.0, flake_count=500, wind_speed=2.0, seed=3)
    bake = SnowBake(domain, settings, (v, t), xp=np, fps=FPS, substeps=1, particles_on_device=True)
    sim = bake.new_simulation()
    flakes = bake.outputs(sim)["flakes"]
    assert not np.shares_memory(flakes["position"], sim.flakes.pos)
    assert all(np.array_equal(flakes[k], v) for k, v in sim.flakes_host().items())


def test_flip_bake_step_reports_a_blown_up_liquid_in_one_line():
    spec, (v, t) = water()
    bake = FlipBake(spec, FlipSettings(), (v, t), xp=np, fps=FPS, frame_end=5, kept_in="/tmp/cache")
    sim = bake.new_simulation()
    sim.vel[0, 0] = np.nan
    with pytest.raises(InputError, match=r"NaN.*; frames up to 3 are kept in '/tmp/cache'$"):
        bake.step(sim, 4)


def test_snow_bake_frames_are_substeps_of_the_frame():
    v, t = merge(box((0, 0, -1), (16, 16, 0)), box((6, 6, 0), (10, 10, 3)))
    domain = SnowDomain.from_box((0, 0, 0), (16, 16, 8), wind_cells_xy=16, ground_vertices_xy=33)
    settings = SnowSettings(initial_depth=0.0, flake_count=2000, wind_speed=2.0, snowfall_rate=3600.0, seed=3)
    bake = SnowBake(domain, settings, (v, t), xp=np, fps=FPS, substeps=3, frame_end=2)
    frames = [(frame, sim.snow_host().copy(), sim.flakes_host()["position"].copy()) for frame, sim in
              bake.frames(1, 2)]
    ref = SnowSimulation(domain, settings, v, t, xp=np)
    assert [f for f, _, _ in frames] == [1, 2]
    for _, snow, flakes in frames:
        for _ in range(3):
            ref.step(1.0 / FPS / 3)
        assert np.array_equal(snow, ref.snow_host()) and np.array_equal(flakes, ref.flakes_host()["position"])
    arrays = bake.outputs(ref)
    assert np.array_equal(arrays["depth"], ref.snow_host()) and set(arrays["flakes"]) == set(ref.flakes_host())
    assert bake.step(ref, 3).startswith("frame 3/2: ")
