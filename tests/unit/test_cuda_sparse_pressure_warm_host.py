"""The warm start's kernels (cuda/flip_sparse_pressure.cu: cg_init_warm, finish_init_warm,
cg_warm_select) against the NumPy reference (``sparse_pressure._start``), on the host
without a GPU as tests/unit/test_cuda_sparse_pressure_host.py builds them: r = b − A x₀
bit for bit, the fall-back to x₀ = 0 where ‖b − A x₀‖ > ‖b‖, a zero b solved by 0 at once,
and the Jacobi / none preconditioners' z and r·z as the cold start gives them."""

import numpy as np
import pytest

from tests.unit.test_cuda_exact import _build, with_defines
from tests.unit.test_cuda_sparse_pressure_host import PREAMBLE, _hex, _tank
from voxfx.kernels.flip import sparse_pressure
from voxfx.kernels.flip.pressure_gpu import _D_BB, _D_RR, _D_THRESH, _S_CONVERGED, _S_STOPPED
from voxfx.kernels.flip.sparse_pressure_gpu import _D_COLD, _K

# Input: mode, tol (hex), m_red m, nbr (6 × (m + 1)), diag, b, x0 (m + 1 each, hex). Output:
# x (m), r (m), z (m), Σ of the partial r·z, the 8 scalars, the 4 state integers.
HARNESS = PREAMBLE + r"""
#define LAUNCH(n, call) do { h_dim.x = 1; h_thread.x = 0; h_grid.x = (unsigned)(n); \
    for (unsigned blk = 0; blk < (unsigned)(n); ++blk) { h_block.x = blk; call; } } while (0)
int main() {
    int mode, m_red, m;
    double tol;
    if (scanf("%d %la %d %d", &mode, &tol, &m_red, &m) != 4) return 1;
    const int stride = m + 1;
    std::vector<int> nbr(6 * (size_t)stride), sizes{m_red, m}, state{0, 0, 0, 100};
    for (auto& a : nbr) scanf("%d", &a);
    std::vector<float> diag, b, x, r(stride, 0.0f), d(stride, 1.0f), z(stride, 0.0f);
    read_floats(diag, stride);
    read_floats(b, stride);
    read_floats(x, stride);
    std::vector<double> partials(2 * (size_t)stride, 0.0), scalars(8, -1.0);
    LAUNCH(stride, cg_init_warm(b.data(), x.data(), r.data(), d.data(), nbr.data(), diag.data(), stride,
                                sizes.data(), partials.data()));
    h_dim.x = 1; h_thread.x = 0; h_grid.x = 1; h_block.x = 0;
    finish_init_warm(partials.data(), stride, scalars.data(), state.data(), tol);
    LAUNCH(stride, cg_warm_select(b.data(), x.data(), r.data(), z.data(), diag.data(), sizes.data(), mode,
                                  scalars.data(), partials.data() + stride));
    double rz = 0.0;
    for (int i = 0; i < stride; ++i) rz += partials[stride + i];
    for (int c = 0; c < m; ++c) printf("%a\n", x[c]);
    for (int c = 0; c < m; ++c) printf("%a\n", r[c]);
    for (int c = 0; c < m; ++c) printf("%a\n", z[c]);
    printf("%a\n", rz);
    for (double s : scalars) printf("%a\n", s);
    for (int s : state) printf("%d\n", s);
    for (int c = 0; c < m; ++c) if (d[c] != 0.0f) return 2;  // d = 0
    return 0;
}
"""

MODES = {"mg": 0, "jacobi": 1, "none": 2}  # sparse_pressure_gpu._MODES


@pytest.fixture(scope="module")
def device(tmp_path_factory):
    return _build(tmp_path_factory, with_defines(HARNESS, _K))


def _run(device, level, mode, b, x0, tol=1e-4):
    m = level.m
    lines = [str(MODES[mode]), float(tol).hex(), f"{level.m_red} {m}", *map(str, level.nbr.ravel()),
             *_hex(level.diag), *_hex(b), *_hex(x0)]
    out = device.raw(lines, check=True).split()  # exit 2: d was not 0
    f = [float.fromhex(v) for v in out[:3 * m + 1 + 8]]
    x, r, z = (np.array(f[i * m:(i + 1) * m], np.float32) for i in range(3))
    rz, scalars = f[3 * m], f[3 * m + 1:]
    state = [int(v) for v in out[3 * m + 9:]]
    return x, r, z, rz, scalars, state


@pytest.fixture(scope="module")
def level():
    g = _tank()
    kind, _, _ = sparse_pressure.solver_cells(g)
    return sparse_pressure.Unknowns(g, kind)


@pytest.mark.parametrize("mode", ["mg", "jacobi", "none"])
def test_warm_start_kernels_equal_the_numpy_start(device, level, mode):
    rng = np.random.default_rng(5)
    m = level.m
    solution = np.append(rng.normal(0, 1, m), 0).astype(np.float32)
    b = level.apply(solution).astype(np.float32)
    x0 = (solution + np.append(rng.normal(0, 0.05, m), 0)).astype(np.float32)  # close: kept
    bb = float(np.dot(b.astype(np.float64), b))
    want_x, want_r, want_rr = sparse_pressure._start(level, b, bb, x0)
    assert not np.array_equal(want_x, np.zeros_like(want_x))  # the warm start was kept
    x, r, z, rz, scalars, state = _run(device, level, mode, b, x0)
    assert np.array_equal(x, want_x[:m]) and np.array_equal(r, want_r[:m])
    assert scalars[_D_COLD] == 0.0
    assert scalars[_D_RR] == pytest.approx(float(want_rr), rel=1e-12)
    assert scalars[_D_BB] == pytest.approx(bb, rel=1e-12) and scalars[_D_THRESH] == pytest.approx(1e-8 * bb)
    assert state[_S_STOPPED] == 0 and state[_S_CONVERGED] == 0
    if mode != "mg":  # the start's z = M r and r·z (the V-cycle does them for "mg")
        want_z = sparse_pressure.PRECONDITIONERS[mode](None, None, level)(want_r)
        if mode == "jacobi":  # "none": the loop reads r as z
            assert np.array_equal(z, want_z[:m])
        assert rz == pytest.approx(float(np.dot(want_r.astype(np.float64), want_z)), rel=1e-12)


def test_a_warm_start_worse_than_zero_falls_back_to_the_cold_start(device, level):
    rng = np.random.default_rng(6)
    m = level.m
    b = np.append(rng.normal(0, 1, m), 0).astype(np.float32)
    x0 = np.append(rng.normal(0, 10, m), 0).astype(np.float32)  # ‖b − A x₀‖ ≫ ‖b‖
    bb = float(np.dot(b.astype(np.float64), b))
    want_x, want_r, want_rr = sparse_pressure._start(level, b, bb, x0)
    assert not want_x.any() and np.array_equal(want_r, b) and want_rr == bb
    x, r, z, rz, scalars, state = _run(device, level, "jacobi", b, x0)
    assert not x.any() and np.array_equal(r, b[:m])
    assert scalars[_D_COLD] == 1.0 and scalars[_D_RR] == pytest.approx(bb, rel=1e-12)
    assert np.array_equal(z, b[:m] * (np.float32(1) / level.diag[:m]))  # cg_init's z


def test_a_zero_right_hand_side_is_solved_by_zero_at_once(device, level):
    rng = np.random.default_rng(7)
    m = level.m
    b = np.zeros(m + 1, np.float32)
    x0 = np.append(rng.normal(0, 1e-3, m), 0).astype(np.float32)
    x, r, z, rz, scalars, state = _run(device, level, "mg", b, x0)
    assert not x.any() and not r.any()
    assert state[_S_STOPPED] == 1 and state[_S_CONVERGED] == 1
