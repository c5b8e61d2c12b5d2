"""Level 1 smoothed block by block (issue 24, h20i; bench/_mg_variants.py ``Level1Blocks``,
``MGOptions.level1``) on NumPy: the blocks partition level 1 as the pool's slots do (4³) or aligned
2×2×2 groups of them (8³), the pre-smoothing reads no other block, the V-cycle stays symmetric
positive definite (the post-smoothing the adjoint; the forward order inside a block, with block4rb's
passes in the pre-smoothing's order, breaks it) and its PCG converges."""

import numpy as np
import pytest

from bench._mg_variants import Level1Blocks, MGOptions, VariantVCycle
from tests.unit.test_cuda_sparse_pressure_host import _tank
from voxfx.kernels.flip import sparse_pressure


def _system(shape=(40, 24, 36), scale=8):
    g = _tank(shape, scale)
    kind, _, _ = sparse_pressure.solver_cells(g)
    return g, kind, sparse_pressure.Unknowns(g, kind)


def _vector(m, seed):
    return np.append(np.random.default_rng(seed).normal(0, 1, m), 0).astype(np.float32)


def test_blocks_partition_level_1_as_the_bricks_do():
    g, kind, level = _system()
    M = VariantVCycle(g, kind, level, MGOptions(smoother="rb", level1="block4"))
    four, eight = M._level1, Level1Blocks(g, kind, level, M.levels[1], "block8")
    m = M.levels[1].m
    for blocks, most in ((four, 64), (eight, 512)):
        assert blocks.block.shape == (m + 1,) and blocks.block[m] == -1 and np.all(blocks.block[:m] >= 0)
        assert np.bincount(blocks.block[:m]).max() <= most
    pairs = np.unique(np.stack([four.block[:m], eight.block[:m]]), axis=1)
    assert np.unique(pairs[0]).size == pairs.shape[1]  # each 4³ block inside one 8³ block
    assert np.unique(four.block[:m]).size > np.unique(eight.block[:m]).size > 1
    # a level-1 unknown's restriction row (1, 1, 1) is its child 2I + (0, 0, 0): the same brick as the block
    child = M.down[0][(1 * 4 + 1) * 4 + 1, :m]
    ok = child < level.m
    slot = level.cells[child[ok]] // 512
    assert np.unique(np.stack([four.block[:m][ok], slot]), axis=1).shape[1] == np.unique(slot).size


def test_pre_smoothing_reads_no_other_block():
    g, kind, level = _system()
    M = VariantVCycle(g, kind, level, MGOptions(smoother="rb", level1="block4"))
    blocks, m = M._level1, M.levels[1].m
    b = _vector(m, 3)
    one = np.argmax(np.bincount(blocks.block[:m]))
    b2 = b.copy()
    b2[:m][blocks.block[:m] == one] += 1.0
    x, x2 = blocks.pre(b, 1.3, 2), blocks.pre(b2, 1.3, 2)
    changed = np.flatnonzero(x[:m] != x2[:m])
    assert changed.size and np.all(blocks.block[changed] == one) and x[m] == 0


@pytest.mark.parametrize("way", ["block4", "block8", "block4rb"])
@pytest.mark.parametrize("mutant", [False, True])
def test_level1_block_vcycle_is_symmetric_and_the_forward_post_order_is_not(monkeypatch, way, mutant):
    g, kind, level = _system()
    M = VariantVCycle(g, kind, level, MGOptions(smoother="brick", level1=way, level1_sweeps=2))
    assert M._level1 is not None and len(M.levels) >= 3
    if mutant:
        monkeypatch.setattr(M._level1, "_post", (0, 1))
        monkeypatch.setattr(M._level1, "_post_step", 1)
    u, v = _vector(level.m, 7), _vector(level.m, 8)
    Mu, Mv = M(u), M(v)
    uMv, vMu = float(np.dot(u.astype(np.float64), Mv)), float(np.dot(v.astype(np.float64), Mu))
    scale = float(np.dot(u.astype(np.float64), Mu))
    if mutant:
        assert abs(uMv - vMu) > 1e-5 * scale  # 2.5e-5 (block8) to 1.2e-3 (block4rb); the adjoint ~1e-9
    else:
        assert abs(uMv - vMu) <= 1e-7 * scale
        assert scale > 0 and float(np.dot(v.astype(np.float64), Mv)) > 0
    assert Mu[level.m] == 0


def _pcg(level, M, b, tolerance=1e-5, limit=60):
    x = np.zeros_like(b)
    r = b.copy()
    z = M(r)
    d, rz, bb = z.copy(), float(np.dot(r, z)), float(np.dot(b, b))
    for it in range(1, limit + 1):
        q = level.apply(d)
        alpha = rz / float(np.dot(d, q))
        x, r = x + np.float32(alpha) * d, r - np.float32(alpha) * q
        if float(np.dot(r, r)) <= bb * tolerance ** 2:
            return it
        z = M(r)
        rz, rz_old = float(np.dot(r, z)), rz
        d = z + np.float32(rz / rz_old) * d
    return limit + 1


def test_level1_block_pcg_converges_near_the_red_black_count():
    g, kind, level = _system()
    b = _vector(level.m, 5)
    counts = {way: _pcg(level, VariantVCycle(g, kind, level, MGOptions(smoother="brick", level1=way, level1_sweeps=2)),
                        b)
              for way in ("rb", "block4", "block8", "none")}
    assert counts["rb"] <= 30
    assert counts["block8"] <= counts["rb"] + 2 and counts["block4"] <= counts["rb"] + 3
    assert counts["none"] > counts["rb"]  # level 1's smoothing matters: the test sees a weaker level 1
