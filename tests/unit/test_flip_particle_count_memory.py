"""The particle count control's frame-end pass in the memory estimates (``particle_count``'s
notes, ``memory.flip_memory`` and ``sparse_memory.memory_at`` with *count_control*): a stage
of its own beside the state when Max Particles per Cell is on, nothing when it is off; on
NumPy it covers the pass as tracemalloc measures it; the add-on's estimates pass the setting."""

import tracemalloc

import numpy as np
import pytest

from tests.meshes import box
from voxfx.kernels.flip import particle_count
from voxfx.kernels.flip.grid import FlipSettings
from voxfx.kernels.flip.memory import flip_memory
from voxfx.kernels.flip.sim import FlipSimulation
from voxfx.kernels.flip.sparse_memory import memory_at, sparse_flip_memory
from voxfx.kernels.grid import GridSpec

GPU = object()  # any module but NumPy: the estimates' device branch


@pytest.mark.parametrize("apic", [False, True], ids=["flip", "apic"])
@pytest.mark.parametrize("xp", [np, GPU], ids=["cpu", "gpu"])
def test_the_dense_estimate_adds_the_pass_beside_the_state_only_when_on(xp, apic):
    """Off: the stages as before. On: a stage the state plus the larger of the passes (16 B a
    cell, the mask's 1 B and a pass's temporaries a particle of a chunk) and the kept copy
    (1 + 32 B a particle, +36 with APIC); the total the largest stage."""
    spec = GridSpec((0.0, 0.0, 0.0), 0.01, (128, 64, 64))
    C = 128 * 64 * 64
    for P in (20_000, 8_000_000):
        before = flip_memory(spec, P, apic, parts=True, xp=xp)
        off = flip_memory(spec, P, apic, parts=True, xp=xp, count_control=False)
        on = flip_memory(spec, P, apic, parts=True, xp=xp, count_control=True)
        assert off == before and "count control" not in off
        per_pass, chunk = (70, 1 << 18) if xp is np else (100, 1 << 22)
        expected = max(16 * C + P + per_pass * min(P, chunk), P + (32 + (36 if apic else 0)) * P)
        assert on["count control"] - on["state"] == expected
        assert {k: v for k, v in on.items() if k not in ("count control", "total")} == \
            {k: v for k, v in off.items() if k != "total"}
        assert on["total"] == max(off["total"], on["count control"])
        assert flip_memory(spec, P, apic, xp=xp, count_control=True) == on["total"]


@pytest.mark.parametrize("xp", [np, GPU], ids=["cpu", "gpu"])
def test_the_sparse_estimate_adds_the_pass_over_the_pool_only_when_on(xp):
    """The same over the bricks' pool (bricks × 512 cells), a pass 120 B a particle; on the
    GPU with a narrow band over the particles held, not the liquid's."""
    spec = GridSpec((0.0, 0.0, 0.0), 0.01, (256, 128, 128))
    bricks, P = 4000, 8_000_000
    cells = bricks * 512
    chunk = 1 << 18 if xp is np else 1 << 22
    off = memory_at(spec, bricks, P, parts=True, xp=xp)
    on = memory_at(spec, bricks, P, parts=True, xp=xp, count_control=True)
    assert "count control" not in off and memory_at(spec, bricks, P, parts=True, xp=xp, count_control=False) == off
    assert on["count control"] - on["state"] == max(16 * cells + P + 120 * min(P, chunk), 33 * P)
    assert on["total"] == max(off["total"], on["count control"])
    assert sparse_flip_memory(spec, P, xp=xp, count_control=False) == sparse_flip_memory(spec, P, xp=xp)
    assert sparse_flip_memory(spec, P, xp=xp, count_control=True) >= sparse_flip_memory(spec, P, xp=xp)
    if xp is GPU:
        held = 2_000_000
        band = memory_at(spec, bricks, P, parts=True, xp=xp, narrow_band=4, kept=held, count_control=True,
                         workspace=False)
        assert band["count control"] - band["state"] == 16 * cells + held + 120 * min(held, chunk)


def _traced(run):
    """(result, tracemalloc peak above what was traced when *run* started)."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        result = run()
        return result, tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("sparse, shape, apic", [(False, (64, 64, 64), False), (False, (128, 64, 64), True),
                                                  (True, (64, 64, 64), False)],
                         ids=["dense-passes", "dense-apic-copy", "sparse-passes"])
def test_the_cpu_estimate_covers_the_pass_as_measured(sparse, shape, apic):
    """tracemalloc of the frame-end pass (``_limit_count``, a pile of 3,000 particles thinned
    in one cell) against what the estimate adds beside the state: measured (v50) 18.2 MB
    against 22.8 dense (the passes: ~265k particles, a chunk and a bit), 45.2 against 45.4
    with APIC at 658k (the kept copy, 68 B each), 29.5 against 34.2 sparse (the pool's
    153,600 cells)."""
    h = 0.01
    spec = GridSpec((0.0, 0.0, 0.0), h, shape)
    v, t = box((0.0, 0.0, 0.0), (shape[0] * h, shape[1] * h, 0.08 if shape[0] == 64 else 0.10))
    sim = FlipSimulation(spec, FlipSettings(max_particles_per_cell=16, density_correction=0.0, apic=apic), v, t,
                         xp=np, sparse=sparse)
    if sparse:
        sim.step(1e-4)  # the bricks' pool is built by the first substep
    pile = np.random.default_rng(3).uniform(0.2 * h, 0.8 * h, (3000, 3)).astype(np.float32)  # one cell
    sim.pos = np.concatenate([sim.pos, pile])
    sim.vel = np.concatenate([sim.vel, np.zeros_like(pile)])
    if sim.c is not None:
        sim.c = np.concatenate([sim.c, np.zeros((len(pile), 3, 3), np.float32)])
    P = len(sim.pos)
    _traced(lambda: particle_count.thin(sim._particle_cells, P, sim._cell_count(), 16, 0, np))  # first-call caches
    removed, measured = _traced(sim._limit_count)
    assert removed > 2500
    if sparse:
        stages = memory_at(spec, sim.grid.capacity, P, parts=True, xp=np, apic=apic, count_control=True)
        assert sim._cell_count() == sim.grid.capacity * 512
    else:
        stages = flip_memory(spec, P, apic, parts=True, xp=np, count_control=True)
    counted = stages["count control"] - stages["state"]
    print(f"\nthe count control's pass: measured {measured:,} B, estimated {counted:,} B")
    assert 0.9 * measured <= counted <= 2 * measured
