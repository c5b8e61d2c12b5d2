"""The warm start's relaxation kernels (cuda/flip_sparse_pressure_cells.cu: warm_relax_mark,
warm_relax_grow, warm_relax_sweep; ``sparse_pressure_cells.warm_relax``'s launches in its order)
against ``sparse_pressure_warm.relax_guess``'s array code, on the host without a GPU (nvcc builds
them as host functions), bit for bit, on random pools (missing neighbours, SOLID, AIR and FLUID
cells, NaN carried values, −0 among the guesses). The device run is
tests/gpu/test_flip_sparse_pressure_relax_gpu.py."""

import numpy as np
import pytest

from tests.unit.test_cuda_exact import _build, with_defines
from tests.unit.test_cuda_sparse_pressure_host import PREAMBLE
from voxfx.kernels.flip import sparse_pressure_cells, sparse_pressure_warm
from voxfx.kernels.flip.grid import FLUID, SOLID

# Input: n, sweeps, width, carried (n hex), kind (n), nbr (6n), b (n hex), x0 (n hex). Output: x (n hex).
HARNESS = PREAMBLE.replace('#include "flip_sparse_pressure.cu"', '#include "flip_sparse_pressure_cells.cu"') + r"""
#define ONE_PER_ITEM(n, call) do { h_dim.x = 1; h_thread.x = 0; h_grid.x = (unsigned)(n); \
    for (unsigned blk = 0; blk < (unsigned)(n); ++blk) { h_block.x = blk; call; } } while (0)
int main() {
    int n, sweeps, width;
    if (scanf("%d %d %d", &n, &sweeps, &width) != 3) return 1;
    std::vector<float> carried(n), b(n), x(n), out(n);
    std::vector<unsigned char> kind(n), mark(n), grown(n);
    std::vector<int> nbr(6 * (size_t)n);
    for (auto& v : carried) scanf("%a", &v);
    for (auto& v : kind) { int t; scanf("%d", &t); v = (unsigned char)t; }
    for (auto& v : nbr) scanf("%d", &v);
    for (auto& v : b) scanf("%a", &v);
    for (auto& v : x) scanf("%a", &v);
    ONE_PER_ITEM(n, warm_relax_mark(carried.data(), kind.data(), nbr.data(), n, mark.data()));
    for (int w = 0; w < width; ++w) {
        ONE_PER_ITEM(n, warm_relax_grow(mark.data(), kind.data(), nbr.data(), n, grown.data()));
        mark.swap(grown);
    }
    for (int s = 0; s < sweeps; ++s) {
        ONE_PER_ITEM(n, warm_relax_sweep(x.data(), b.data(), kind.data(), nbr.data(), mark.data(), n, out.data()));
        x.swap(out);
    }
    for (float v : x) printf("%a\n", v);
    return 0;
}
"""


class Pool:
    """The few fields of a sparse grid ``relax_guess`` reads (random tables, not a lattice)."""

    def __init__(self, carried, nbr):
        self.xp, self.nbr, self.size = np, nbr, carried.shape[0]
        self.channels = {sparse_pressure_warm.CARRIED: [carried, np.nan]}

    def __getitem__(self, name):
        return self.channels[name][0]


@pytest.fixture(scope="module")
def relax(tmp_path_factory):
    k = sparse_pressure_cells._K
    return _build(tmp_path_factory, with_defines(HARNESS, k, extra=("#include <cmath>", "using std::isfinite;")))


def _bits(a):
    return np.asarray(a, np.float32).view(np.uint32)


@pytest.mark.parametrize("seed,sweeps,width", [(0, 2, 1), (1, 1, 0), (2, 3, 2), (3, 8, 3)])
def test_relax_kernels_equal_the_array_code(relax, monkeypatch, seed, sweeps, width):
    rng = np.random.default_rng(seed)
    n = 900
    kind = rng.choice([0, FLUID, SOLID], n, p=[0.2, 0.65, 0.15]).astype(np.uint8)
    nbr = rng.integers(-1, n, (6, n)).astype(np.int32)
    nbr[rng.random((6, n)) < 0.1] = -1
    nbr[:, :3] = np.array([[-1], [0], [1], [2], [-1], [0]])  # a cell with no non-SOLID neighbour among them
    kind[:3] = (FLUID, SOLID, SOLID)
    carried = rng.normal(0, 3, n).astype(np.float32)
    carried[rng.random(n) < 0.25] = np.nan
    b = np.where(kind == FLUID, rng.normal(0, 1, n), 0).astype(np.float32)
    x0 = np.where(np.isfinite(carried), carried, np.float32(0)).astype(np.float32)
    x0[5] = -0.0
    monkeypatch.setenv(sparse_pressure_warm.RELAX, f"{sweeps},{width}")
    want = sparse_pressure_warm.relax_guess(Pool(carried, nbr), kind, b, x0)
    assert not np.array_equal(_bits(want), _bits(x0))  # it relaxed something
    lines = [f"{n} {sweeps} {width}"] + [float(v).hex() for v in carried] + [str(int(v)) for v in kind]
    lines += [str(int(v)) for v in nbr.ravel()] + [float(v).hex() for v in b] + [float(v).hex() for v in x0]
    got = np.array([float.fromhex(v) for v in relax.raw(lines).split()], np.float32)
    assert np.array_equal(_bits(got), _bits(want))
