"""Level 0 smoothed brick by brick on the device (VOXFX_SPARSE_MG_SMOOTHER "brick";
sparse_multigrid_bricks, cuda/flip_sparse_pressure_brick_smooth.cu; issue 24, h19a): the solver's
z of one V-cycle (fused and split) against the NumPy brick reference's, the pressure against the
CPU's, and a dam break's solves converging beside the red-black sweeps'; the span loads' tables
(h20a) against NumPy's. The host proof of the kernels: tests/unit/test_cuda_sparse_brick_smooth_host.py,
tests/unit/test_cuda_sparse_brick_span_host.py."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_pressure_gpu import random_scene, tank
from tests.meshes import box
from tests.pressure_solves import solves
from voxfx.kernels import backend
from voxfx.kernels.flip import (sparse_multigrid_bricks, sparse_pressure, sparse_pressure_brick_smooth,
                                sparse_pressure_gpu, sparse_pressure_vcycle)
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.sparse_multigrid import VCycle
from voxfx.kernels.grid import GridSpec

pytestmark = pytest.mark.usefixtures("fresh_sparse_solvers")


@pytest.fixture(scope="module")
def scene():
    """Five levels."""
    return random_scene(np.random.default_rng(7), (64, 48, 56), 400000)


def _way(monkeypatch, way, vcycle="fused"):
    monkeypatch.setattr(sparse_multigrid_bricks, "SMOOTHER", way)
    monkeypatch.setattr(sparse_pressure_gpu, "VCYCLE", vcycle)
    sparse_pressure_gpu.release_gpu_solvers()


def _z_of_solver(solver, r):
    """The solver's z = V-cycle(r) by its own launches, outside its graph, on the tables its last
    solve loaded (the stopped flag cleared)."""
    import cupy

    solver.state[:3] = 0
    solver.r.fill(0)
    solver.r[:r.shape[0]] = cupy.asarray(r)
    solver.z.fill(0)
    solver._precondition_and_dot()
    cupy.cuda.runtime.deviceSynchronize()
    return cupy.asnumpy(solver.z[:r.shape[0]])


@pytest.mark.parametrize("vcycle", ["fused", "split"])
def test_gpu_brick_vcycle_is_the_numpy_references_and_its_pressure_the_cpus(monkeypatch, scene, vcycle):
    import cupy

    monkeypatch.setenv("VOXFX_PRESSURE_WARM", "0")
    monkeypatch.setattr(sparse_pressure_vcycle, "HOLD_BRICK_LEVEL", True)
    spec, pos, vel, obstacle = scene
    g_np = tank(np, pos, vel, spec, obstacle)
    _, kind, *_ = sparse_pressure.pressure_rhs(g_np, 0.01, None)
    level = sparse_pressure.Unknowns(g_np, kind)
    r = np.append(np.random.default_rng(3).normal(0, 1, level.m), 0).astype(np.float32)
    z, p, stats = {}, {}, {}
    for way in ("rb", "brick"):
        _way(monkeypatch, way, vcycle)
        g = tank(cupy, pos, vel, spec, obstacle)
        p_gpu, stats[way] = sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5)
        p[way] = backend.to_numpy(p_gpu)
        (solver,) = sparse_pressure_gpu._solvers.values()
        assert solver.brick_smooth == (way == "brick") and solver.generation is not None
        assert len(solver.strides) >= 4 and int(solver.sizes[1].get()) == level.m
        z[way] = (_z_of_solver(solver, r), VCycle(g_np, kind, level)(r))
        assert stats[way]["converged"]
    for way in ("rb", "brick"):  # the device's z is the NumPy reference's, every bit
        got, want = z[way]
        assert np.array_equal(got[:level.m].view(np.int32), want[:level.m].view(np.int32)), \
            (way, float(np.abs(got - want).max()), int(np.count_nonzero(got != want)))
    assert not np.array_equal(z["rb"][1], z["brick"][1])
    assert stats["brick"]["iterations"] <= stats["rb"]["iterations"] + 2
    assert np.abs(p["brick"] - p["rb"]).max() <= 1e-3 * np.abs(p["rb"]).max()
    monkeypatch.setattr(sparse_multigrid_bricks, "SMOOTHER", "brick")
    p_cpu, s_cpu = sparse_pressure.solve_pressure(tank(np, pos, vel, spec, obstacle), 0.01, tolerance=1e-5)
    assert abs(s_cpu["iterations"] - stats["brick"]["iterations"]) <= 1
    assert np.abs(p["brick"] - p_cpu).max() <= 1e-3 * np.abs(p_cpu).max()


def test_gpu_solver_memory_counts_the_brick_smoothers_buffers(monkeypatch, scene):
    """What a brick solver holds beyond a red-black one's — brick_x, its r·z partials, the span
    table grown to the pool's slots — is ``brick_smooth_bytes`` of its level-0 stride and the slots
    (``solver_memory_bytes``' *brick_smooth*, h20d), a bound within 1 KiB; a red-black solver holds none."""
    import cupy

    from voxfx.kernels.flip.sparse_pressure_buffers import brick_smooth_bytes, solver_memory_bytes

    monkeypatch.setenv("VOXFX_PRESSURE_WARM", "0")
    monkeypatch.setattr(sparse_pressure_vcycle, "HOLD_BRICK_LEVEL", True)
    spec, pos, vel, obstacle = scene
    for way in ("rb", "brick"):
        _way(monkeypatch, way)
        _, stats = sparse_pressure.solve_pressure(tank(cupy, pos, vel, spec, obstacle), 0.01, tolerance=1e-5)
        (solver,) = sparse_pressure_gpu._solvers.values()
        assert stats["converged"] and solver.brick_smooth == (way == "brick")
        if way == "rb":
            assert solver.brick_x is None and solver.brick_span is None
            continue
        slots = int(solver._brick_level.candidates) // 64
        held = solver.brick_x.nbytes + solver.brick_rz.nbytes + solver.brick_span.nbytes
        counted = brick_smooth_bytes(solver.strides[0], slots)
        assert held <= counted <= held + 1024, (held, counted)
        base = solver_memory_bytes(solver.strides, "mg", solver.level0_nbr)
        assert solver_memory_bytes(solver.strides, "mg", solver.level0_nbr, brick_smooth=True, slots=slots) - \
            base == counted


@pytest.mark.parametrize("warm", ["0", "1"])
def test_gpu_brick_smoother_dam_break_converges(monkeypatch, warm):
    """A dam break's solves to 1e-4 with the brick smoother: converged, at most two iterations more
    than the red-black sweeps' a solve, the pressure within the tolerance of theirs."""
    import cupy

    monkeypatch.setenv("VOXFX_PRESSURE_WARM", warm)
    spec = GridSpec((0.0, 0.0, 0.0), 1 / 48, (48, 32, 40))
    v, t = box((0.0, 0.0, 0.0), (0.4, 0.6, 0.8))
    runs = {}
    for way in ("rb", "brick"):
        _way(monkeypatch, way)
        sim = FlipSimulation(spec, FlipSettings(seed=5, warm_start_pressure=warm == "1", pressure_tolerance=1e-4),
                             v, t, xp=cupy, sparse=True)
        runs[way] = solves(sim, 2)
        assert any(s.brick_smooth == (way == "brick") for s in sparse_pressure_gpu._solvers.values())
    old, new = runs["rb"], runs["brick"]
    assert len(old) == len(new) > 0 and max(s["iterations"] for _, s in old) >= 3
    for (p_old, s_old), (p_new, s_new) in zip(old, new):
        assert s_new["converged"] and s_new["iterations"] <= s_old["iterations"] + 2
        assert np.abs(p_new - p_old).max() <= 1e-2 * max(np.abs(p_old).max(), 1e-6)  # trajectories part slightly
    print("iterations rb", [s["iterations"] for _, s in old], "brick", [s["iterations"] for _, s in new])


def test_gpu_brick_kernels_shapes_give_the_same_z_and_a_fixed_rz(monkeypatch, scene):
    """Every block shape (SMOOTH_THREADS) on a block-a-brick grid and on the reduction grid
    (SMOOTH_GRID): the solver's z of one V-cycle the NumPy brick reference's bit for bit; r·z in
    the first of the reduction grid's partials (the others 0), within 1e-9 of Σ r·z, the same bits
    on a second run (the last block sums the blocks' partials in block order)."""
    import cupy

    monkeypatch.setenv("VOXFX_PRESSURE_WARM", "0")
    monkeypatch.setattr(sparse_pressure_vcycle, "HOLD_BRICK_LEVEL", True)
    spec, pos, vel, obstacle = scene
    g_np = tank(np, pos, vel, spec, obstacle)
    _, kind, *_ = sparse_pressure.pressure_rhs(g_np, 0.01, None)
    level = sparse_pressure.Unknowns(g_np, kind)
    r = np.append(np.random.default_rng(4).normal(0, 1, level.m), 0).astype(np.float32)
    monkeypatch.setattr(sparse_multigrid_bricks, "SMOOTHER", "brick")  # read when the reference is built
    want = VCycle(g_np, kind, level)(r)
    shapes = [(t, "slots") for t in sparse_pressure_brick_smooth.SMOOTH_THREAD_WAYS] + [("512", "reduce"),
                                                                                         ("128", "reduce"),
                                                                                         ("span", "reduce")]
    for threads, grid in shapes:
        monkeypatch.setattr(sparse_pressure_brick_smooth, "SMOOTH_THREADS", threads)
        monkeypatch.setattr(sparse_pressure_brick_smooth, "SMOOTH_GRID", grid)
        _way(monkeypatch, "brick")
        _, stats = sparse_pressure.solve_pressure(tank(cupy, pos, vel, spec, obstacle), 0.01, tolerance=1e-5)
        (solver,) = sparse_pressure_gpu._solvers.values()
        assert solver.brick_smooth and stats["converged"]
        assert solver.smooth_threads == (128 if threads.startswith("span") else int(threads[:3].rstrip("x")))
        if threads.startswith("span"):  # the device's span table the NumPy one's (sparse_multigrid_bricks.span_table)
            lvl = solver._brick_level
            slots = int(lvl.candidates) // 64
            nbr27 = cupy.asnumpy(lvl._prolong_args[1]).reshape(-1, 27)[:slots]
            want_table = sparse_multigrid_bricks.span_table(cupy.asnumpy(lvl.position)[:slots * 512],
                                                            nbr27[:, 13] >= 0, level.m_red, level.m)
            got_table = cupy.asnumpy(solver.brick_span[:slots * sparse_multigrid_bricks.SPAN_WORDS])
            assert np.array_equal(got_table.reshape(slots, -1), want_table)
            if threads == "spanh":  # and its halo table
                want_halo = sparse_multigrid_bricks.span_halo(cupy.asnumpy(lvl.position)[:slots * 512], nbr27, level.m)
                got_halo = cupy.asnumpy(solver.brick_span_halo[:slots * sparse_multigrid_bricks.SPAN_HALO])
                assert np.array_equal(got_halo.reshape(slots, -1), want_halo)
        runs = []
        for _ in range(2):
            z = _z_of_solver(solver, r)
            runs.append((z, cupy.asnumpy(solver.partials[solver.red_blocks:])))
        (z, rz), (z2, rz2) = runs
        assert np.array_equal(z[:level.m].view(np.int32), want[:level.m].view(np.int32)), (threads, grid)
        assert np.array_equal(z2.view(np.int32), z.view(np.int32)) and np.array_equal(rz2.view(np.int64),
                                                                                    rz.view(np.int64))
        assert np.all(rz[1:] == 0), (threads, grid)
        exact = float(np.dot(r[:level.m].astype(np.float64), z[:level.m].astype(np.float64)))
        assert rz[0] == pytest.approx(exact, rel=1e-9), (threads, grid)
