"""The sparse solver's kept faces without copies (``sparse_kept``, helper h18d): the keep takes
the grid's face arrays themselves and u_n is written into them (``start_velocity_into``), where
the keep copied the faces and u_n was a select into new arrays. The oracle is that way, written
out here: the same particles, velocities, kept channels and checkpoints bit for bit, frame after
frame, across a checkpoint and restore, with the narrow band and with the air band prototype
(whose substep makes its own u_n and masks)."""

import numpy as np
import pytest

from tests.meshes import box
from voxfx.kernels import backend
from voxfx.kernels.flip import sparse_transfer, transfer
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.sparse_kept import KeptBricks, start_velocity_into
from voxfx.kernels.grid import GridSpec

KEPT = KeptBricks.KEPT


def _bits(a):
    a = backend.to_numpy(a)
    return a.view(np.uint32) if a.dtype == np.float32 else a


def start_velocity_inputs(rs, n: int, specials: int):
    """(faces, kept, was, now) for ``transfer.start_velocity``'s checks: three float32 components of
    *n* faces and of their kept values, *specials* of each set NaN and as many −0; the kept masks of 0,
    1 and 255, the new ones of 0 and 1 (uint8; NumPy arrays, the GPU tests copy them)."""
    faces, kept = ([rs.standard_normal(n).astype(np.float32) for _ in range(3)] for _ in range(2))
    for f in (*faces, *kept):
        f[rs.integers(0, n, specials)] = np.nan
        f[rs.integers(0, n, specials)] = -0.0
    was = [rs.choice(np.array([0, 1, 255], np.uint8), n) for _ in range(3)]
    now = [rs.choice(np.array([0, 1], np.uint8), n) for _ in range(3)]
    return faces, kept, was, now


def test_start_velocity_into_writes_the_references_bits_into_the_kept_faces():
    """u_n in place: the kept arrays come back, holding ``transfer.start_velocity``'s bits (NaN and
    ±0 copied as they are, masks of 0, 1 and 255); nothing kept gives None."""
    faces, kept, was, now = start_velocity_inputs(np.random.default_rng(5), 10_007, 40)
    want = transfer.start_velocity(faces, now, ([k.copy() for k in kept], was))
    got = start_velocity_into(faces, now, (kept, was))
    assert all(g is k for g, k in zip(got, kept))
    for w, g in zip(want, got):
        assert np.array_equal(_bits(g), _bits(w))
    assert start_velocity_into(faces, now, None) is None


def _copying(sim):
    """*sim* keeping its faces as before helper h18d: copied into the kept channels at the keep,
    u_n a select into new arrays (``transfer.start_velocity``)."""
    g = sim.grid

    def start(fluid=None):
        if KEPT[0] not in g.channels:
            return None
        kept = (tuple(g[n] for n in KEPT[:3]), tuple(g[n] for n in KEPT[3:]))
        return transfer.start_velocity(g.faces(), sparse_transfer.fluid_faces(g) if fluid is None else fluid, kept)

    def keep(fluid=None):
        if KEPT[0] not in g.channels:
            for n in KEPT:
                g.add(n, np.uint8 if "fluid" in n else np.float32, 0)
        for n, f in zip(KEPT[:3], g.faces()):
            g[n] = f.copy()
        for n, f in zip(KEPT[3:], sparse_transfer.fluid_faces(g) if fluid is None else fluid):
            g[n] = f

    sim._start_velocity, sim._keep_velocity = start, keep
    return sim


def _dam(xp=np, h=0.05, **settings):
    spec = GridSpec((0.0, 0.0, 0.0), h, tuple(round(n * 0.05 / h) for n in (16, 8, 12)))
    return FlipSimulation(spec, FlipSettings(time_centred_advection=True, cfl=4.0, **settings),
                          *box((0.0, 0.0, 0.0), (0.3, 0.4, 0.4)), xp=xp, sparse=True)


def _assert_same(a, b, when):
    for key in ("position", "velocity"):
        assert np.array_equal(_bits(a.particles_host()[key]), _bits(b.particles_host()[key])), (when, key)
    for name in (*KEPT, *a.grid.FACES):
        assert np.array_equal(_bits(a.grid[name]), _bits(b.grid[name])), (when, name)
    sa, sb = a.checkpoint(), b.checkpoint()
    assert sa.keys() == sb.keys(), when
    for key in sa:
        assert np.array_equal(_bits(sa[key]), _bits(sb[key])), (when, key)


def check_ways_agree(case, monkeypatch, xp=np, h=0.05, frames=(5, 3), resume_exact=True):
    """24 fps frames of a dam break at CFL 4 (several substeps a frame) the kept-faces way and the
    copying way: the same bits after every frame, and after a checkpoint restored into fresh
    simulations of both ways; the kept faces are the grid's face arrays after each frame (no copy)
    and each substep's u_n is written into the kept faces (the arrays G2P reads are theirs)."""
    if case == "air band":
        monkeypatch.setenv("VOXFX_AIR_BAND_PROJECTION", "1")
    settings = {"narrow_band": 2} if case == "narrow band" else {}
    make = lambda: _dam(xp, h, **settings)  # noqa: E731
    shared, copying = make(), _copying(make())
    starts = []
    plain = sparse_transfer.g2p_advect

    def g2p_advect(grid, *args, before=None, **kwargs):
        if grid is shared.grid and before is not None:
            starts.append(all(b is grid[n] for b, n in zip(before, KEPT[:3])))
        return plain(grid, *args, before=before, **kwargs)

    monkeypatch.setattr(sparse_transfer, "g2p_advect", g2p_advect)
    for frame in range(frames[0]):
        for sim in (shared, copying):
            sim.step(1 / 24)
        _assert_same(shared, copying, f"frame {frame}")
        assert all(shared.grid[k] is shared.grid[f] for k, f in zip(KEPT[:3], shared.grid.FACES))
    if case != "air band":  # its advection samples u_n itself (sparse_air_band.advect), not through G2P
        assert len(starts) >= 2 * frames[0] - 2 and all(starts)
    state = {k: np.array(v) for k, v in shared.checkpoint().items()}
    resumed, resumed_copying = make(), _copying(make())
    for sim in (resumed, resumed_copying):
        sim.restore(state)
    for frame in range(frames[1]):
        for sim in (shared, copying, resumed, resumed_copying):
            sim.step(1 / 24)
        _assert_same(shared, copying, f"frame {frame + frames[0]}")
        _assert_same(resumed, resumed_copying, f"resumed frame {frame + frames[0]}")
    if resume_exact and case != "narrow band":  # the band's resume: not bit for bit either way (its deep faces)
        assert np.array_equal(shared.particles_host()["position"], resumed.particles_host()["position"])


@pytest.mark.parametrize("case", ["plain", "narrow band", "air band"])
def test_kept_faces_without_copies_move_the_liquid_as_copies_did(case, monkeypatch):
    check_ways_agree(case, monkeypatch)
