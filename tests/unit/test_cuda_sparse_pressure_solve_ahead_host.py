"""The kernels of the solve launched ahead of the set-up's read (cuda/flip_sparse_pressure_ahead.cu:
ahead_sizes, unknowns_gather; kernels/flip/sparse_pressure_solve_ahead.py) on the host without a
GPU (nvcc builds them as host functions): ahead_sizes against its NumPy reference — the solver's
control ints, every size 0 where a level's count passes its stride or its red count is out of
range — and unknowns_gather against Unknowns.gather (cupy.take's values, bit for bit, NaN and −0
among them), writing nothing past m. The device run is
tests/gpu/test_flip_sparse_pressure_solve_ahead_gpu.py."""

import numpy as np
import pytest

from tests.unit.test_cuda_exact import _build, with_defines
from tests.unit.test_cuda_sparse_pressure_host import PREAMBLE
from voxfx.kernels.flip import sparse_pressure_solve_ahead
from voxfx.kernels.flip.sparse_pressure_solve_ahead import ahead_sizes_reference

# Input: L, cnt (4·L), strides (L), max_iterations; n, m, stride, with_x0, b (n hex), x0 (n hex),
# cells (m). Output: the ints (4 + 2·L), then ub and ux (stride each, hex; −7 where not written).
HARNESS = PREAMBLE.replace('#include "flip_sparse_pressure.cu"', '#include "flip_sparse_pressure_ahead.cu"') + r"""
int main() {
    int L, max_it;
    if (scanf("%d", &L) != 1) return 1;
    std::vector<int> cnt, strides;
    read_ints(cnt, 4 * L);
    read_ints(strides, L);
    if (scanf("%d", &max_it) != 1) return 1;
    std::vector<int> ints(4 + 2 * L, -9);
    h_dim.x = 1; h_thread.x = 0; h_grid.x = 1; h_block.x = 0;
    ahead_sizes(cnt.data(), strides.data(), L, max_it, ints.data());
    for (int v : ints) printf("%d\n", v);
    int n, m, stride, with_x0;
    if (scanf("%d %d %d %d", &n, &m, &stride, &with_x0) != 4) return 1;
    std::vector<float> b, x0;
    read_floats(b, n);
    read_floats(x0, n);
    std::vector<long long> cells(m);
    for (auto& c : cells) scanf("%lld", &c);
    std::vector<int> sizes = {0, m};
    std::vector<float> ub(stride, -7.0f), ux(stride, -7.0f);
    h_grid.x = (unsigned)stride;
    for (unsigned blk = 0; blk < (unsigned)stride; ++blk) {
        h_block.x = blk;
        unknowns_gather(b.data(), with_x0 ? x0.data() : nullptr, cells.data(), sizes.data(), ub.data(), ux.data());
    }
    for (float v : ub) printf("%a\n", v);
    for (float v : ux) printf("%a\n", v);
    return 0;
}
"""


@pytest.fixture(scope="module")
def ahead(tmp_path_factory):
    return _build(tmp_path_factory, with_defines(HARNESS, sparse_pressure_solve_ahead._K))


def _bits(a):
    return np.asarray(a, np.float32).view(np.uint32)


def _run(ahead, cnt, strides, max_it, b, x0, cells, stride):
    n, m = b.shape[0], cells.shape[0]
    lines = [str(len(strides))] + [str(int(v)) for v in np.ravel(cnt)] + [str(int(s)) for s in strides]
    lines += [str(max_it), f"{n} {m} {stride} {int(x0 is not None)}"]
    lines += [float(v).hex() for v in b] + [float(v).hex() for v in (b if x0 is None else x0)]
    lines += [str(int(c)) for c in cells]
    words = ahead.raw(lines, check=True).split()
    k = 4 + 2 * len(strides)
    ints = np.array([int(w) for w in words[:k]], np.int32)
    out = np.array([float.fromhex(w) for w in words[k:]], np.float32)
    return ints, out[:stride], out[stride:]


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
            ints, ub, ux = _run(ahead, case, strides, 37, b, warm, cells, stride)
            ref = ahead_sizes_reference(case.reshape(-1), strides, 37)
            assert np.array_equal(ints, ref)
            assert np.array_equal(_bits(ub[:m0]), _bits(b[cells])) and np.all(ub[m0:] == -7)
            if warm is None:
                assert np.all(ux == -7)
            else:
                assert np.array_equal(_bits(ux[:m0]), _bits(x0[cells])) and np.all(ux[m0:] == -7)
    for worse in cases[1:]:  # every size 0 where any level does not fit
        assert not ahead_sizes_reference(worse.reshape(-1), strides, 37)[4:].any()
    assert np.array_equal(ahead_sizes_reference(cnt.reshape(-1), strides, 37)[4:], cnt[:, 1:3].reshape(-1))
