"""The sparse pressure solve on the device (sparse_pressure_gpu.py, cuda/flip_sparse_pressure.cu)
against the NumPy reference on fresh random tanks: the index tables and labels are the same
integers, the pressure agrees to float32 rounding with the same iteration counts (±1: the
dot products add in another order), and the solver keeps its buffers and CUDA graph from
one solve to the next while the unknowns change."""

import numpy as np
import pytest

from voxfx.kernels import backend
from voxfx.kernels.flip import (sparse_multigrid_bricks, sparse_pressure, sparse_pressure_gpu, sparse_pressure_setup,
                                sparse_transfer)
from voxfx.kernels.flip.grid import FLUID, SOLID
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid
from voxfx.kernels.flip.sparse_multigrid import VCycle
from voxfx.kernels.grid import GridSpec


def host(a):
    return backend.to_numpy(a)


def tank(xp, pos, vel, spec, obstacle=None):
    """A closed sparse grid with the particles' velocities on it, ready for the solve."""
    g = SparseFlipGrid(spec, xp, closed=True)
    p_, v_ = xp.asarray(pos), xp.asarray(vel)
    g.update(p_, 3, obstacle=obstacle)
    sparse_transfer.particles_to_grid(g, p_, v_)
    sparse_transfer.classify(g, p_)
    sparse_transfer.extrapolate(g)
    sparse_transfer.enforce_boundaries(g)
    return g


def random_scene(rng, shape=(40, 28, 32), n=60000):
    """A block of water in a corner, a second one in the air, a plate under the first."""
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, shape)
    up = np.asarray(spec.upper)
    pos = np.concatenate([rng.uniform(0.0, 0.6, (n, 3)) * up, rng.uniform(0.7, 0.95, (n // 4, 3)) * up])
    vel = rng.normal(0, 1, pos.shape)
    obstacle = np.array([(i, j, 3) for i in range(4, 9) for j in range(3, 8)])
    return spec, pos.astype(np.float32), vel.astype(np.float32), obstacle


@pytest.mark.parametrize("preconditioner", ["mg", "jacobi", "none"])
def test_gpu_sparse_pressure_matches_cpu_for_every_preconditioner(preconditioner):
    import cupy

    rng = np.random.default_rng()
    spec, pos, vel, obstacle = random_scene(rng)
    out = []
    for xp in (np, cupy):
        g = tank(xp, pos, vel, spec, obstacle)
        p, stats = sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5, preconditioner=preconditioner,
                                                  max_iterations=3000)
        sparse_pressure.project(g, p, 0.01)
        out.append((host(p), stats, host(sparse_pressure.divergence(g))))
    (pc, sc, _), (pg, sg, dg) = out
    assert sc["converged"] and sg["converged"] and sg["residual"] <= 1e-5
    slack = 1 if preconditioner == "mg" else 2 + sc["iterations"] // 50  # long CG runs drift a little
    assert abs(sg["iterations"] - sc["iterations"]) <= slack
    assert np.abs(pg - pc).max() <= 1e-3 * np.abs(pc).max()
    assert np.abs(dg).max() * spec.voxel_size <= 1e-3 * max(1.0, float(np.abs(vel).max()))


@pytest.mark.parametrize("setup", ["host", "device", "device:0", "device:4000", "device:1000000000", "device:cupy",
                                   "device:kernel", "device:thread"])
@pytest.mark.usefixtures("mg_dense_sweeps")
def test_gpu_multigrid_tables_and_unknowns_are_the_cpus(monkeypatch, setup):
    """Unknowns and TableKernels ("host"), sparse_pressure_setup ("device": level 0's
    unknowns by one classification kernel and a scan, the coarser levels' sizes on the
    device; the coarse levels in mgs_tail_levels' one block from the first whose finer
    level's bound is at most TAIL_BOUND: the default, ":0" none, ":4000" from a coarser
    level, ":1000000000" every level; ":cupy" the scans by cupy.cumsum, ":kernel" by two
    launches, not the default look-back; ":thread" level 0's classification by unk_classify,
    VOXFX_SPARSE_SETUP_WIDEN "thread", not the default unk_classify_block)."""
    import cupy

    setup, _, option = setup.partition(":")
    monkeypatch.setattr(sparse_pressure_setup, "SETUP", setup)
    if option == "thread":
        monkeypatch.setenv("VOXFX_SPARSE_SETUP_WIDEN", "thread")
    elif option in ("cupy", "kernel"):
        monkeypatch.setattr(sparse_pressure_setup, "SCAN", option)
    elif option:
        monkeypatch.setattr(sparse_pressure_setup, "TAIL_BOUND", int(option))
    rng = np.random.default_rng()
    spec, pos, vel, obstacle = random_scene(rng)
    built = []
    for xp in (np, cupy):
        g = tank(xp, pos, vel, spec, obstacle)
        kind, _, _ = sparse_pressure.solver_cells(g)
        level = sparse_pressure.compact_unknowns(g, kind)
        built.append((level, VCycle(g, kind, level)))
    (lc, mc), (lg, mg) = built
    assert lg.m == lc.m and lg.m_red == lc.m_red
    assert np.array_equal(host(lg.cells), lc.cells) and np.array_equal(host(lg.nbr), lc.nbr)
    assert np.array_equal(host(lg.position), lc.position) and np.array_equal(host(lg.diag), lc.diag)
    assert all(np.array_equal(host(a), b) for a, b in zip(lg.lattice, lc.lattice))
    assert len(mg.levels) == len(mc.levels) >= 4
    for a, b in zip(mg.levels[1:], mc.levels[1:]):
        assert (a.m, a.m_red) == (b.m, b.m_red)
        assert np.array_equal(host(a.nbr), b.nbr) and np.array_equal(host(a.diag), b.diag)
    for a, b in zip(mg.up + mg.down, mc.up + mc.down):
        assert np.array_equal(host(a), b)


def test_gpu_sealed_region_labels_and_pressure_are_the_cpus():
    """A tank filled to the lid and split in two by a wall of obstacle cells: two sealed
    regions; the union-find labels are the CPU's and the solve (pinned cells, region
    means removed) agrees."""
    import cupy

    rng = np.random.default_rng()
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (16, 12, 14))
    pos = (rng.uniform(0.0, 1.0, (60000, 3)) * np.asarray(spec.upper)).astype(np.float32)
    vel = rng.normal(0, 0.5, pos.shape).astype(np.float32)
    wall = np.array([(7, j, k) for j in range(12) for k in range(14)])
    out = []
    for xp in (np, cupy):
        g = tank(xp, pos, vel, spec, wall)
        solid = g["cell"] == SOLID
        g["cell"] = xp.where(g.active() & ~solid, xp.uint8(FLUID), g["cell"]).astype(xp.uint8)  # all of it water
        labels = sparse_pressure.label_components(g, g["cell"] == FLUID)
        p, stats = sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5)
        out.append((host(labels), host(p), stats))
    (lc, pc, sc), (lg, pg, sg) = out
    assert np.array_equal(lg, lc)
    assert len(np.unique(lc[lc < len(lc)])) == 2
    assert sc["converged"] and sg["converged"] and abs(sg["iterations"] - sc["iterations"]) <= 1
    assert np.abs(pg - pc).max() <= 1e-3 * np.abs(pc).max()


def test_gpu_solver_keeps_its_buffers_and_graph_while_the_unknowns_change():
    """Substep after substep the liquid moves: one solver, one captured graph, and every
    solve still the CPU's (the graph reads the new sizes from the device)."""
    import cupy

    sparse_pressure_gpu.release_gpu_solvers()
    rng = np.random.default_rng()
    spec, pos, vel, obstacle = random_scene(rng)
    graphs = set()
    for step in range(3):
        moved = np.clip(pos + rng.normal(0, 0.01, pos.shape).astype(np.float32), 0.0, 0.999 * np.asarray(spec.upper))
        keep = rng.random(len(pos)) < 0.98 - 0.02 * step  # fewer cells each time: the buffers still fit
        results = []
        for xp in (np, cupy):
            g = tank(xp, moved[keep].astype(np.float32), vel[keep], spec, obstacle)
            p, stats = sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5)
            results.append((host(p), stats))
        (pc, sc), (pg, sg) = results
        assert sg["converged"] and abs(sg["iterations"] - sc["iterations"]) <= 1
        assert np.abs(pg - pc).max() <= 1e-3 * np.abs(pc).max()
        (solver,) = sparse_pressure_gpu._solvers.values()
        graphs.add(id(solver.loop.graph))
        assert solver.loop.graph is not None or solver.loop.failed
    assert len(graphs) == 1
    cupy.cuda.Device().synchronize()


def test_gpu_fused_and_split_vcycles_give_the_same_pressure(monkeypatch):
    """sparse_pressure_gpu.VCYCLE "fused" (fewer launches per level, r·z in the last sweep)
    and "split" (the reference's launch sequence) compute the same values: the same
    iterations and the same pressure bit for bit."""
    import cupy

    rng = np.random.default_rng()
    spec, pos, vel, obstacle = random_scene(rng)
    out = {}
    for mode in ("split", "fused"):
        monkeypatch.setattr(sparse_pressure_gpu, "VCYCLE", mode)
        sparse_pressure_gpu.release_gpu_solvers()
        g = tank(cupy, pos, vel, spec, obstacle)
        p, stats = sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5)
        (solver,) = sparse_pressure_gpu._solvers.values()
        assert solver.vcycle == mode and len(solver.levels) >= 3
        out[mode] = (host(p), stats)
    sparse_pressure_gpu.release_gpu_solvers()
    (ps, ss), (pf, sf) = out["split"], out["fused"]
    assert ss["converged"] and sf["converged"] and ss["iterations"] == sf["iterations"]
    assert np.abs(ps).max() > 0 and np.array_equal(ps, pf)


@pytest.mark.parametrize("scene", ["tank", "sealed"])
def test_gpu_device_setup_gives_the_host_setups_pressure(monkeypatch, scene):
    """VOXFX_SPARSE_PRESSURE_SETUP device and host: the same tables, so the same solve bit
    for bit (the sealed scene: pinned cells, a deep hierarchy). Level 0 smoothed by red-black
    sweeps both ways: the host set-up's solver has no workspace (no brick table), so no brick
    smoother (sparse_multigrid_bricks.SMOOTHER "brick", the default, smooths workspace solvers)."""
    import cupy

    monkeypatch.setattr(sparse_multigrid_bricks, "SMOOTHER", "rb")

    rng = np.random.default_rng()
    spec, pos, vel, obstacle = random_scene(rng)
    out = {}
    for setup in ("host", "device"):
        monkeypatch.setattr(sparse_pressure_setup, "SETUP", setup)
        g = tank(cupy, pos, vel, spec, obstacle)
        if scene == "sealed":
            solid = g["cell"] == SOLID
            g["cell"] = cupy.where(g.active() & ~solid, cupy.uint8(FLUID), g["cell"]).astype(cupy.uint8)
        p, stats = sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5)
        out[setup] = (host(p), stats)
    (ph, sh), (pd, sd) = out["host"], out["device"]
    assert sh["converged"] and sd["converged"] and sh["iterations"] == sd["iterations"]
    assert np.abs(ph).max() > 0 and np.array_equal(ph, pd)


@pytest.mark.parametrize("cells", ["liquid", "random"])
def test_gpu_fused_setup_kernels_give_the_cpus_rhs_kinds_and_labels(monkeypatch, cells):
    """sparse_pressure_cells (SETUP_KERNELS "fused"): b bit for bit, the cell types, the
    sealed regions and their labels equal NumPy's pressure_rhs; "random" cell types over
    the active cells give many components (and sealed ones) for the concurrent union-find."""
    import cupy

    rng = np.random.default_rng()
    spec, pos, vel, obstacle = random_scene(rng)
    kinds = None
    out = []
    for xp in (np, cupy):
        g = tank(xp, pos, vel, spec, obstacle)
        if cells == "random":
            if kinds is None:
                kinds = rng.choice(np.array([0, FLUID, SOLID], np.uint8), g.size, p=[0.04, 0.66, 0.30])
            g["cell"] = xp.asarray(kinds)
        monkeypatch.setattr(sparse_pressure, "SETUP_KERNELS", "fused")
        out.append([host(a) if a is not None else None for a in sparse_pressure.pressure_rhs(g, 0.0123)])
        if xp is cupy:
            monkeypatch.setattr(sparse_pressure, "SETUP_KERNELS", "reference")
            out.append([host(a) if a is not None else None for a in sparse_pressure.pressure_rhs(g, 0.0123)])
    (bc, kc, ec, lc), fused, reference = out
    for bg, kg, eg, lg in (fused, reference):
        assert np.array_equal(bg.view(np.uint32), bc.view(np.uint32))
        assert np.array_equal(kg, kc)
        assert (eg is None) == (ec is None) == (cells == "liquid")
        if ec is not None:
            assert np.array_equal(eg, ec) and np.array_equal(lg, lc)
            assert len(np.unique(lc[ec])) >= 5  # H200: 19 sealed regions


def test_gpu_tail_vcycle_gives_the_same_pressure_bit_for_bit(monkeypatch):
    """TAIL_UNKNOWNS (VOXFX_SPARSE_MG_TAIL): the coarse levels in mg_tail_vcycle's one block
    compute the launch-by-launch V-cycle's values: the same iterations and pressure bit for
    bit, off (0), from the last level above the coarsest (a bound of its stride: the scene's
    strides, not the default's, decide which levels a bound takes — they follow the set-up's
    capacities, ``VOXFX_SPARSE_SETUP_FIRST_CAPS``) and from level 1 whatever its size."""
    import cupy

    rng = np.random.default_rng()
    spec, pos, vel, obstacle = random_scene(rng)
    out, bounds = {}, [0, None, 2 ** 30]
    for i, tail in enumerate(bounds):
        monkeypatch.setattr(sparse_pressure_gpu, "TAIL_UNKNOWNS", tail)
        sparse_pressure_gpu.release_gpu_solvers()
        g = tank(cupy, pos, vel, spec, obstacle)
        p, stats = sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5)
        (solver,) = sparse_pressure_gpu._solvers.values()
        assert len(solver.levels) >= 3 and (solver.tail is None) == (tail == 0)
        if tail == 0:  # the next bound: the stride of the level above the coarsest
            bounds[1] = solver.levels[-2].stride
        else:
            assert solver.tail[0] == 1 if tail == 2 ** 30 else 1 <= solver.tail[0] <= len(solver.levels) - 2
        out[i] = (host(p), stats)
    sparse_pressure_gpu.release_gpu_solvers()
    (p0, s0), *rest = out.values()
    assert s0["converged"] and np.abs(p0).max() > 0
    for p, s in rest:
        assert s["iterations"] == s0["iterations"] and np.array_equal(p, p0)


def test_gpu_reused_tables_give_the_fresh_tables_pressure(monkeypatch):
    """sparse_pressure.solver_tables on the device: three solves of an unchanged tank, the
    third on the second's tables (and the solver's kept buffers), equal bit for bit to three
    solves that build them each time."""
    import cupy

    rng = np.random.default_rng()
    spec, pos, vel, obstacle = random_scene(rng)
    runs = []
    for reuse in (False, True):
        monkeypatch.setattr(sparse_pressure, "REUSE_TABLES", reuse)
        g = tank(cupy, pos, vel, spec, obstacle)
        runs.append([sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5) for _ in range(3)])
        assert (getattr(g, "_pressure_memo", None) is not None and g._pressure_memo[3] is not None) == reuse
    for (p_fresh, s_fresh), (p_reused, s_reused) in zip(*runs):
        assert np.array_equal(host(p_fresh), host(p_reused)) and s_fresh == s_reused


def test_gpu_project_kernel_gives_the_cpus_faces_bit_for_bit(monkeypatch):
    """sparse_pressure.project on the device (PROJECT "kernel": project_faces) and the array
    code ("reference") give NumPy's projected faces bit for bit, from the same pressure."""
    import cupy

    rng = np.random.default_rng()
    spec, pos, vel, obstacle = random_scene(rng)
    faces, noise, start = [], None, None
    for xp, mode in ((np, "reference"), (cupy, "kernel"), (cupy, "reference")):
        monkeypatch.setattr(sparse_pressure, "PROJECT", mode)
        g = tank(xp, pos, vel, spec, obstacle)
        if start is None:  # one pressure and one u* for all three (P2G rounds differently on the device)
            noise, start = rng.normal(0.0, 40.0, g.size), [host(g[name]).copy() for name in g.FACES]
        for name, f in zip(g.FACES, start):
            g[name] = xp.asarray(f)
        p = xp.where(g["cell"] == FLUID, xp.asarray(noise), 0.0).astype(xp.float32)
        before = [host(g[name]).copy() for name in g.FACES]
        sparse_pressure.project(g, p, 0.0123)
        faces.append([host(g[name]) for name in g.FACES])
        assert sum(int((f != b).sum()) for f, b in zip(faces[-1], before)) > 1000
    for got in faces[1:]:
        for a, b in zip(got, faces[0]):
            assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


def test_gpu_project_fluid_gives_the_cpus_faces_and_fluid_faces(monkeypatch):
    """VOXFX_SPARSE_PROJECT_FLUID=1 (project_faces_fluid: the neighbours from the brick table,
    the fluid faces' masks in the same pass): NumPy's projected faces bit for bit, and the next
    sparse_transfer.fluid_faces answers with those masks (not a launch of its own), NumPy's masks;
    once taken, or after the cell types are replaced, fluid_faces makes them again."""
    import cupy

    from voxfx.kernels.flip import sparse_pressure_cells

    rng = np.random.default_rng()
    spec, pos, vel, obstacle = random_scene(rng)
    got = {}
    for xp, fused in ((np, "0"), (cupy, "1"), (cupy, "0")):
        monkeypatch.setenv("VOXFX_SPARSE_PROJECT_FLUID", fused)
        g = tank(xp, pos, vel, spec, obstacle)
        if not got:
            noise, start = rng.normal(0.0, 40.0, g.size), [host(g[name]).copy() for name in g.FACES]
        for name, f in zip(g.FACES, start):
            g[name] = xp.asarray(f)
        p = xp.where(g["cell"] == FLUID, xp.asarray(noise), 0.0).astype(xp.float32)
        sparse_pressure.project(g, p, 0.0123)
        kept = getattr(g, "_projected_fluid", None)
        assert (kept is not None) == (fused == "1" and xp is cupy)
        masks = sparse_transfer.fluid_faces(g)
        got[(xp.__name__, fused)] = ([host(g[name]) for name in g.FACES], [host(m) for m in masks])
        if kept is not None:
            assert all(a is b for a, b in zip(masks, kept[2]))  # the projection's own masks
            again = sparse_transfer.fluid_faces(g)  # taken once: made again, the same
            assert not any(a is b for a, b in zip(again, masks))
            assert all(np.array_equal(host(a), host(b)) for a, b in zip(again, masks))
            sparse_pressure.project(g, p, 0.0)  # the masks kept, then new cell types: not used
            g["cell"] = g["cell"].copy()
            assert sparse_pressure_cells.projected_fluid(g) is None
    (ref_faces, ref_masks), *others = got.values()
    assert sum(int(m.sum()) for m in ref_masks) > 1000
    for faces, masks in others:
        for a, b in zip(faces, ref_faces):
            assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
        for a, b in zip(masks, ref_masks):
            assert np.array_equal(a, b)


@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_gpu_sparse_runs_give_the_same_particle_bits_with_the_projection_s_fluid_faces(monkeypatch, apic):
    """VOXFX_SPARSE_PROJECT_FLUID 0 / 1: whole dam-break runs (12 substeps) give the same particle bits
    (the masks of project_faces_fluid serve the extrapolation, u_n and the keep as fluid_faces' did)."""
    from tests.gpu.sparse_runs import assert_runs_agree

    assert_runs_agree(monkeypatch, apic, "VOXFX_SPARSE_PROJECT_FLUID", ("0", "1"), time_centred_advection=apic)


@pytest.mark.parametrize("rows, n", [(1, 1), (1, 300), (2, 70001), (3, 1_800_001)])
def test_gpu_scan_kernels_equal_cumsum(monkeypatch, rows, n):
    """sparse_pressure_setup.inclusive_scan (SCAN "kernel": two launches, 256-thread block
    scans; "lookback": one) equals NumPy's cumsum per row, and cupy.cumsum ("cupy")."""
    import cupy

    rng = np.random.default_rng()
    a = rng.integers(0, 2, (rows, n)).astype(np.int32)
    want = np.cumsum(a, axis=1)
    for mode in ("kernel", "lookback", "cupy"):
        monkeypatch.setattr(sparse_pressure_setup, "SCAN", mode)
        d = cupy.asarray(a if rows > 1 else a[0])
        got = host(sparse_pressure_setup.inclusive_scan(d))
        assert got.dtype == np.int32 and np.array_equal(got.reshape(rows, n), want)


@pytest.mark.parametrize("blocks", [1, 7, 2048])
def test_gpu_classify_block_equals_the_thread_kernel(monkeypatch, blocks):
    """unk_classify_block (VOXFX_SPARSE_SETUP_WIDEN "block": the box reduced per block of 256 threads, on a full
    grid or fewer blocks striding) gives unk_classify's diag, flags and box bit for bit."""
    import cupy

    spec, pos, vel, obstacle = random_scene(np.random.default_rng())
    g = tank(cupy, pos, vel, spec, obstacle)
    kind, _, _ = sparse_pressure.solver_cells(g)
    monkeypatch.setattr(sparse_pressure_setup, "_CLASSIFY_BLOCKS", blocks)
    size, out = int(g.size), []
    for mode in ("thread", "block"):
        monkeypatch.setenv("VOXFX_SPARSE_SETUP_WIDEN", mode)
        diag8, flags = cupy.full(size, 99, cupy.uint8), cupy.full((3, size), -7, cupy.int32)
        box = cupy.asarray(np.array([2 ** 31 - 1] * 3 + [-(2 ** 31)] * 3, np.int32))
        sparse_pressure_setup.classify(g, kind, size, diag8, flags, box)
        out.append((host(diag8), host(flags), host(box)))
    assert out[0][2][0] <= out[0][2][3] and int(out[0][1][2].sum()) > 1000  # a set and its box
    for a, b in zip(*out):
        assert np.array_equal(a, b)


def test_gpu_predicted_iterations_give_the_blocks_pressure_bit_for_bit(monkeypatch):
    """PREDICT (VOXFX_SPARSE_PCG_PREDICT): the second solve of a tank starts with as many
    one-iteration graph replays as the first took; the same iterations and pressure bit for
    bit as blocks of check_every, and no block launched when the guess was right."""
    import cupy

    rng = np.random.default_rng()
    spec, pos, vel, obstacle = random_scene(rng)
    runs = {}
    for predict in (False, True):
        monkeypatch.setattr(sparse_pressure_gpu, "PREDICT", predict)
        sparse_pressure_gpu.release_gpu_solvers()
        g = tank(cupy, pos, vel, spec, obstacle)
        first = sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5)
        (solver,) = sparse_pressure_gpu._solvers.values()
        blocks = solver.loop.launches
        second = sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5)
        assert solver.last_iterations == second[1]["iterations"] > 3
        if predict and solver.single.graph is not None:  # VOXFX_SPARSE_PCG_BLOCK singles: blocks replay it too
            replays = solver.check_every * blocks if solver.block == "singles" else 0
            assert solver.single.launches == first[1]["iterations"] + replays and solver.loop.launches == blocks
        runs[predict] = [(host(p), stats) for p, stats in (first, second)]
    sparse_pressure_gpu.release_gpu_solvers()
    for (p_blocks, s_blocks), (p_predicted, s_predicted) in zip(runs[False], runs[True]):
        assert s_blocks == s_predicted and np.array_equal(p_blocks, p_predicted)


@pytest.mark.parametrize("predict", [False, True])
def test_gpu_block_as_single_replays_gives_the_graphs_pressure_bit_for_bit(monkeypatch, predict):
    """VOXFX_SPARSE_PCG_BLOCK "singles": run_blocks' block of check_every iterations as that
    many replays of the one-iteration graph (no block graph captured) — the same iterations and
    pressure bit for bit as the block's own graph, with blocks run (PREDICT off: blocks from the
    start) or not."""
    import cupy

    rng = np.random.default_rng(7)
    spec, pos, vel, obstacle = random_scene(rng)
    monkeypatch.setattr(sparse_pressure_gpu, "PREDICT", predict)
    runs = {}
    for block in ("graph", "singles"):
        monkeypatch.setenv("VOXFX_SPARSE_PCG_BLOCK", block)
        sparse_pressure_gpu.release_gpu_solvers()
        g = tank(cupy, pos, vel, spec, obstacle)
        out = [sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5) for _ in range(2)]
        (solver,) = sparse_pressure_gpu._solvers.values()
        assert solver.block == block
        if block == "singles":
            assert solver.loop.graph is solver.single.graph  # nothing captured of its own
            assert predict or solver.loop.launches > 0
        runs[block] = [(host(p), stats) for p, stats in out]
    sparse_pressure_gpu.release_gpu_solvers()
    for (p_graph, s_graph), (p_singles, s_singles) in zip(runs["graph"], runs["singles"]):
        assert s_graph == s_singles and np.array_equal(p_graph, p_singles)
