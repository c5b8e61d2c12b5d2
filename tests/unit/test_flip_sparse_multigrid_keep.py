"""The NumPy V-cycle with levels ≥ 2 kept across set-ups (sparse_multigrid_kept, issue 24, h19d;
``VOXFX_SPARSE_MG_KEEP``): on one grid whose liquid moves set-up by set-up, "3" rebuilds levels
≥ 2 at set-ups 0 and 3 (the fresh V-cycle's tables and z bit for bit) and keeps them at 1 and 2
(bench/_mg_kept.py's ``KeptVCycle`` with levels ≥ 2 from set-up 0, h19c's measured model: the
same tables and z bit for bit); "0" keeps nothing; a set-up whose V-cycle has fewer levels drops
what was held, so the next one rebuilds; and a pressure solve with the switch on converges to the
same tolerance as without it."""

import numpy as np
import pytest

from bench._mg_kept import KeptVCycle, Snapshot
from voxfx.kernels.flip import sparse_pressure, sparse_transfer
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid
from voxfx.kernels.flip.sparse_multigrid import VCycle
from voxfx.kernels.flip.sparse_multigrid_kept import keep_every, keep_from
from voxfx.kernels.grid import GridSpec

SHAPE = (40, 24, 36)
TOPS = (0.4, 0.46, 0.52, 0.58)  # the first puddle's height, set-up by set-up: the liquid moves


SHAPE3 = (80, 48, 72)  # the tank twice as fine: levels ≥ 3 to hold (K = 3; SHAPE's V-cycle has 3 levels)


def _positions(top, n=48000, shape=SHAPE):
    rng = np.random.default_rng(8)
    spec = GridSpec((0.0, 0.0, 0.0), 0.1 * SHAPE[0] / shape[0], shape)
    up = np.asarray(spec.upper)
    first = rng.uniform(0.0, 0.4, (n, 3)) * up
    first[:, 1] *= top / 0.4
    return spec, np.concatenate([first, rng.uniform(0.7, 0.95, (n // 2, 3)) * up]).astype(np.float32)


def _substep(g, pos):
    """*g* updated to the particles *pos* (tests/unit/test_flip_sparse_multigrid_kept.py's tank):
    (kind, level 0)."""
    g.update(pos, 3, obstacle=np.array([(i, j, 2) for i in range(3, 7) for j in range(2, 5)]))
    sparse_transfer.classify(g, pos)
    kind, _, _ = sparse_pressure.solver_cells(g)
    return kind, sparse_pressure.Unknowns(g, kind)


def _tables(v):
    return [v.levels[0].m] + [(L.m, L.m_red) for L in v.levels] + v.up + v.down + [L.nbr for L in v.levels[1:]]


def _equal(a, b):
    ta, tb = _tables(a), _tables(b)
    assert len(ta) == len(tb)
    for x, y in zip(ta, tb):
        assert np.array_equal(np.asarray(x), np.asarray(y))


def _r(m, seed=3):
    return np.append(np.random.default_rng(seed).normal(0, 1, m), 0).astype(np.float32)


@pytest.mark.parametrize("variable, read, default, other, bad", [
    ("VOXFX_SPARSE_MG_KEEP", keep_every, 0, 3, "5"),
    ("VOXFX_SPARSE_MG_KEEP_FROM", keep_from, 2, 3, "1"),
])
def test_the_switches_read_their_variables(monkeypatch, variable, read, default, other, bad):
    monkeypatch.delenv(variable, raising=False)
    assert read() == default
    monkeypatch.setenv(variable, str(other))
    assert read() == other
    monkeypatch.setenv(variable, bad)
    with pytest.raises(ValueError, match=variable):
        read()


@pytest.mark.parametrize("first", [2, 3])
def test_kept_every_3_is_the_fresh_vcycle_at_rebuilds_and_the_kept_model_in_between(monkeypatch, first):
    """Levels ≥ *first* held (``VOXFX_SPARSE_MG_KEEP_FROM``; 3: levels 0 … 2 built each set-up,
    h19f): against ``KeptVCycle(keep_from=first)`` bit for bit."""
    monkeypatch.setenv("VOXFX_SPARSE_MG_KEEP_FROM", str(first))
    scene = {"n": 8 * 48000, "shape": SHAPE3} if first == 3 else {}
    spec, _ = _positions(TOPS[0], **scene)
    g = SparseFlipGrid(spec, np, closed=True)
    snaps, got, held = [], [], []
    for top in TOPS:
        kind, level0 = _substep(g, _positions(top, **scene)[1])
        monkeypatch.delenv("VOXFX_SPARSE_MG_KEEP", raising=False)
        snaps.append(Snapshot(g, kind, level0))  # the fresh hierarchy (nothing held touched)
        monkeypatch.setenv("VOXFX_SPARSE_MG_KEEP", "3")
        got.append(VCycle(g, kind, level0))
        held.append(g._mg_held)
        assert len(got[-1].levels) >= first + 1
    assert held[0] is held[1] is held[2] and held[3] is not held[0] and held[3].age == 0 and held[2].age == 2
    assert held[0].first == first and held[0].levels[0] is got[0].levels[first]
    for at in (0, 3):  # rebuilt: the fresh V-cycle
        _equal(got[at], snaps[at].vcycle)
        r = _r(snaps[at].level0.m)
        assert np.array_equal(got[at](r), snaps[at].vcycle(r))
    moved = 0
    for at in (1, 2):  # kept from set-up 0: h19c's model
        model = KeptVCycle(snaps[at], snaps[0], keep_from=first)
        _equal(got[at], model)
        r = _r(snaps[at].level0.m)
        z = got[at](r)
        assert np.array_equal(z, model(r))
        assert got[at].levels[first] is got[0].levels[first]  # the same tables, not rebuilt
        if first == 3:  # level 2 is this set-up's: the fresh one's tables
            assert got[at].levels[2] is not got[0].levels[2]
            assert np.array_equal(got[at].levels[2].nbr, snaps[at].vcycle.levels[2].nbr)
        moved += not np.array_equal(got[at].up[first - 1], snaps[at].vcycle.up[first - 1])
    assert moved  # the liquid moved: level K − 1 ↔ K is not the fresh one


def test_off_keeps_nothing(monkeypatch):
    monkeypatch.setenv("VOXFX_SPARSE_MG_KEEP", "0")
    spec, pos = _positions(TOPS[0])
    g = SparseFlipGrid(spec, np, closed=True)
    for top in TOPS[:2]:
        kind, level0 = _substep(g, _positions(top)[1])
        v = VCycle(g, kind, level0)
        assert getattr(g, "_mg_held", None) is None
        monkeypatch.delenv("VOXFX_SPARSE_MG_KEEP")
        _equal(v, Snapshot(g, kind, level0).vcycle)
        monkeypatch.setenv("VOXFX_SPARSE_MG_KEEP", "0")


def test_fewer_levels_drop_what_was_held_and_the_next_set_up_rebuilds(monkeypatch):
    """A set-up with only a few cells of liquid (level 0 spans < MG_MIN_SIDE: one level) between
    two of the tank: the held levels go, the third set-up builds them afresh."""
    monkeypatch.setenv("VOXFX_SPARSE_MG_KEEP", "8")
    spec, pos = _positions(TOPS[0])
    g = SparseFlipGrid(spec, np, closed=True)
    kind, level0 = _substep(g, pos)
    VCycle(g, kind, level0)
    first = g._mg_held
    assert first is not None
    drop = pos[(pos[:, 0] < 0.3) & (pos[:, 1] < 0.3) & (pos[:, 2] < 0.3)]
    kind, level0 = _substep(g, drop)
    assert len(VCycle(g, kind, level0).levels) < 3 and g._mg_held is None
    kind, level0 = _substep(g, _positions(TOPS[1])[1])
    v = VCycle(g, kind, level0)
    assert g._mg_held is not None and g._mg_held is not first and g._mg_held.age == 0
    monkeypatch.delenv("VOXFX_SPARSE_MG_KEEP")
    _equal(v, Snapshot(g, kind, level0).vcycle)


def test_a_kept_set_up_solves_to_the_same_tolerance(monkeypatch):
    """The CPU pressure solve (``solve_pressure``, MGPCG) on the third set-up, levels ≥ 2 from
    the first: converged, its residual under the tolerance, within 2 iterations of the fresh
    hierarchy's, and the pressures within the tolerance's reach of each other."""
    spec, _ = _positions(TOPS[0])
    runs = {}
    for way in ("0", "3"):
        monkeypatch.setenv("VOXFX_SPARSE_MG_KEEP", way)
        g = SparseFlipGrid(spec, np, closed=True)
        for top in TOPS[:3]:
            _substep(g, _positions(top)[1])
            sparse_transfer.classify(g, _positions(top)[1])
            p, stats = sparse_pressure.solve_pressure(g, 0.01, tolerance=1e-5)
        runs[way] = (p, stats, getattr(g, "_mg_held", None))
    (p0, s0, h0), (p3, s3, h3) = runs["0"], runs["3"]
    assert h0 is None and h3 is not None and h3.age == 2
    assert s3["converged"] and abs(s3["iterations"] - s0["iterations"]) <= 2
    scale = float(np.abs(p0).max())
    assert float(np.abs(p3 - p0).max()) <= 1e-3 * scale


def test_a_frame_begun_rebuilds_at_the_next_set_up(monkeypatch):
    """``frame_started`` (the simulation's step, h19e) between two set-ups that "3" would keep
    from: the second rebuilds — the fresh hierarchy, held anew at age 0 — and the third keeps it."""
    from voxfx.kernels.flip.sparse_multigrid_kept import frame_started

    monkeypatch.setenv("VOXFX_SPARSE_MG_KEEP", "3")
    spec, _ = _positions(TOPS[0])
    g = SparseFlipGrid(spec, np, closed=True)
    held = []
    for at, top in enumerate(TOPS[:3]):
        if at == 1:
            frame_started(g)
        kind, level0 = _substep(g, _positions(top)[1])
        v = VCycle(g, kind, level0)
        held.append((g._mg_held, g._mg_held.age))
        if at == 1:
            monkeypatch.delenv("VOXFX_SPARSE_MG_KEEP")
            _equal(v, Snapshot(g, kind, level0).vcycle)
            monkeypatch.setenv("VOXFX_SPARSE_MG_KEEP", "3")
    (first, _), (second, age), (third, age3) = held
    assert second is not first and age == 0 and third is second and age3 == 1
