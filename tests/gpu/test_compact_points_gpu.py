"""Compact particle frames encoded from CuPy arrays (issue 17): the device does the array
work (quantizing, sorting by cell, half floats) and the file's bytes are exactly those of
the NumPy reference, on fresh random frames."""

import numpy as np
import pytest

from voxfx.addon import compact_points

cp = pytest.importorskip("cupy")


@pytest.mark.parametrize("seed, n", [(0, 1), (1, 1000), (2, 250_000), (3, 2_000_000)])
def test_gpu_encode_writes_the_same_bytes_as_the_numpy_reference(seed, n):
    rs = np.random.default_rng(seed)
    pos = (rs.uniform(-3.0, 5.0, (n, 3))).astype(np.float32)
    vel = (rs.normal(0.0, 4.0, (n, 3)) * rs.choice([1e-3, 1.0, 1e3], (n, 1))).astype(np.float32)
    size = rs.uniform(0.001, 0.004, n).astype(np.float32)
    ids = np.arange(n, dtype=np.int32)
    cell = float(rs.uniform(0.005, 0.1))
    for codec in (compact_points.CODEC_ZLIB, compact_points.best_codec()):
        host = compact_points.encode(pos, {"velocity": vel, "size": size, "id": ids}, cell=cell, codec=codec)
        device = compact_points.encode(cp.asarray(pos), {"velocity": cp.asarray(vel), "size": cp.asarray(size),
                                                         "id": cp.asarray(ids)}, cell=cell, codec=codec)
        assert device == host
    got, cols = compact_points.decode(device)
    back = np.empty_like(pos)
    back[cols["id"]] = got
    assert np.linalg.norm(back.astype(np.float64) - pos, axis=1).max() <= cell / 1000


def test_gpu_encode_refuses_non_finite_positions():
    with pytest.raises(compact_points.VoxFXError, match="not finite"):
        compact_points.encode(cp.asarray([[0.0, float("nan"), 1.0]]), None, cell=0.1)


def test_a_gpu_liquid_frame_encoded_on_the_device_is_the_frame_of_its_host_copy():
    """``FlipBake(particles_on_device=True)`` on CuPy: the particles stay on the GPU, the
    compact frame is encoded there, and its bytes are those of the NumPy encoder fed the
    same simulation's host copy (``particles_host``)."""
    from tests.meshes import box
    from voxfx.kernels.flip.bake import FlipBake
    from voxfx.kernels.flip.grid import FlipSettings
    from voxfx.kernels.grid import GridSpec

    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (16, 8, 12))
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.3, 0.3))
    bake = FlipBake(spec, FlipSettings(seed=5), (v, t), xp=cp, fps=24.0, particles_on_device=True)
    sim = bake.new_simulation()
    bake.step(sim, 2)
    arrays = bake.outputs(sim)
    assert isinstance(arrays["position"], cp.ndarray) and isinstance(arrays["surface"], np.ndarray)
    device = compact_points.encode(arrays["position"], {"velocity": arrays["velocity"], "size": arrays["size"]},
                                   cell=spec.voxel_size)
    host = sim.particles_host()
    size = np.full(len(host["position"]), 0.25 * spec.voxel_size, np.float32)
    assert device == compact_points.encode(host["position"], {"velocity": host["velocity"], "size": size},
                                           cell=spec.voxel_size)


def test_gpu_snow_flakes_encoded_on_the_device_are_the_frame_of_their_host_copy():
    """``SnowBake(particles_on_device=True)`` on CuPy: the flakes stay on the GPU and
    encode to the bytes of ``flakes_host`` through the NumPy encoder."""
    from tests.meshes import box
    from voxfx.kernels.snow.bake import SnowBake
    from voxfx.kernels.snow.domain import SnowDomain, SnowSettings

    v, t = box((0, 0, -1), (16, 16, 0))
    domain = SnowDomain.from_box((0, 0, 0), (16, 16, 8), wind_cells_xy=16, ground_vertices_xy=33)
    settings = SnowSettings(initial_depth=0.0, flake_count=20000, wind_speed=2.0, snowfall_rate=3600.0, seed=3)
    bake = SnowBake(domain, settings, (v, t), xp=cp, fps=24.0, substeps=2, particles_on_device=True)
    sim = bake.new_simulation()
    bake.step(sim, 1)
    flakes = bake.outputs(sim)["flakes"]
    assert isinstance(flakes["position"], cp.ndarray)
    device = compact_points.encode(flakes["position"], {k: a for k, a in flakes.items() if k != "position"},
                                   cell=0.25)
    host = sim.flakes_host()
    assert device == compact_points.encode(host["position"], {k: a for k, a in host.items() if k != "position"},
                                           cell=0.25)


def test_a_device_out_of_memory_while_encoding_falls_back_to_the_host_bytes(monkeypatch):
    """Injected: the device encoder's first allocation fails as CuPy's OutOfMemoryError;
    ``encode_here`` then encodes a host copy, and the bytes are the NumPy encoder's."""
    rs = np.random.default_rng(7)
    pos = rs.uniform(-1.0, 1.0, (50_000, 3)).astype(np.float32)
    vel = rs.normal(0.0, 1.0, (50_000, 3)).astype(np.float32)
    host = compact_points.encode(pos, {"velocity": vel}, cell=0.02)
    real = compact_points._quantize

    def no_device_memory(positions, *args):
        if isinstance(positions, cp.ndarray):
            raise cp.cuda.memory.OutOfMemoryError(1 << 30, 0)
        return real(positions, *args)

    monkeypatch.setattr(compact_points, "_quantize", no_device_memory)
    assert compact_points.encode_here(cp.asarray(pos), {"velocity": cp.asarray(vel)}, cell=0.02) == host
    with pytest.raises(cp.cuda.memory.OutOfMemoryError):
        compact_points.encode(cp.asarray(pos), {"velocity": cp.asarray(vel)}, cell=0.02)


def test_a_gpu_bake_writes_each_frame_as_its_particles_were_when_it_was_handed_over(tmp_path):
    """A GPU liquid bake through the real frame loop (``sim_bake.run``): particles left on
    the device, encoded there, written on the writer thread while the next frame steps.
    Each file holds the frame its host copy at output time encodes to (the stepping that
    followed never leaked into it)."""
    from tests.meshes import box
    from voxfx.addon import sim_bake
    from voxfx.addon.cache import BakeCache
    from voxfx.addon.jobs import run_inline
    from voxfx.kernels.flip.bake import FlipBake
    from voxfx.kernels.flip.grid import FlipSettings
    from voxfx.kernels.grid import GridSpec

    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (16, 8, 12))
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.3, 0.3))
    bake = FlipBake(spec, FlipSettings(seed=5), (v, t), xp=cp, fps=24.0, particles_on_device=True)
    expected = []

    def writers(arrays):
        points = {"velocity": arrays["velocity"], "size": arrays["size"]}
        assert isinstance(arrays["position"], cp.ndarray)
        expected.append(compact_points.encode(cp.asnumpy(arrays["position"]),
                                              {k: cp.asnumpy(a) for k, a in points.items()}, cell=spec.voxel_size))
        data = compact_points.encode_here(arrays["position"], points, cell=spec.voxel_size)
        return {".vxp": lambda p: compact_points.write_encoded(p, data)}

    cache = BakeCache(tmp_path, "liquid", kind="flip")
    plan = cache.begin({"gpu": 1}, 1, 4)
    written, _ = run_inline(sim_bake.run(cache, plan, bake, writers))
    assert written == [1, 2, 3, 4] and cache.frames_done() == [1, 2, 3, 4]
    assert [cache.frame_path(f, ".vxp").read_bytes() for f in written] == expected
    assert expected[0] != expected[-1]  # the liquid moved
