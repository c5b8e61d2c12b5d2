"""The warm start relaxed where the liquid changed on the device (``VOXFX_PRESSURE_WARM_RELAX``;
sparse_pressure_cells.warm_relax: warm_relax_mark, warm_relax_grow, warm_relax_sweep) against the
NumPy array code of ``sparse_pressure_warm.relax_guess``: bit for bit on random pools and on every
relaxed guess of a dam break on CuPy (the solve ahead's included), and the dam break's fewer
iterations. The host harness: tests/unit/test_cuda_sparse_pressure_relax_host.py."""

import numpy as np
import pytest

from tests.pressure_solves import iterations_of
from tests.unit.test_cuda_sparse_pressure_relax_host import Pool
from tests.unit.test_flip_sparse_pressure_warm_relax import dam_break
from voxfx.kernels import backend
from voxfx.kernels.flip import sparse_pressure, sparse_pressure_warm
from voxfx.kernels.flip.grid import FLUID, SOLID

RELAX = sparse_pressure_warm.RELAX


def bits(a):
    return np.asarray(backend.to_numpy(a), np.float32).view(np.uint32)


class DevicePool(Pool):
    def __init__(self, carried, nbr):
        import cupy

        super().__init__(cupy.asarray(carried), cupy.asarray(nbr))
        self.xp = cupy


@pytest.mark.parametrize("around", ["kernels", "arrays"])
@pytest.mark.parametrize("seed,setting", [(0, "2,1"), (1, "1,0"), (2, "8,3")])
def test_gpu_relaxed_guess_equals_the_cpus_on_random_pools(monkeypatch, around, seed, setting):
    import cupy

    monkeypatch.setenv(RELAX, setting)
    monkeypatch.setenv("VOXFX_SPARSE_PRESSURE_AROUND", around)
    rng = np.random.default_rng(seed)
    n = 20000
    kind = rng.choice([0, FLUID, SOLID], n, p=[0.2, 0.65, 0.15]).astype(np.uint8)
    nbr = rng.integers(-1, n, (6, n)).astype(np.int32)
    carried = rng.normal(0, 3, n).astype(np.float32)
    carried[rng.random(n) < 0.25] = np.nan
    b = np.where(kind == FLUID, rng.normal(0, 1, n), 0).astype(np.float32)
    x0 = np.where(np.isfinite(carried), carried, np.float32(0)).astype(np.float32)
    want = sparse_pressure_warm.relax_guess(Pool(carried, nbr), kind, b, x0)
    got = sparse_pressure_warm.relax_guess(DevicePool(carried, nbr), cupy.asarray(kind), cupy.asarray(b),
                                           cupy.asarray(x0))
    assert not np.array_equal(bits(want), bits(x0))
    assert np.array_equal(bits(got), bits(want))


def test_gpu_dam_break_relaxed_guesses_equal_the_cpus_and_take_fewer_iterations(monkeypatch):
    """Every relaxed x₀ of a CuPy dam break (in the solve or the solve ahead) equals the array code
    on NumPy from the same carried pressure, cell types and b; relaxed, frames 3–13 take fewer
    iterations than today's (the CPU test's scene, with the red-black level-0 sweeps it was
    measured with: pinned as there)."""
    import cupy

    monkeypatch.setenv("VOXFX_SPARSE_MG_SMOOTHER", "rb")
    monkeypatch.delenv(RELAX, raising=False)
    its_off = iterations_of(dam_break(32, cupy), 14, fps=72)
    monkeypatch.setenv(RELAX, "2,1")
    relax = sparse_pressure_warm.relax_guess
    checked = []

    def spy(grid, kind, b, x0):
        out = relax(grid, kind, b, x0)
        if x0 is not None:
            host_grid = Pool(backend.to_numpy(grid[sparse_pressure.CARRIED]), backend.to_numpy(grid.nbr))
            want = relax(host_grid, backend.to_numpy(kind), backend.to_numpy(b), backend.to_numpy(x0))
            checked.append(np.array_equal(bits(out), bits(want)))
        return out

    monkeypatch.setattr(sparse_pressure, "relax_guess", spy)
    monkeypatch.setattr(sparse_pressure_warm, "relax_guess", spy)
    its_on = iterations_of(dam_break(32, cupy), 14, fps=72)
    assert len(checked) >= 13 and all(checked), checked
    assert sum(its_on[3:]) <= sum(its_off[3:]) - 4, (its_off, its_on)

