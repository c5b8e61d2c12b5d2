"""Cancel inside the GPU kernels (issue 19, issue 23): the batched voxelizer gives the
CPU reference's voxels bit for bit and stops within a batch; the FLIP pressure solve
stops between blocks of iterations (after the block's one host sync, no extra ones),
its cached solver still solves correctly afterwards; a FLIP step stops mid-frame; and a
cancel asked from another thread (what Esc does) ends a long voxelization quickly."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tests.meshes import box, torus, uv_sphere
from tests.unit.test_cancel_kernels import CancelAt, Counters, assert_stops_at, full_run_calls
from tests.unit.test_worker import cancel_latency
from voxfx.kernels.errors import Cancelled
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.voxelize import MODES, voxelize


@pytest.fixture
def small_gpu_batches(monkeypatch):
    from voxfx.kernels.voxelize import gpu

    monkeypatch.setattr(gpu, "BATCH_ITEMS", 499)  # odd: batches split triangles' columns; > 10 batches per pass


@pytest.mark.parametrize("mode,vote", [(m, False) for m in MODES] + [("solid", True), ("solid+surface", True)])
def test_batched_gpu_voxelize_matches_cpu(small_gpu_batches, mode, vote):
    import cupy

    rng = np.random.default_rng()
    v, t = torus(1.0, 0.35, int(rng.integers(24, 60)), int(rng.integers(12, 30)))
    v = (v + rng.uniform(-0.05, 0.05, size=3)).astype(np.float32)
    spec = GridSpec.around(v.min(0), v.max(0), float(rng.uniform(0.02, 0.05)))
    calls = []
    cpu = voxelize(v, t, spec, mode, vote=vote, xp=np).bits
    gpu = voxelize(v, t, spec, mode, vote=vote, xp=cupy, progress=lambda f, m: calls.append(f) or True).bits
    assert np.array_equal(cpu, gpu) and cpu.any()
    assert len(calls) > 10 and calls == sorted(calls)  # many batches, reported in order


@pytest.mark.parametrize("k", [1, 2, 5, 13])
def test_gpu_voxelize_stops_within_a_batch(monkeypatch, small_gpu_batches, k):
    import cupy

    from voxfx.kernels.voxelize import gpu

    v, t = uv_sphere(1.0, 64, 32)
    spec = GridSpec.around(v.min(0), v.max(0), 2.0 / 96)
    counters = Counters()
    real = gpu._K.get

    def counted(name):  # one look-up per launch (grid.launch.Kernels.launch)
        counters[name] = counters.get(name, 0) + 1
        return real(name)

    monkeypatch.setattr(gpu._K, "get", counted)

    def run(cb):
        return voxelize(v, t, spec, "solid+surface", vote=True, xp=cupy, progress=cb)

    assert full_run_calls(run).calls > k + 3
    counters.clear()
    assert_stops_at(run, k, counters)
    cupy.cuda.get_current_stream().synchronize()  # the queued batches finish harmlessly


def test_gpu_voxelize_without_progress_is_one_launch_per_pass(monkeypatch, small_gpu_batches):
    import cupy

    from voxfx.kernels.voxelize import gpu

    names = []
    real = gpu._K.get
    monkeypatch.setattr(gpu._K, "get", lambda name: names.append(name) or real(name))
    v, t = uv_sphere(1.0, 32, 16)
    spec = GridSpec.around(v.min(0), v.max(0), 2.0 / 64)
    voxelize(v, t, spec, "surface", xp=cupy)
    assert names.count("surface_columns") == 1


def test_cancel_from_another_thread_ends_a_long_gpu_voxelization_quickly(monkeypatch):
    import cupy

    from voxfx.addon.worker import Worker
    from voxfx.kernels.voxelize import gpu

    monkeypatch.setattr(gpu, "BATCH_ITEMS", 1 << 16)  # many batches: the cancel lands inside a pass

    v, t = uv_sphere(1.0, 256, 128)
    spec = GridSpec.around(v.min(0), v.max(0), 2.0 / 1024)
    w = Worker(lambda progress: voxelize(v, t, spec, "solid+surface", vote=True, xp=cupy, progress=progress)).start()
    deadline = time.monotonic() + 60
    while w.calls < 2 and not w.done():
        assert time.monotonic() < deadline
        time.sleep(0.001)
    assert cancel_latency(w, 30) < 0.5


# ------------------------------------------------------------------------------ FLIP

def dam_break_gpu(n=32):
    import cupy as cp

    from voxfx.kernels.flip.grid import FLUID, DenseGrid

    g = DenseGrid(GridSpec((0.0, 0.0, 0.0), 1.0 / n, (n, n, n)), cp)
    cell = np.zeros((n, n, n), np.uint8)
    cell[: n // 2, :, : n // 3] = FLUID
    g.cell[...] = cp.asarray(cell)
    rng = np.random.default_rng()
    g.w[...] = cp.asarray(np.float32(-9.81 / 60) + 0.01 * rng.standard_normal(g.w.shape).astype(np.float32))
    return g


@pytest.mark.parametrize("k", [1, 2, 4])
def test_gpu_pressure_solve_stops_between_blocks(k):
    from voxfx.kernels.flip import pressure as P

    P.release_gpu_solvers()
    g = dam_break_gpu()
    opts = dict(tolerance=1e-7, preconditioner="none", check_every=5, max_iterations=2000)
    full = CancelAt(10 ** 9)
    p_ref, stats = P.solve_pressure(g, 1 / 60, progress=full, **opts)
    blocks = -(-stats["iterations"] // 5)
    assert full.calls in (blocks - 1, blocks)  # one report per block, between blocks: no sync added
    assert blocks > k + 2
    solver = next(iter(P._gpu_solvers.values()))
    before = solver.loop.launches
    cb = CancelAt(k)
    with pytest.raises(Cancelled):
        P.solve_pressure(g, 1 / 60, progress=cb, **opts)
    assert cb.calls == k
    if solver.loop.graph is not None:  # block 1, then one block after each report that said go on
        assert solver.loop.launches - before == k
    # the cached solver comes back clean: the same answer as before the cancel
    p_again, again = P.solve_pressure(g, 1 / 60, **opts)
    assert abs(again["iterations"] - stats["iterations"]) <= 1
    ref = p_ref.get()
    np.testing.assert_allclose(p_again.get(), ref, rtol=0, atol=1e-5 * float(np.abs(ref).max()))


@pytest.mark.parametrize("k", [1, 3, 6])
def test_gpu_flip_step_stops_mid_frame(monkeypatch, k):
    import cupy

    from voxfx.kernels.flip import pressure
    from voxfx.kernels.flip.grid import FlipSettings
    from voxfx.kernels.flip.sim import FlipSimulation

    solve = pressure.solve_pressure
    monkeypatch.setattr(pressure, "solve_pressure",
                        lambda *a, **kw: solve(*a, **kw, preconditioner="jacobi", check_every=5))
    h = 0.05
    spec = GridSpec((0.0, 0.0, 0.0), h, (24, 10, 16))
    v, t = box((0.0, 0.0, 0.0), (8 * h, 10 * h, 10 * h))
    sim = FlipSimulation(spec, FlipSettings(pressure_tolerance=1e-6), v, t, xp=cupy)
    sim.step(1 / 30)
    state = sim.checkpoint()
    full = full_run_calls(lambda cb: sim.step(1 / 30, progress=cb))
    assert full.calls > k + 2
    sim.restore(state)
    cb = CancelAt(k)
    with pytest.raises(Cancelled):
        sim.step(1 / 30, progress=cb)
    assert cb.calls == k and sim.frames == 1  # the cancelled frame is not counted
    sim.restore(state)  # a bake resumes from its last complete frame: the step runs whole again
    sim.step(1 / 30)
    sim.check_finite()
