"""The time-centred advection (``FlipSettings.time_centred_advection``, issue 24's substep
policy): particles move through the velocity linear in time over the substep, from the last
substep's projected faces to this one's (RK2 in time and space), not through the end
velocity for the whole substep. Off by default (today's advection); on, the accuracy tests
pass at CFL 4 where today's advection leads the 16-cell Martin–Moyce front by 13%
(``bench/flip_advection.py`` measures CFL 2–5)."""

import numpy as np
import pytest

from tests import flip_accuracy as scenes
from tests.meshes import box
from voxfx.kernels import backend
from voxfx.kernels.flip import transfer
from voxfx.kernels.flip.grid import TIMINGS, DenseGrid, FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.surface import liquid_volume
from voxfx.kernels.grid import GridSpec


def front_deviation(T, Z):
    """The largest |Z/Z_experiment − 1| over the test's window T ∈ [0.4, 2.5]."""
    reference = np.interp(T, scenes.MARTIN_MOYCE[:, 0], scenes.MARTIN_MOYCE[:, 1])
    window = (T >= 0.4) & (T <= 2.5)
    return float(np.abs(Z[window] / reference[window] - 1).max())


def test_off_by_default():
    assert FlipSettings().time_centred_advection is False


def test_uniform_acceleration_moves_by_the_mean_of_the_start_and_end_velocity():
    """u_n = 0, u_{n+1} = 1 m/s along x everywhere: the particles move ½Δt (the exact
    path under constant acceleration), today's advection Δt."""
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (10, 6, 6))
    grid = DenseGrid(spec, np)
    grid.u[...] = 1.0
    before = tuple(np.zeros_like(f) for f in grid.faces())
    old = tuple(f.copy() for f in grid.faces())
    rng = np.random.default_rng(3)
    pos = (rng.uniform(0.2, 0.4, (200, 3))).astype(np.float32)
    dt = 0.05
    moved = {}
    for name, b in (("end", None), ("centred", before)):
        p, v = pos.copy(), np.zeros_like(pos)
        transfer.grid_to_particles_and_advect(grid, *old, p, v, 0.97, dt, before=b)
        moved[name] = p - pos
    assert np.allclose(moved["end"][:, 0], dt, atol=1e-6)
    assert np.allclose(moved["centred"][:, 0], 0.5 * dt, atol=1e-6)
    assert np.abs(moved["centred"][:, 1:]).max() < 1e-6


def test_start_velocity_is_the_last_substeps_where_both_touch_fluid():
    new = (np.full(4, 5.0, np.float32),)
    prev = (np.arange(4, dtype=np.float32),)
    was, now = (np.array([1, 1, 0, 0], np.uint8),), (np.array([1, 0, 1, 0], np.uint8),)
    assert transfer.start_velocity(new, now, None) is None  # nothing kept: today's advection
    (got,) = transfer.start_velocity(new, now, (prev, was))
    assert got.tolist() == [0.0, 5.0, 5.0, 5.0]


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_first_substep_is_todays_and_the_next_ones_are_not(sparse):
    """Nothing is kept before the first substep: the same bits as the setting off; then the
    kept faces change the path (a dam break, accelerating)."""
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (16, 4, 12))
    sims = [FlipSimulation(spec, FlipSettings(time_centred_advection=on), *box((0, 0, 0), (0.3, 0.2, 0.4)),
                           xp=np, sparse=sparse) for on in (False, True)]
    for sim in sims:
        sim.substep(0.01)
    assert np.array_equal(sims[0].pos, sims[1].pos)
    for sim in sims:
        sim.substep(0.01)
    assert not np.array_equal(sims[0].pos, sims[1].pos)
    assert np.isfinite(sims[1].pos).all()


def test_sixteen_cell_front_follows_martin_and_moyce_at_cfl_4():
    """Today's advection leads the front by 13.0% at CFL 4 (the test allows 12%): measured
    with the time-centred advection −5.6% to +9.9%."""
    end = front_deviation(*scenes.dam_break_front(cells_per_a=16, cfl=4.0))
    T, Z = scenes.dam_break_front(cells_per_a=16, cfl=4.0, time_centred_advection=True)
    print(f"\n16-cell front at CFL 4: today's advection {end:.1%} at worst, time-centred {front_deviation(T, Z):.1%}")
    assert end > 0.12
    scenes.assert_front_follows_martin_moyce(T, Z)


def test_thirty_two_cell_front_at_three_substeps_a_24_fps_frame():
    """The 8M dam break's fastest policy that the accuracy tests hold (bench/RESULTS.md):
    CFL 5, Max Time Step 1/72 s, Max Substeps 3, i.e. three substeps a 24 fps frame. At 32
    cells across the column today's advection leads the front by 12.5% (the test allows
    12%); the time-centred one stays within −6.5…+10.5% (at 16 and 64 cells both hold:
    +10.8% and +10.3% today's, +9.9% and +9.8% time-centred). At 24 fps only ~5 frames fall
    in the test's window T ∈ [0.4, 2.5], so the frame count of
    ``assert_front_follows_martin_moyce`` is not asked here."""
    policy = {k: v for k, v in TIMINGS["fast"].items() if k != "time_centred_advection"}
    end = front_deviation(*scenes.dam_break_front(cells_per_a=32, fps=24.0, **policy))
    T, Z = scenes.dam_break_front(cells_per_a=32, fps=24.0, time_centred_advection=True, **policy)
    centred = front_deviation(T, Z)
    print(f"\n32-cell front, 3 substeps a frame: today's advection {end:.1%} at worst, time-centred {centred:.1%}")
    assert end > 0.12
    assert centred <= 0.12 and (Z <= 1 + 2 * T + 1e-9).all()  # within the test's 12%, behind the Ritter front


THREE_SUBSTEPS = TIMINGS["fast"]  # the Liquid panel's Fast timing: three substeps a 24 fps frame


def test_sloshing_period_at_three_substeps_a_24_fps_frame():
    """The three-substep policy above on the sloshing tank at 24 fps: measured +6.6% (today's
    advection +9.7%), allowed −3% to +10% as at CFL 4."""
    expected = scenes.linear_sloshing_period(0.8, 0.32)
    period, beta = scenes.sloshing(fps=24.0, **THREE_SUBSTEPS)
    print(f"\nsloshing period, 3 substeps a 24 fps frame, time-centred: {period / expected - 1:+.1%}")
    assert 0.97 * expected <= period <= 1.10 * expected
    assert beta < 2.0


def test_balanced_timing_holds_the_front_and_the_sloshing_period_at_24_fps():
    """The Liquid panel's Balanced timing (at most 8 cells a substep, 3–16 substeps a 24 fps
    frame) on the tests Fast holds: the 32-cell Martin–Moyce front within 12% and behind the
    Ritter front, the sloshing period within −3…+10%. Measured 10.5% and +6.6%, Fast's own:
    neither scene is fast enough in cells to ask more than Max Time Step's three substeps."""
    T, Z = scenes.dam_break_front(cells_per_a=32, fps=24.0, **TIMINGS["balanced"])
    centred = front_deviation(T, Z)
    expected = scenes.linear_sloshing_period(0.8, 0.32)
    period, beta = scenes.sloshing(fps=24.0, **TIMINGS["balanced"])
    print(f"\nBalanced, 24 fps: 32-cell front {centred:.1%} at worst, sloshing period {period / expected - 1:+.1%}")
    assert centred <= 0.12 and (Z <= 1 + 2 * T + 1e-9).all()
    assert 0.97 * expected <= period <= 1.10 * expected and beta < 2.0


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_front_follows_martin_and_moyce_at_cfl_4(sparse):
    T, Z = scenes.dam_break_front(sparse=sparse, cfl=4.0, time_centred_advection=True)
    scenes.assert_front_follows_martin_moyce(T, Z)


def test_sloshing_period_at_cfl_4():
    """Measured +4.8% (today's advection +7.1%): allowed −3% to +10%."""
    expected = scenes.linear_sloshing_period(0.8, 0.32)
    period, beta = scenes.sloshing(cfl=4.0, time_centred_advection=True)
    print(f"\nsloshing period at CFL 4, time-centred: {period / expected - 1:+.1%}, decay {beta:.2f} /s")
    assert 0.97 * expected <= period <= 1.10 * expected
    assert beta < 2.0


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_dam_break_keeps_its_volume_at_cfl_4(sparse):
    """``test_flip_sim.test_dam_break_keeps_its_volume`` at CFL 4, time-centred: measured
    −4.5% (dense) and −3.8% (sparse) after 100 frames, close to the bound (today's advection
    −1.8% and −0.8%; u_n taken on every face, the air band and the faces the liquid entered
    or left included, lost 6.5%, dense)."""
    spec = GridSpec((0.0, 0.0, 0.0), 0.04, (30, 10, 15))
    sim = FlipSimulation(spec, FlipSettings(cfl=4.0, time_centred_advection=True), *box((0, 0, 0), (0.4, 0.4, 0.4)),
                         xp=np, sparse=sparse)
    water = len(sim.pos) * 0.04 ** 3 / 8
    for _ in range(100):
        sim.step(1 / 60)
    v1 = liquid_volume(backend.to_numpy(sim.level_set()), sim.surface_spec)
    print(f"\nvolume after 100 frames at CFL 4, time-centred: {v1 / water - 1:+.1%}")
    assert abs(v1 / water - 1) < 0.05
    assert sim.centre_of_mass()[0] > 0.3


def _dam(sparse, on=True):
    spec = GridSpec((0.0, 0.0, 0.0), 0.05, (16, 8, 12))
    return FlipSimulation(spec, FlipSettings(time_centred_advection=on, cfl=4.0),
                          *box((0.0, 0.0, 0.0), (0.3, 0.4, 0.4)), xp=np, sparse=sparse)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_a_resumed_bake_goes_on_bit_for_bit(sparse):
    """The kept faces and masks travel in the checkpoint (as written to and read from
    disk): the resumed run's particles are the uninterrupted run's, bit for bit. An older
    checkpoint without them still loads, its first substep advecting as today's (2 mm
    apart after 3 frames, measured)."""
    a = _dam(sparse)
    for _ in range(3):
        a.step(1 / 60)
    state = {k: np.array(v) for k, v in a.checkpoint().items()}
    assert {k for k in state if k.startswith("kept")} >= set(FlipSimulation.KEPT_KEYS)
    resumed, older = _dam(sparse), _dam(sparse)
    resumed.restore(state)
    older.restore({k: v for k, v in state.items() if not k.startswith("kept")})
    for _ in range(3):
        for sim in (a, resumed, older):
            sim.step(1 / 60)
    want = a.particles_host()["position"]
    assert np.array_equal(resumed.particles_host()["position"], want)
    assert np.abs(older.particles_host()["position"] - want).max() > 1e-4


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_the_kept_faces_are_checkpointed_only_with_the_setting_on(sparse):
    """Off: the checkpoint is today's; on, a checkpoint taken right after a restore (no
    substep since) holds the restored kept faces unchanged."""
    off, on = _dam(sparse, on=False), _dam(sparse)
    for sim in (off, on):
        sim.step(1 / 60)
    assert not any(k.startswith("kept") for k in off.checkpoint())
    state = on.checkpoint()
    again = _dam(sparse)
    again.restore(state)
    after = again.checkpoint()
    for key in (k for k in state if k.startswith("kept")):
        assert np.array_equal(after[key], state[key]), key
    ignored = _dam(sparse, on=False)
    ignored.restore(state)  # the setting off: a state's kept faces are not carried on
    assert not any(k.startswith("kept") for k in ignored.checkpoint())


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("damage", ["shape", "nan", "kind", "missing mask"])
def test_damaged_kept_faces_in_a_checkpoint_are_refused(sparse, damage):
    a = _dam(sparse)
    a.step(1 / 60)
    state = a.checkpoint()
    if damage == "shape":
        state["kept_v"] = state["kept_v"][:-1]
    elif damage == "nan":
        state["kept_u"] = state["kept_u"].copy()
        state["kept_u"].flat[0] = np.nan
    elif damage == "kind":
        state["kept_fluid_w"] = state["kept_fluid_w"].astype(np.float32)
    else:
        del state["kept_fluid_u"]
    b = _dam(sparse)
    before = b.checkpoint()
    with pytest.raises(ValueError):
        b.restore(state)
    assert np.array_equal(b.checkpoint()["pos"], before["pos"])


def test_sparse_kept_bricks_must_be_ascending_lattice_keys():
    a = _dam(True)
    a.step(1 / 60)
    state = a.checkpoint()
    assert len(state["kept_bricks"]) > 1
    state["kept_bricks"] = state["kept_bricks"][::-1].copy()
    with pytest.raises(ValueError, match="kept_bricks"):
        _dam(True).restore(state)


_PEAKS = """
import gc, json, sys, tracemalloc
sys.path.insert(0, sys.argv[1])
from tools.package import load; load()
import numpy as np
from tests.meshes import box
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.grid import GridSpec

sparse = sys.argv[2] == "sparse"
spec = GridSpec((0.0, 0.0, 0.0), 0.025, (48, 24, 32))


def peak(on):
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        sim = FlipSimulation(spec, FlipSettings(time_centred_advection=on, cfl=4.0),
                             *box((0.0, 0.0, 0.0), (0.4, 0.6, 0.5)), xp=np, sparse=sparse)
        for _ in range(2):
            sim.step(1 / 60)
        return tracemalloc.get_traced_memory()[1], sim
    finally:
        tracemalloc.stop()
        gc.enable()


for flag in (False, True):  # first-call caches (either way's) outside the measurement
    peak(flag)
(off, _), (on, sim) = (peak(flag) for flag in (False, True))
print(json.dumps([off, on, int(sim.grid.capacity) if sparse else 0, len(sim.pos)]))
"""


def _peaks_of_two_frames(sparse):
    """tracemalloc peaks of building a dam break and stepping two frames at CFL 4 (NumPy), the setting
    off then on, in a fresh interpreter (what earlier tests left in a test process — caches, the cyclic
    collector's timing — moved the 0.36–1.9 MB difference by ~4 MB under xdist): (off, on, capacity,
    particles)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    r = subprocess.run([sys.executable, "-c", _PEAKS, root, "sparse" if sparse else "dense"],
                       capture_output=True, text=True, timeout=300, cwd=root)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_the_cpu_memory_estimate_covers_what_the_kept_faces_cost(sparse):
    """The peak the setting adds on the NumPy path (measured 51.0 B a cell dense, 7.0 B a
    pool cell sparse — 14.8 while the sparse keep copied the faces) against what the estimate
    adds to its substep (55 + 15, 11)."""
    from voxfx.kernels.flip.sim import flip_memory
    from voxfx.kernels.flip.sparse_memory import memory_at

    spec = GridSpec((0.0, 0.0, 0.0), 0.025, (48, 24, 32))
    off, on, capacity, particles = _peaks_of_two_frames(sparse)
    if sparse:
        stages = [memory_at(spec, capacity, particles, parts=True, xp=np, time_centred=flag)
                  for flag in (False, True)]
    else:
        stages = [flip_memory(spec, particles, parts=True, xp=np, time_centred=flag) for flag in (False, True)]
    measured, counted = on - off, stages[1]["substep"] - stages[0]["substep"]
    print(f"\nthe setting's peak: measured {measured:,} B, estimated {counted:,} B")
    assert 0.9 * measured <= counted <= 2 * measured
    assert stages[1]["state"] > stages[0]["state"] and stages[1]["total"] >= stages[0]["total"]


def test_the_gpu_memory_estimate_counts_the_kept_faces_and_the_advection():
    """On the device (counted, not yet measured there): dense, the kept faces and masks
    (5 B a face) in the state and an advection stage 14 B a face above it; sparse, 15 B a
    pool cell in the state and 30 in the substep."""
    from voxfx.kernels.flip.sim import flip_memory
    from voxfx.kernels.flip.sparse_memory import memory_at, sparse_flip_memory

    gpu = object()  # any module but NumPy: the device branch
    spec = GridSpec((0.0, 0.0, 0.0), 0.01, (256, 128, 128))
    nx, ny, nz = spec.shape
    faces = (nx + 1) * ny * nz + nx * (ny + 1) * nz + nx * ny * (nz + 1)
    off, on = (flip_memory(spec, 8_000_000, parts=True, xp=gpu, time_centred=flag) for flag in (False, True))
    assert on["state"] - off["state"] == 5 * faces
    assert on["advection"] == on["state"] + 14 * faces and "advection" not in off
    assert on["total"] >= off["total"] + 5 * faces
    off, on = (memory_at(spec, 4000, 8_000_000, parts=True, xp=gpu, time_centred=flag) for flag in (False, True))
    cells = 4000 * 512
    assert on["state"] - off["state"] == 15 * cells and on["substep"] - off["substep"] == 30 * cells
    assert (sparse_flip_memory(spec, 8_000_000, xp=gpu, time_centred=True)
            > sparse_flip_memory(spec, 8_000_000, xp=gpu))


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_the_disk_plan_counts_the_kept_faces_in_each_checkpoint(sparse):
    """A real checkpoint's kept arrays against what the disk estimate adds per checkpoint:
    dense exactly 5 bytes a face; sparse per liquid cell, at least what it holds."""
    from voxfx.addon import disk_plan

    sim = _dam(sparse)
    for _ in range(6):
        sim.step(1 / 24)
    state = sim.checkpoint()
    kept = sum(np.asarray(v).nbytes for k, v in state.items() if k.startswith("kept"))
    faces = None if sparse else sum(f.size for f in sim.grid.faces())
    off, on = (disk_plan.liquid_plan(10, len(sim.pos), "COMPACT", 5, 8.0, grid_faces=faces, time_centred=flag)
               for flag in (False, True))
    added = on.per_checkpoint - off.per_checkpoint
    print(f"\nkept faces in a checkpoint: {kept:,} B, the plan adds {added:,.0f} B")
    if sparse:
        assert kept <= added <= 4 * kept
    else:
        assert added == kept


def test_the_substeps_one_set_of_fluid_masks_moves_the_particles_as_masks_made_afresh(monkeypatch):
    """The sparse substep makes its fluid-face masks once (the extrapolation's, u_n's and the kept
    ones: the cell types stand from classify to the next) and keeps them without a copy: u_n, the
    particles and the kept channels are those of masks made again for u_n and for the keep."""
    from voxfx.kernels.flip import sparse_transfer
    from voxfx.kernels.flip.sparse_kept import KeptBricks

    shared, afresh = _dam(True), _dam(True)
    afresh._start_velocity = lambda fluid=None: KeptBricks._start_velocity(afresh)
    afresh._keep_velocity = lambda fluid=None: KeptBricks._keep_velocity(afresh)
    starts = {id(shared): [], id(afresh): []}  # u_n of each substep, by simulation
    plain = sparse_transfer.g2p_advect

    def g2p_advect(grid, *args, before=None, **kwargs):
        sim = shared if grid is shared.grid else afresh
        starts[id(sim)].append(None if before is None else tuple(np.array(b) for b in before))
        return plain(grid, *args, before=before, **kwargs)

    monkeypatch.setattr(sparse_transfer, "g2p_advect", g2p_advect)
    for _ in range(6):
        for sim in (shared, afresh):
            sim.step(1 / 60)
    a, b = starts[id(shared)], starts[id(afresh)]
    assert len(a) == len(b) >= 4 and a[0] is None and all(x is not None for x in a[1:])
    for x, y in zip(a[1:], b[1:]):
        assert all(np.array_equal(u, v) for u, v in zip(x, y))
    assert np.array_equal(shared.particles_host()["position"], afresh.particles_host()["position"])
    assert np.array_equal(shared.particles_host()["velocity"], afresh.particles_host()["velocity"])
    for name in KeptBricks.KEPT:
        assert np.array_equal(shared.grid[name], afresh.grid[name]), name
    masks = [shared.grid[name] for name in KeptBricks.KEPT[3:]]
    assert len({id(m) for m in masks}) == 3 and not any(m is v for m in masks for v in shared.grid.valid)
