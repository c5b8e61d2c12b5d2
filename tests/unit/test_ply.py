"""PLY point files read back are untrusted: a header that lies about its point count or
layout is one clear error, never a crash or a huge allocation."""

import numpy as np
import pytest

from voxfx.addon.ply import read_points, write_points
from voxfx.kernels.errors import VoxFXError


@pytest.fixture
def good(tmp_path):
    rng = np.random.default_rng(0)
    pos = rng.random((100, 3)).astype(np.float32)
    vel = rng.random((100, 3)).astype(np.float32)
    return write_points(tmp_path / "p_0001.ply", pos, {"velocity": vel, "id": np.arange(100, dtype=np.int32)}), pos, vel


def test_round_trip(good):
    path, pos, vel = good
    got, cols = read_points(path)
    assert np.array_equal(got, pos) and np.array_equal(cols["velocity_y"], vel[:, 1])
    assert np.array_equal(cols["id"], np.arange(100))


@pytest.mark.parametrize("change, says", [
    (lambda d: d.replace(b"element vertex 100", b"element vertex 2000000000"), "promises 2,000,000,000 points"),
    (lambda d: d.replace(b"element vertex 100", b"element vertex -5"), "promises -5 points"),
    (lambda d: d[:-7], "is damaged"),
    (lambda d: d + b"extra", "is damaged"),
    (lambda d: d.replace(b"binary_little_endian", b"ascii"), "did not write"),
    (lambda d: d.replace(b"property float x", b"property double x"), "did not write"),
    (lambda d: d.replace(b"ply\n", b"PK\x03\x04", 1), "not a VoxFX point file"),
    (lambda d: d.replace(b"end_header\n", b"end_headr\n"), "not a VoxFX point file"),
    (lambda d: b"ply\n" + b"comment " + b"x" * 9000 + b"\n" + d[4:], "not a VoxFX point file"),
])
def test_a_lying_or_damaged_file_is_one_clear_error(good, change, says):
    path = good[0]
    path.write_bytes(change(path.read_bytes()))
    with pytest.raises(VoxFXError, match=says):
        read_points(path)
