"""Level 0's V-cycle passes folded into the brick transfers
(cuda/flip_sparse_pressure_vcycle_bricks.cu: mg_residual_restrict_bricks,
mg_prolong_black_bricks and mg_smooth_red_after_bricks; sparse_pressure_gpu.FOLD_BRICKS) on the
host without a GPU: nvcc builds them with the set-up's brick kernels and the V-cycle's
(flip_sparse_pressure_vcycle.cu) as host functions, a C++ driver builds level 1 as the
workspace does (test_cuda_sparse_vcycle_bricks_host's driver), then from the same level-0 x, b,
black residuals and level-1 x runs both ways: mg_residual (red) then mg_restrict_bricks against
mg_residual_restrict_bricks (the red residuals poisoned: not read); mg_prolong_add_bricks, then
mg_smooth black and red, against mg_prolong_black_bricks then mg_smooth_red_after_bricks. b of
level 1, x after the black pass, the prolonged red values and x after the red pass must be equal
bit for bit, with the module's MG_OMEGA (over-relaxed: the prolonged values are read) and at
ω = 1. The device run is in tests/gpu/test_flip_sparse_vcycle_bricks_gpu.py."""

import numpy as np
import pytest

from tests.unit.test_cuda_exact import _build, with_defines
from tests.unit.test_cuda_sparse_pressure_bricks_host import BRICK_KEYS_INPUT, LEVEL0_INPUT, level0_lines, scene
from tests.unit.test_cuda_sparse_pressure_host import PREAMBLE, _hex, _tank
from tests.unit.test_cuda_sparse_pressure_setup_host import SETUP_LEVELS
from tests.unit.test_cuda_sparse_vcycle_plan_host import Buffer, Recorded, hierarchy  # noqa: F401 (a fixture)
from voxfx.kernels.flip import sparse_multigrid, sparse_pressure
from voxfx.kernels.flip.sparse_multigrid import VCycle
from voxfx.kernels.flip.sparse_pressure_gpu import _MG
from voxfx.kernels.flip.sparse_pressure_setup import _B

# Input: MARGIN, level 0 (LEVEL0_INPUT), the topology's bricks; level 0's nbr (6 × (m0 + 1)) and
# diag (m0 + 1); x, b, r (m0 + 1 each), x_c (m1 + 1). Output (hex): m1; b_c both ways (m1 + 1
# each); x after the black pass both ways (m0 + 1 each); the prolonged values x + P x_c (m0 + 1)
# and the folded kernel's xp (m0 + 1); x after the red pass both ways (m0 + 1 each).
HARNESS = PREAMBLE.replace('#include "flip_sparse_pressure.cu"', '#include "flip_sparse_pressure_setup.cu"\n'
                           '#include "flip_sparse_pressure_bricks.cu"\n'
                           '#include "flip_sparse_pressure_vcycle.cu"\n'
                           '#include "flip_sparse_pressure_vcycle_bricks.cu"') + r"""
#include <cmath>
#include <numeric>
""" + SETUP_LEVELS + r"""
static void put(const std::vector<float>& v) { for (float a : v) printf("%a\n", a); }
int main() {
    int margin, size, cap, m_red0, m0, n0, lo[3], nbk;
    if (scanf("%d %d %d", &margin, &size, &cap) != 3) return 1;
""" + LEVEL0_INPUT + r"""
    scanf("%d", &nbk);
""" + BRICK_KEYS_INPUT + r"""    std::vector<int> cnt(8, 0);
    cnt[0] = n0; cnt[1] = m_red0; cnt[2] = m0;
    const int cand = cap * 64, nb1 = std::max(n0 / 8, 1);
    std::vector<unsigned char> flag(cand, 9);
    std::vector<int> take(cand, -7), map1(cand, -7), seg(std::max(16 * nbk, 1), -7), segscan, scand(nb1, -7), uorder;
    ONE_PER_ITEM(cand, mgb_coarsen(kind.data(), active, cand, flag.data(), take.data(), map1.data()));
    Set f;
    f.bx = coarser(lo[0] - margin, margin); f.by = coarser(lo[1] - margin, margin);
    f.bz = coarser(lo[2] - margin, margin);
    f.keys.assign(nb1, -1); f.fluid.assign(nb1, 7);
    ONE_PER_ITEM(16 * nbk, mgb_segment_counts(bkeys.data(), bslots.data(), nbk, flag.data(), seg.data()));
    seg.resize(16 * nbk);
    scan_rows(seg, segscan, 1, 16 * nbk);
    segscan.resize(std::max(16 * nbk, 1));
    ONE_PER_ITEM(std::max(16 * nbk, 1), mgb_ranked(bkeys.data(), bslots.data(), nbk, flag.data(), seg.data(),
                                                   segscan.data(), coords.data(), f.bx, f.by, f.bz, nb1,
                                                   f.keys.data(), f.fluid.data(), scand.data(), map1.data(), &cnt[4]));
    std::vector<ll> ukeys;
    Built B1;
    level_tables(f, &cnt[4], nb1, B1, ukeys, uorder);
    const int m1 = cnt[6], s0 = m0 + 1;
    std::vector<int> nbr;
    std::vector<float> diag, x, b, r, xc;
    read_ints(nbr, 6 * (size_t)s0);
    read_floats(diag, s0);
    read_floats(x, s0);
    read_floats(b, s0);
    read_floats(r, s0);
    read_floats(xc, m1 + 1);
    int sizes[4] = {m_red0, m0, cnt[5], m1}, state[4] = {0, 0, 0, 0};
    const unsigned long long ptrs[BT_WORDS] = {
        (unsigned long long)(size_t)position0.data(), (unsigned long long)(size_t)cells0.data(),
        (unsigned long long)(size_t)nbr27.data(), (unsigned long long)(size_t)map1.data(),
        (unsigned long long)(size_t)f.position.data(), (unsigned long long)cand};
    printf("%d\n", m1);
    // the red residuals and the restriction: launch by launch, then folded (the red r poisoned)
    std::vector<float> r1 = r, bc1(m1 + 1, NAN), bc2(m1 + 1, NAN), r2 = r;
    ONE_PER_ITEM(s0, mg_residual(x.data(), b.data(), nbr.data(), diag.data(), s0, sizes, 0, 0, r1.data(), state));
    ONE_PER_ITEM(2 * cand, mg_restrict_bricks(r1.data(), ptrs, sizes, bc1.data(), state));
    for (int u = 0; u < m_red0; ++u) r2[u] = NAN;
    ONE_PER_ITEM(7, mg_residual_restrict_bricks(x.data(), b.data(), diag.data(), r2.data(), ptrs, sizes, bc2.data(),
                                                state));
    put(bc1);
    put(bc2);
    // the prolongation and the black pass, then the red pass: launch by launch, then folded
    std::vector<float> x1 = x, x2 = x, xp(s0, NAN);
    ONE_PER_ITEM(s0, mg_prolong_add_bricks(xc.data(), ptrs, sizes, 1, x1.data(), state));
    const std::vector<float> prolonged = x1;
    ONE_PER_ITEM(s0, mg_smooth(x1.data(), b.data(), nbr.data(), diag.data(), s0, sizes, 0, 1, 0, state));
    ONE_PER_ITEM(7, mg_prolong_black_bricks(xc.data(), ptrs, sizes, b.data(), diag.data(), x2.data(), xp.data(),
                                            state));
    put(x1);
    put(x2);
    put(prolonged);
    put(xp);
    ONE_PER_ITEM(s0, mg_smooth(x1.data(), b.data(), nbr.data(), diag.data(), s0, sizes, 0, 0, 0, state));
    ONE_PER_ITEM(s0, mg_smooth_red_after_bricks(x2.data(), xp.data(), b.data(), nbr.data(), diag.data(), s0, sizes,
                                                state));
    put(x1);
    put(x2);
    return 0;
}
"""


def _build_with(tmp_path_factory, omega):
    mine = [f"#define {o[2:].replace('=', ' ', 1)}" for o in _MG.options if o.startswith("-D")
            and o[2:].split("=")[0] not in {p[2:].split("=")[0] for p in _B.options} | {"MG_OMEGA"}]
    if omega != 1.0:
        mine.append(f"#define MG_OMEGA {omega!r}f")
    return _build(tmp_path_factory, with_defines(HARNESS, _B, mine), name=f"fold{omega}")


@pytest.fixture(scope="module")
def folds(tmp_path_factory):
    return {omega: _build_with(tmp_path_factory, omega) for omega in (sparse_multigrid.MG_OMEGA, 1.0)}


def _floats(words):
    return np.array([float.fromhex(w) for w in words], np.float32)


def _bits(a):
    return np.asarray(a, np.float32).view(np.int32)


@pytest.mark.parametrize("omega", ["module", "1"])
@pytest.mark.parametrize("name", ["tank", "sealed", "moved", "big"])
def test_folded_brick_passes_give_the_launches_values_bit_for_bit(folds, name, omega):
    g = _tank((40, 24, 36), 8) if name == "big" else scene(name)
    kind, _, _ = sparse_pressure.solver_cells(g)
    level = sparse_pressure.Unknowns(g, kind)
    M = VCycle(g, kind, level)
    assert len(M.levels) >= 2 and M.levels[1].m > 0
    m0, m1, red = level.m, M.levels[1].m, level.m_red
    rng = np.random.default_rng(23)

    def vec(n):  # magnitudes over six decades (another order of a sum's terms would round otherwise); sentinel 0
        return np.append(rng.normal(0, 1, n) * 10.0 ** rng.integers(-3, 3, n), 0).astype(np.float32)

    x, b, r, xc = vec(m0), vec(m0), vec(m0), vec(m1)
    lines = [str(sparse_multigrid._MARGIN), *level0_lines(g, kind, level), str(g.topology.count),
             *map(str, g.topology.keys), *map(str, g.topology.slots), *map(str, level.nbr.ravel()),
             *_hex(level.diag), *_hex(x), *_hex(b), *_hex(r), *_hex(xc)]
    run = folds[sparse_multigrid.MG_OMEGA if omega == "module" else 1.0]
    out = run.raw(lines, check=True).split()
    assert int(out[0]) == m1
    at = 1
    bc1, bc2 = _floats(out[at:at + m1 + 1]), _floats(out[at + m1 + 1:at + 2 * m1 + 2])
    at += 2 * m1 + 2
    s0 = m0 + 1
    black1, black2, prolonged, xp, x1, x2 = (_floats(out[at + k * s0:at + (k + 1) * s0]) for k in range(6))
    assert len(out) == at + 6 * s0
    assert np.array_equal(_bits(bc2[:m1]), _bits(bc1[:m1])) and np.isnan(bc2[m1])
    assert np.abs(bc1[:m1]).max() > 0
    assert np.array_equal(_bits(black2[red:m0]), _bits(black1[red:m0]))  # the black pass
    assert np.array_equal(_bits(black2[:red]), _bits(x[:red]))  # xf's red values left as they were
    assert np.array_equal(_bits(xp[:red]), _bits(prolonged[:red])) and np.isnan(xp[red:]).all()
    assert np.array_equal(_bits(x2[:m0]), _bits(x1[:m0]))  # and after the red pass
    assert not np.array_equal(_bits(x1[:m0]), _bits(x[:m0]))


@pytest.mark.parametrize("folds", [(True, True), (True, False), (False, True)])
def test_folded_brick_passes_launch_less(hierarchy, folds):  # noqa: F811 (the fixture)
    """One V-cycle (the fused launches, the tail from level 2): each fold one level-0 launch fewer,
    its kernels in place of mg_residual + mg_restrict_bricks and mg_prolong_add_bricks + the black
    mg_smooth."""
    strides = hierarchy[0]
    plain, folded = Recorded(strides, strides[2]), Recorded(strides, strides[2])
    for plan in (plain, folded):
        plan.brick_ptrs = Buffer("bricks")
        plan.brick_transfers = (True, True)
    folded.fold_bricks = folds
    plain._vcycle_fused()
    folded._vcycle_fused()
    names = [name for name, *_ in folded.launches]
    assert len(folded.launches) == len(plain.launches) - sum(folds)
    assert ("mg_residual_restrict_bricks" in names) == folds[0] and ("mg_restrict_bricks" in names) != folds[0]
    assert ("mg_prolong_black_bricks" in names) == folds[1] and ("mg_prolong_add_bricks" in names) != folds[1]
    assert ("mg_smooth_red_after_bricks" in names) == folds[1]
