"""The V-cycle's transfers between levels 0 and 1 without their tables
(cuda/flip_sparse_pressure_vcycle_bricks.cu: mg_restrict_bricks, mg_prolong_add_bricks and
their block-a-brick forms, the _shared kernels;
sparse_pressure_gpu.BRICK_TRANSFERS) on the host without a GPU: nvcc builds them with the
set-up's brick kernels (flip_sparse_pressure_bricks.cu, flip_sparse_pressure_setup.cu) as host
functions, a C++ driver builds level 1 as the workspace does (mgb_coarsen, the ranks, the level
tables, mgb_prolong, mgb_restrict), then restricts a random r and prolongs a random x both ways:
through up[0] and down[0] with restrict_value / prolong_value (mg_restrict's and
mg_prolong_add's values) and through the bricks' look-ups. Both must equal each other and the
NumPy reference (sparse_multigrid.gather_sum on VCycle's tables) bit for bit, on pools whose
slots are out of key order or partly free. The device run is
tests/gpu/test_flip_sparse_vcycle_bricks_gpu.py."""

import numpy as np
import pytest

from tests.unit.test_cuda_exact import _build, with_defines
from tests.unit.test_cuda_sparse_pressure_bricks_host import BRICK_KEYS_INPUT, LEVEL0_INPUT, level0_lines, scene
from tests.unit.test_cuda_sparse_pressure_host import PREAMBLE, _hex
from tests.unit.test_cuda_sparse_pressure_setup_host import SETUP_LEVELS
from voxfx.kernels.flip import sparse_multigrid, sparse_pressure
from voxfx.kernels.flip.sparse_multigrid import PROLONG_WEIGHTS, RESTRICT_WEIGHTS, VCycle, gather_sum
from voxfx.kernels.flip.sparse_pressure_gpu import _MGB
from voxfx.kernels.flip.sparse_pressure_setup import _B

# Input: MARGIN, size capacity, kind (size), the capacity active flags, slot coordinates
# (3 × capacity), nbr27 (27 × capacity); level 0's m_red m, its m cells, the size positions, its
# set's size and lattice box min (3); the topology's brick count, sorted keys and their slots;
# r (m0 + 1, hex), x_c (m1 + 1, hex), x_f (m0 + 1, hex). Output: m1 m_red1; b_c by restrict_value
# (m1), by mg_restrict_bricks (m1 + 1: its sentinel untouched, NaN); x_f + P x_c by
# prolong_value (m0), by mg_prolong_add_bricks over all unknowns (m0 + 1), over the red ones
# (m0 + 1); then b_c by mg_restrict_bricks_shared (m1 + 1) and x_f + P x_c by
# mg_prolong_add_bricks_shared over all, over the red (m0 + 1 each): every value hex.
HARNESS = PREAMBLE.replace('#include "flip_sparse_pressure.cu"', '#include "flip_sparse_pressure_setup.cu"\n'
                           '#include "flip_sparse_pressure_bricks.cu"\n'
                           '#include "flip_sparse_pressure_vcycle_bricks.cu"') + r"""
#include <cmath>
#include <numeric>
""" + SETUP_LEVELS + r"""
int main() {
    int margin, size, cap, m_red0, m0, n0, lo[3], nbk;
    if (scanf("%d %d %d", &margin, &size, &cap) != 3) return 1;
""" + LEVEL0_INPUT + r"""
    scanf("%d", &nbk);
""" + BRICK_KEYS_INPUT + r"""    std::vector<int> cnt(8, 0), span(12, -2147483647);
    cnt[0] = n0; cnt[1] = m_red0; cnt[2] = m0;
    // level 1 as sparse_pressure_workspace_levels._level1 (ranks), bound nb1
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
    const int m1 = cnt[6], s0 = m0 + 1, s1 = nb1 + 1;
    B1.up.assign(8 * (size_t)s0, -7);
    ONE_PER_ITEM(s0, mgb_prolong(cells0.data(), &cnt[0], s0, nbr27.data(), map1.data(), f.position.data(), &cnt[4],
                                 B1.up.data()));
    B1.down.assign(64 * (size_t)s1, -7);
    ONE_PER_ITEM(s1, mgb_restrict(scand.data(), uorder.data(), &cnt[4], s1, nbr27.data(), position0.data(), &cnt[0],
                                  B1.down.data()));
    std::vector<float> r, xc, xf;
    read_floats(r, s0);
    read_floats(xc, m1 + 1);
    read_floats(xf, s0);
    int sizes[4] = {m_red0, m0, cnt[5], m1}, state[4] = {0, 0, 0, 0};
    const unsigned long long ptrs[BT_WORDS] = {
        (unsigned long long)(size_t)position0.data(), (unsigned long long)(size_t)cells0.data(),
        (unsigned long long)(size_t)nbr27.data(), (unsigned long long)(size_t)map1.data(),
        (unsigned long long)(size_t)f.position.data(), (unsigned long long)cand};
    printf("%d %d\n", m1, cnt[5]);
    for (int u = 0; u < m1; ++u) printf("%a\n", restrict_value(r.data(), B1.down.data(), s1, u));
    std::vector<float> bc(m1 + 1, NAN);
    ONE_PER_ITEM(2 * s1, mg_restrict_bricks(r.data(), ptrs, sizes, bc.data(), state));
    for (float v : bc) printf("%a\n", v);
    for (int u = 0; u < m0; ++u) printf("%a\n", xf[u] + prolong_value(xc.data(), B1.up.data(), s0, u));
    for (int all = 1; all >= 0; --all) {
        std::vector<float> x = xf;
        ONE_PER_ITEM(97, mg_prolong_add_bricks(xc.data(), ptrs, sizes, all, x.data(), state));
        for (float v : x) printf("%a\n", v);
    }
    // a block a brick (one "thread" a block, 7 blocks: the grid-stride over the slots)
    std::vector<float> bs(m1 + 1, NAN);
    ONE_PER_ITEM(7, mg_restrict_bricks_shared(r.data(), ptrs, sizes, bs.data(), state));
    for (float v : bs) printf("%a\n", v);
    for (int all = 1; all >= 0; --all) {
        std::vector<float> x = xf;
        ONE_PER_ITEM(7, mg_prolong_add_bricks_shared(xc.data(), ptrs, sizes, all, x.data(), state));
        for (float v : x) printf("%a\n", v);
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def transfers(tmp_path_factory):
    mine = [f"#define {o[2:].replace('=', ' ', 1)}" for o in _MGB.options if o.startswith("-D")
            and o[2:].split("=")[0] not in {p[2:].split("=")[0] for p in _B.options}]
    return _build(tmp_path_factory, with_defines(HARNESS, _B, mine))


def _floats(words):
    return np.array([float.fromhex(w) for w in words], np.float32)


def _bits(a):
    return np.asarray(a, np.float32).view(np.int32)


@pytest.mark.parametrize("name", ["tank", "sealed", "moved", "big"])
def test_brick_transfers_equal_the_tables_and_the_numpy_reference_bit_for_bit(transfers, name):
    """b_c = ½·Σ w·r_f and x_f + Σ w·x_c found through the bricks are mg_restrict's and
    mg_prolong_add's (through down[0], up[0]) and the reference's, every bit; the restriction
    leaves the sentinel alone and the red-only prolongation the black unknowns."""
    if name == "big":
        from tests.unit.test_cuda_sparse_pressure_host import _tank

        g = _tank((40, 24, 36), 8)
    else:
        g = scene(name)
    kind, _, _ = sparse_pressure.solver_cells(g)
    level = sparse_pressure.Unknowns(g, kind)
    M = VCycle(g, kind, level)
    assert len(M.levels) >= 2 and M.levels[1].m > 0
    m0, m1 = level.m, M.levels[1].m
    rng = np.random.default_rng(17)
    # magnitudes over six decades: a sum in another order or with another term would round otherwise
    r = np.append(rng.normal(0, 1, m0) * 10.0 ** rng.integers(-3, 3, m0), 0).astype(np.float32)
    xc = np.append(rng.normal(0, 1, m1) * 10.0 ** rng.integers(-3, 3, m1), 0).astype(np.float32)
    xf = np.append(rng.normal(0, 1, m0), 0).astype(np.float32)
    lines = [str(sparse_multigrid._MARGIN), *level0_lines(g, kind, level), str(g.topology.count),
             *map(str, g.topology.keys), *map(str, g.topology.slots), *_hex(r), *_hex(xc), *_hex(xf)]
    out = transfers.raw(lines, check=True).split()
    assert (int(out[0]), int(out[1])) == (m1, M.levels[1].m_red)
    at = 2
    table_b, brick_b = _floats(out[at:at + m1]), _floats(out[at + m1:at + 2 * m1 + 1])
    at += 2 * m1 + 1
    table_x = _floats(out[at:at + m0])
    brick_x, red_x = _floats(out[at + m0:at + 2 * m0 + 1]), _floats(out[at + 2 * m0 + 1:at + 3 * m0 + 2])
    at += 3 * m0 + 2
    shared_b = _floats(out[at:at + m1 + 1])
    at += m1 + 1
    shared_x, shared_red_x = _floats(out[at:at + m0 + 1]), _floats(out[at + m0 + 1:at + 2 * m0 + 2])
    assert len(out) == at + 2 * m0 + 2
    want_b = np.float32(0.5) * gather_sum(r, M.down[0], RESTRICT_WEIGHTS)
    want_x = xf + gather_sum(xc, M.up[0], PROLONG_WEIGHTS)
    assert np.array_equal(_bits(table_b), _bits(want_b[:m1]))
    assert np.array_equal(_bits(brick_b[:m1]), _bits(want_b[:m1]))
    assert np.isnan(brick_b[m1])  # the sentinel: not written
    assert np.array_equal(_bits(table_x), _bits(want_x[:m0]))
    assert np.array_equal(_bits(brick_x[:m0]), _bits(want_x[:m0]))
    assert brick_x[m0] == xf[m0]
    red = level.m_red
    assert np.array_equal(_bits(red_x[:red]), _bits(want_x[:red]))
    assert np.array_equal(_bits(red_x[red:]), _bits(xf[red:]))
    # a block a brick (the "shared" kernels): the same bits
    assert np.array_equal(_bits(shared_b[:m1]), _bits(want_b[:m1])) and np.isnan(shared_b[m1])
    assert np.array_equal(_bits(shared_x), _bits(np.append(want_x[:m0], xf[m0])))
    assert np.array_equal(_bits(shared_red_x), _bits(np.concatenate([want_x[:red], xf[red:]])))
    # the sums are not trivially exact: the other order of the terms rounds otherwise somewhere
    backwards = np.float32(0.5) * gather_sum(r, M.down[0][::-1], RESTRICT_WEIGHTS[::-1])
    assert not np.array_equal(_bits(backwards[:m1]), _bits(want_b[:m1]))
