"""The kernels around the sparse pressure solve (cuda/flip_sparse_pressure_cells.cu: warm_guess,
unknowns_scatter, warm_carry, and the last two in one, unknowns_scatter_carry;
``sparse_pressure_cells.around_kernels``) against the array
expressions of sparse_pressure_warm and Unknowns.scatter, on the host without a GPU (nvcc
builds them as host functions), bit for bit: NaN, ±inf and −0 among the carried values. The
device run is tests/gpu/test_flip_sparse_pressure_around_gpu.py."""

import numpy as np
import pytest

from tests.unit.test_cuda_exact import _build, with_defines
from tests.unit.test_cuda_sparse_pressure_host import PREAMBLE
from voxfx.kernels.flip import sparse_pressure_cells
from voxfx.kernels.flip.grid import FLUID

# Input: n, m, carried (n hex), position (n), x (m + 1 hex), cell (n). Output: x0 (n hex), p
# (n hex), carried of p (n hex), then unknowns_scatter_carry's p and carried (n hex each).
HARNESS = PREAMBLE.replace('#include "flip_sparse_pressure.cu"', '#include "flip_sparse_pressure_cells.cu"') + r"""
#define ONE_PER_ITEM(n, call) do { h_dim.x = 1; h_thread.x = 0; h_grid.x = (unsigned)(n); \
    for (unsigned blk = 0; blk < (unsigned)(n); ++blk) { h_block.x = blk; call; } } while (0)
static const unsigned NAN_BITS = 0x7fc00000u;
int main() {
    int n, m;
    if (scanf("%d %d", &n, &m) != 2) return 1;
    std::vector<float> carried(n), x(m + 1), x0(n, -7.0f), p(n, -7.0f), out(n, -7.0f), p2(n, -7.0f),
        out2(n, -7.0f);
    std::vector<int> position(n);
    std::vector<unsigned char> cell(n);
    for (auto& v : carried) scanf("%a", &v);
    for (auto& v : position) scanf("%d", &v);
    for (auto& v : x) scanf("%a", &v);
    for (auto& v : cell) { int t; scanf("%d", &t); v = (unsigned char)t; }
    ONE_PER_ITEM(n, warm_guess(carried.data(), n, x0.data()));
    ONE_PER_ITEM(n, unknowns_scatter(position.data(), x.data(), m, n, p.data()));
    float none;
    memcpy(&none, &NAN_BITS, 4);  // np.float32(np.nan), as sparse_pressure_cells.warm_carry passes it
    ONE_PER_ITEM(n, warm_carry(cell.data(), p.data(), n, none, out.data()));
    ONE_PER_ITEM(n, unknowns_scatter_carry(position.data(), x.data(), m, n, cell.data(), none, p2.data(),
                                           out2.data()));
    for (float v : x0) printf("%a\n", v);
    for (float v : p) printf("%a\n", v);
    for (float v : out) printf("%a\n", v);
    for (float v : p2) printf("%a\n", v);
    for (float v : out2) printf("%a\n", v);
    return 0;
}
"""


@pytest.fixture(scope="module")
def around(tmp_path_factory):
    k = sparse_pressure_cells._K
    return _build(tmp_path_factory, with_defines(HARNESS, k, extra=("#include <cmath>", "using std::isfinite;")))


def _bits(a):
    return np.asarray(a, np.float32).view(np.uint32)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_around_kernels_equal_the_array_code(around, seed):
    rng = np.random.default_rng(seed)
    n, m = 700, 260
    carried = rng.normal(0, 3, n).astype(np.float32)
    carried[rng.random(n) < 0.2] = np.nan
    carried[:4] = (np.inf, -np.inf, -0.0, np.nan)
    cells = rng.permutation(n)[:m]
    position = np.full(n, m, np.int32)
    position[cells] = np.arange(m, dtype=np.int32)
    x = rng.normal(0, 1, m + 1).astype(np.float32)
    x[0] = -0.0
    cell = rng.integers(0, 3, n).astype(np.uint8)
    lines = [f"{n} {m}"] + [float(v).hex() for v in carried] + [str(int(v)) for v in position]
    lines += [float(v).hex() for v in x] + [str(int(v)) for v in cell]
    out = np.array([float.fromhex(v) for v in around.raw(lines).split()], np.float32)
    x0, p, kept, p2, kept2 = (out[i * n:(i + 1) * n] for i in range(5))
    assert np.array_equal(_bits(x0), _bits(np.where(np.isfinite(carried), carried, np.float32(0))))
    ref = np.zeros(n, np.float32)  # Unknowns.scatter
    ref[cells] = x[:m]
    assert np.array_equal(_bits(p), _bits(ref))
    assert np.array_equal(_bits(kept), _bits(np.where(cell == FLUID, ref, np.float32(np.nan)).astype(np.float32)))
    # the scatter and the carry in one launch: the two launches' values bit for bit
    assert np.array_equal(_bits(p2), _bits(p)) and np.array_equal(_bits(kept2), _bits(kept))
