"""The sums re-zeroed by the division (``VOXFX_SPARSE_SCATTER_REZERO=1``, flip_sparse_scatter.cu's
SCATTER_REZERO, ``sparse_scatter.KeptSums``; helper h21n) on the device: P2G after P2G on one grid
(the velocities scaled each time, so stale sums would show) gives "0"'s masks, faces and cell types bit
for bit with every P2G tail (live's idle bricks, tail, apart, and fused, whose ring division leaves the
sums dirty), the kept sums zero after every re-zeroing division; a scatter never divided (an exception
between the two) is zeroed by the next P2G; whole sparse runs (the pool growing) are the same particle
bits either way. The host harness: tests/unit/test_cuda_sparse_scatter_rezero_host.py."""

import numpy as np
import pytest

from tests.gpu.sparse_runs import assert_runs_agree
from tests.gpu.test_flip_sparse_gpu import host
from tests.unit.test_cuda_sparse_idle_bricks_host import idle_scene
from voxfx.kernels.flip import sparse_gpu, sparse_scatter, sparse_transfer


def bits(a):
    return host(a).view(np.uint32) if host(a).dtype == np.float32 else host(a)


def p2g(grid, dev, scale):
    """One P2G (the ring asked, as the stage runs it) with the velocities (and C) times *scale*; its masks,
    faces and the division's cell types as bytes."""
    pos, vel, c = dev
    raw = sparse_transfer.particles_to_grid(grid, pos, vel * scale, None if c is None else c * scale, ring=True)
    cells = grid.p2g_cells[-2] if getattr(grid, "p2g_cells", None) is not None else None
    out = [host(m) for m in raw] + [bits(f) for f in grid.faces()]
    return out + ([host(cells)] if cells is not None else [])


@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
@pytest.mark.parametrize("tail", sparse_transfer.P2G_TAILS)
def test_gpu_rezeroed_sums_give_the_default_bits_p2g_after_p2g(monkeypatch, closed, apic, tail):
    import cupy

    seed = int(np.random.default_rng().integers(1 << 30))
    monkeypatch.setenv("VOXFX_SPARSE_P2G_TAIL", tail)
    out = {}
    for way in ("0", "1"):
        monkeypatch.setenv("VOXFX_SPARSE_SCATTER_REZERO", way)
        grid, pos, vel, c, _, _ = idle_scene(closed, apic, seed, cupy)
        dev = [cupy.asarray(a) if a is not None else None for a in (pos, vel, c)]
        runs = []
        for k, scale in enumerate((1.0, 3.0, 0.5, 2.0)):
            runs.append(p2g(grid, dev, np.float32(scale)))
            kept = getattr(grid, "_p2g_sums", None)
            assert (kept is not None) == (way == "1")
            if kept is not None:
                assert kept.acc.size == 6 * grid.size
                assert kept.clean == (tail != "fused")  # the ring's division reads neighbours: left dirty
                if kept.clean:
                    assert not bool(kept.acc.any())
            if tail == "live" and k == 0:
                used = host(grid.brick_slot).astype(bool)
                assert int((used & (host(grid._p2g_live[1]) == 0)).sum()) >= 4  # idle bricks
            sparse_gpu.p2g_live(grid)  # the tail's flags read once (as the stage does)
            sparse_gpu.p2g_ring_done(grid)
        out[way] = runs
    for got, want in zip(out["1"], out["0"]):
        assert len(got) == len(want)
        for a, b in zip(got, want):
            assert np.array_equal(a, b)
    assert sum(int(m.sum()) for m in out["0"][1][:3]) > 1000


@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_gpu_a_scatter_never_divided_is_zeroed_by_the_next_p2g(monkeypatch, apic):
    import cupy

    seed = int(np.random.default_rng().integers(1 << 30))
    grid, pos, vel, c, _, _ = idle_scene(True, apic, seed, cupy)
    dev = [cupy.asarray(a) if a is not None else None for a in (pos, vel, c)]
    want = p2g(grid, dev, np.float32(1.0))  # "0"
    monkeypatch.setenv("VOXFX_SPARSE_SCATTER_REZERO", "1")
    p2g(grid, dev, np.float32(2.0))
    kept = grid._p2g_sums
    real = sparse_scatter.launch_finish

    def fail(*args, **kwargs):
        raise RuntimeError("injected: the division never launched")

    monkeypatch.setattr(sparse_scatter, "launch_finish", fail)
    with pytest.raises(RuntimeError, match="injected"):
        p2g(grid, dev, np.float32(3.0))
    monkeypatch.setattr(sparse_scatter, "launch_finish", real)
    assert not kept.clean and bool(kept.acc.any())  # the scatter's sums left
    got = p2g(grid, dev, np.float32(1.0))
    assert grid._p2g_sums is kept and kept.clean and not bool(kept.acc.any())
    for a, b in zip(got, want):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("centred", [False, True], ids=["midpoint", "centred"])
@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_gpu_sparse_runs_are_the_same_bits_with_rezeroed_sums(monkeypatch, apic, centred):
    assert_runs_agree(monkeypatch, apic, "VOXFX_SPARSE_SCATTER_REZERO", sparse_scatter.REZERO_MODES,
                      time_centred_advection=centred)


@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_gpu_sparse_runs_are_the_same_bits_with_either_table_code(monkeypatch, apic):
    """VOXFX_SPARSE_G2P_TABLE_CODE (helper h21n): the time-centred entries with h21g's per-axis code give the
    default's particle bits (table corners, time-centred advection)."""
    from voxfx.kernels.flip import sparse_g2p_gpu

    monkeypatch.setenv("VOXFX_SPARSE_G2P_CORNERS", "table")
    assert_runs_agree(monkeypatch, apic, "VOXFX_SPARSE_G2P_TABLE_CODE", sparse_g2p_gpu.G2P_TABLE_CODES,
                      time_centred_advection=True)
