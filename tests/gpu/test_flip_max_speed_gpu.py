"""``transfer.max_speed`` on the device both ways (``VOXFX_MAX_SPEED``: a block's maximum first,
one atomic a block, or one atomic a warp): the same float32 bits as each other and as the
NumPy reference, at sizes around the blocks' tiles (8 particles a thread), with the fastest
particle anywhere, and with a NaN velocity (kept: the margin then reports it)."""

import numpy as np
import pytest

from voxfx.kernels.flip import transfer as ft

cp = pytest.importorskip("cupy")

TILE = ft.SPEED_ITEMS * ft.KERNELS.threads


def bits(x) -> int:
    return int(np.asarray(x.get() if hasattr(x, "get") else x, np.float32).view(np.uint32))


@pytest.mark.parametrize("n", [1, 31, 33, TILE - 1, TILE, TILE + 1, 3 * TILE + 17, 1_000_003])
def test_both_ways_give_numpys_bits(monkeypatch, n):
    rs = np.random.default_rng(int(np.random.default_rng().integers(1 << 30)))
    vel = rs.normal(scale=rs.uniform(0.1, 50.0), size=(n, 3)).astype(np.float32)
    vel[int(rs.integers(n))] *= np.float32(3.0)  # the fastest particle anywhere, often in the last block
    want = bits(ft.max_speed(vel))
    got = {}
    for mode in ft.SPEED_MAXIMA:
        monkeypatch.setenv("VOXFX_MAX_SPEED", mode)
        got[mode] = bits(ft.max_speed(cp.asarray(vel)))
    assert got == {mode: want for mode in ft.SPEED_MAXIMA}


def test_a_nan_velocity_is_kept_both_ways(monkeypatch):
    vel = np.ones((5 * TILE + 3, 3), np.float32)
    vel[4 * TILE + 1, 1] = np.nan
    for mode in ft.SPEED_MAXIMA:
        monkeypatch.setenv("VOXFX_MAX_SPEED", mode)
        assert np.isnan(float(ft.max_speed(cp.asarray(vel)))), mode


def test_no_particles_and_an_unknown_way(monkeypatch):
    monkeypatch.setenv("VOXFX_MAX_SPEED", "blocks")
    assert float(ft.max_speed(cp.zeros((0, 3), cp.float32))) == 0.0
    monkeypatch.setenv("VOXFX_MAX_SPEED", "threads")
    with pytest.raises(ValueError, match="VOXFX_MAX_SPEED"):
        ft.max_speed(cp.ones((4, 3), cp.float32))
