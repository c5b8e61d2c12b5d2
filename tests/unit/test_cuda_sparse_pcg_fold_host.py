"""The PCG loop's direction update folded into its next kernels (cuda/flip_sparse_pressure.cu:
apply_laplacian_direction, update_solution_direction; sparse_pressure_gpu.FOLD_DIRECTION) on
the host without a GPU: nvcc builds the kernels as host functions (one "thread" a block, as
test_cuda_sparse_pressure_host's harness) and a driver runs, from the same x, r, d, z and
scalars, update_direction → apply_laplacian → update_solution (the launches today) and the two
folded kernels, for each preconditioner mode (MG, Jacobi, none: z is then r itself). q, d, x,
r, z and every partial sum must be equal bit for bit; the device run is in
tests/gpu/test_flip_sparse_pcg_loop_gpu.py."""

import numpy as np
import pytest

from tests.unit.test_cuda_exact import _build, with_defines
from tests.unit.test_cuda_sparse_pressure_host import PREAMBLE, _hex, _tank
from voxfx.kernels.flip import sparse_pressure
from voxfx.kernels.flip.sparse_pressure_gpu import _D_ALPHA, _D_BETA, _K

# Input: m_red m, nbr (6 × (m + 1)), diag (m + 1), then x r d z (m + 1 each), α, β (hex).
# Output per mode (0 MG, 1 Jacobi, 2 none): per way (launches, folded) q d x r z (m + 1 each)
# and the 3·(m + 1) partials (the partials as %a of doubles).
HARNESS = PREAMBLE + r"""
#define LAUNCH(n, call) do { h_dim.x = 1; h_thread.x = 0; h_grid.x = (unsigned)(n); \
    for (unsigned blk = 0; blk < (unsigned)(n); ++blk) { h_block.x = blk; call; } } while (0)
int main() {
    int m_red, m;
    if (scanf("%d %d", &m_red, &m) != 2) return 1;
    const int s = m + 1;
    std::vector<int> nbr;
    std::vector<float> diag, x0, r0, d0, z0;
    read_ints(nbr, 6 * (size_t)s);
    read_floats(diag, s);
    read_floats(x0, s); read_floats(r0, s); read_floats(d0, s); read_floats(z0, s);
    float alpha, beta;
    scanf("%a %a", &alpha, &beta);
    int sizes[2] = {m_red, m}, state[4] = {0, 0, 0, 0};
    std::vector<double> scalars(8, 0.0);
    scalars[D_ALPHA] = alpha;
    scalars[D_BETA] = beta;
    for (int mode = 0; mode < 3; ++mode) {
        for (int fold = 0; fold < 2; ++fold) {
            std::vector<float> x = x0, r = r0, d = d0, z = z0, q(s, __builtin_nanf(""));
            q[m] = 0.0f;
            float* zp = mode == PRE_NONE ? r.data() : z.data();  // sparse_pressure_gpu._z()
            std::vector<double> partials(3 * (size_t)s, 0.0);  // d·q; ‖r‖², r·z
            if (!fold) {
                LAUNCH(s, update_direction(d.data(), zp, sizes, scalars.data(), state));
                LAUNCH(s, apply_laplacian(d.data(), q.data(), nbr.data(), diag.data(), s, sizes, partials.data(),
                                          state));
                LAUNCH(s, update_solution(x.data(), r.data(), d.data(), q.data(), z.data(), diag.data(), sizes, mode,
                                          scalars.data(), partials.data() + s, state));
            } else {
                LAUNCH(s, apply_laplacian_direction(d.data(), zp, q.data(), nbr.data(), diag.data(), s, sizes,
                                                    scalars.data(), partials.data(), state));
                LAUNCH(s, update_solution_direction(x.data(), r.data(), d.data(), q.data(), zp, diag.data(), sizes,
                                                    mode, scalars.data(), partials.data() + s, state));
            }
            for (auto* v : {&q, &d, &x, &r, &z}) for (float a : *v) printf("%a\n", a);
            for (double p : partials) printf("%a\n", p);
        }
    }
    return 0;
}
"""


@pytest.fixture(scope="module")
def fold(tmp_path_factory):
    return _build(tmp_path_factory, with_defines(HARNESS, _K))


@pytest.mark.parametrize("beta", [0.0, 0.37])
def test_folded_direction_update_gives_the_launches_values_bit_for_bit(fold, beta):
    """β = 0 is the first iteration after the start (d = 0 there: d' = z)."""
    g = _tank()
    kind, _, _ = sparse_pressure.solver_cells(g)
    level = sparse_pressure.Unknowns(g, kind)
    m = level.m
    rng = np.random.default_rng(5)

    def vec(scale=1.0):  # magnitudes over four decades; the sentinel 0
        return np.append(rng.normal(0, scale, m) * 10.0 ** rng.integers(-2, 2, m), 0).astype(np.float32)

    x, r, d, z = vec(), vec(), (vec() if beta else np.zeros(m + 1, np.float32)), vec()
    lines = [f"{level.m_red} {m}", *map(str, level.nbr.ravel()), *_hex(level.diag), *_hex(x), *_hex(r), *_hex(d),
             *_hex(z), *_hex([0.61, beta])]
    out = fold.raw(lines, check=True).split()
    s = m + 1
    per_way = 5 * s + 3 * s
    assert len(out) == 3 * 2 * per_way
    for mode in range(3):
        ways = [out[(2 * mode + w) * per_way:(2 * mode + w + 1) * per_way] for w in range(2)]
        assert ways[0] == ways[1], f"mode {mode}"  # q, d, x, r, z and the partials, every bit
        q = np.array([float.fromhex(v) for v in ways[0][:m]], np.float32)
        assert np.abs(q).max() > 0
    assert _D_ALPHA != _D_BETA
