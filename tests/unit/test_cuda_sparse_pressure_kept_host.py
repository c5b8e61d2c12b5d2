"""A kept set-up's two launches (sparse_pressure_workspace_kept, issue 24, h19d:
``VOXFX_SPARSE_MG_KEEP``) on the host, as test_cuda_sparse_pressure_setup_host.py builds the
set-up's kernels: mgs_down_fill over level K's capacity (K = 2, or 3: ``VOXFX_SPARSE_MG_KEEP_FROM``;
its down holding another set-up's entries) then mgs_prolong_restrict from this set-up's level K − 1
against a level K held from another set-up give the integers of the NumPy ``Held.transfers``
(``TableBuilder.prolong`` and ``restrict``) exactly — on two tanks whose liquid moved between them,
and on the same one."""

import numpy as np
import pytest

from bench._mg_kept import Snapshot
from tests.unit.test_cuda_exact import _build, with_defines
from tests.unit.test_cuda_sparse_pressure_host import PREAMBLE
from tests.unit.test_flip_sparse_multigrid_keep import SHAPE3, TOPS, _positions, _substep
from voxfx.kernels.flip.sparse_grid import SparseFlipGrid
from voxfx.kernels.flip.sparse_multigrid import TableBuilder
from voxfx.kernels.flip.sparse_multigrid_kept import Held, rebased

# Input: the fine level's base, mf and its mf unknown keys; the kept coarse level's base, its nc
# set keys and nc positions, mc, and the down stride C (its capacity). Output: up (8 × (mf + 1)),
# then down's columns 0 … mc (64 rows).
KEPT = PREAMBLE.replace('#include "flip_sparse_pressure.cu"', '#include "flip_sparse_pressure_setup.cu"') + r"""
typedef long long ll;
#define ONE_PER_ITEM(n, call) do { h_dim.x = 1; h_thread.x = 0; h_grid.x = (unsigned)(n); \
    for (unsigned blk = 0; blk < (unsigned)(n); ++blk) { h_block.x = blk; call; } } while (0)
int main() {
    int bx, by, bz, mf, cbx, cby, cbz, nc, mc, C;
    if (scanf("%d %d %d %d", &bx, &by, &bz, &mf) != 4) return 1;
    std::vector<ll> fkeys(mf);
    for (auto& k : fkeys) scanf("%lld", &k);
    if (scanf("%d %d %d %d", &cbx, &cby, &cbz, &nc) != 4) return 1;
    std::vector<ll> ckeys(nc);
    std::vector<int> position(nc);
    for (auto& k : ckeys) scanf("%lld", &k);
    for (auto& p : position) scanf("%d", &p);
    if (scanf("%d %d", &mc, &C) != 2) return 1;
    int fcnt[4] = {-1, -1, mf, -1}, ccnt[4] = {nc, -1, mc, -1};
    const int fstride = mf + 1;
    std::vector<int> up(8 * (size_t)fstride, -7), down(64 * (size_t)C);
    for (size_t i = 0; i < down.size(); ++i) down[i] = (int)(i % 97);  // another set-up's entries
    ONE_PER_ITEM(C, mgs_down_fill(ccnt, fcnt, C, down.data()));
    ONE_PER_ITEM(fstride, mgs_prolong_restrict(fkeys.data(), fcnt, fstride, bx, by, bz, ckeys.data(), ccnt,
                                               position.data(), cbx, cby, cbz, up.data(), C, down.data()));
    for (int v : up) printf("%d\n", v);
    for (int r = 0; r < 64; ++r) for (int u = 0; u <= mc; ++u) printf("%d\n", down[(size_t)r * C + u]);
    return 0;
}
"""


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    from voxfx.kernels.flip.sparse_pressure_setup import _K as setup_kernels

    return _build(tmp_path_factory, with_defines(KEPT, setup_kernels))


@pytest.fixture(scope="module", params=[2, 3], ids=["from2", "from3"])
def snapshots(request):
    """Two set-ups of the tank (the liquid moved between them) and the first level held: 3 on
    the finer tank (``SHAPE3``: levels 2 → 3, ``VOXFX_SPARSE_MG_KEEP_FROM`` "3", h19f)."""
    scene = {"n": 8 * 48000, "shape": SHAPE3} if request.param == 3 else {}
    spec, _ = _positions(TOPS[0], **scene)
    g = SparseFlipGrid(spec, np, closed=True)
    out = []
    for top in (TOPS[0], TOPS[2]):
        out.append(Snapshot(g, *_substep(g, _positions(top, **scene)[1])))
    return request.param, out


@pytest.mark.parametrize("pair", ["moved", "same"])
def test_kept_transfers_on_the_device_are_the_numpy_ones(kept, snapshots, pair):
    first, snapshots = snapshots
    f = first - 1
    old, now = (snapshots[0], snapshots[1]) if pair == "moved" else (snapshots[0], snapshots[0])
    fine, fkeys = now.cells[f], now.keys[f]
    # the device's bases chain from level 0's (coarser_base): level K's lowered to level K − 1's parent base
    fbase = tuple(min(a, 2 * c) for a, c in zip(fine.base, old.cells[first].base))
    fine, fkeys = rebased(fine, fkeys, fbase)
    coarse, ckeys = rebased(old.cells[first], old.keys[first], fine.coarser_base())
    m_fine, held_level = now.vcycle.levels[f].m, old.vcycle.levels[first]
    assert int(fkeys.shape[0]) == m_fine and held_level.m > 0
    held = Held(old.vcycle.levels[first:], old.vcycle.up[first:], old.vcycle.down[first:], old.cells[first],
                old.keys[first], first=first)
    up, down = held.transfers(TableBuilder(np), now.cells[f], now.keys[f], m_fine)
    mc, stride = held_level.m, held_level.m + 9  # a capacity past the count: columns past mc untouched
    lines = [" ".join(map(str, fine.base)), str(m_fine), *map(str, fkeys), " ".join(map(str, coarse.base)),
             str(len(coarse.keys)), *map(str, coarse.keys), *map(str, coarse.position), str(mc), str(stride)]
    out = np.array(kept(lines))
    got_up, got_down = out[:8 * (m_fine + 1)].reshape(8, m_fine + 1), out[8 * (m_fine + 1):].reshape(64, mc + 1)
    assert np.array_equal(got_up, up) and np.array_equal(got_down, down)
    if pair == "moved":
        assert not np.array_equal(up, now.vcycle.up[f])  # not the fresh hierarchy's
    else:
        assert np.array_equal(up, now.vcycle.up[f]) and np.array_equal(down, now.vcycle.down[f])
