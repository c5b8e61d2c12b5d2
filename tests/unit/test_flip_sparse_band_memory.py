"""The narrow band's update on packed cell keys (issue 12, 65M particles ran to a 70 GiB
pool): the same deep cells, level set and particles as the row-list update it replaced,
kept here as the oracle (``RowListBand``), and its bytes in the sparse memory estimate."""

import numpy as np
import pytest

from tests.meshes import box
from voxfx.kernels.flip import sparse_band, transfer
from voxfx.kernels.flip.frame_check import FrameCheck
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.sparse_band import CORNERS, FAR, RINGS, SHRINK, NarrowBand
from voxfx.kernels.flip.sparse_band_frame import _isin
from voxfx.kernels.flip.sparse_grid import unique_rows
from voxfx.kernels.grid import GridSpec
from voxfx.kernels.grid.sparse_mac import DIRECTIONS

_F = np.float32
NEIGHBOURS_27 = tuple((a, b, c) for c in (-1, 0, 1) for b in (-1, 0, 1) for a in (-1, 0, 1))


def _find(a, b, xp):
    if len(b) == 0:
        return xp.full(len(a), -1, xp.int64)
    ka, kb = sparse_band.sparse_bodies.lattice_keys(a, b, xp)
    order = xp.argsort(kb)
    at = xp.minimum(xp.searchsorted(kb[order], ka), len(kb) - 1)
    return xp.where(kb[order][at] == ka, order[at], -1)


class RowListBand(NarrowBand):
    """The update before packed keys: (n, 3) rows per particle, 27 shifted copies."""

    def update(self, sim, dt):
        xp, g = self.xp, sim.grid
        pcells = sim._lattice_cells_of_particles()
        cand = unique_rows(xp.concatenate([self.lattice, pcells]), xp)
        reach = int(np.ceil(float(transfer.max_speed(sim.vel)) * dt / g.h))
        self.reaches = getattr(self, "reaches", []) + [reach]
        for _ in range(max(0, reach - RINGS)):
            cand = unique_rows(xp.concatenate([cand + xp.asarray(o, xp.int64) for o in NEIGHBOURS_27]), xp)
        cand = cand[~self._solid(sim, cand)]
        x = [cand[:, a].astype(xp.float32) + _F(0.5) for a in range(3)]
        u = g.sample_faces(g.faces(), *x, boxes=g.boxes if g.closed else None)
        back = xp.stack([x[a] - u[a] * _F(dt / g.h) for a in range(3)], axis=1)
        advected = self.sample(sim, back)
        liquid = cand[_isin(cand, pcells, xp) | (advected + _F(SHRINK) < 0)]
        depth = self._depths(sim, liquid)
        self._store(sim, liquid, depth)
        deep = liquid[depth >= self.cells]
        if len(deep):
            sim._keep(~_isin(pcells, deep, xp))
            pcells = sim._lattice_cells_of_particles()
        inner = (depth >= 1) & (depth < self.cells)
        refill = liquid[inner]
        was = _isin(refill, self.deep, xp) if len(self.deep) else xp.zeros(len(refill), bool)
        ppc = float(sim.settings.particles_per_cell)
        self.deep, self.mass = deep, xp.full(len(deep), ppc, xp.float64)
        if len(refill):
            at = _find(pcells, refill, xp)
            have = xp.bincount(at[at >= 0], minlength=len(refill)).astype(xp.float64)
            want = xp.where(was | (have == 0), xp.maximum(ppc - have, 0.0), 0.0)
            pick = want > 0
            if bool(pick.any()):
                self._resample(sim, refill[pick], want[pick])

    def sample(self, sim, x):
        xp = self.xp
        m = int(x.shape[0])
        if m == 0 or len(self.lattice) == 0:
            return xp.full(m, _F(FAR), xp.float32)
        t = x - _F(0.5)
        base = xp.floor(t)
        frac = (t - base).astype(xp.float32)
        base = base.astype(xp.int64)
        corners = xp.concatenate([base + xp.asarray(o, xp.int64) for o in CORNERS])
        at = _find(corners, self.lattice, xp)
        value = xp.where(at >= 0, self.phi[xp.maximum(at, 0)], _F(FAR)).reshape(8, m)
        open_ = (~self._solid(sim, corners)).reshape(8, m)
        total = xp.zeros(m, xp.float32)
        weights = xp.zeros(m, xp.float32)
        for c, o in enumerate(CORNERS):
            w = xp.ones(m, xp.float32)
            for a in range(3):
                w = w * (frac[:, a] if o[a] else _F(1) - frac[:, a])
            w = xp.where(open_[c], w, _F(0))
            total += w * value[c]
            weights += w
        return xp.where(weights > 0, total / xp.maximum(weights, _F(1e-12)), _F(FAR)).astype(xp.float32)

    def _depths(self, sim, liquid):
        xp = self.xp
        depth = xp.zeros(len(liquid), xp.int64)
        level = liquid
        for k in range(1, self.cells + 1):
            if len(level) == 0:
                break
            keep = xp.ones(len(level), bool)
            for o in DIRECTIONS:
                nb = level + xp.asarray(o, xp.int64)
                keep &= _isin(nb, level, xp) | self._solid(sim, nb)
            level = level[keep]
            depth[_isin(liquid, level, xp)] = k
        return depth

    def _store(self, sim, liquid, depth):
        xp = self.xp
        cells, phi = [liquid], [-(depth.astype(xp.float32) + _F(0.5))]
        known = liquid
        for ring in range(1, RINGS + 1):
            grown = unique_rows(xp.concatenate([known + xp.asarray(o, xp.int64) for o in DIRECTIONS]), xp) \
                if len(known) else known
            new = grown[~_isin(grown, known, xp)] if len(known) else grown
            new = new[~self._solid(sim, new)]
            cells.append(new)
            phi.append(xp.full(len(new), _F(ring - 0.5), xp.float32))
            known = xp.concatenate([known, new])
        self.lattice, self.phi = xp.concatenate(cells), xp.concatenate(phi)


def _pair(spec, water, settings, boundary="closed"):
    s = FlipSettings(**settings, boundary=boundary)
    new = FlipSimulation(spec, s, *water, xp=np, sparse=True)
    old = FlipSimulation(spec, s, *water, xp=np, sparse=True)
    old.band = RowListBand(s.narrow_band, np)
    return new, old


def _assert_same(new, old, when):
    assert np.array_equal(new.band.deep, old.band.deep), when
    assert np.array_equal(new.band.lattice, old.band.lattice), when
    assert np.array_equal(new.band.phi, old.band.phi), when
    assert np.array_equal(new.band.mass, old.band.mass), when
    assert new.band.resampled == old.band.resampled, when
    assert len(new.pos) == len(old.pos), when
    assert np.array_equal(new.pos, old.pos) and np.array_equal(new.vel, old.vel), when


@pytest.mark.parametrize("cells,cap", [(3, 8), (2, 8), (4, 1)])
def test_the_keyed_update_keeps_the_row_list_updates_deep_cells_level_set_and_particles(cells, cap):
    """A dam break at 24 fps (a cap of one substep: traces longer than the rings, so the
    candidates are dilated): bit-identical deep cells, φ, masses and particles each frame."""
    h = 0.05
    spec = GridSpec((0.0, 0.0, 0.0), h, (24, 10, 16))
    water = box((0.0, 0.0, 0.0), (8 * h, 10 * h, 12 * h))
    new, old = _pair(spec, water, {"narrow_band": cells, "seed": 2, "max_substeps": cap})
    for frame in range(8):
        new.step(1 / 24)
        old.step(1 / 24)
        _assert_same(new, old, frame)
    assert len(new.band.deep) > 0 and new.band.resampled > 0
    if cap == 1:
        assert max(old.band.reaches) > RINGS  # the dilation ran


def test_the_keyed_update_matches_in_an_open_domain_leaving_the_box():
    """Negative cells and liquid beyond the box: the keys' frame follows the liquid."""
    spec = GridSpec((0.0, 0.0, 0.0), 0.1, (8, 8, 8))
    water = box((0.0, 0.0, 0.2), (0.8, 0.8, 0.8))
    new, old = _pair(spec, water, {"narrow_band": 2, "seed": 3}, boundary="open")
    for frame in range(6):
        new.step(1 / 24)
        old.step(1 / 24)
        _assert_same(new, old, frame)
    assert (new.band.lattice < 0).any()


def _band_update_peaks(sim, frames):
    """tracemalloc peak (bytes above what was held) of each band update over *frames*."""
    import tracemalloc

    update, peaks = sim.band.update, []

    def traced(s, dt):
        tracemalloc.start()
        held = tracemalloc.get_traced_memory()[0]
        try:
            update(s, dt)
        finally:
            peaks.append(tracemalloc.get_traced_memory()[1] - held)
            tracemalloc.stop()

    sim.band.update = traced
    for _ in range(frames):
        sim.step(1 / 24)
    return peaks


def test_the_band_updates_measured_peak_lies_within_its_estimate():
    """A dam break of 0.33M particles, 4-cell band, one substep a frame (the candidates
    dilated): the update's NumPy peak under the estimate's band bytes and above half of them."""
    from voxfx.kernels.flip import sparse_memory

    n = 64
    spec = GridSpec((0.0, 0.0, 0.0), 1.0 / n, (n, n // 2, n))
    sim = FlipSimulation(spec, FlipSettings(narrow_band=4, seed=1, max_substeps=1),
                         *box((0.0, 0.0, 0.0), (0.4, 0.5, 0.8)), xp=np, sparse=True)
    particles = len(sim.pos)
    peak = max(_band_update_peaks(sim, 2))
    band = sparse_memory.CPU_BAND_PARTICLE * particles + sparse_memory.CPU_BAND_CELL * particles / 8
    assert 0.5 * band < peak < band, (peak, band)
    stages = sparse_memory.sparse_flip_memory(spec, particles, narrow_band=4, parts=True, xp=np)
    assert stages["narrow band"] == stages["state"] + int(band)


def test_the_sparse_estimate_counts_the_narrow_band_only_when_it_is_on(monkeypatch):
    """On the device the band's estimate holds only the particles the band keeps
    (``band_kept``) in its state and substep, sees every liquid particle in the level set,
    and adds the band's update to the substep; off, no band stage."""
    monkeypatch.setenv("VOXFX_SPARSE_BAND", "arrays")  # the array way's fit and runs
    from voxfx.kernels.flip import sparse_memory as M

    spec = GridSpec((0.0, 0.0, 0.0), 1 / 512, (512, 512, 512))
    particles = 65_536_000
    gpu = object()  # any module but NumPy: the estimate's device branch
    off = M.sparse_flip_memory(spec, particles, xp=gpu, parts=True)
    on = M.sparse_flip_memory(spec, particles, xp=gpu, parts=True, narrow_band=4)
    kept = M.band_kept(particles, 8, 4, spec)
    assert "narrow band" not in off and 0 < kept < particles
    assert on == M.memory_at(spec, on["bricks"], particles, narrow_band=4, parts=True, xp=gpu, kept=kept)
    assert on["frame output"] == off["frame output"] and on["substep"] < off["substep"]
    assert on["narrow band"] > on["substep"] and on["total"] == max(on["substep"], on["frame output"],
                                                                      on["narrow band"])
    # the 65M row's pool with a 4-cell band (a few frames): 10.04 GiB against 6.87 without
    assert on["narrow band"] > 10.04 * 2 ** 30


def _dam_8m():
    import sys

    from tests.conftest import ROOT

    sys.path.insert(0, str(ROOT / "bench"))
    from flip import dam_break

    from voxfx.kernels.flip import sparse_memory as M

    spec, v, _ = dam_break(256, 8_000_000)
    top = (float(v[:, 2].max()) - spec.origin[2]) / spec.voxel_size
    return spec, M.climb_cells(top, 0.0, spec)


# band cells -> per frame: the bricks held after it, the liquid's and the kept particles after it (thousands),
# its in-use peak (MiB, rounded up); bench/memory_liquid.py --rows band --band-frames 30 on an H100, the
# set-up's workspace on (bench/RESULTS.md, calls 22-25)
BAND_RUNS = {
    2: {
        "bricks": [3248, 3318, 3492, 3695, 3934, 4242, 4554, 4896, 5359, 6034, 6300, 6901, 7354, 8227, 8419, 8861,
                   9201, 9350, 9851, 10208, 10151, 9380, 8118, 6841, 6609, 6735, 6934, 6956, 6664, 6210],
        "liquid_k": [7969, 7960, 7956, 7951, 7938, 7896, 7811, 7725, 7622, 7396, 7099, 6835, 6618, 6411, 6227, 6092,
                     5993, 5925, 5856, 5800, 5725, 5590, 5388, 5164, 5027, 4960, 4970, 4967, 4976, 4985],
        "kept_k": [365, 338, 341, 342, 363, 413, 518, 727, 968, 1219, 1496, 1811, 2046, 2165, 2235, 2274, 2283, 2242,
                   2170, 2079, 1921, 1743, 1450, 1275, 1319, 1372, 1285, 1188, 1093, 975],
        "peak_mib": [1005.5, 1005.8, 1010.7, 1018.0, 1023.9, 1034.4, 1045.3, 1060.0, 1115.5, 1138.2, 1146.1, 1160.6,
                     1178.0, 1322.1, 1345.1, 1336.1, 1373.1, 1340.8, 1440.8, 1513.2, 1583.6, 1591.1, 1473.3, 1315.4,
                     1200.2, 1205.6, 1206.8, 1236.6, 1234.5, 1200.5],
    },
    4: {
        "bricks": [3247, 3297, 3497, 3691, 3937, 4250, 4576, 4904, 5352, 6006, 6575, 7133, 8102, 9436, 10307, 11281,
                   12196, 13149, 14318, 15513, 16546, 17150, 17319, 16882, 15743, 13975, 12523, 10943, 9519, 8488],
        "liquid_k": [7971, 7962, 7960, 7957, 7947, 7915, 7848, 7798, 7774, 7712, 7604, 7514, 7442, 7357, 7253, 7124,
                     6999, 6896, 6800, 6710, 6606, 6476, 6275, 6109, 5943, 5750, 5506, 5329, 5234, 5196],
        "kept_k": [840, 800, 797, 801, 835, 916, 1092, 1466, 1937, 2483, 3098, 3747, 4309, 4747, 5054, 5238, 5336,
                   5364, 5299, 5130, 4815, 4439, 3994, 3639, 3481, 3261, 2918, 2931, 2878, 2595],
        "peak_mib": [1157.4, 1157.6, 1162.0, 1169.3, 1175.6, 1185.8, 1200.3, 1220.7, 1242.7, 1319.5, 1455.6, 1602.0,
                     1868.8, 2041.5, 2157.0, 2278.8, 2376.9, 2523.1, 2602.3, 2643.4, 2679.1, 2740.2, 2864.1, 2939.3,
                     2760.9, 2647.2, 2475.1, 2254.5, 2262.6, 2238.0],
    },
    8: {
        "bricks": [3247, 3297, 3495, 3693, 3938, 4260, 4591, 4926, 5253, 5766, 6403, 7133, 7958, 8953, 9552, 10427,
                   11350, 12493, 13672, 14740, 15658, 16235, 16335, 15743, 13987, 11566, 9311, 7889, 7291, 6804],
        "liquid_k": [7973, 7968, 7966, 7952, 7924, 7864, 7761, 7674, 7613, 7553, 7497, 7421, 7350, 7311, 7279, 7261,
                     7227, 7209, 7180, 7140, 7055, 6946, 6813, 6660, 6486, 6324, 6152, 5985, 5898, 5882],
        "kept_k": [1729, 1666, 1636, 1627, 1665, 1780, 2059, 2660, 3375, 4076, 4749, 5371, 5942, 6386, 6711, 6946,
                   7068, 7108, 7016, 6835, 6523, 6101, 5567, 4994, 4504, 4491, 4547, 4443, 4369, 4129],
        "peak_mib": [1300.9, 1224.1, 1207.6, 1207.5, 1234.4, 1293.1, 1411.6, 1633.4, 1870.5, 2055.8, 2199.6, 2335.3,
                     2478.6, 2731.1, 2822.9, 2929.2, 3013.5, 3079.1, 3120.3, 3197.9, 3198.9, 3157.3, 3092.8, 2949.3,
                     2766.9, 2674.2, 2727.1, 2772.6, 2809.8, 2805.6],
    },
}


def test_the_kept_share_follows_the_most_each_band_kept():
    """``band_kept`` before the bake (the band's cells of a sheet twice the spread layer's
    depth) against the most particles each band kept over the H100 runs: within 0.9-1.25×;
    all of them without a band or in an open domain."""
    from voxfx.kernels.flip import sparse_memory as M

    spec, climb = _dam_8m()
    particles = 8_000_033
    for band, run in BAND_RUNS.items():
        estimate = M.band_kept(particles, 8, band, spec, True, climb)
        most = max(run["kept_k"]) * 1000
        assert 0.9 * most <= estimate <= 1.25 * most, (band, estimate, most)
    assert M.band_kept(particles, 8, 0, spec, True, climb) == particles
    assert M.band_kept(particles, 8, 4, spec, False, climb) == particles
    assert M.band_kept(particles, 8, 64, spec, True, climb) == particles  # a band past the sheet keeps them all


def test_the_gpu_band_estimate_covers_whole_runs_of_each_band_width(monkeypatch):
    """The estimate before the bake lies within [1, 1.5]× of each band's in-use peak over
    the H100 runs (``BAND_RUNS``) and the dam's without a band (60 frames, fresh set-up).
    Counting every liquid particle in the substep, it was 1.69× with 2 cells."""
    monkeypatch.setenv("VOXFX_SPARSE_BAND", "arrays")  # the array way's fit and runs
    from voxfx.kernels.flip.sparse_memory import sparse_flip_memory

    spec, climb = _dam_8m()
    particles = 8_000_033
    peaks = {0: (1.310 * 2 ** 30, False)}  # GiB in use; the set-up's workspace off for the dam
    peaks.update({band: (max(run["peak_mib"]) * 2 ** 20, True) for band, run in BAND_RUNS.items()})
    for band, (peak, workspace) in peaks.items():
        estimate = sparse_flip_memory(spec, particles, xp=object(), narrow_band=band, climb=climb,
                                      workspace=workspace)
        assert peak <= estimate <= 1.5 * peak, (band, estimate / peak)


def test_the_gpu_band_check_before_each_frame_covers_it_and_counts_the_kept_particles(monkeypatch):
    """``FrameCheck`` replayed on each band's run (the bricks, the liquid's and the kept
    particles a frame before, their growth): its need is at least each frame's in-use peak
    and from the second frame on at most 1.35× it. Counting every liquid particle as held
    it was up to 1.59×, 1.81× and 2.65× (2, 4, 8 cells). The runs' peaks were measured before
    the level set's interior skip (its two flag buffers) became the default: it is off here."""
    monkeypatch.setenv("VOXFX_LEVEL_SET_INTERIOR", "0")
    monkeypatch.setenv("VOXFX_SPARSE_BAND", "arrays")  # the array way's fit and runs
    from voxfx.kernels.flip import sparse_memory as M

    spec, climb = _dam_8m()
    particles = 8_000_033
    first = M.estimate_bricks(particles / 8, spec, True, climb)
    for band, run in BAND_RUNS.items():
        check = FrameCheck(lambda b, p, parts=False, kept=None, band=band: M.memory_at(
            spec, b, p, 8, False, True, parts, object(), band, workspace=True, kept=kept),
            True, M.box_bricks(spec), first=first, band=True)
        bricks = capacity = 0
        liquid = kept = particles  # before the first frame every particle is held
        ratios = []
        for frame, peak in enumerate(run["peak_mib"]):
            need, _ = check.plan(bricks, capacity, liquid, kept)
            ratios.append(need / (peak * 2 ** 20))
            bricks, liquid, kept = run["bricks"][frame], run["liquid_k"][frame] * 1000, run["kept_k"][frame] * 1000
            capacity = max(capacity, bricks)
            check.saw(bricks, liquid, kept)
        assert min(ratios) >= 1.0, (band, ratios.index(min(ratios)) + 1, min(ratios))
        assert max(ratios[1:]) <= 1.35, (band, max(ratios[1:]))


def test_the_frame_check_gives_the_band_the_particles_the_simulation_holds():
    """A NumPy dam break with a 2-cell band: the check before each frame asks the memory
    for the particles the simulation holds (``len(sim.pos)``) beside the liquid's (with
    the deep cells'), the next frame's grown within the liquid's; without ``band`` it
    asks as before."""
    from voxfx.kernels.flip import sparse_memory as M

    h = 0.05
    spec = GridSpec((0.0, 0.0, 0.0), h, (24, 10, 16))
    sim = FlipSimulation(spec, FlipSettings(narrow_band=2, seed=2), *box((0.0, 0.0, 0.0), (8 * h, 10 * h, 12 * h)),
                         xp=np, sparse=True)
    asked = []

    def memory(b, p, parts=False, kept=None):
        asked.append((p, kept))
        return M.memory_at(spec, b, p, 8, parts=parts, xp=np, narrow_band=2, kept=kept)

    check = FrameCheck(memory, True, M.box_bricks(spec), first=100, band=True)
    for _ in range(3):
        sim.step(1 / 24)
        asked.clear()
        check.need(sim)
        assert len(sim.pos) < sim.liquid_particles()
        assert asked[1] == (sim.liquid_particles(), len(sim.pos))  # the state held now
        assert asked[0][1] <= asked[0][0] and asked[0][1] >= len(sim.pos)  # the next frame's, grown
        check.seen(sim)
    plain = FrameCheck(lambda b, p, parts=False: M.memory_at(spec, b, p, 8, parts=parts, xp=np), True,
                       M.box_bricks(spec), first=100)
    assert plain.need(sim)[0] > 0  # a memory without ``kept`` is called as before


# the band at other sizes (dam breaks of 1M particles at 128³ and 2M at 160³): per frame the bricks, the
# liquid's and the kept particles after it, the pool's bytes in use before it (MiB, rounded down: other
# tests' and rows' blocks included) and its in-use peak (MiB, rounded up); ``bench/memory_liquid.py --rows
# band-sizes --stages`` on an H100 (each frame's peak: the topology update's ``keys_of_boxes``)
BAND_SIZES = {
    (128, 1_000_117, 4): {
        "bricks": [588, 642, 680, 721, 776, 832, 904],
        "liquid": [995456, 992862, 991084, 988901, 983941, 978856, 969070],
        "kept": [211192, 196510, 190604, 186517, 187773, 198744, 225342],
        "used_mib": [49.8, 56.4, 57.8, 58.8, 60.0, 64.1, 66.1],
        "peak_mib": [287.4, 288.7, 298.7, 301.7, 332.9, 336.0, 401.8],
    },
    (128, 1_000_117, 8): {
        "bricks": [588, 642, 680, 721, 776, 833],
        "liquid": [996242, 994345, 994015, 991577, 984751, 974015],
        "kept": [406610, 388089, 373351, 362377, 360231, 374399],
        "used_mib": [52.2, 60.4, 61.7, 62.6, 63.6, 67.4],
        "peak_mib": [314.4, 316.0, 332.9, 336.9, 340.4, 387.8],
    },
    (160, 2_000_000, 2): {
        "bricks": [963, 1046, 1106],
        "liquid": [1992619, 1984890, 1984157],
        "kept": [144107, 138274, 130885],
        "used_mib": [75.1, 98.5, 99.1],
        "peak_mib": [589.1, 594.9, 604.3],
    },
    (160, 2_000_000, 4): {
        "bricks": [963, 1046, 1105, 1215, 1327, 1426, 1534],
        "liquid": [1992824, 1986113, 1984738, 1982113, 1978205, 1970801, 1957866],
        "kept": [324784, 314641, 303426, 303017, 308997, 324953, 368434],
        "used_mib": [95.8, 102.3, 102.9, 104.7, 108.9, 111.3, 114.7],
        "peak_mib": [562.4, 566.9, 577.2, 590.2, 614.7, 618.1, 683.5],
    },
    (160, 2_000_000, 8): {
        "bricks": [963, 1046, 1098, 1215],
        "liquid": [1993697, 1988708, 1987986, 1984559],
        "kept": [652137, 634236, 609866, 602071],
        "used_mib": [106.9, 119.7, 120.1, 123.1],
        "peak_mib": [566.2, 573.2, 602.3, 612.1],
    },
}


def _dam(n, particles):
    import sys

    from tests.conftest import ROOT

    sys.path.insert(0, str(ROOT / "bench"))
    from flip import dam_break

    from voxfx.kernels.flip import sparse_memory as M

    spec, v, _ = dam_break(n, particles)
    top = (float(v[:, 2].max()) - spec.origin[2]) / spec.voxel_size
    return spec, M.climb_cells(top, 0.0, spec)


def test_the_band_topology_stage_counts_the_liquids_boxes_and_their_brick_pairs(monkeypatch):
    """On the device a band's topology update (``keys_of_boxes`` over every liquid cell's
    box) is a stage: beside the state, bytes per liquid cell, per (cell, brick) pair (27 a
    cell at most, expanded ``BUILD_CHUNK`` at a time: a fixed cost once the liquid is large)
    and per particle kept; no such stage without a band or on the CPU."""
    monkeypatch.setenv("VOXFX_SPARSE_BAND", "arrays")  # the array way's fit and runs
    from voxfx.kernels.flip import sparse_memory as M
    from voxfx.kernels.grid.sparse import BUILD_CHUNK

    gpu = object()
    for n, particles in ((128, 1_000_117), (256, 8_000_033)):
        spec, climb = _dam(n, particles)
        kept = M.band_kept(particles, 8, 4, spec, True, climb)
        on = M.sparse_flip_memory(spec, particles, xp=gpu, parts=True, narrow_band=4, climb=climb)
        cells = particles / 8
        pairs = min(BUILD_CHUNK, M.TOPOLOGY_PAIRS * cells)
        assert on["band topology"] == int(on["state"] + M.TOPOLOGY_CELL * cells + M.TOPOLOGY_PAIR * pairs
                                          + M.TOPOLOGY_PARTICLE * kept)
        assert (pairs < BUILD_CHUNK) == (n == 128)  # 1M: 27 pairs a cell; 8M: one chunk at a time
        assert "band topology" not in M.sparse_flip_memory(spec, particles, xp=gpu, parts=True, climb=climb)
        assert "band topology" not in M.sparse_flip_memory(spec, particles, xp=np, parts=True, narrow_band=4,
                                                           climb=climb)
    # the 1M run's second frame (4 cells; kept 211k of 995k): its topology's 1.89M pairs (the trace's pair
    # array, 14.5 MiB) took it from 56.4 MiB in use to 288.7; the bytes a cell, pair and particle cover that
    # within 1.25×, and the bound of 27 pairs a cell (the check's) within 2×
    measured = (288.7 - 56.4) * 2 ** 20
    cells, kept = 995_456 / 8, 211_192
    fitted = M.TOPOLOGY_CELL * cells + M.TOPOLOGY_PAIR * 1_890_000 + M.TOPOLOGY_PARTICLE * kept
    assert measured <= fitted <= 1.25 * measured
    assert fitted < M.band_topology(0, cells, kept) <= 2 * measured


def test_the_band_check_adds_what_the_pool_holds_beyond_the_state():
    """With a band, ``FrameCheck.plan(..., used=)`` adds the pool's bytes in use beyond the
    state's estimate to the need (the frame's work comes on top of whatever holds them);
    less in use than the state, or without a band, the need is as before."""
    from voxfx.kernels.flip import sparse_memory as M

    spec, _ = _dam(128, 1_000_117)
    gpu = object()

    def memory(b, p, parts=False, kept=None):
        return M.memory_at(spec, b, p, 8, parts=parts, xp=gpu, narrow_band=4, kept=kept)

    band = FrameCheck(memory, True, M.box_bricks(spec), first=3000, band=True)
    band.saw(642, 992_862, 196_510)
    bare, state = band.plan(680, 680, 991_084, 190_604)
    assert band.plan(680, 680, 991_084, 190_604, used=state + 123_456) == (bare + 123_456, state)
    assert band.plan(680, 680, 991_084, 190_604, used=state // 2) == (bare, state)
    plain = FrameCheck(lambda b, p, parts=False: M.memory_at(spec, b, p, 8, parts=parts, xp=gpu), True,
                       M.box_bricks(spec), first=3000)
    plain.saw(642, 992_862)
    assert plain.plan(680, 680, 991_084, used=10 * 2 ** 30) == plain.plan(680, 680, 991_084)


def test_the_gpu_band_estimate_and_check_cover_the_runs_at_1m_and_2m_particles(monkeypatch):
    """Replayed on the 1M (128³) and 2M (160³) band runs (``BAND_SIZES``: each frame's
    peak the topology update's), the estimate before the bake covers every frame and the
    check before each frame (the counts a frame ago, the pool's bytes in use) covers it,
    within 2× from the second frame. Without the topology stage and the pool's bytes the
    check fell to 0.52× (1M, 4 cells) from the second frame."""
    monkeypatch.setenv("VOXFX_SPARSE_BAND", "arrays")  # the array way's fit and runs
    from voxfx.kernels.flip import sparse_memory as M

    gpu = object()
    for (n, particles, band), run in BAND_SIZES.items():
        spec, climb = _dam(n, particles)
        estimate = M.sparse_flip_memory(spec, particles, xp=gpu, narrow_band=band, climb=climb, workspace=True)
        assert max(run["peak_mib"]) * 2 ** 20 <= estimate, (n, band)
        check = FrameCheck(lambda b, p, parts=False, kept=None, spec=spec, band=band: M.memory_at(
            spec, b, p, 8, False, True, parts, gpu, band, workspace=True, kept=kept),
            True, M.box_bricks(spec), first=M.estimate_bricks(particles / 8, spec, True, climb), band=True)
        bricks = capacity = 0
        liquid = kept = particles
        ratios = []
        for frame, peak in enumerate(run["peak_mib"]):
            need, _ = check.plan(bricks, capacity, liquid, kept, used=int(run["used_mib"][frame] * 2 ** 20))
            ratios.append(need / (peak * 2 ** 20))
            bricks, liquid, kept = run["bricks"][frame], run["liquid"][frame], run["kept"][frame]
            capacity = max(capacity, bricks)
            check.saw(bricks, liquid, kept)
        assert min(ratios) >= 1.0, (n, band, ratios.index(min(ratios)) + 1, min(ratios))
        assert max(ratios[1:]) <= 2.0, (n, band, max(ratios[1:]))
