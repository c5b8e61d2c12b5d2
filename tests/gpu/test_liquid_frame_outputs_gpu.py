"""A GPU liquid frame's outputs at the pace of the simulation (issue 24): the sparse box's
cell velocity padded on the device's indices and copied into a pinned block is the NumPy
reference's array bit for bit (the same checkpoint on both), and a bake that compresses
its compact frames on the writer thread writes the bytes of each frame's host copy;
a compression that fails there leaves complete frames only, and the next bake resumes."""

import numpy as np
import pytest

from tests.meshes import box
from tests.unit.deferred_pack_faults import (assert_a_failed_pack_keeps_complete_frames_and_resumes,
                                              pack_failing_on_writer)
from voxfx.addon import compact_points, liquid_files, sim_bake
from voxfx.addon.cache import BakeCache
from voxfx.addon.jobs import run_inline
from voxfx.kernels.flip.bake import FlipBake
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.surface import WALL_CELLS
from voxfx.kernels.grid import GridSpec

cp = pytest.importorskip("cupy")

SPEC = GridSpec((0.0, 0.0, 0.0), 0.05, (16, 8, 12))


def _velocity(sim, monkeypatch, mode, padding=WALL_CELLS):
    monkeypatch.setenv("VOXFX_CELL_VELOCITY", mode)
    return sim.cell_velocity(padding=padding)


@pytest.mark.parametrize("padding", [0, WALL_CELLS])
def test_gpu_cell_velocity_is_the_numpy_references_bit_for_bit(monkeypatch, padding):
    v, t = box((0.0, 0.0, 0.0), (0.3, 0.4, 0.3))
    cpu = FlipSimulation(SPEC, FlipSettings(seed=4), v, t, xp=np, sparse=True)
    for _ in range(3):
        cpu.step(1 / 60)
    gpu = FlipSimulation(SPEC, FlipSettings(seed=4), v, t, xp=cp, sparse=True)
    gpu.restore(cpu.checkpoint())  # the checkpoint's bricks on both: the same faces
    reference = _velocity(cpu, monkeypatch, "legacy", padding)
    assert np.abs(reference).max() > 0.1
    for mode in ("direct", "legacy", "direct"):  # twice: the pinned block comes back from CuPy's pool
        got = _velocity(gpu, monkeypatch, mode, padding)
        assert isinstance(got, np.ndarray) and got.dtype == np.float32
        assert got.shape == reference.shape and got.tobytes() == reference.tobytes(), mode
    gpu.step(1 / 60)  # its own bricks now: direct and legacy still agree on the device
    assert _velocity(gpu, monkeypatch, "direct", padding).tobytes() == \
        _velocity(gpu, monkeypatch, "legacy", padding).tobytes()


def _bake(tmp_path, expected, monkeypatch, defer=True, fail_at=None):
    """Frames 1–4 of a small GPU liquid through ``sim_bake.run`` with the bpy-free
    writers (``liquid_files``), particles on the device: (frames written, cache); *expected*
    gets each frame's bytes from its host copy at output time; *fail_at*: the n-th ``pack``
    on the writer thread raises (``deferred_pack_faults``)."""
    monkeypatch.setenv(liquid_files.DEFER_ENV, "1" if defer else "0")
    spec = SPEC
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.3, 0.3))
    bake = FlipBake(spec, FlipSettings(seed=5, sparse=True), (v, t), xp=cp, fps=24.0, particles_on_device=True)

    def writers(arrays):
        assert isinstance(arrays["position"], cp.ndarray)
        expected.append(compact_points.encode(cp.asnumpy(arrays["position"]),
                                              {"velocity": cp.asnumpy(arrays["velocity"]),
                                               "size": cp.asnumpy(arrays["size"])}, cell=spec.voxel_size))
        return liquid_files.writers_of(arrays, spec, compact=True)

    cache = BakeCache(tmp_path, "liquid", kind="flip")
    plan = cache.begin({"gpu": 1}, 1, 4)
    with pack_failing_on_writer(monkeypatch, fail_at):
        return run_inline(sim_bake.run(cache, plan, bake, writers))[0], cache


@pytest.mark.parametrize("defer", [True, False])
def test_a_gpu_bake_compressing_on_the_writer_thread_writes_each_frames_bytes(tmp_path, monkeypatch, defer):
    expected = []
    written, cache = _bake(tmp_path, expected, monkeypatch, defer)
    assert written == [1, 2, 3, 4] and cache.frames_done() == [1, 2, 3, 4]
    assert [cache.frame_path(f, ".vxp").read_bytes() for f in written] == expected
    assert expected[0] != expected[-1]  # the liquid moved


def test_a_compression_failing_on_the_writer_thread_keeps_complete_frames_and_resumes(tmp_path, monkeypatch):
    assert_a_failed_pack_keeps_complete_frames_and_resumes(
        tmp_path, lambda expected, fail_at=None: _bake(tmp_path, expected, monkeypatch, fail_at=fail_at))
