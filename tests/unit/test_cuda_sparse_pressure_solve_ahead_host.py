"""The kernels of the solve launched ahead of the set-up's read (cuda/flip_sparse_pressure_ahead.cu:
ahead_sizes, unknowns_gather; kernels/flip/sparse_pressure_solve_ahead.py) on the host without a
GPU (nvcc builds them as host functions): ahead_sizes against its NumPy reference — the solver's
control ints, every size 0 where a level's count passes its stride or its red count is out of
range; in every case each of the solver's vectors 0 at its level's m just written (its sentinel,
index 0 where the sizes are 0) and unchanged elsewhere (``ZERO`` "sentinels") — and
unknowns_gather against Unknowns.gather (cupy.take's values, bit for bit, NaN and −0 among
them) and, with guess (``GATHER_SWITCH`` "guess"), against warm_guess's x₀ gathered (the carried
pressure finite, else 0; NaN, ±inf and −0 among it) and, with udiag, unk_diag_strided's diag
(the sentinel 1 at m), writing nothing past m. The device run is
tests/gpu/test_flip_sparse_pressure_solve_ahead_gpu.py."""

import numpy as np
import pytest

from tests.unit.test_cuda_exact import _build, with_defines
from tests.unit.test_cuda_sparse_pressure_host import PREAMBLE
from voxfx.kernels.flip import sparse_pressure_solve_ahead
from voxfx.kernels.flip.sparse_pressure_solve_ahead import ahead_sizes_reference

# Input: L, count, drop, min_side, cnt (4·L, or with count > 0 10·count: counts, then spans),
# strides (L), max_iterations; n, m, stride, with_x0, guess, with_diag, b (n hex), x0 (n hex), cells (m). Output: the
# ints (4 + 2·L), per vector (2 a level, one more of level 0) its level, the count of entries not 3 and
# each one's index and value (hex), then ub, ux and udiag (stride each, hex; −7 where not written).
HARNESS = PREAMBLE.replace('#include "flip_sparse_pressure.cu"', '#include "flip_sparse_pressure_ahead.cu"') + r"""
int main() {
    int L, count, drop, min_side, max_it;
    if (scanf("%d %d %d %d", &L, &count, &drop, &min_side) != 4) return 1;
    std::vector<int> cnt, strides;
    read_ints(cnt, count > 0 ? 10 * count : 4 * L);
    read_ints(strides, L);
    if (scanf("%d", &max_it) != 1) return 1;
    std::vector<int> ints(4 + 2 * L, -9);
    // a solver's vectors: two a level (its stride long), then one more of level 0 (brick_x's), all 3
    std::vector<std::vector<float>> vecs;
    std::vector<int> vec_levels;
    for (int l = 0; l < L; ++l)
        for (int k = 0; k < 2; ++k) { vecs.emplace_back(strides[l], 3.0f); vec_levels.push_back(l); }
    vecs.emplace_back(strides[0], 3.0f);
    vec_levels.push_back(0);
    std::vector<float*> ptrs;
    for (auto& v : vecs) ptrs.push_back(v.data());
    h_dim.x = 1; h_thread.x = 0; h_grid.x = 1; h_block.x = 0;
    ahead_sizes(cnt.data(), strides.data(), L, count, drop, min_side, max_it, ints.data(), ptrs.data(),
                vec_levels.data(), (int)ptrs.size());
    for (int v : ints) printf("%d\n", v);
    for (size_t k = 0; k < vecs.size(); ++k) {  // per vector: its level, then each entry no longer 3
        int changed = 0;
        for (float x : vecs[k]) changed += x != 3.0f;
        printf("%d %d\n", vec_levels[k], changed);
        for (size_t i = 0; i < vecs[k].size(); ++i)
            if (vecs[k][i] != 3.0f) printf("%d %a\n", (int)i, vecs[k][i]);
    }
    int n, m, stride, with_x0, guess, with_diag;
    if (scanf("%d %d %d %d %d %d", &n, &m, &stride, &with_x0, &guess, &with_diag) != 6) return 1;
    std::vector<float> b, x0;
    read_floats(b, n);
    read_floats(x0, n);
    std::vector<long long> cells(m);
    for (auto& c : cells) scanf("%lld", &c);
    std::vector<unsigned char> diag8(n);
    for (int i = 0; i < n; ++i) diag8[i] = (unsigned char)((i * 7 + 3) % 7);  // 0 … 6, as unk_classify's
    std::vector<int> sizes = {0, m};
    std::vector<float> ub(stride, -7.0f), ux(stride, -7.0f), udiag(stride, -7.0f);
    h_grid.x = (unsigned)stride;
    for (unsigned blk = 0; blk < (unsigned)stride; ++blk) {
        h_block.x = blk;
        unknowns_gather(b.data(), with_x0 ? x0.data() : nullptr, cells.data(), sizes.data(), ub.data(), ux.data(),
                        guess, diag8.data(), with_diag ? udiag.data() : nullptr);
    }
    for (float v : ub) printf("%a\n", v);
    for (float v : ux) printf("%a\n", v);
    for (float v : udiag) printf("%a\n", v);
    return 0;
}
"""


@pytest.fixture(scope="module")
def ahead(tmp_path_factory):
    return _build(tmp_path_factory, with_defines(HARNESS, sparse_pressure_solve_ahead._K))


def _bits(a):
    return np.asarray(a, np.float32).view(np.uint32)


def _run(ahead, cnt, strides, max_it, b, x0, cells, stride, count=0, drop=-1, min_side=4, guess=False, diag=False):
    n, m = b.shape[0], cells.shape[0]
    lines = [f"{len(strides)} {count} {drop} {min_side}"] + [str(int(v)) for v in np.ravel(cnt)]
    lines += [str(int(s)) for s in strides]
    lines += [str(max_it), f"{n} {m} {stride} {int(x0 is not None)} {int(guess)} {int(diag)}"]
    lines += [float(v).hex() for v in b] + [float(v).hex() for v in (b if x0 is None else x0)]
    lines += [str(int(c)) for c in cells]
    words = ahead.raw(lines, check=True).split()
    k = 4 + 2 * len(strides)
    ints = np.array([int(w) for w in words[:k]], np.int32)
    for _ in range(2 * len(strides) + 1):  # each vector's entry at its level's m (just written) 0, no other
        level, changed = int(words[k]), int(words[k + 1])
        k += 2
        assert changed == 1 and int(words[k]) == ints[5 + 2 * level] and float.fromhex(words[k + 1]) == 0.0
        k += 2 * changed
    out = np.array([float.fromhex(w) for w in words[k:]], np.float32)
    ub, ux, udiag = out[:stride], out[stride:2 * stride], out[2 * stride:]
    m = cells.shape[0]
    if diag:  # unk_diag_strided's values (the harness's diag8: (7i + 3) mod 7), the sentinel 1, nothing past m
        want = np.concatenate([((cells * 7 + 3) % 7).astype(np.float32), np.ones(1, np.float32)])
        assert np.array_equal(_bits(udiag[:m + 1]), _bits(want)) and np.all(udiag[m + 1:] == -7)
    else:
        assert np.all(udiag == -7)
    return ints, ub, ux


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ahead_kernels_equal_the_reference(ahead, seed):
    rng = np.random.default_rng(seed)
    levels = int(rng.integers(1, 5))
    strides = rng.integers(20, 400, levels)
    m = rng.integers(0, strides)  # each m + 1 within its stride
    cnt = np.stack([rng.integers(0, 50, levels), rng.integers(0, m + 1), m, rng.integers(0, 50, levels)], axis=1)
    cases = [cnt]
    for col, value in ((2, strides), (1, m + 1), (1, np.full(levels, -1)), (2, np.full(levels, -1))):
        worse = cnt.copy()  # one level's m + 1 past its stride, its m_red past m or negative, m negative
        at = int(rng.integers(levels))
        worse[at, col] = value[at]
        cases.append(worse)
    n, m0, stride = 900, int(m[0]), int(strides[0])
    b = rng.normal(0, 2, n).astype(np.float32)
    b[:3] = (np.nan, -0.0, np.inf)
    x0 = rng.normal(0, 1, n).astype(np.float32)
    x0[3] = -0.0
    cells = rng.permutation(n)[:m0].astype(np.int64)
    cells[:min(m0, 3)] = np.arange(min(m0, 3))
    for case in cases:
        for warm in (None, x0):
            ints, ub, ux = _run(ahead, case, strides, 37, b, warm, cells, stride, diag=warm is None)
            ref = ahead_sizes_reference(case.reshape(-1), strides, 37)
            assert np.array_equal(ints, ref)
            assert np.array_equal(_bits(ub[:m0]), _bits(b[cells])) and np.all(ub[m0:] == -7)
            if warm is None:
                assert np.all(ux == -7)
            else:
                assert np.array_equal(_bits(ux[:m0]), _bits(x0[cells])) and np.all(ux[m0:] == -7)
    carried = x0.copy()  # the carried pressure: NaN where none, ±inf, −0 (GATHER_SWITCH "guess": warm_guess's)
    carried[[4, 5, 6, 7]] = (np.nan, np.inf, -np.inf, -0.0)
    carried[rng.random(n) < 0.2] = np.nan
    cells[3:min(m0, 8)] = np.arange(3, min(m0, 8))
    want = np.where(np.isfinite(carried), carried, np.float32(0)).astype(np.float32)  # warm_guess
    for guess, diag in ((False, False), (False, True), (True, True)):  # "apart", "folded", "guess"
        _, ub, ux = _run(ahead, cnt, strides, 37, b, carried, cells, stride, guess=guess, diag=diag)
        assert np.array_equal(_bits(ub[:m0]), _bits(b[cells])) and np.all(ub[m0:] == -7)
        assert np.array_equal(_bits(ux[:m0]), _bits((want if guess else carried)[cells])) and np.all(ux[m0:] == -7)
    for worse in cases[1:]:  # every size 0 where any level does not fit
        assert not ahead_sizes_reference(worse.reshape(-1), strides, 37)[4:].any()
    assert np.array_equal(ahead_sizes_reference(cnt.reshape(-1), strides, 37)[4:], cnt[:, 1:3].reshape(-1))


def _workspace_sizes(rng, count, m, spans=None):
    """A set-up workspace's sizes for *count* levels of *m* unknowns: counts (m_red, m at 1, 2),
    then per level six span entries whose pairs a, a + 3 add to the axis's span (or *spans*)."""
    cnt = np.stack([rng.integers(0, 50, count), rng.integers(0, m + 1), m, rng.integers(0, 50, count)], axis=1)
    if spans is None:
        width = rng.integers(0, 9, (count, 3))
        lo = rng.integers(-(2 ** 20), 2 ** 20, (count, 3))
        spans = np.concatenate([-lo, lo + width], axis=1)  # −lo and hi: hi − lo added
    return np.concatenate([cnt.reshape(-1), np.asarray(spans, np.int64).reshape(-1)]).astype(np.int32)


@pytest.mark.parametrize("seed", range(6))
def test_ahead_sizes_level_count_equals_the_hosts_levels_kept_and_dense_drop(ahead, seed):
    """ahead_sizes with the workspace's spans: its sizes kept only where the V-cycle the host keeps
    (sparse_pressure_setup.levels_kept of level_extents, then VCycle's MG_DENSE "2" drop of the last
    level where the one above holds at most DENSE_DROP_UNKNOWNS) has the guessed solver's level
    count; the reference's count is the host's, and every case of a level fewer or more zeroes the
    sizes on the device as in the reference."""
    from voxfx.kernels.flip import sparse_pressure_setup
    from voxfx.kernels.flip.sparse_multigrid import DENSE_DROP_UNKNOWNS
    from voxfx.kernels.flip.sparse_pressure_solve_ahead import ahead_depth_reference

    rng = np.random.default_rng(100 + seed)
    b, cells = np.zeros(4, np.float32), np.zeros(0, np.int64)
    seen = set()
    for _ in range(40):
        count = int(rng.integers(1, 8))
        m = np.sort(rng.integers(0, 400, count))[::-1].copy()
        m[rng.random(count) < 0.15] = 0  # empty levels
        m[rng.random(count) < 0.3] = rng.integers(100, 140)  # about the dense drop's bound
        sizes = _workspace_sizes(rng, count, m)
        cnt_h, span_h = sizes[:4 * count].reshape(count, 4), sizes[4 * count:].reshape(count, 6)
        kept = sparse_pressure_setup.levels_kept(sparse_pressure_setup.level_extents(cnt_h, span_h, count), count)
        for drop in (-1, DENSE_DROP_UNKNOWNS):
            host_count = kept - 1 if drop >= 0 and kept > 2 and cnt_h[kept - 2, 2] <= drop else kept
            assert ahead_depth_reference(sizes, count, drop) == host_count
            seen.add((kept, host_count))
            for levels in {host_count, max(1, host_count - 1), min(count, host_count + 1)}:
                strides = np.full(levels, 500)
                ints, _, _ = _run(ahead, sizes, strides, 23, b, None, cells, 1, count, drop)
                ref = ahead_sizes_reference(sizes, strides, 23, count, drop)
                assert np.array_equal(ints, ref)
                assert ref[4:].any() == (levels == host_count and bool(m[:levels].any()))
    assert any(k != h for k, h in seen) and any(k == h and k > 2 for k, h in seen)  # drops and deep hierarchies


def test_ahead_depth_wraps_as_the_hosts_int32_sums(ahead):
    """Spans whose pairs overflow int32 (the host adds numpy int32s, which wrap): the device's
    unsigned adds give the host's extents, so the same level count."""
    from voxfx.kernels.flip import sparse_pressure_setup
    from voxfx.kernels.flip.sparse_pressure_solve_ahead import ahead_depth_reference

    rng = np.random.default_rng(7)
    big = 2 ** 31 - 5
    # level 0 spans 4 cells (its wrapped axis adds to a negative), level 1's every axis wraps: 2 levels kept
    spans = [[big, 0, 0, 10, 3, 3], [big, big, big, big, big, big], [0, 0, 0, 0, 0, 0]]
    sizes = _workspace_sizes(rng, 3, np.array([50, 20, 3]), spans)
    cnt_h, span_h = sizes[:12].reshape(3, 4), sizes[12:].reshape(3, 6)
    with np.errstate(over="ignore"):
        kept = sparse_pressure_setup.levels_kept(sparse_pressure_setup.level_extents(cnt_h, span_h, 3), 3)
    assert ahead_depth_reference(sizes, 3, -1) == kept == 2
    for levels in (1, 2, 3):
        strides = np.full(levels, 100)
        ints, _, _ = _run(ahead, sizes, strides, 5, np.zeros(4, np.float32), None, np.zeros(0, np.int64), 1, 3)
        assert np.array_equal(ints, ahead_sizes_reference(sizes, strides, 5, 3))
