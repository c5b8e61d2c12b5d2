"""The divergence-free air band and the wall split on the GPU's sparse solver
(``kernels/flip/sparse_air_band.py`` on CuPy, its particle kernels ``sparse_air_band_gpu.py``)
against the NumPy reference: the band's cells the same set and its projected faces within the
two PCGs' rounding (the liquid's faces and every put-back channel bit for bit); the G2P update
and the sub-stepped advection bit for bit on a shared scene; a small closed dam break with both
switches on agreeing with the NumPy run as the NumPy sparse and dense runs agree
(tests/unit/test_flip_sparse_air_band.py). The kernels' host harness:
tests/unit/test_cuda_sparse_air_band_host.py."""

import numpy as np
import pytest

from tests.gpu.test_flip_sparse_g2p_gpu import host, scene
from tests.meshes import box
from tests.unit.test_flip_sparse_air_band import H, cell_divergence, falling_block
from voxfx.kernels.flip import air_band, sparse_air_band, sparse_air_band_gpu, sparse_pressure, sparse_transfer
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid
from voxfx.kernels.flip.surface import liquid_volume
from voxfx.kernels.grid import GridSpec

cp = pytest.importorskip("cupy")

PUT_BACK = ("cell", "solid", "solid_u", "solid_v", "solid_w", sparse_pressure.CARRIED)


def on_gpu(cpu):
    """A CuPy grid of *cpu*'s bricks (in its slots) holding its channels and valid masks."""
    gpu = SparseFlipGrid(cpu.spec, cp, closed=True)
    gpu.retopologize(cp.asarray(cpu.topology.keys))
    assert np.array_equal(host(gpu.topology.slots), cpu.topology.slots), "slots"
    assert gpu.size == cpu.size, (gpu.size, cpu.size)
    for name, (a, background) in cpu.channels.items():
        if name not in gpu.channels:
            gpu.add(name, a.dtype, background)
        gpu[name] = cp.asarray(a)
    gpu.valid = tuple(cp.asarray(v) for v in cpu.valid)
    return gpu


@pytest.mark.parametrize("margin", [8, 1], ids=["whole", "cut"])
def test_the_band_on_the_gpu_is_the_references(margin):
    cpu = falling_block(margin)
    gpu = on_gpu(cpu)
    touching = tuple(host(m) for m in sparse_transfer.fluid_faces(gpu))
    assert all(np.array_equal(a, b) for a, b in zip(touching, sparse_transfer.fluid_faces(cpu))), "fluid faces"
    kept = {n: gpu[n].copy() for n in PUT_BACK}
    memo = getattr(gpu, "_pressure_memo", None)
    band_cpu, stats_cpu = sparse_air_band.project_band(cpu, 0.1, tolerance=1e-6)
    band_gpu, stats_gpu = sparse_air_band.project_band(gpu, 0.1, tolerance=1e-6)
    print(f"\nmargin {margin}: NumPy {stats_cpu}, CuPy {stats_gpu}")
    assert np.array_equal(host(band_gpu), band_cpu) and band_cpu.sum() > 100, (host(band_gpu).sum(), band_cpu.sum())
    assert stats_gpu["converged"] and stats_gpu["band_cut"] == stats_cpu["band_cut"], (stats_gpu, stats_cpu)
    assert (stats_cpu["band_cut"] > 0) == (margin == 1)
    scale = max(float(np.abs(f).max()) for f in cpu.faces())
    for comp, (f_gpu, f_cpu, m) in enumerate(zip(gpu.faces(), cpu.faces(), touching)):
        got = host(f_gpu)
        same = got[m != 0].view(np.uint32) == f_cpu[m != 0].view(np.uint32)
        assert same.all(), (comp, int((~same).sum()))  # the liquid's faces: as they were, bit for bit
        error = float(np.abs(got - f_cpu).max())
        print(f"component {comp}: largest difference {error:.3g} m/s of {scale:.3g}")
        assert error <= 1e-4 * scale, (comp, error, scale)  # the band's: the two PCGs' rounding
    assert float(np.abs(host(cell_divergence(gpu))[band_cpu]).max()) < 1e-2
    for n, a in kept.items():  # the liquid's cell types, solid marks and warm start put back
        assert np.array_equal(host(gpu[n]), host(a), equal_nan=True), n
    assert getattr(gpu, "_pressure_memo", None) is memo


@pytest.mark.parametrize("centred", [False, True], ids=["end", "centred"])
@pytest.mark.parametrize("holes", [False, True], ids=["bricks", "holes"])
@pytest.mark.parametrize("closed", [True, False], ids=["closed", "open"])
@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
def test_the_band_kernels_give_the_reference_bits(closed, holes, apic, centred):
    seed = int(np.random.default_rng().integers(1 << 30))
    spec, cpu, gpu, pos, vel, c, (old_cpu, old_gpu) = scene(closed, holes, apic, seed)
    rng = np.random.default_rng(seed + 1)
    before = tuple(rng.normal(0, 1, cpu.size).astype(np.float32) for _ in range(3)) if centred else None
    flip = np.float32(0.0 if apic else 0.95)
    pic = np.float32(1) - flip
    want = [pos.copy(), vel.copy()] + ([c.copy()] if apic else [])
    sparse_transfer.update_velocity(cpu, old_cpu, cpu.cell_coords(want[0]), want[1], flip, pic,
                                    want[2] if apic else None)
    steps = sparse_air_band.advect(cpu, want[0], 0.05, before)
    assert steps >= 3 and np.abs(want[0] - pos).max() > spec.voxel_size
    dev = [cp.asarray(a) for a in [pos, vel] + ([c] if apic else [])]
    sparse_air_band_gpu.update_velocity(gpu, old_gpu, dev[0], dev[1], flip, pic, dev[2] if apic else None)
    got_steps = sparse_air_band.advect(gpu, dev[0], 0.05, None if before is None else tuple(map(cp.asarray, before)))
    assert got_steps == steps
    for got, ref in zip(dev, want):
        assert np.array_equal(host(got).view(np.uint32), ref.view(np.uint32))


def dam_break(monkeypatch, xp, band=True, frames=5, centred=False):
    """tests/unit/test_flip_sparse_air_band.py's closed 12³ dam break on the sparse solver on
    *xp*: (occupied cells, meshed volume / water − 1, centre of mass, wall pieces)."""
    monkeypatch.setenv(air_band.SWITCH, "1" if band else "0")
    monkeypatch.setenv(air_band.WALL_SWITCH, "1" if band else "0")
    v, t = box((0.0, 0.0, 0.0), (0.4, 1.2, 0.8))
    spec = GridSpec((0.0, 0.0, 0.0), H, (12, 12, 12))
    sim = FlipSimulation(spec, FlipSettings(max_substeps=1, max_time_step=0.0, seed=3, sparse=True,
                                            time_centred_advection=centred), v, t, xp=xp)
    for _ in range(frames):
        sim.step(1 / 6)
    pos = host(sim.pos)
    ijk = np.clip(np.floor(pos / np.float32(H)).astype(np.int64), 0, 11)
    occupied = len(np.unique((ijk[:, 2] * 12 + ijk[:, 1]) * 12 + ijk[:, 0]))
    water = len(pos) * H ** 3 / sim.settings.particles_per_cell
    volume = liquid_volume(sim.level_set(), sim.surface_spec) / water - 1
    return occupied, volume, sim.centre_of_mass(), getattr(sim, "air_band_pieces", 0)


@pytest.mark.parametrize("centred", [False, True], ids=["end", "centred"])
def test_the_gpu_dam_break_with_the_band_and_the_split_follows_numpy(monkeypatch, centred):
    """The NumPy sparse and dense runs' tolerances (tests/unit/test_flip_sparse_air_band.py):
    1% of the occupied cells, 0.5 points of volume, 1 mm of centre of mass, the same pieces."""
    cpu = dam_break(monkeypatch, np, centred=centred)
    gpu = dam_break(monkeypatch, cp, centred=centred)
    print(f"\nband + split, centred {centred}: NumPy {cpu[:2]}, {cpu[3]} pieces; CuPy {gpu[:2]}, {gpu[3]} pieces")
    assert cpu[3] >= 2 and gpu[3] == cpu[3]
    assert abs(gpu[0] - cpu[0]) <= 0.01 * cpu[0], (gpu, cpu)
    assert abs(gpu[1] - cpu[1]) < 0.005, (gpu, cpu)
    assert np.abs(np.asarray(gpu[2]) - np.asarray(cpu[2])).max() < 1e-3
    plain = dam_break(monkeypatch, cp, band=False, centred=centred)  # on the GPU too, the band keeps the volume
    assert plain[1] < gpu[1] - 0.1, (plain, gpu)


def test_the_wall_pieces_on_the_gpu_are_the_references():
    rng = np.random.default_rng()
    spec = GridSpec((0.0, 0.0, 0.0), H, (16, 16, 16))
    pos = rng.uniform(0.0, 1.6, (5000, 3)).astype(np.float32)
    vel = rng.normal(0.0, 3.0, pos.shape).astype(np.float32)
    want = air_band.wall_pieces(SparseFlipGrid(spec, np), pos, vel, 0.2)
    got = air_band.wall_pieces(SparseFlipGrid(spec, cp), cp.asarray(pos), cp.asarray(vel), 0.2)
    assert got == want and want > 1

