"""The set-up's prefix sums in one launch (sparse_pressure_setup.SCAN "lookback": scan_lookback,
a single pass with decoupled look-back) against np.cumsum and the two-launch scan ("kernel"),
on fresh random rows large enough for thousands of tiles in flight (the look-back over
published aggregates), launched in turn on the state the last launch left; and the same
pressure bit for bit and iterations through a dam break's solves."""

import numpy as np
import pytest

from tests.meshes import box
from tests.pressure_solves import solves as _solves
from voxfx.kernels.flip import sparse_pressure_gpu, sparse_pressure_setup
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec


@pytest.mark.parametrize("rows, n", [(1, 1), (3, 1000), (2, 4096), (3, 2_000_000), (1, 5_000_000), (2, 300_001)])
def test_gpu_lookback_scan_is_the_cumulative_sum(monkeypatch, rows, n):
    import cupy

    rng = np.random.default_rng()
    seed = int(rng.integers(1 << 30))
    rng = np.random.default_rng(seed)
    status, ctrl = sparse_pressure_setup.lookback_state(cupy)
    for launch in range(3):  # each launch on the status words and ctrl the one before left
        a = rng.integers(0, 4, (rows, n)).astype(np.int32)
        if launch == 2:
            a[:, rng.integers(0, n, 3)] = 0
        a_d = cupy.asarray(a if rows > 1 else a[0])
        epoch = int(ctrl.get()[0])
        monkeypatch.setattr(sparse_pressure_setup, "SCAN", "lookback")
        got = cupy.asnumpy(sparse_pressure_setup.inclusive_scan(a_d)).reshape(rows, n)
        assert list(ctrl.get()) == [epoch + 1, 0, 0], f"seed {seed}"  # one scan_lookback launch, ctrl readied
        monkeypatch.setattr(sparse_pressure_setup, "SCAN", "kernel")
        two = cupy.asnumpy(sparse_pressure_setup.inclusive_scan(a_d)).reshape(rows, n)
        assert np.array_equal(got, np.cumsum(a, axis=1)), f"seed {seed}, launch {launch}"
        assert np.array_equal(got, two)
    assert int(status.get().astype(np.int64).max()) > 0


def test_gpu_lookback_scan_gives_the_dam_breaks_pressure_bit_for_bit(monkeypatch):
    """A dam break (warm start and table reuse on, the defaults), three frames with each scan:
    every solve's pressure and stats the same, the look-back scan launched."""
    import cupy

    spec = GridSpec((0.0, 0.0, 0.0), 1 / 32, (32, 24, 24))
    v, t = box((0.0, 0.0, 0.0), (0.35, 0.55, 0.7))
    runs = {}
    for scan in ("kernel", "lookback"):
        monkeypatch.setattr(sparse_pressure_setup, "SCAN", scan)
        sparse_pressure_gpu.release_gpu_solvers()
        epoch = int(sparse_pressure_setup.lookback_state(cupy)[1].get()[0])
        runs[scan] = _solves(FlipSimulation(spec, FlipSettings(seed=5), v, t, xp=cupy, sparse=True), 3)
        launched = int(sparse_pressure_setup.lookback_state(cupy)[1].get()[0]) - epoch
        assert (launched > len(runs[scan])) if scan == "lookback" else launched == 0
    sparse_pressure_gpu.release_gpu_solvers()
    assert len(runs["kernel"]) == len(runs["lookback"]) > 0
    for (p_a, s_a), (p_b, s_b) in zip(runs["kernel"], runs["lookback"]):
        assert s_a == s_b and p_a.dtype == p_b.dtype and np.array_equal(p_a.view(np.uint32), p_b.view(np.uint32))
    assert max(s["iterations"] for _, s in runs["lookback"]) >= 3


@pytest.mark.parametrize("width", sparse_pressure_setup.SCAN_TILE_WIDTHS)
@pytest.mark.parametrize("rows, n", [(3, 1_884_160), (1, 5_000_000), (2, 300_001), (3, 9_000)])
def test_gpu_lookback_scan_at_each_tile_width_is_the_cumulative_sum(monkeypatch, width, rows, n):
    """scan_lookback over tiles of each floor (``VOXFX_SPARSE_SCAN_TILE``: 2,048, 4,096, 8,192
    items; 3 × 1,884,160 the 8M row's level 0) on the device's real blocks: np.cumsum and the
    two-launch scan, three launches in turn on the state each leaves."""
    import cupy

    seed = int(np.random.default_rng().integers(1 << 30))
    rng = np.random.default_rng(seed)
    monkeypatch.setenv("VOXFX_SPARSE_SCAN_TILE", width)
    monkeypatch.setenv("VOXFX_SPARSE_SCAN_WAY", "0")  # the floor is scan_lookback's ("1": 4,096-item tiles)
    ctrl = sparse_pressure_setup.lookback_state(cupy)[1]
    for launch in range(3):
        a = rng.integers(0, 2 + launch, (rows, n)).astype(np.int32)
        a_d = cupy.asarray(a)
        epoch = int(ctrl.get()[0])
        monkeypatch.setattr(sparse_pressure_setup, "SCAN", "lookback")
        got = cupy.asnumpy(sparse_pressure_setup.inclusive_scan(a_d))
        assert list(ctrl.get()) == [epoch + 1, 0, 0], f"seed {seed}"
        monkeypatch.setattr(sparse_pressure_setup, "SCAN", "kernel")
        two = cupy.asnumpy(sparse_pressure_setup.inclusive_scan(a_d))
        assert np.array_equal(got, np.cumsum(a, axis=1)) and np.array_equal(got, two), f"seed {seed}, {launch}"


def test_gpu_lookback_scan_widths_give_the_dam_breaks_pressure_bit_for_bit(monkeypatch):
    """The dam break of the test above, three frames at each tile floor: the same pressure and stats."""
    import cupy

    spec = GridSpec((0.0, 0.0, 0.0), 1 / 32, (32, 24, 24))
    v, t = box((0.0, 0.0, 0.0), (0.35, 0.55, 0.7))

    monkeypatch.setattr(sparse_pressure_setup, "SCAN", "lookback")
    monkeypatch.setenv("VOXFX_SPARSE_SCAN_WAY", "0")  # the floor is scan_lookback's
    runs = {}
    for width in sparse_pressure_setup.SCAN_TILE_WIDTHS:
        monkeypatch.setenv("VOXFX_SPARSE_SCAN_TILE", width)
        sparse_pressure_gpu.release_gpu_solvers()
        runs[width] = _solves(FlipSimulation(spec, FlipSettings(seed=5), v, t, xp=cupy, sparse=True), 3)
    sparse_pressure_gpu.release_gpu_solvers()
    first = runs[sparse_pressure_setup.SCAN_TILE_WIDTHS[0]]
    assert len(first) > 0
    for width, run in runs.items():
        assert len(run) == len(first), width
        for (p_a, s_a), (p_b, s_b) in zip(first, run):
            assert s_a == s_b and np.array_equal(p_a.view(np.uint32), p_b.view(np.uint32)), width
