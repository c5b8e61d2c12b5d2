"""A liquid frame's outputs made at the pace of the simulation (issue 24): the sparse cell
velocity padded on the lattice's indices (no host ``np.pad``) is the old array bit for
bit, and a compact frame prepared now and packed later (on the writer thread) is the
bytes ``encode`` gives."""

import numpy as np
import pytest

from tests.meshes import box
from tests.unit.deferred_pack_faults import (assert_a_failed_pack_keeps_complete_frames_and_resumes,
                                              pack_failing_on_writer)
from voxfx.addon import compact_points, liquid_files
from voxfx.kernels.flip import sparse_output
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.surface import WALL_CELLS, surface_grid
from voxfx.kernels.grid import GridSpec


def _both_ways(sim, monkeypatch, padding):
    got = {}
    for mode in ("legacy", "direct"):
        monkeypatch.setenv("VOXFX_CELL_VELOCITY", mode)
        got[mode] = sim.cell_velocity(padding=padding)
    return got["legacy"], got["direct"]


@pytest.mark.parametrize("padding", [0, 1, WALL_CELLS])
def test_closed_box_cell_velocity_is_the_padded_old_array_bit_for_bit(monkeypatch, padding):
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (16, 8, 12))
    v, t = box((0.0, 0.0, 0.0), (0.3, 0.4, 0.3))
    sim = FlipSimulation(spec, FlipSettings(seed=4), v, t, xp=np, sparse=True)
    for _ in range(3):
        sim.step(1 / 60)
    old, new = _both_ways(sim, monkeypatch, padding)
    assert new.dtype == old.dtype == np.float32 and new.shape == old.shape
    assert new.shape == tuple(n + 2 * padding for n in spec.array_shape) + (3,)
    assert np.abs(old).max() > 0.1  # the liquid moves: a real comparison
    assert old.tobytes() == new.tobytes()
    restored = FlipSimulation(spec, FlipSettings(seed=4), v, t, xp=np, sparse=True)
    restored.restore(sim.checkpoint())  # the checkpoint's bricks (``_restored_velocity``)
    again_old, again_new = _both_ways(restored, monkeypatch, padding)
    assert again_old.tobytes() == old.tobytes() and again_new.tobytes() == old.tobytes()


def test_several_chunks_and_a_region_offset_give_the_old_cells(monkeypatch):
    """Chunks of a few z layers (``CHUNK_CELLS`` made small) and a region offset on the
    lattice: the same cells as the old chunked average, the padding its edge."""
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (16, 8, 12))
    v, t = box((0.0, 0.0, 0.0), (0.3, 0.4, 0.3))
    sim = FlipSimulation(spec, FlipSettings(seed=2), v, t, xp=np, sparse=True)
    sim.step(1 / 30)
    monkeypatch.setattr(sparse_output, "CHUNK_CELLS", 300)
    region = GridSpec((0.1, 0.05, 0.15), 0.05, (9, 6, 7))
    old = sparse_output.legacy_cell_velocity(sim.grid, region, spec)
    assert old.tobytes() == sparse_output.cell_velocity(sim.grid, region, spec).tobytes()
    padded = np.pad(old, ((3, 3),) * 3 + ((0, 0),), mode="edge")
    assert padded.tobytes() == sparse_output.cell_velocity(sim.grid, region, spec, padding=3).tobytes()
    assert np.abs(old).max() > 0.0


def test_open_domain_region_cells_are_unchanged(monkeypatch):
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    v, t = box((0.2, 0.2, 0.2), (0.6, 0.6, 0.6))
    sim = FlipSimulation(spec, FlipSettings(gravity=(0.0, 0.0, 0.0)), v, t, xp=np, sparse=True, boundary="open",
                         kill_distance=50.0, initial_velocity=(6.0, 0.0, 0.0))
    for _ in range(4):
        sim.step(1 / 24)
    grown = surface_grid(sparse_output.liquid_region(sim), WALL_CELLS)
    assert sim.cell_velocity(padding=WALL_CELLS).tobytes() == \
        sparse_output.legacy_cell_velocity(sim.grid, grown, spec).tobytes()


def test_a_bad_cell_velocity_mode_is_one_clear_line(monkeypatch):
    monkeypatch.setenv("VOXFX_CELL_VELOCITY", "fast")
    with pytest.raises(ValueError, match="'direct' or 'legacy'"):
        sparse_output.cell_velocity_mode()


@pytest.mark.parametrize("codec", [compact_points.CODEC_ZLIB, compact_points.best_codec()])
def test_a_frame_prepared_now_and_packed_later_is_the_encoded_bytes(codec):
    rs = np.random.default_rng(11)
    pos = rs.uniform(-1.0, 2.0, (30_000, 3)).astype(np.float32)
    vel = rs.normal(0.0, 3.0, (30_000, 3)).astype(np.float32)
    size = np.full(30_000, 0.01, np.float32)
    expected = compact_points.encode(pos, {"velocity": vel, "size": size}, cell=0.04, codec=codec)
    frame = compact_points.prepare(pos, {"velocity": vel, "size": size}, cell=0.04, codec=codec)
    pos += 1.0  # the particles move on before the writer packs: the frame is its own copy
    vel *= -1.0
    assert frame.pack() == expected
    assert compact_points.decode(expected)[0].shape == (30_000, 3)


def test_prepare_refuses_an_unknown_codec_before_the_array_work():
    with pytest.raises(compact_points.VoxFXError, match="Unknown compact frame codec 7"):
        compact_points.prepare(np.zeros((3, 3), np.float32), None, cell=0.1, codec=7)


def test_deferred_compression_is_on_unless_switched_off(monkeypatch):
    monkeypatch.delenv(liquid_files.DEFER_ENV, raising=False)
    assert liquid_files.defer_compression()
    monkeypatch.setenv(liquid_files.DEFER_ENV, "0")
    assert not liquid_files.defer_compression()


def test_host_liquid_writers_write_the_encoded_frame_and_no_vdb_without_a_writer(tmp_path):
    """The bpy-free writers (``liquid_files``) on host arrays: the compact file holds
    ``encode``'s bytes; with no VDB writer there is no ``.vdb`` entry (the operator's,
    with ``writeback.write_vdb``: tests/blender/test_flip_surface_blender.py)."""
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (16, 8, 12))
    v, t = box((0.0, 0.0, 0.0), (0.3, 0.4, 0.3))
    sim = FlipSimulation(spec, FlipSettings(seed=4), v, t, xp=np, sparse=True)
    sim.step(1 / 60)
    from voxfx.kernels.flip.bake import frame_arrays

    arrays = frame_arrays(sim, spec)
    files = liquid_files.writers_of(arrays, spec, compact=True)
    assert sorted(files) == [compact_points.SUFFIX]
    files[compact_points.SUFFIX](tmp_path / "f.vxp")
    assert (tmp_path / "f.vxp").read_bytes() == compact_points.encode(
        arrays["position"], {"velocity": arrays["velocity"], "size": arrays["size"]}, cell=spec.voxel_size)


def test_a_compression_failing_on_the_writer_thread_keeps_complete_frames_and_resumes(tmp_path, monkeypatch):
    """The deferred compression's fault path on the host (a GPU bake's is
    tests/gpu/test_liquid_frame_outputs_gpu.py): the frame's raw block prepared on the
    bake's thread (``compact_points.prepare``, as ``liquid_files`` does for device
    particles), packed and written by the writer thread (Write While Simulating). The
    third compression there fails (injected): frames 1–2 stay whole, no temporary is
    left, and the next bake rewrites frame 3 from its checkpoint, the same bytes
    (``deferred_pack_faults``)."""
    from voxfx.addon import sim_bake
    from voxfx.addon.cache import BakeCache
    from voxfx.addon.jobs import run_inline
    from voxfx.kernels.flip.bake import FlipBake

    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (16, 8, 12))

    def bake(expected, fail_at=None):
        def writers(arrays):
            points = {"velocity": arrays["velocity"], "size": arrays["size"]}
            expected.append(compact_points.encode(arrays["position"], points, cell=spec.voxel_size))
            frame = compact_points.prepare(arrays["position"], points, cell=spec.voxel_size)
            return {compact_points.SUFFIX: lambda p: compact_points.write_encoded(p, frame.pack())}

        v, t = box((0.0, 0.0, 0.0), (0.4, 0.3, 0.3))
        flip = FlipBake(spec, FlipSettings(seed=5, sparse=True), (v, t), xp=np, fps=24.0)
        cache = BakeCache(tmp_path, "liquid", kind="flip")
        with pack_failing_on_writer(monkeypatch, fail_at):
            return run_inline(sim_bake.run(cache, cache.begin({"cpu": 1}, 1, 4), flip, writers))[0], cache

    assert_a_failed_pack_keeps_complete_frames_and_resumes(tmp_path, bake)
