"""Compact particle frames (.vxp): positions within 1/1000 of a cell, velocities to half
precision with 8 mantissa bits, at most 8 bytes per particle on a real liquid frame; a
truncated, corrupted or lying file is one clear error naming it, never garbage."""

import zlib

import numpy as np
import pytest

from voxfx.addon import compact_points as cp
from voxfx.kernels.errors import VoxFXError

CODECS = [cp.CODEC_ZLIB] + ([cp.CODEC_ZSTD] if cp._zstd() is not None else [])


def _frame(n=5000, seed=0, cell=0.013):
    rng = np.random.default_rng(seed)
    pos = rng.random((n, 3)) * 0.9 - np.array([0.3, 0.1, -2.0])  # not at the origin, negative coordinates too
    vel = (rng.normal(size=(n, 3)) * 3).astype(np.float32)
    return pos, vel, np.arange(n, dtype=np.int32), cell


def _in_original_order(positions, columns):
    """The decoded frame back in the writer's order, by the ``id`` attribute it carried."""
    order = np.argsort(columns["id"])
    return positions[order], {k: v[order] for k, v in columns.items()}


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_keeps_positions_within_a_thousandth_of_a_cell(codec):
    pos, vel, ids, cell = _frame()
    got, cols = cp.decode(cp.encode(pos, {"velocity": vel, "id": ids}, cell=cell, codec=codec))
    got, cols = _in_original_order(got, cols)
    assert got.dtype == np.float32 and got.shape == pos.shape
    assert np.array_equal(cols["id"], ids)  # integers exact, every particle once
    error = np.linalg.norm(got.astype(np.float64) - pos, axis=1) / cell
    assert error.max() <= 1e-3
    # The velocity: a half float with 8 mantissa bits, relative error ≤ 2^-9 (+ half's own rounding)
    back = np.stack([cols[f"velocity_{a}"] for a in "xyz"], 1)
    relative = np.abs(back - vel) / np.maximum(np.abs(vel), 2.0 ** -14)
    assert relative.max() <= 2.0 ** -9 + 2.0 ** -11


def test_the_quantization_is_the_stated_step_not_better_by_accident():
    """A point on a step's lower edge comes back at the step's centre: 1/2048 of a cell off."""
    cell = 0.5
    pos = np.array([[0.0, 0.0, 0.0], [1.0 / 1024 * cell, 0.0, 0.0]])
    got, _ = cp.decode(cp.encode(pos, None, cell=cell))
    got = got[np.argsort(got[:, 0])]
    assert np.allclose(got[:, 0] / cell, [0.5 / 1024, 1.5 / 1024], atol=1e-7)


def test_huge_velocities_stay_finite_and_empty_frames_round_trip():
    pos = np.zeros((2, 3))
    got, cols = cp.decode(cp.encode(pos, {"velocity": np.array([[1e9, -1e9, 0]] * 2, np.float32)}, cell=0.1))
    assert np.isfinite(cols["velocity_x"]).all() and cols["velocity_x"].max() > 60000
    got, cols = cp.decode(cp.encode(np.zeros((0, 3)), {"velocity": np.zeros((0, 3), np.float32)}, cell=0.1))
    assert got.shape == (0, 3) and cols["velocity_x"].shape == (0,)


def test_quantizing_in_chunks_writes_the_bytes_of_one_pass(monkeypatch):
    """The CPU encoder quantizes CHUNK particles at a time; the frame is the one a single
    pass over all particles gives (what the CuPy path does), bit for bit."""
    pos, vel, ids, cell = _frame(3 * cp.CHUNK + 17, seed=4)
    chunked = cp.encode(pos, {"velocity": vel, "id": ids}, cell=cell)
    monkeypatch.setattr(cp, "CHUNK", 1 << 40)
    assert cp.encode(pos, {"velocity": vel, "id": ids}, cell=cell) == chunked


def test_vectors_come_back_as_one_array_equal_to_their_split_columns():
    pos, vel, ids, cell = _frame(4000, seed=5)
    four = np.repeat(vel[:, :1], 4, axis=1)  # a 4-component column stays split
    data = cp.encode(pos, {"velocity": vel, "id": ids, "q": four}, cell=cell)
    got, split = cp.decode(data)
    got_v, joined = cp.decode(data, vectors=True)
    assert np.array_equal(got, got_v)
    assert joined["velocity"].shape == (4000, 3) and joined["velocity"].flags.c_contiguous
    assert np.array_equal(joined["velocity"], np.stack([split[f"velocity_{a}"] for a in "xyz"], axis=1))
    assert np.array_equal(joined["id"], split["id"]) and {"q_x", "q_w"} <= set(joined)


def test_encode_here_on_the_host_is_encode_and_a_host_memory_error_is_not_swallowed(monkeypatch):
    pos, vel, ids, cell = _frame(500, seed=6)
    assert cp.encode_here(pos, {"velocity": vel}, cell=cell) == cp.encode(pos, {"velocity": vel}, cell=cell)

    def no_memory(*args, **kwargs):
        raise MemoryError("injected")

    monkeypatch.setattr(cp, "_quantize", no_memory)
    with pytest.raises(MemoryError, match="injected"):
        cp.encode_here(pos, {"velocity": vel}, cell=cell)


def test_particles_at_infinity_are_refused_like_nan():
    with pytest.raises(VoxFXError, match="not finite"):
        cp.encode(np.array([[0.0, 1.0, 0.0], [np.inf, 0.0, 0.0]], np.float32), None, cell=0.1)


def test_non_finite_positions_are_refused_with_a_clear_error():
    with pytest.raises(VoxFXError, match="not finite"):
        cp.encode(np.array([[0.0, np.nan, 0.0]]), None, cell=0.1)


def test_a_real_liquid_frame_takes_at_most_8_bytes_per_particle():
    """The benches' dam break (a 32³ grid) after a quarter second, on the NumPy path
    (seed 003 Alg. 1): position and velocity together. Tiny frames cost a little more
    (a 20³ grid: 8.0–8.5 bytes, measured); the bench reports 1M and 8M particles."""
    from voxfx.kernels.flip.sim import FlipSimulation
    from bench.sim_scenes import liquid_scene

    spec, settings, (v, t) = liquid_scene(32)
    sim = FlipSimulation(spec, settings, v, t, xp=np)
    for _ in range(6):
        sim.step(1 / 24)
    parts = sim.particles_host()
    n = len(parts["position"])
    assert n > 40000 and np.abs(parts["velocity"]).max() > 0.5  # the water moves
    for codec in CODECS:
        data = cp.encode(parts["position"], {"velocity": parts["velocity"]}, cell=spec.voxel_size, codec=codec)
        assert len(data) / n <= 8.0, (codec, len(data) / n)


@pytest.fixture
def good(tmp_path):
    pos, vel, ids, cell = _frame(2000)
    return cp.write_points(tmp_path / "liquid_0001.vxp", pos, {"velocity": vel, "id": ids}, cell=cell)


def _header(data, **changes):
    fields = list(cp._HEADER.unpack_from(data))
    names = ["magic", "version", "ncol", "n", "ncells", "codec", "pad", "raw", "packed", "crc"]
    for key, value in changes.items():
        fields[names.index(key)] = value
    return cp._HEADER.pack(*fields) + data[cp._HEADER.size:]


@pytest.mark.parametrize("change, says", [
    (lambda d: d[:-9], "promises"),  # truncated
    (lambda d: d[:50], "no VoxFX particle header"),
    (lambda d: d + b"junk", "promises"),
    (lambda d: d[:-20] + bytes(b ^ 0x5A for b in d[-20:]), "damaged|Zstandard|zlib"),  # corrupted payload
    (lambda d: b"VOXFXPTX" + d[8:], "no VoxFX particle header"),
    (lambda d: _header(d, version=7), "version 7"),
    (lambda d: _header(d, n=2_000_000_000), "do not match"),
    (lambda d: _header(d, ncells=3), "do not match"),
    (lambda d: _header(d, ncol=60), "promises"),
    (lambda d: _header(d, codec=9), "unknown codec"),
    (lambda d: _header(d, crc=(zlib.crc32(b"x") & 0xFFFFFFFF)), "checksum"),
])
def test_a_truncated_corrupted_or_lying_frame_is_one_clear_error_naming_it(good, change, says):
    good.write_bytes(change(good.read_bytes()))
    with pytest.raises(VoxFXError, match=says) as e:
        cp.read_points(good)
    assert "liquid_0001.vxp" in str(e.value)


def test_a_decompression_bomb_is_refused_before_inflating():
    """A tiny file claiming a raw block far beyond its packed size (with counts to match)."""
    n = 10_000_000
    raw_size = 12 * 1 + 4 * n
    header = cp._HEADER.pack(cp.MAGIC, cp.VERSION, 0, n, 1, cp.CODEC_ZLIB, 0, raw_size, 100, 0,
                             0.0, 0.0, 0.0, 0.1, 1, 1, 1)
    with pytest.raises(VoxFXError, match="do not match"):
        cp.decode(header + b"\0" * 100, "bomb.vxp")


def test_a_consistent_header_over_an_inconsistent_cell_table_is_refused():
    """Counts that add up to another particle count, rewritten with a valid checksum."""
    pos, vel, ids, cell = _frame(300)
    data = cp.encode(pos, None, cell=cell, codec=cp.CODEC_ZLIB)
    fields = list(cp._HEADER.unpack_from(data))
    ncells = fields[4]
    raw = bytearray(zlib.decompress(data[cp._HEADER.size:]))
    raw[8 * ncells] ^= 0x01  # the low byte plane of the first cell's count
    fields[8], fields[9] = len(zlib.compress(bytes(raw))), zlib.crc32(bytes(raw)) & 0xFFFFFFFF
    forged = cp._HEADER.pack(*fields) + zlib.compress(bytes(raw))
    with pytest.raises(VoxFXError, match="cell table"):
        cp.decode(forged, "forged.vxp")
